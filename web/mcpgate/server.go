// Package mcpgate is Countersign as an MCP server: an outside agent that
// speaks the Model Context Protocol sees the tools in force, and each of its
// tools/call goes through the gate (decided, recorded, run once) through
// gate.Outside, in a run per conversation (the one a request names in
// _meta, else its MCP session, else the agent's sessionless one). A call
// that waits for a person is held for a while; one not decided in time
// answers that it waits, and the same call made again returns its outcome
// instead of a second call.
package mcpgate

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/countersign/countersign/agent/telemetry"
	"go.opentelemetry.io/otel/propagation"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/upstream"
)

// DefaultWait is how long a call that needs a person is held before the
// answer says it waits: under the minute MCP clients commonly give up at.
const DefaultWait = 50 * time.Second

// Gateway builds MCP servers over one gate.
type Gateway struct {
	// Outside gates the calls, as for the gate API.
	Outside *gate.Outside
	// Wait is how long a call that needs a person is held (0: DefaultWait).
	Wait time.Duration
	// Receipt is a final call's signed receipt (nil: results carry none);
	// fresh: the call ended while this request waited, so none is kept yet
	// unless another instance or the sweep was quicker.
	Receipt func(ctx context.Context, call *models.ToolCall, fresh bool) (string, error)
	// Answers are where web waits for the bytes of a tools/call's result
	// (answer.go; nil: the SDK encodes every result).
	Answers *Answers
	// Servers are the tools file's MCP servers, whose prompts, resources
	// and completions pass through (offers.go); nil: none.
	Servers func() []*upstream.Server
	// QuestionTTL is how long what a 2025 server asks a ModernProtocol
	// client during a call waits for its answer (0:
	// upstream.DefaultQuestionTTL; rounds.go).
	QuestionTTL time.Duration

	subs   subscriptions
	rounds rounds
}

// Server is the MCP server one agent sees: every tool in force that
// Countersign runs itself (decision-only tools are for the gate API) and
// that is offered to clients of its revision (modern: the revisions
// without sessions; OfferedAt).
func (gw *Gateway) Server(ag *models.Agent, modern bool) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "countersign", Version: "1"}, &mcp.ServerOptions{
		CompletionHandler: gw.completer(modern), SubscribeHandler: gw.subscribe, UnsubscribeHandler: gw.unsubscribe,
	})
	s.AddReceivingMiddleware(UnknownToolAsResult(modern), gw.unlisted(ag))
	gw.Offer(s, ag, modern, nil, gw.Outside.Gate.Tools())
	return s
}

// OfferedAt says whether a tool is offered to clients of the revisions
// with sessions (modern false) or those without: an upstream's tool as
// its server lists it to each.
func OfferedAt(t *tools.Tool, modern bool) bool {
	if modern {
		return t.Revision != tools.LegacyOnly
	}
	return t.Revision == "" || t.Revision == tools.LegacyOnly
}

// Offer changes what a server built by Server offers from the tools in prev
// (nil: none) to those in next: tools gone are removed, new or changed ones
// added. The SDK tells the connected clients that the list changed.
func (gw *Gateway) Offer(s *mcp.Server, ag *models.Agent, modern bool, prev, next *tools.Registry) {
	offered := func(reg *tools.Registry) map[string]*tools.Tool {
		out := map[string]*tools.Tool{}
		if reg != nil {
			for _, t := range reg.All() {
				if t.Executes() && OfferedAt(t, modern) {
					out[t.Name] = t
				}
			}
		}
		return out
	}
	before, after := offered(prev), offered(next)
	var gone []string
	for name := range before {
		if after[name] == nil {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		s.RemoveTools(gone...)
	}
	for name, t := range after {
		if was := before[name]; was != nil && sameShape(was, t) {
			continue
		}
		gw.add(s, ag, t)
	}
}

// Retell offers one tool of those a server built by Server offers (reg)
// again as it is: the SDK tells the connected clients that the list
// changed, as an MCP server said of a list Countersign found the same.
// A server that offers no tool has no list to tell of.
func (gw *Gateway) Retell(s *mcp.Server, ag *models.Agent, modern bool, reg *tools.Registry) {
	for _, t := range reg.All() {
		if t.Executes() && OfferedAt(t, modern) {
			gw.add(s, ag, t)
			return
		}
	}
}

func (gw *Gateway) add(s *mcp.Server, ag *models.Agent, t *tools.Tool) {
	s.AddTool(asListed(t), func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return gw.call(ctx, ag, t, req)
	})
}

// asListed is a tool as MCP clients see it. An upstream MCP server's tool is
// listed as that server listed it (title, description, input and output
// schemas, annotations, icons, _meta), under the name Countersign offers;
// other tools say what their risk means in MCP's annotations.
func asListed(t *tools.Tool) *mcp.Tool {
	if len(t.Listing) > 0 {
		var up mcp.Tool
		if json.Unmarshal(t.Listing, &up) == nil {
			up.Name = t.Name
			if up.InputSchema == nil {
				up.InputSchema = json.RawMessage(t.Schema)
			}
			return &up
		}
	}
	readOnly := t.Risk == tools.RiskRead
	destructive := t.Risk == tools.RiskHighWrite
	return &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: json.RawMessage(t.Schema),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: readOnly, DestructiveHint: &destructive}}
}

// sameShape: a client sees no difference between the two, in its place in
// tools/list too (a server's new order is a changed list).
func sameShape(a, b *tools.Tool) bool {
	return a.Description == b.Description && a.Risk == b.Risk && string(a.Schema) == string(b.Schema) && string(a.Listing) == string(b.Listing) &&
		string(a.Wire) == string(b.Wire) && string(a.ModernWire) == string(b.ModernWire) && a.Place == b.Place && a.ModernPlace == b.ModernPlace
}

func (gw *Gateway) call(ctx context.Context, ag *models.Agent, tool *tools.Tool, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	meta := req.Params.GetMeta()
	ctx = telemetry.Continue(ctx, traceOf(meta))
	if ourRound(req.Params.RequestState) {
		return gw.nextRound(ctx, ag, req) // answers to what a 2025 server asked (rounds.go)
	}
	// An upstream's progress, log messages and requests to the client
	// during a call that runs now reach this client.
	relay := &upstream.Relay{Session: req.Session, Ctx: ctx, Token: req.Params.GetProgressToken()}
	// A client without a session (2026-07-28) is answered by the
	// upstream at its revision: an input-required result comes back to
	// it, and its answers go to the upstream with the call asked again.
	if req.Session.ID() == "" {
		relay.Modern, relay.Meta = true, meta
		relay.InputResponses, relay.RequestState = req.Params.InputResponses, req.Params.RequestState
	}
	ctx = upstream.WithRelay(ctx, relay)
	if gw.Receipt != nil {
		ctx = gate.WantsReceipt(ctx) // signed with the outcome: the answer carries it
	}
	asTask := req.Session.ID() == "" && DeclaresTasks(meta) && !gw.TaskForbidden(req.Params.Name, true)
	if asTask {
		ctx = withTaskVia(ctx)
	} else if asksApart(relay, tool) {
		return gw.apart(ctx, ag, tool, req, relay)
	}
	// A call asked again with the answers to what the upstream asked is
	// the next round of it, not the same call found again: decided and
	// run anew.
	rounds := req.Params.InputResponses != nil || req.Params.RequestState != ""
	asked, err := gw.Outside.Ask(ctx, gw.outsideCall(ag, tool, meta, req.Session.ID(), req.Params.Arguments, rounds))
	if err != nil {
		return nil, err
	}
	return gw.finish(ctx, req, tool, relay, asked, asTask)
}

// finish answers a call the gate took: at once when it ended, as a task
// when the client asked for one and it waits, else once a person decided
// or the hold ended.
func (gw *Gateway) finish(ctx context.Context, req *mcp.CallToolRequest, tool *tools.Tool, relay *upstream.Relay, asked gate.Asked, asTask bool) (*mcp.CallToolResult, error) {
	if call := asked.Brief(); asTask && gw.Outside.Waiting(call) {
		return gw.asTask(call, tool), nil // a task, not a hold (tasks.go)
	}
	call := gw.hold(ctx, req, asked.Brief())
	if rpc := relay.Refused(); rpc != nil && !asked.Joined && call.Status == models.CallFailed {
		// The upstream did not take the call: its own error, as it sent it.
		return nil, rpc
	}
	// For the record only: the same intent asked again is this call
	// within the intent window whether or not this answer reaches the client.
	if ctx.Err() == nil {
		_ = gw.Outside.HandedOver(ctx, call)
	}
	return gw.answer(ctx, tool, call, !asked.Joined, asked.Replay(), relay, answerPlace(req)), nil
}

// outsideCall is a call for the gate. The same intent asked again, from
// this session or another, another process or instance, after a restart
// (a client that gave up waiting, or reconnected), while it waits or
// within the intent window after a person decided it, is that call
// (Outside.Ask joins it), unless the request says it means a new one.
func (gw *Gateway) outsideCall(ag *models.Agent, tool *tools.Tool, meta mcp.Meta, sessionID string, args json.RawMessage, next bool) gate.OutsideCall {
	newIntent, _ := meta[MetaNewIntent].(bool)
	return gate.OutsideCall{Agent: ag, Session: session(meta, sessionID), Tool: tool.Name, Args: []byte(args), Context: callContext(meta), NewIntent: newIntent || next}
}

// changeSaid tells what a person changed (note, "": nothing): a text block
// before the content, and in _meta and, for clients that read nothing but
// the structured content (Mastra), beside the upstream's keys in it (none
// removed), unless the tool's output schema forbids other keys: clients
// check structured content against it, so there it is in _meta and the
// text only.
func changeSaid(tool *tools.Tool, call *models.ToolCall, note string) additions {
	var add additions
	if note == "" {
		return add
	}
	changed := map[string]any{"note": note, "asked": json.RawMessage(call.OriginalArgs), "ran": json.RawMessage(call.Args)}
	add.first = textBlock{Type: "text", Text: note}
	add.meta = append(add.meta, member{MetaChanged, changed})
	if !closedOutput(tool) {
		add.structured = append(add.structured, member{MetaChanged, changed})
	}
	return add
}

// withSaid is r (result's, which has the text block already) with the
// _meta and structured content members added.
func withSaid(r *mcp.CallToolResult, add additions) *mcp.CallToolResult {
	if len(add.meta) > 0 {
		meta := r.GetMeta()
		if meta == nil {
			meta = map[string]any{}
		}
		for _, m := range add.meta {
			meta[m.key] = m.value
		}
		r.SetMeta(meta)
	}
	if sc, ok := r.StructuredContent.(map[string]any); ok {
		for _, m := range add.structured {
			sc[m.key] = m.value
		}
	}
	return r
}

// textBlock is MCP's text content, as Countersign words it.
type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// MetaNewIntent is the _meta key under which a request says it means a
// second identical action (true): the same intent decided before is not
// replayed.
const MetaNewIntent = "countersign/new-intent"

// MetaChanged is the _meta key of a result whose arguments a person
// changed before approving: the note, and the arguments asked and run.
const MetaChanged = "countersign/changed"

// MetaReceipt is the _meta key of a final call's signed receipt (a JWS).
const MetaReceipt = "countersign/receipt"

// MetaReplay is the _meta key of a result that replays a call a person
// decided before: its id, status and when it ended.
const MetaReplay = "countersign/replay"

// BridgeClient is the client name the stdio bridge (countersign mcp) gives
// /mcp. A 2025-11-25 session of it is not told that tasks are spoken: the
// bridge answers its own client without them, and passes on each tool as
// /mcp lists it, which is then as its server listed it.
const BridgeClient = "countersign-mcp-bridge"

// MetaSession is the _meta key under which a request may name the
// conversation it belongs to: calls are tied to a run by it, else by the
// MCP session, else (a stateless request naming none) by the agent alone.
const MetaSession = "countersign/session"

// MetaContext is the _meta key under which a request may say why the agent
// makes the call, in words, for the person who reviews it.
const MetaContext = "countersign/context"

// callContext is what the agent says of the call ("" when it said nothing),
// at most 2,000 characters.
func callContext(meta mcp.Meta) string {
	s, _ := meta[MetaContext].(string)
	return tools.Truncate(strings.TrimSpace(s), 2000)
}

// traceOf is the W3C trace context a request carries in _meta
// ("traceparent", "tracestate"), as the MCP community's convention has it.
func traceOf(meta mcp.Meta) propagation.MapCarrier {
	c := propagation.MapCarrier{}
	for _, k := range []string{"traceparent", "tracestate"} {
		if s, ok := meta[k].(string); ok && len(s) <= 512 {
			c[k] = s
		}
	}
	return c
}

// session is the run a call belongs to, from what the request carries:
// its _meta, else its MCP session (sessionID), else none.
func session(meta mcp.Meta, sessionID string) string {
	if s, ok := meta[MetaSession].(string); ok {
		if s = strings.TrimSpace(s); s != "" && len(s) <= 200 {
			return "mcp:" + s
		}
	}
	if sessionID != "" {
		return "mcp:" + sessionID
	}
	return "mcp"
}

// hold waits while a person decides or the call runs, telling a client that
// asked for progress that it still waits.
func (gw *Gateway) hold(ctx context.Context, req *mcp.CallToolRequest, call *models.ToolCall) *models.ToolCall {
	wait := gw.Wait
	if wait == 0 {
		wait = DefaultWait
	}
	token := req.Params.GetProgressToken()
	if token == nil {
		return gw.Outside.Wait(ctx, call, wait, 0, nil)
	}
	step := 0.0
	return gw.Outside.Wait(ctx, call, wait, min(5*time.Second, wait/4), func(c *models.ToolCall) { // a few notes within any hold
		step++
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: step,
			Message: "waiting for a person to decide (" + string(c.Status) + ")"})
	})
}

// changedNote says, in words for the agent, what the approver changed in
// the call's arguments before approving it, and their note ("" when nobody
// changed them).
func (gw *Gateway) changedNote(ctx context.Context, c *models.ToolCall) string {
	if c.Status != models.CallSucceeded || c.OriginalArgs == "" || c.OriginalArgs == c.Args {
		return ""
	}
	var from, to map[string]any
	if json.Unmarshal([]byte(c.OriginalArgs), &from) != nil || json.Unmarshal([]byte(c.Args), &to) != nil {
		return ""
	}
	keys := map[string]bool{}
	for k := range from {
		keys[k] = true
	}
	for k := range to {
		keys[k] = true
	}
	var names []string
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	show := func(v any, ok bool) string {
		if !ok {
			return "(none)"
		}
		b, _ := json.Marshal(v)
		return tools.Truncate(string(b), 200)
	}
	var parts []string
	for _, k := range names {
		a, okA := from[k]
		b, okB := to[k]
		if ja, jb := show(a, okA), show(b, okB); ja != jb {
			parts = append(parts, fmt.Sprintf("%s from %s to %s", k, ja, jb))
		}
	}
	note := "A person changed the arguments before approving this call: " + strings.Join(parts, "; ") + "."
	if approvals, err := gw.Outside.Store.Approvals(ctx, c.ID); err == nil {
		for _, a := range approvals {
			if a.Verdict == "approve" && a.Edited && strings.TrimSpace(a.Note) != "" {
				note += " Their note: " + a.Note
			}
		}
	}
	return note + " What follows is the result of the call as approved."
}

// closedOutput says whether a tool's output schema forbids keys it does
// not name (additionalProperties: false, or unevaluatedProperties: false).
func closedOutput(t *tools.Tool) bool {
	if t == nil || len(t.Listing) == 0 {
		return false
	}
	var l struct {
		OutputSchema map[string]json.RawMessage `json:"outputSchema"`
	}
	if json.Unmarshal(t.Listing, &l) != nil {
		return true // unreadable: leave it as it came
	}
	return string(l.OutputSchema["additionalProperties"]) == "false" || string(l.OutputSchema["unevaluatedProperties"]) == "false"
}

func hasOutputSchema(t *tools.Tool) bool {
	if t == nil || len(t.Listing) == 0 {
		return false
	}
	var l struct {
		OutputSchema json.RawMessage `json:"outputSchema"`
	}
	return json.Unmarshal(t.Listing, &l) == nil && len(l.OutputSchema) > 0 && string(l.OutputSchema) != "null"
}

// result is the MCP answer for a call. A tool of an upstream MCP server
// answers with that server's result as it came (content blocks, structured
// content, _meta); Countersign adds its own words only where a person or
// the policy acted: before the content, what an approver changed; instead
// of it, a denial, rejection or expiry. changed is that note ("" if none).
// relay, when set, may hold the upstream's result already decoded.
func result(c *models.ToolCall, tool *tools.Tool, changed string, relay *upstream.Relay) *mcp.CallToolResult {
	text := func(s string, isErr bool) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}, IsError: isErr}
	}
	told := gate.TellOutcome(c)
	if c.Status.Open() {
		// A tool with an output schema must answer with structured content
		// unless it answers an error (clients check), so its "not yet" is one.
		return text(told.Said(), hasOutputSchema(tool))
	}
	if c.Status != models.CallSucceeded {
		return text(told.Words, told.Failed)
	}
	var r *mcp.CallToolResult
	if up := relay.Result(c.Result); tool.Upstream != "" && up != nil && up.Content != nil {
		r = up // decoded as it came, and recorded as it is encoded
	} else if up := (&mcp.CallToolResult{}); tool.Upstream != "" && json.Unmarshal([]byte(c.Result), up) == nil && up.Content != nil {
		r = up
	} else {
		r = text(c.Result, false)
		var structured map[string]any
		if json.Unmarshal([]byte(c.Result), &structured) == nil {
			r.StructuredContent = structured
		}
	}
	if changed != "" {
		r.Content = append([]mcp.Content{&mcp.TextContent{Text: changed}}, r.Content...)
	}
	return r
}
