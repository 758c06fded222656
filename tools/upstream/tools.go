package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/countersign/countersign/tools"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What a server offers, as Countersign tools: its list, each tool with the
// risk the file or its annotations give it, and a call forwarded to it.

// list asks the server for its tools, as Countersign tools, sorted by name.
// A tool whose name another tool has is skipped, and said so.
func (u *Server) list(ctx context.Context, s *mcp.ClientSession) (out []*tools.Tool, skipped []string, err error) {
	seen := map[string]bool{}
	place := 0 // in the server's list, across pages
	params := &mcp.ListToolsParams{}
	for page := 0; page == 0 || params.Cursor != ""; page++ {
		if page == maxPages {
			return nil, nil, fmt.Errorf("list tools: more than %d pages", maxPages)
		}
		pctx, sent := withRawResult(ctx)
		res, err := s.ListTools(pctx, params)
		if err != nil {
			return nil, nil, fmt.Errorf("list tools: %s", u.cfg.Redact(err.Error()))
		}
		wire := listed(sent.bytes(), len(res.Tools))
		for i, t := range res.Tools {
			tool, err := u.proxy(t, wire[i])
			place++
			if err == nil {
				tool.Place, tool.ModernPlace = place-1, place-1 // at both, till a list at 2026-07-28 says otherwise
			}
			if err != nil {
				skipped = append(skipped, fmt.Sprintf("%s: %v", t.Name, err))
				continue
			}
			if u.cfg.Taken(tool.Name) || seen[tool.Name] {
				skipped = append(skipped, fmt.Sprintf("%s: %s is the name of another tool", t.Name, tool.Name))
				continue
			}
			seen[tool.Name] = true
			out = append(out, tool)
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, skipped, nil
}

// maxPages bounds a server's tool list (one that pages for ever).
const maxPages = 1000

// listed is each tool of a tools/list result in the bytes it came in (nil
// each when they are not known, or not n of them).
func listed(result []byte, n int) []json.RawMessage {
	var l struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if result == nil || !utf8.Valid(result) || json.Unmarshal(result, &l) != nil || len(l.Tools) != n {
		return make([]json.RawMessage, n)
	}
	return l.Tools
}

// call forwards one call to the server on the session in use now.
func (u *Server) call(ctx context.Context, name string, risk tools.Risk, args map[string]any) (any, error) {
	relay := relayOf(ctx)
	u.mu.Lock()
	s, st := u.sessionFor(name, relay), u.st
	u.mu.Unlock()
	server := u.spec.Name
	if s == nil {
		return nil, tools.Refuse("the %s MCP server is not answering (down since %s: %s); Countersign keeps trying to reconnect; nothing was changed",
			server, st.Since.UTC().Format("15:04:05 MST"), tools.Truncate(st.Error, 200))
	}
	// What the server says and asks during the call goes to the client
	// that asked for it, if it is waiting (relay.go).
	id := u.begin(relay)
	defer u.end(id)
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	modernParams(params, relay) // modern.go
	if relay != nil && relay.Token != nil {
		params.SetProgressToken(id)
	}
	ctx, sent := withRawResult(ctx)
	res, err := s.CallTool(ctx, params)
	if rpc := notAccepted(err); rpc != nil {
		relay.refused(rpc)
		return nil, tools.Refuse("the %s MCP server did not take the call: %s (JSON-RPC error %d); nothing was changed",
			server, tools.Truncate(u.cfg.Redact(rpc.Message), 500), rpc.Code)
	}
	if err != nil {
		select { // is it still there? (found out apart from this call)
		case u.check <- struct{}{}:
		default:
		}
		if errors.Is(err, mcp.ErrConnectionClosed) || risk == tools.RiskRead {
			// Not sent, or only a read: nothing changed.
			return nil, tools.Refuse("the %s MCP server is not answering (%s); nothing was changed", server, tools.Truncate(u.cfg.Redact(err.Error()), 200))
		}
		return nil, &tools.UnknownError{Message: "the " + server + " MCP server did not answer (" + u.cfg.Redact(err.Error()) + "); a team member will check what happened"}
	}
	text := contentText(res.Content)
	if res.IsError {
		return nil, tools.Refuse("%s", tools.Truncate(u.cfg.Redact(text), 1000))
	}
	if err := u.inputRequired(res, relay); err != nil {
		return nil, err
	}
	// The result is the server's, as it sent it (every content block, the
	// structured content beside them, _meta, in its bytes over HTTP: raw.go),
	// secrets hidden; the gateway hands it on unchanged (web/mcpgate).
	raw := sent.bytes()
	if !sent.lightened() && !utf8.Valid(raw) { // also nil; the SDK read bad UTF-8 as U+FFFD (a stand-in's result was checked)
		raw = nil
	}
	if raw == nil {
		if raw, err = json.Marshal(res); err != nil {
			return nil, fmt.Errorf("encode the %s MCP server's result: %w", server, err)
		}
	}
	recorded := u.cfg.RedactJSON(raw)
	if relay != nil && !sent.lightened() && bytes.Equal(recorded, raw) {
		relay.ran(res, raw) // the gateway need not decode it again
	}
	return tools.Encoded(recorded), nil
}

var unsafeName = regexp.MustCompile(`[^a-z0-9_]+`)

// safeToolName is an upstream tool's name as Countersign offers it, after
// the server's prefix: lower case, runs of other characters as one _.
func safeToolName(upstream string) string {
	return strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(upstream), "_"), "_")
}

// proxy is one upstream tool as a Countersign tool. Its risk is the tools
// file's override, else read from the annotations, which are only hints:
// anything not marked read-only or non-destructive is a high-risk write.
func (u *Server) proxy(t *mcp.Tool, wire json.RawMessage) (*tools.Tool, error) {
	ms := u.spec
	safe := safeToolName(t.Name)
	name := ms.Name + "__" + safe
	if !ms.Prefixed() {
		name = t.Name
	}
	risk, source := tools.RiskHighWrite, "not marked read-only or non-destructive"
	if a := t.Annotations; a != nil {
		switch {
		case a.ReadOnlyHint:
			risk, source = tools.RiskRead, "annotation readOnlyHint"
		case a.DestructiveHint != nil && !*a.DestructiveHint:
			risk, source = tools.RiskLowWrite, "annotation destructiveHint: false"
		}
	}
	if ov, ok := ms.Tools["*"]; ok && ov.Risk != "" {
		risk, source = tools.Risk(ov.Risk), `tools file ("*")`
	}
	// The override is found by the name Countersign offers as well as by
	// the upstream's own: an upstream that renames Delete-Contact to
	// delete_contact (or back) keeps the risk the file gave it. Where
	// several entries match, the highest risk holds.
	var found tools.Risk
	for key, ov := range ms.Tools {
		same := key == t.Name || key == name || (key != "*" && safeToolName(key) == safe)
		if same && ov.Risk != "" && (found == "" || tools.Risk(ov.Risk).Above(found)) {
			found = tools.Risk(ov.Risk)
		}
	}
	if found != "" {
		risk, source = found, "tools file"
	}
	schema, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("input schema: %v", err)
	}
	idempotent := t.Annotations != nil && t.Annotations.IdempotentHint
	upstreamName := t.Name
	run := func(ctx context.Context, call tools.Call, args map[string]any) (any, error) {
		return u.call(ctx, upstreamName, u.riskNow(name, risk), args)
	}
	tool, err := tools.FromSpec(tools.Spec{Name: name, Description: t.Description, Risk: risk, Idempotent: idempotent,
		Schema: schema, Run: run, MCPName: !ms.Prefixed()})
	if err != nil {
		return nil, err
	}
	tool.Origin = "MCP server " + ms.Name + " (" + upstreamName + "); risk from " + source
	tool.Upstream, tool.UpstreamName = ms.Name, upstreamName
	tool.TrustListing = ms.TrustAnnotations
	if listing, err := json.Marshal(t); err == nil {
		tool.SetListing(json.RawMessage(u.cfg.RedactJSON(listing)))
	}
	if wire != nil {
		tool.Wire = json.RawMessage(u.cfg.RedactJSON(wire))
		if !sameValue(tool.Wire, tool.Listing) {
			// It holds more than the SDK read (keys it does not know):
			// what an admin accepts, and a pin covers, is all of it.
			tool.SetListing(tool.Wire)
		}
	}
	return tool, nil
}

// sameValue says whether two JSON texts hold the same value, whatever
// their key order, escapes or number formats.
func sameValue(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// riskNow is a tool's risk as in force now (it may have been kept higher
// than the server's list said), never below what it was built with.
func (u *Server) riskNow(name string, built tools.Risk) tools.Risk {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, t := range u.tools {
		if t.Name == name && t.Risk.Above(built) {
			return t.Risk
		}
	}
	return built
}

func contentText(cs []mcp.Content) string {
	var parts []string
	for _, c := range cs {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}
