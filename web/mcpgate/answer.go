package mcpgate

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/rawjson"
	"github.com/countersign/countersign/tools/upstream"
)

// An upstream's result reaches the client as the bytes the upstream sent
// (tools/upstream records them so), Countersign's own words spliced in:
// the SDK would decode and encode it again, escaping <, > and & anew,
// ordering keys its own way and dropping those it does not know, and
// taking time over a big one. web asks for it on a tools/call it serves
// (HeaderAnswer) and writes the bytes as the JSON-RPC result instead of
// the SDK's stand-in (one _meta key, MetaAnswer).

// HeaderAnswer is the request header under which web names the place for
// a tools/call's answer bytes (Answers.Expect). Web sets it itself, over
// whatever a client sent.
const HeaderAnswer = "X-Countersign-Answer"

// MetaAnswer is the _meta key of the stand-in result whose bytes web
// writes in its place: the name of that place.
const MetaAnswer = "countersign/answer"

// Answers are the places where results for tools/call requests being
// served wait to be written, by name.
type Answers struct{ by sync.Map }

// Answer is one request's place.
type Answer struct {
	mu sync.Mutex
	b  []byte
}

// Bytes is the result to write (nil: the SDK's own is the answer).
func (a *Answer) Bytes() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.b
}

// Expect makes a place for one request's answer, under a name no client
// can guess; done removes it.
func (as *Answers) Expect() (name string, a *Answer, done func()) {
	name, a = rand.Text(), &Answer{}
	as.by.Store(name, a)
	return name, a, func() { as.by.Delete(name) }
}

// put leaves a result in the place named (false: there is none, or no
// result).
func (as *Answers) put(name string, b []byte) bool {
	if as == nil || name == "" || b == nil {
		return false
	}
	v, ok := as.by.Load(name)
	if !ok {
		return false
	}
	a := v.(*Answer)
	a.mu.Lock()
	a.b = b
	a.mu.Unlock()
	return true
}

// member is one key Countersign adds to an object, and its value.
type member struct {
	key   string
	value any
}

// additions are Countersign's words for an upstream's result: a text
// block before its content, members at the end of its structured content
// and of its _meta, and members of the result itself that it lacks.
type additions struct {
	first      any // a content block (nil: none)
	structured []member
	meta       []member
	top        []member
}

var errNotResult = errors.New("not a tool result object")

// edit puts text in place of b[at:end] (at == end: inserts it).
type edit struct {
	at, end int
	text    []byte
}

// applyEdits is b with the edits made (they do not overlap).
func applyEdits(b []byte, eds []edit) []byte {
	sort.SliceStable(eds, func(i, j int) bool { return eds[i].at < eds[j].at })
	n := len(b)
	for _, e := range eds {
		n += len(e.text)
	}
	out := make([]byte, 0, n)
	last := 0
	for _, e := range eds {
		out = append(append(out, b[last:e.at]...), e.text...)
		last = e.end
	}
	return append(out, b[last:]...)
}

// splice is an upstream's tool result (a JSON object) with Countersign's
// additions, its own bytes otherwise as they are. A result whose content
// is not an array, or whose _meta is not an object, is not spliced
// (errNotResult); structured content that is not an object gets nothing.
func splice(result []byte, add additions) ([]byte, error) {
	o, err := rawjson.ReadObject(result)
	if err != nil {
		return nil, err
	}
	var eds []edit
	// members before the closing brace of the object value at s
	members := func(s rawjson.Span, ms []member) error {
		if len(ms) == 0 {
			return nil
		}
		b, err := encodeMembers(ms, len(bytes.TrimSpace(result[s.Start+1:s.End-1])) > 0)
		eds = append(eds, edit{s.End - 1, s.End - 1, b})
		return err
	}
	content, ok := o.Members["content"]
	_, typed := o.Members["resultType"]
	switch {
	case ok && result[content.Start] != '[':
		return nil, errNotResult
	case !ok && (!typed || add.first != nil):
		// A result without content is an input-required one (2026-07-28),
		// into which Countersign puts nothing but _meta.
		return nil, errNotResult
	}
	if add.first != nil {
		b, err := MarshalRaw(add.first)
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(result[content.Start+1:content.End-1])) > 0 {
			b = append(b, ',')
		}
		eds = append(eds, edit{content.Start + 1, content.Start + 1, b})
	}
	if s, ok := o.Members["structuredContent"]; ok && result[s.Start] == '{' {
		if err := members(s, add.structured); err != nil {
			return nil, err
		}
	}
	top := slices.Clone(add.top)
	if s, ok := o.Members["_meta"]; ok {
		if result[s.Start] != '{' {
			return nil, errNotResult
		}
		if err := members(s, add.meta); err != nil {
			return nil, err
		}
	} else if len(add.meta) > 0 {
		b, err := encodeMembers(add.meta, false)
		if err != nil {
			return nil, err
		}
		top = append(top, member{"_meta", json.RawMessage("{" + string(b) + "}")})
	}
	top = slices.DeleteFunc(top, func(m member) bool { _, ok := o.Members[m.key]; return ok })
	if len(top) > 0 {
		b, err := encodeMembers(top, o.Keys > 0)
		if err != nil {
			return nil, err
		}
		eds = append(eds, edit{o.Closing, o.Closing, b})
	}
	return applyEdits(result, eds), nil
}

// encodeMembers is `"k":v,...` (with a comma first when the object had
// members before).
func encodeMembers(ms []member, after bool) ([]byte, error) {
	var b bytes.Buffer
	for i, m := range ms {
		if i > 0 || after {
			b.WriteByte(',')
		}
		k, err := MarshalRaw(m.key)
		if err != nil {
			return nil, err
		}
		v, err := MarshalRaw(m.value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	return b.Bytes(), nil
}

// MarshalRaw is v as JSON without HTML escaping: what is passed on stays
// as it was written.
func MarshalRaw(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// WithProtocolWords is a result written in an upstream's bytes (raw) with
// what the SDK added to the stand-in for the client's protocol revision
// (a 2026-07-28 result's resultType and _meta serverInfo): each member
// of the stand-in but its content (messages, contents) and MetaAnswer
// that raw lacks (in _meta,
// in raw's _meta).
func WithProtocolWords(raw, standIn []byte) []byte {
	var in map[string]json.RawMessage
	if json.Unmarshal(standIn, &in) != nil {
		return raw
	}
	var add additions
	var meta, has map[string]json.RawMessage
	_ = json.Unmarshal(in["_meta"], &meta)
	if o, err := rawjson.ReadObject(raw); err == nil {
		_ = json.Unmarshal(o.Value(raw, "_meta"), &has) // raw's own: a hop that spoke the revision put them there
	}
	for _, k := range sortedKeys(meta) {
		if _, ok := has[k]; !ok && k != MetaAnswer {
			add.meta = append(add.meta, member{k, meta[k]})
		}
	}
	for _, k := range sortedKeys(in) {
		if k != "content" && k != "messages" && k != "contents" && k != "_meta" { // the stand-in's own
			add.top = append(add.top, member{k, in[k]})
		}
	}
	if len(add.meta) == 0 && len(add.top) == 0 {
		return raw
	}
	if out, err := splice(raw, add); err == nil {
		return out
	}
	return raw
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Wire is an upstream's tool in the bytes its server listed it to clients
// of the revisions with sessions (modern false) or without, under the
// name Countersign offers it (nil: its bytes are not known).
func Wire(t *tools.Tool, modern bool) json.RawMessage {
	wire := t.Wire
	if modern && t.ModernWire != nil {
		wire = t.ModernWire
	}
	if len(wire) == 0 {
		return nil
	}
	o, err := rawjson.ReadObject(wire)
	if err != nil {
		return nil
	}
	name, ok := o.Members["name"]
	if _, schema := o.Members["inputSchema"]; !ok || !schema {
		return nil // not a tool MCP clients take: the SDK's words
	}
	var was string
	if json.Unmarshal(wire[name.Start:name.End], &was) != nil {
		return nil
	}
	if was == t.Name {
		return bytes.TrimSpace(wire)
	}
	to, err := MarshalRaw(t.Name)
	if err != nil {
		return nil
	}
	return bytes.TrimSpace(applyEdits(wire, []edit{{name.Start, name.End, to}}))
}

// answerPlace is the place web named for this request's answer ("": none).
func answerPlace(req *mcp.CallToolRequest) string { return placeOf(req.Extra) }

func placeOf(extra *mcp.RequestExtra) string {
	if extra == nil || extra.Header == nil {
		return ""
	}
	return extra.Header.Get(HeaderAnswer)
}

// answer is the MCP result for a call as it stands: the outcome, what a
// person changed, the signed receipt of a final call (fresh: it ended
// while this request waited), and, for a call decided before (replay), that
// it is a replay. An upstream's result is answered in its own bytes, with
// these added, when web waits for them in the place named (answer.go).
func (gw *Gateway) answer(ctx context.Context, tool *tools.Tool, call *models.ToolCall, fresh, replay bool, relay *upstream.Relay, place string) *mcp.CallToolResult {
	add, note := gw.said(ctx, tool, call, fresh, replay)
	if place != "" {
		if b := asSent(tool, call, add); b != nil && gw.Answers.put(place, b) {
			return &mcp.CallToolResult{Content: []mcp.Content{}, Meta: mcp.Meta{MetaAnswer: place}}
		}
	}
	return withSaid(result(call, tool, note, relay), add)
}

// asSent is an upstream's result in the bytes it sent, with add spliced
// in (nil: not an upstream's result, or not as it was sent).
func asSent(tool *tools.Tool, call *models.ToolCall, add additions) []byte {
	if tool.Upstream == "" || call.Status != models.CallSucceeded {
		return nil
	}
	b, err := splice([]byte(call.Result), add)
	if err != nil {
		return nil
	}
	return b
}

// said is what Countersign adds to a call's result (answer), and what a
// person changed in words ("": nothing).
func (gw *Gateway) said(ctx context.Context, tool *tools.Tool, call *models.ToolCall, fresh, replay bool) (additions, string) {
	note := gw.changedNote(ctx, call)
	add := changeSaid(tool, call, note)
	if call.Status.Final() && gw.Receipt != nil {
		// Countersign's own words: the signed receipt of what it decided
		// and how the call ended.
		if jws, err := gw.Receipt(ctx, call, fresh); err == nil {
			add.meta = append(add.meta, member{MetaReceipt, jws})
		}
	}
	if replay {
		replayed := map[string]any{"call": call.ID, "status": string(call.Status)}
		if call.FinishedAt != nil {
			replayed["finished_at"] = call.FinishedAt.UTC().Format(time.RFC3339Nano)
		}
		add.meta = append(add.meta, member{MetaReplay, replayed})
	}
	return add, note
}
