package web_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
	"github.com/countersign/countersign/web"
	"github.com/countersign/countersign/web/mcpgate"
)

// roundsApp is a Countersign in front of the desk server (2025 only), whose
// "ask" asks its client for a sampled message, a form and its roots, one
// after the other.
func roundsApp(t *testing.T, ttl time.Duration) *app {
	t.Helper()
	set, err := httptool.Load([]byte("mcp_servers:\n  - name: desk\n    url: \""+deskServer(t, make(chan struct{}))+"\"\n"+
		"    headers: {Authorization: \"Bearer ${DESK_TOKEN}\"}\n    prefix: false\n"),
		"tools.yaml", httptool.Options{Env: func(string) (string, bool) { return "desk-token", true }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	go set.Keep() // reconnects, as the core keeps the set in force
	reg, _ := tools.NewRegistry(set.Tools()...)
	pol, _ := policy.LoadPolicy(policy.DefaultPolicyYAML, "test", reg)
	return startApp(t, appConfig{Store: openStore(t), Tools: reg, Policy: pol, Log: discardLog(),
		Web: web.Config{MCPWait: time.Second, MCPQuestionTTL: ttl}}, false)
}

// modernAsk is a 2026-07-28 client's tools/call of "ask" (it declares
// sampling, elicitation and roots), with answers to the round state
// names; it returns the JSON-RPC answer's result or error.
func modernAsk(t *testing.T, a *app, key, state string, answers map[string]any) (result, rpcErr map[string]any) {
	t.Helper()
	params := map[string]any{"name": "ask", "arguments": map[string]any{}, "_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{"form": map[string]any{}}, "roots": map[string]any{}},
	}}
	if state != "" {
		params["requestState"], params["inputResponses"] = state, answers
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	r := a.doWith("POST", "/mcp", key, string(body), "Mcp-Protocol-Version", "2026-07-28", "Accept", "application/json, text/event-stream",
		"Mcp-Method", "tools/call", "Mcp-Name", "ask")
	var msg struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	raw := r.Raw
	if !strings.HasPrefix(strings.TrimSpace(raw), "{") { // an event stream: its last data line
		for _, line := range strings.Split(raw, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				raw = d
			}
		}
	}
	if err := json.Unmarshal([]byte(raw), &msg); err != nil {
		t.Fatalf("answer %q: %v", r.Raw, err)
	}
	return msg.Result, msg.Error
}

// question is the one question an input-required result asks: its id, its
// method and its parameters.
func question(t *testing.T, res map[string]any) (id, method string, params map[string]any) {
	t.Helper()
	if res["resultType"] != "input_required" {
		t.Fatalf("want an input-required result, got %v", res)
	}
	asked, _ := res["inputRequests"].(map[string]any)
	if len(asked) != 1 {
		t.Fatalf("want one question, got %v", asked)
	}
	for k, v := range asked {
		q, _ := v.(map[string]any)
		p, _ := q["params"].(map[string]any)
		return k, q["method"].(string), p
	}
	return "", "", nil
}

func TestA2026ClientIsAskedWhatA2025ServerAsksRoundByRound(t *testing.T) {
	a := roundsApp(t, 0)
	key, _, _ := a.accounts.AddAgent(context.Background(), "bot", models.Actor{ID: "test"})
	other, _, _ := a.accounts.AddAgent(context.Background(), "other", models.Actor{ID: "test"})

	res, rpcErr := modernAsk(t, a, key, "", nil)
	if rpcErr != nil {
		t.Fatalf("first round: %v", rpcErr)
	}
	id, method, params := question(t, res)
	if method != "sampling/createMessage" || !strings.Contains(asJSONText(params), "summarize order A1001") {
		t.Fatalf("first question: %s %v", method, params)
	}
	first, _ := res["requestState"].(string)

	// Another agent holding the state learns nothing and answers nothing.
	if _, rpcErr := modernAsk(t, a, other, first, map[string]any{id: map[string]any{"role": "assistant", "model": "m",
		"content": map[string]any{"type": "text", "text": "the other agent's words"}}}); rpcErr == nil ||
		!strings.Contains(asJSONText(rpcErr), "no question that is open") {
		t.Fatalf("another agent's answer: %v", rpcErr)
	}

	res, rpcErr = modernAsk(t, a, key, first, map[string]any{id: map[string]any{"role": "assistant", "model": "m",
		"content": map[string]any{"type": "text", "text": "the agent's model read it"}}})
	if rpcErr != nil {
		t.Fatalf("second round: %v", rpcErr)
	}
	id, method, params = question(t, res)
	if method != "elicitation/create" || params["message"] != "Which name?" {
		t.Fatalf("second question: %s %v", method, params)
	}
	// The first state was used: a replay of it is refused.
	if _, rpcErr := modernAsk(t, a, key, first, map[string]any{}); rpcErr == nil {
		t.Fatal("a used requestState was taken again")
	}
	res, _ = modernAsk(t, a, key, res["requestState"].(string), map[string]any{id: map[string]any{"action": "accept", "content": map[string]any{"name": "Bea"}}})
	id, method, _ = question(t, res)
	if method != "roots/list" {
		t.Fatalf("third question: %s", method)
	}
	res, rpcErr = modernAsk(t, a, key, res["requestState"].(string), map[string]any{id: map[string]any{"roots": []any{map[string]any{"uri": "file:///srv/shop"}}}})
	if rpcErr != nil || res["resultType"] != "complete" {
		t.Fatalf("last round: %v %v", rpcErr, res)
	}
	got := asJSONText(res["content"])
	for _, want := range []string{"sampled: the agent's model read it", "elicited: accept Bea", "root: file:///srv/shop"} {
		if !strings.Contains(got, want) {
			t.Errorf("the server did not get %q: %s", want, got)
		}
	}
	calls := a.callsOf(t, "ask")
	if len(calls) != 1 || calls[0].Status != models.CallSucceeded {
		t.Errorf("want one call of ask, succeeded; got %+v", calls)
	}
}

func TestAQuestionNobodyAnswersEndsTheCall(t *testing.T) {
	a := roundsApp(t, 300*time.Millisecond)
	key, _, _ := a.accounts.AddAgent(context.Background(), "bot", models.Actor{ID: "test"})
	res, _ := modernAsk(t, a, key, "", nil)
	id, _, _ := question(t, res)
	time.Sleep(400 * time.Millisecond) // the question's time runs out: the server goes on without it
	_, rpcErr := modernAsk(t, a, key, res["requestState"].(string), map[string]any{id: map[string]any{"role": "assistant", "model": "m",
		"content": map[string]any{"type": "text", "text": "too late"}}})
	if rpcErr == nil || !strings.Contains(asJSONText(rpcErr), "expired") {
		t.Fatalf("a late answer: %v", rpcErr)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		calls := a.callsOf(t, "ask")
		if len(calls) == 1 && !calls[0].Status.UnderWay() {
			if r := calls[0].Result; !strings.Contains(r, "sampling failed: ") || !strings.Contains(r, "did not answer within 300ms") {
				t.Errorf("the server was told %q, want that the client did not answer", r)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the call did not end: %+v", calls)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func asJSONText(v any) string { b, _ := json.Marshal(v); return string(b) }

// callsOf is every call of tool recorded so far.
func (a *app) callsOf(t *testing.T, tool string) []models.ToolCall {
	t.Helper()
	calls, err := a.store.CallsDecidedSince(context.Background(), time.Time{}, time.Time{}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var of []models.ToolCall
	for _, c := range calls {
		if c.Tool == tool {
			of = append(of, c)
		}
	}
	return of
}

// An agent that never answers cannot pile up calls waiting on it: past
// MaxRoundsPerAgent, the server hears at once that no answer will come, and
// the call ends with what it made of that. Another agent is not held back.
func TestAnAgentsUnansweredQuestionsAreCapped(t *testing.T) {
	a := roundsApp(t, time.Minute)
	key, _, _ := a.accounts.AddAgent(context.Background(), "bot", models.Actor{ID: "test"})
	other, _, _ := a.accounts.AddAgent(context.Background(), "other", models.Actor{ID: "test"})
	for i := range mcpgate.MaxRoundsPerAgent {
		if res, rpcErr := modernAsk(t, a, key, "", nil); rpcErr != nil || res["resultType"] != "input_required" {
			t.Fatalf("call %d: %v %v", i+1, rpcErr, res)
		}
	}
	res, rpcErr := modernAsk(t, a, key, "", nil)
	if rpcErr != nil || res["resultType"] != "complete" || !strings.Contains(asJSONText(res["content"]), "calls waiting for its answers already") {
		t.Fatalf("one call too many: %v %v", rpcErr, res)
	}
	if res, _ := modernAsk(t, a, other, "", nil); res["resultType"] != "input_required" {
		t.Fatalf("another agent: %v", res)
	}
}
