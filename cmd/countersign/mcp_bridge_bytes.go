package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/tools/upstream"
	"github.com/countersign/countersign/web/mcpgate"
)

// What the server (/mcp) lists and answers reaches the bridge's client in
// the bytes the server sent, as /mcp hands on an upstream's: the bridge's
// own SDK server would decode and encode each tool and result again,
// escaping <, > and & anew, ordering keys its own way, dropping those it
// does not know and adding some of its own. The SDK's client reads each
// answer through upstream.KeepingResults, which keeps the result's bytes;
// the bridge's SDK server is handed a stand-in (one _meta key,
// mcpgate.MetaAnswer), and stdout (answering) gets the bytes in its place.

// answers are the server's results waiting to be written in place of
// their stand-ins, by a name no client can guess; listMark marks a
// tools/list result, whose tools are written as the server listed them.
type answers struct {
	by       sync.Map // name -> kept
	listMark string
	swept    atomic.Int64 // when those never written were last let go (unix seconds)
}

// kept is a result waiting, and since when.
type kept struct {
	b  []byte
	at time.Time
}

// keptFor is how long a result waits to be written: one whose request the
// client cancelled is never written, and is let go after it.
const keptFor = 10 * time.Minute

func newAnswers() *answers { return &answers{listMark: rand.Text()} }

// standIn is the result the bridge's SDK server is given for the
// server's result raw.
func (as *answers) standIn(raw []byte) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{}, Meta: as.keep(raw)}
}

// keep keeps raw till it is written, and is the _meta of its stand-in.
func (as *answers) keep(raw []byte) mcp.Meta {
	now := time.Now()
	if last := as.swept.Load(); now.Unix()-last >= 60 && as.swept.CompareAndSwap(last, now.Unix()) {
		as.by.Range(func(name, v any) bool {
			if now.Sub(v.(kept).at) > keptFor {
				as.by.Delete(name)
			}
			return true
		})
	}
	name := rand.Text()
	as.by.Store(name, kept{raw, now})
	return mcp.Meta{mcpgate.MetaAnswer: name}
}

// take is the result kept under name, forgotten (false: none).
func (as *answers) take(name string) ([]byte, bool) {
	v, ok := as.by.LoadAndDelete(name)
	if !ok {
		return nil, false
	}
	return v.(kept).b, true
}

// markListed marks a list result to be written as listed: the tools in
// the server's bytes, and without the 2026-07-28 revision's cache words
// to a client of an earlier one.
func (b *bridge) markListed(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || !mcpgate.CacheableList(method) {
			return res, err
		}
		var meta *mcp.Meta
		switch list := res.(type) {
		case *mcp.ListToolsResult:
			meta = &list.Meta
		case *mcp.ListPromptsResult:
			meta = &list.Meta
		case *mcp.ListResourcesResult:
			meta = &list.Meta
		case *mcp.ListResourceTemplatesResult:
			meta = &list.Meta
		default:
			return res, err
		}
		if *meta == nil {
			*meta = mcp.Meta{}
		}
		(*meta)[mcpgate.MetaAnswer] = b.answers.listMark
		return res, err
	}
}

// answering is the bridge's stdout: a line the SDK wrote with a stand-in
// is written with what it stands in for (filled); every other line as it
// was written.
type answering struct {
	b   *bridge
	out io.Writer
}

func (w answering) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(mcpgate.MetaAnswer)) {
		if line, ok := w.b.filled(p); ok {
			if _, err := w.out.Write(line); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	return w.out.Write(p)
}

// filled is a line the SDK wrote, one JSON-RPC response, with the result it
// stands in for (false: it holds no stand-in of the bridge's).
func (b *bridge) filled(line []byte) ([]byte, bool) {
	msg := bytes.TrimSpace(line)
	var env struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	var res map[string]json.RawMessage
	var meta map[string]json.RawMessage
	var name string
	if json.Unmarshal(msg, &env) != nil || json.Unmarshal(env.Result, &res) != nil ||
		json.Unmarshal(res["_meta"], &meta) != nil || json.Unmarshal(meta[mcpgate.MetaAnswer], &name) != nil {
		return nil, false
	}
	var out []byte
	if name == b.answers.listMark {
		if delete(meta, mcpgate.MetaAnswer); len(meta) == 0 {
			delete(res, "_meta")
		} else if m, err := mcpgate.MarshalRaw(meta); err == nil {
			res["_meta"] = m
		}
		b.mu.Lock()
		legacy := b.version == legacyMCP
		b.mu.Unlock()
		if legacy { // no 2026-07-28 words to a client of an earlier revision
			mcpgate.WithoutCacheWords(res)
		}
		if res["tools"] != nil && !mcpgate.ToolsAsListed(res, b.listedTool, false) {
			return nil, false
		}
		for key, method := range map[string]string{"prompts": "prompts/list", "resources": "resources/list", "resourceTemplates": "resources/templates/list"} {
			if res[key] != nil {
				mcpgate.EntriesAsListed(res, method, b.offeredAs)
			}
		}
		out = append(append(append([]byte(`{"jsonrpc":"2.0","id":`), env.ID...), `,"result":`...), object(res)...)
		out = append(out, '}')
	} else {
		raw, ok := b.answers.take(name)
		if !ok {
			return nil, false
		}
		if out, ok = mcpgate.AnswerIn(msg, raw, ""); !ok { // what /mcp sent, resultType and all
			return nil, false
		}
	}
	// One message a line: the line breaks of the server's bytes (JSON's
	// white space between values; a string holds none) become spaces.
	for i, c := range out {
		if c == '\n' || c == '\r' {
			out[i] = ' '
		}
	}
	return append(out, '\n'), true
}

// listedTool is a tool in the bytes the server listed it in, and its place
// in the server's list.
func (b *bridge) listedTool(name string) (json.RawMessage, [2]int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	place, ok := b.place[name]
	return b.wire[name], [2]int{0, place}, ok
}

// object is the members as one JSON object, by key, each value in its own
// bytes (json.Marshal would take the white space out of them).
func object(members map[string]json.RawMessage) []byte {
	out := []byte{'{'}
	for i, k := range slices.Sorted(maps.Keys(members)) {
		if i > 0 {
			out = append(out, ',')
		}
		key, _ := mcpgate.MarshalRaw(k)
		out = append(append(append(out, key...), ':'), members[k]...)
	}
	return append(out, '}')
}

// offeredAs is a prompt, resource or template in the bytes the server
// listed it in (nil: not known).
func (b *bridge) offeredAs(kind, id string) json.RawMessage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.offeredWire[upstream.WireKey(kind, id)]
}
