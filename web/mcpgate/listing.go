package mcpgate

import (
	"bytes"
	"encoding/json"
	"sort"

	"github.com/countersign/countersign/tools/rawjson"
	"github.com/countersign/countersign/tools/upstream"
)

// Listed is how an MCP client is shown an offered tool: in the bytes its
// server listed it in (nil: not an upstream's, or not known: the SDK's
// are right), and where in the list (order: upstream tools after the
// others, by the file's order of their servers, then in their server's
// own order; ok false: where the SDK put it).
type Listed func(name string) (wire json.RawMessage, order [2]int, ok bool)

// ToolsAsListed is a tools/list result with each tool of an upstream MCP
// server in the bytes the server's list held it (but for the name
// Countersign offers it under) instead of the SDK's encoding of it, which
// drops keys it does not know and adds some of its own, and in the
// server's order instead of the SDK's by name; tasks: a 2025-11-25
// session, told that each tool may be called as a task
// (execution.taskSupport "optional", unless the tool says otherwise).
func ToolsAsListed(res map[string]json.RawMessage, listed Listed, tasks bool) bool {
	var list []json.RawMessage
	if json.Unmarshal(res["tools"], &list) != nil {
		return false
	}
	type entry struct {
		bytes []byte
		order [2]int
		known bool
	}
	entries := make([]entry, 0, len(list))
	for _, t := range list {
		var keys map[string]json.RawMessage
		t = bytes.TrimSpace(t)
		if json.Unmarshal(t, &keys) != nil || len(keys) == 0 {
			entries = append(entries, entry{bytes: t}) // the tool as it was listed, untouched
			continue
		}
		var name string
		_ = json.Unmarshal(keys["name"], &name)
		w, order, known := listed(name)
		if w != nil {
			t, keys = w, nil
			_ = json.Unmarshal(w, &keys)
		}
		if tasks && keys["execution"] == nil {
			out := append(append([]byte(nil), t[:len(t)-1]...), ',')
			if len(keys) == 0 {
				out = out[:len(out)-1]
			}
			t = append(out, `"execution":{"taskSupport":"optional"}}`...)
		}
		entries = append(entries, entry{bytes: t, order: order, known: known})
	}
	sort.SliceStable(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		if a.known != b.known {
			return !a.known
		}
		return a.known && (a.order[0] < b.order[0] || a.order[0] == b.order[0] && a.order[1] < b.order[1])
	})
	var out bytes.Buffer
	out.WriteByte('[')
	for i, e := range entries {
		if i > 0 {
			out.WriteByte(',')
		}
		out.Write(e.bytes)
	}
	out.WriteByte(']')
	res["tools"] = out.Bytes()
	return true
}

// AnswerIn is msg, a JSON-RPC response the SDK wrote whose result is the
// stand-in for an answer (a MetaAnswer in its _meta), with raw, the
// answer's bytes, as its result, and what the SDK added to the stand-in
// for the client's revision (WithProtocolWords); false: msg is no such
// response. For a client of a revision without sessions, modern is the
// request's method: a result the upstream wrote at an earlier revision
// gains what the client's revision requires of it (ModernWords); "" for
// others.
func AnswerIn(msg, raw []byte, modern string) ([]byte, bool) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	var standIn struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(msg, &m) != nil || json.Unmarshal(m.Result, &standIn) != nil || standIn.Meta[MetaAnswer] == nil {
		return nil, false
	}
	raw = WithProtocolWords(raw, m.Result)
	if modern != "" {
		raw = ModernWords(modern, raw)
	}
	out := make([]byte, 0, len(raw)+len(m.ID)+32)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, m.ID...)
	out = append(out, `,"result":`...)
	return append(append(out, raw...), '}'), true
}

// ModernWords is the result of a request (method) that an upstream wrote
// at a 2025 revision, for a client of 2026-07-28: with the resultType every
// result there has ("complete": a 2025 server asks nothing in a result),
// and for a resource read the cache words it requires (ttlMs 0 and scope
// private: a 2025 server said nothing of how long its contents stay true
// or for whom, so nothing is cached, nor shared). What the result has of
// these stays as written; a result that is not an object is left alone.
func ModernWords(method string, raw []byte) []byte {
	o, err := rawjson.ReadObject(raw)
	if err != nil {
		return raw
	}
	var add []byte
	with := func(key, value string) {
		if _, ok := o.Members[key]; !ok {
			if len(add) > 0 || o.Keys > 0 {
				add = append(add, ',')
			}
			add = append(add, `"`+key+`":`+value...)
		}
	}
	with("resultType", `"complete"`)
	if method == "resources/read" {
		with("ttlMs", "0")
		with("cacheScope", `"private"`)
	}
	if len(add) == 0 {
		return raw
	}
	return applyEdits(raw, []edit{{o.Closing, o.Closing, add}})
}

// CacheableList says whether a method's result is a list the Go SDK gives
// the 2026-07-28 revision's cache words (ttlMs, cacheScope) to clients of
// every revision.
func CacheableList(method string) bool {
	switch method {
	case "tools/list", "prompts/list", "resources/list", "resources/templates/list":
		return true
	}
	return false
}

// WithoutCacheWords takes the 2026-07-28 revision's cache words out of a
// list result for a client of an earlier one, which has no such words.
func WithoutCacheWords(res map[string]json.RawMessage) {
	delete(res, "ttlMs")
	delete(res, "cacheScope")
}

// OfferedWire is how each prompt ("prompt", its name), resource
// ("resource", its URI) and template ("template", its URI template)
// offered to clients of the revisions with sessions (modern false) or
// without is shown: in the bytes its server listed it in, the first
// server of the file that lists it (nil: not known, the SDK's are right).
func (gw *Gateway) OfferedWire(modern bool) func(kind, id string) json.RawMessage {
	var lists []map[string]json.RawMessage
	return func(kind, id string) json.RawMessage {
		if lists == nil {
			lists = []map[string]json.RawMessage{}
			for _, u := range gw.servers() {
				lists = append(lists, u.OffersAt(modern).Wire)
			}
		}
		for _, l := range lists {
			if w, ok := l[upstream.WireKey(kind, id)]; ok {
				return w
			}
		}
		return nil
	}
}

// EntriesAsListed is a prompts/list, resources/list or
// resources/templates/list result with each entry in the bytes its server
// listed it in (wire), instead of the SDK's encoding of it, which drops
// the keys it does not know (false: not such a result).
func EntriesAsListed(res map[string]json.RawMessage, method string, wire func(kind, id string) json.RawMessage) bool {
	key, kind, idKey := "", "", ""
	switch method {
	case "prompts/list":
		key, kind, idKey = "prompts", "prompt", "name"
	case "resources/list":
		key, kind, idKey = "resources", "resource", "uri"
	case "resources/templates/list":
		key, kind, idKey = "resourceTemplates", "template", "uriTemplate"
	default:
		return false
	}
	var list []json.RawMessage
	if json.Unmarshal(res[key], &list) != nil {
		return false
	}
	var out bytes.Buffer
	out.WriteByte('[')
	for i, e := range list {
		if i > 0 {
			out.WriteByte(',')
		}
		var id string
		var m map[string]json.RawMessage
		if json.Unmarshal(e, &m) == nil && json.Unmarshal(m[idKey], &id) == nil {
			if w := wire(kind, id); w != nil {
				e = w
			}
		}
		out.Write(bytes.TrimSpace(e))
	}
	out.WriteByte(']')
	res[key] = out.Bytes()
	return true
}
