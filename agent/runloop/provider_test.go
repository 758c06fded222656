package runloop_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/models"
)

// fakeProvider is an HTTP server that answers with scripted bodies and keeps
// every request it received.
type fakeProvider struct {
	mu       sync.Mutex
	requests []map[string]any
	headers  []http.Header
	replies  []fakeReply
}

type fakeReply struct {
	status int
	body   string
}

func (f *fakeProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req map[string]any
	_ = json.Unmarshal(b, &req)
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.headers = append(f.headers, r.Header.Clone())
	var rep fakeReply
	if len(f.replies) > 0 {
		rep = f.replies[0]
		f.replies = f.replies[1:]
	} else {
		rep = fakeReply{500, `{"error":{"message":"no more scripted replies"}}`}
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After-Ms", "5")
	w.WriteHeader(rep.status)
	io.WriteString(w, rep.body)
}

func openAIReply(content string, calls ...[3]string) fakeReply {
	var tc []map[string]any
	for _, c := range calls {
		tc = append(tc, map[string]any{"id": c[0], "type": "function", "function": map[string]any{"name": c[1], "arguments": c[2]}})
	}
	msg := map[string]any{"role": "assistant", "content": content}
	if len(tc) > 0 {
		msg["tool_calls"] = tc
	}
	b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": msg}}})
	return fakeReply{200, string(b)}
}

func anthropicReply(text string, calls ...[3]string) fakeReply {
	var content []any
	if text != "" {
		content = append(content, map[string]any{"type": "text", "text": text})
	}
	for _, c := range calls {
		content = append(content, map[string]any{"type": "tool_use", "id": c[0], "name": c[1], "input": json.RawMessage(c[2])})
	}
	b, _ := json.Marshal(map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
		"stop_reason": "tool_use", "content": content, "usage": map[string]any{"input_tokens": 1, "output_tokens": 1}})
	return fakeReply{200, string(b)}
}

func TestOpenAIProviderThroughTheGate(t *testing.T) {
	e := newEnv(t)
	fake := &fakeProvider{replies: []fakeReply{
		{429, `{"error":{"message":"slow down","type":"rate_limit"}}`},
		openAIReply("", [3]string{"call_a", "get_order_status", `{"order_id":"A1002"}`}, [3]string{"call_b", "issue_refund", `{"order_id":"A1002","amount":900}`}),
		openAIReply("Your refund is being reviewed."),
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	model := llm.NewOpenAI(llm.Config{BaseURL: srv.URL + "/v1/", APIKey: "sk-test-secret", Model: "gpt-test", Timeout: 5 * time.Second})
	r := e.runner(model)
	run := e.start(r, "cus_alice", "Alice", "refund $900 on A1002")
	e.waitRun(run, models.RunPaused)

	// 429 was retried; the request carried our tools and schemas.
	if len(fake.requests) != 2 {
		t.Fatalf("%d requests", len(fake.requests))
	}
	req := fake.requests[1]
	if req["model"] != "gpt-test" || fake.headers[1].Get("Authorization") != "Bearer sk-test-secret" {
		t.Fatalf("request %v", req)
	}
	tools := req["tools"].([]any)
	found := false
	for _, tl := range tools {
		fn := tl.(map[string]any)["function"].(map[string]any)
		if fn["name"] == "issue_refund" {
			found = true
			tool, _ := e.Gate.Tools().Get("issue_refund")
			got, _ := json.Marshal(fn["parameters"])
			var want any
			_ = json.Unmarshal(tool.Schema, &want)
			wantJSON, _ := json.Marshal(want)
			if string(got) != string(wantJSON) {
				t.Fatalf("schema sent %s, want %s", got, wantJSON)
			}
		}
	}
	if !found || len(tools) != 5 {
		t.Fatalf("tools %v", tools)
	}
	msgs := req["messages"].([]any)
	if msgs[0].(map[string]any)["role"] != "system" || msgs[1].(map[string]any)["content"] != "refund $900 on A1002" {
		t.Fatalf("messages %v", msgs)
	}
	// Both parallel calls went through the gate: one ran, one waits.
	if e.Executions["get_order_status"].Load() != 1 || e.Executions["issue_refund"].Load() != 0 {
		t.Fatal("parallel calls were not both handled")
	}
	if err := e.Gate.Reject(context.Background(), e.pendingAction(run).ID, approver1, "needs photos first"); err != nil {
		t.Fatal(err)
	}
	e.waitRun(run, models.RunWaiting)
	// The third request replays the conversation in wire format: the
	// assistant's two tool calls, then both results.
	last := fake.requests[2]["messages"].([]any)
	var roles []string
	for _, m := range last {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	if strings.Join(roles, ",") != "system,user,assistant,tool,tool" {
		t.Fatalf("roles %v", roles)
	}
	rejected := last[4].(map[string]any)
	if rejected["tool_call_id"] != "call_b" || !strings.Contains(rejected["content"].(string), "Rejected by a person: needs photos first. Do not retry this call") {
		t.Fatalf("rejection message %v", rejected)
	}
	if e.lastText(run, "assistant") != "Your refund is being reviewed." {
		t.Fatal(e.transcript(run))
	}
	if body, _ := json.Marshal(fake.requests); strings.Contains(string(body), "sk-test-secret") {
		t.Fatal("the API key reached the model's context")
	}
}

func TestOpenAIGarbageArgumentsBecomeAnInvalidCall(t *testing.T) {
	e := newEnv(t)
	fake := &fakeProvider{replies: []fakeReply{
		openAIReply("", [3]string{"call_x", "issue_refund", `{"order_id": "A1002", amount: lots}`}),
		openAIReply("Sorry, let me try that differently."),
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	r := e.runner(llm.NewOpenAI(llm.Config{BaseURL: srv.URL + "/v1/", APIKey: "k", Model: "m", Timeout: 5 * time.Second}))
	run := e.start(r, "cus_alice", "Alice", "refund A1002")
	e.waitRun(run, models.RunWaiting)
	calls, _ := e.Store.RunCalls(context.Background(), run)
	if len(calls) != 1 || calls[0].Status != models.CallInvalid || !strings.Contains(calls[0].Error, "must be a JSON object") {
		t.Fatalf("calls %+v", calls)
	}
	last := fake.requests[1]["messages"].([]any)
	if got := last[len(last)-1].(map[string]any)["content"].(string); !strings.Contains(got, "The call was invalid: ") {
		t.Fatalf("model was told %q", got)
	}
}

func TestOpenAIProviderErrorFailsTheRun(t *testing.T) {
	e := newEnv(t)
	fake := &fakeProvider{replies: []fakeReply{{500, `{"error":{"message":"boom"}}`}, {500, `{"error":{"message":"boom"}}`}}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	r := e.runner(llm.NewOpenAI(llm.Config{BaseURL: srv.URL + "/v1/", APIKey: "k", Model: "m", MaxRetries: 1, Timeout: 5 * time.Second}))
	run := e.start(r, "cus_alice", "Alice", "hi")
	got := e.waitRun(run, models.RunFailed)
	if !strings.Contains(got.LastError, "openai") || len(fake.requests) != 2 {
		t.Fatalf("%q after %d requests", got.LastError, len(fake.requests))
	}
}

func TestAnthropicProviderThroughTheGate(t *testing.T) {
	e := newEnv(t)
	fake := &fakeProvider{replies: []fakeReply{
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"overloaded"}}`},
		anthropicReply("Checking both.", [3]string{"toolu_1", "get_order_status", `{"order_id":"A1001"}`}, [3]string{"toolu_2", "issue_refund", `{"order_id":"A1001","amount":20}`}),
		anthropicReply("All done."),
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	r := e.runner(llm.NewAnthropic(llm.Config{BaseURL: srv.URL, APIKey: "ak-test", Model: "claude-test", Timeout: 5 * time.Second}))
	run := e.start(r, "cus_alice", "Alice", "where is A1001 and refund $20")
	e.waitRun(run, models.RunWaiting)
	if len(fake.requests) != 3 {
		t.Fatalf("%d requests", len(fake.requests))
	}
	if h := fake.headers[1]; h.Get("X-Api-Key") != "ak-test" && h.Get("Authorization") != "Bearer ak-test" {
		t.Fatalf("api key header missing: %v", h)
	}
	req := fake.requests[1]
	if req["model"] != "claude-test" || req["system"] == nil {
		t.Fatalf("request %v", req)
	}
	for _, tl := range req["tools"].([]any) {
		tm := tl.(map[string]any)
		if tm["name"] == "issue_refund" {
			schema := tm["input_schema"].(map[string]any)
			props := schema["properties"].(map[string]any)
			if _, ok := props["amount"]; !ok || schema["additionalProperties"] != false {
				t.Fatalf("schema %v", schema)
			}
		}
	}
	// Third request: assistant tool_use blocks, then one user turn with both results.
	msgs := fake.requests[2]["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("messages %v", msgs)
	}
	results := msgs[2].(map[string]any)["content"].([]any)
	if len(results) != 2 || results[0].(map[string]any)["type"] != "tool_result" || results[1].(map[string]any)["tool_use_id"] != "toolu_2" {
		t.Fatalf("results %v", results)
	}
	if e.Order("A1001").RefundedCents != 2000 || e.lastText(run, "assistant") != "All done." {
		t.Fatal(e.transcript(run))
	}
}
