package web

import (
	"bytes"
	"encoding/json"
	"sort"

	"github.com/countersign/countersign/web/mcpgate"
)

// listedTool is how an MCP client is shown an offered tool: in the bytes
// its server listed it in (nil: not an upstream's, or not known: the SDK's
// are right), and where in the list (order: upstream tools after the
// others, by the file's order of their servers, then in their server's
// own order; ok false: where the SDK put it).
type listedTool func(name string) (wire json.RawMessage, order [2]int, ok bool)

// toolsAsListed is a tools/list result with each tool of an upstream MCP
// server in the bytes the server's list held it (but for the name
// Countersign offers it under) instead of the SDK's encoding of it, which
// drops keys it does not know and adds some of its own, and in the
// server's order instead of the SDK's by name; tasks: a 2025-11-25
// session, told that each tool may be called as a task
// (execution.taskSupport "optional", unless the tool says otherwise).
func toolsAsListed(res map[string]json.RawMessage, listed listedTool, tasks bool) bool {
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

// lister is how each tool is shown to clients of the revisions with
// sessions (modern false) or without (listedTool), over the tools in force
// now; the order of the servers is read once, when first asked.
func (ep *mcpEndpoint) lister(modern bool) listedTool {
	reg := ep.gw.Outside.Gate.Tools()
	var servers map[string]int
	return func(name string) (json.RawMessage, [2]int, bool) {
		t, ok := reg.Get(name)
		if !ok || !t.Executes() || !mcpgate.OfferedAt(t, modern) || t.Upstream == "" {
			return nil, [2]int{}, false
		}
		if servers == nil {
			servers = map[string]int{}
			for _, o := range reg.All() {
				if _, seen := servers[o.Upstream]; !seen && o.Upstream != "" {
					servers[o.Upstream] = len(servers)
				}
			}
		}
		place := t.Place
		if modern && t.Revision == "" {
			place = t.ModernPlace
		}
		return mcpgate.Wire(t, modern), [2]int{servers[t.Upstream], place}, true
	}
}
