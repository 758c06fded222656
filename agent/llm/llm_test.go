package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/llm"
)

// provider answers with the scripted replies in turn (then 500) and keeps
// each request's body and headers.
type provider struct {
	mu      sync.Mutex
	replies []reply
	bodies  []map[string]any
	headers []http.Header
}

type reply struct {
	status int
	body   string
}

func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	p.mu.Lock()
	p.bodies, p.headers = append(p.bodies, m), append(p.headers, r.Header.Clone())
	rep := reply{500, `{"error":{"message":"no more replies","type":"server_error"}}`}
	if len(p.replies) > 0 {
		rep, p.replies = p.replies[0], p.replies[1:]
	}
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After-Ms", "1")
	w.WriteHeader(rep.status)
	io.WriteString(w, rep.body)
}

const conversationSecret = "sk-test-do-not-leak-0123456789"

var conversation = llm.Request{
	System: "You help customers.",
	Turns: []llm.Turn{
		{Role: "customer", Text: "refund A1"},
		{Role: "assistant", Text: "Looking.", Calls: []llm.Call{{ID: "c1", Tool: "get_order", Args: json.RawMessage(`{"order_id":"A1"}`)}}},
		{Role: "tool", CallID: "c1", Text: `{"status":"delivered"}`},
	},
	Tools: []llm.ToolSpec{{Name: "get_order", Description: "Look up an order.", Schema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}}}`)}},
}

// OpenAI: a 429 is tried again; the conversation goes out as Chat
// Completions messages with the tool; parallel calls come back in order,
// garbage arguments as they were written; the key is sent only as the
// bearer token and never appears in an error.
func TestOpenAIAdapter(t *testing.T) {
	t.Parallel()
	ok := `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"On it.","tool_calls":[` +
		`{"id":"a","type":"function","function":{"name":"get_order","arguments":"{\"order_id\":\"A1\"}"}},` +
		`{"id":"b","type":"function","function":{"name":"get_order","arguments":"{not json"}}]}}]}`
	p := &provider{replies: []reply{{429, `{"error":{"message":"slow down","type":"rate_limit"}}`}, {200, ok}}}
	srv := httptest.NewServer(p)
	defer srv.Close()
	m := llm.NewOpenAI(llm.Config{BaseURL: srv.URL, APIKey: conversationSecret, Model: "m"})
	got, err := m.Next(context.Background(), conversation)
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != "On it." || len(got.Calls) != 2 || got.Calls[0].ID != "a" || string(got.Calls[1].Args) != "{not json" {
		t.Fatalf("reply: %+v", got)
	}
	if len(p.bodies) != 2 {
		t.Fatalf("%d requests, want the 429 and one more", len(p.bodies))
	}
	msgs, _ := p.bodies[1]["messages"].([]any)
	if len(msgs) != 4 || msgs[0].(map[string]any)["role"] != "system" || msgs[3].(map[string]any)["tool_call_id"] != "c1" {
		t.Fatalf("messages: %v", msgs)
	}
	if h := p.headers[1].Get("Authorization"); h != "Bearer "+conversationSecret {
		t.Fatalf("authorization %q", h)
	}

	p.replies = []reply{{401, `{"error":{"message":"bad key ` + conversationSecret[:6] + `…","type":"auth"}}`}}
	_, err = m.Next(context.Background(), conversation)
	if !errors.Is(err, llm.ErrModel) || strings.Contains(err.Error(), conversationSecret) {
		t.Fatalf("a refused key: %v", err)
	}
}

// Anthropic: the system prompt goes apart, tool results as tool_result
// blocks of a user turn; an overloaded 529 is tried again; tool_use
// blocks come back as calls; the key goes as x-api-key with the API
// version the adapter speaks, and in no error.
func TestAnthropicAdapter(t *testing.T) {
	t.Parallel()
	ok := `{"id":"msg","type":"message","role":"assistant","model":"m","stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1},"content":[` +
		`{"type":"text","text":"On it."},{"type":"tool_use","id":"a","name":"get_order","input":{"order_id":"A1"}}]}`
	p := &provider{replies: []reply{{529, `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`}, {200, ok}}}
	srv := httptest.NewServer(p)
	defer srv.Close()
	m := llm.NewAnthropic(llm.Config{BaseURL: srv.URL, APIKey: conversationSecret, Model: "m"})
	got, err := m.Next(context.Background(), conversation)
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != "On it." || len(got.Calls) != 1 || got.Calls[0].Tool != "get_order" || string(got.Calls[0].Args) != `{"order_id":"A1"}` {
		t.Fatalf("reply: %+v", got)
	}
	if len(p.bodies) != 2 {
		t.Fatalf("%d requests, want the 529 and one more", len(p.bodies))
	}
	body := p.bodies[1]
	msgs, _ := body["messages"].([]any)
	if len(msgs) != 3 || body["system"] == nil {
		t.Fatalf("messages %v, system %v", msgs, body["system"])
	}
	last, _ := msgs[2].(map[string]any)["content"].([]any)
	if len(last) != 1 || last[0].(map[string]any)["type"] != "tool_result" || last[0].(map[string]any)["tool_use_id"] != "c1" {
		t.Fatalf("the tool result: %v", msgs[2])
	}
	if h := p.headers[1]; h.Get("X-Api-Key") != conversationSecret || h.Get("Anthropic-Version") != "2023-06-01" || h.Get("Authorization") != "" {
		t.Fatalf("headers %v", h)
	}
	p.replies = []reply{{401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`}}
	if _, err := m.Next(context.Background(), conversation); !errors.Is(err, llm.ErrModel) || strings.Contains(err.Error(), conversationSecret) {
		t.Fatalf("a refused key: %v", err)
	}
}

// recorded is a conversation with parallel calls, garbage arguments, a
// refused call and an assistant turn without text: the request each
// adapter makes of it is the one the providers' own Go SDKs made
// (openai-go v3.98.0 and anthropic-sdk-go v2.15.0, recorded in testdata
// before the adapters left them for the plain HTTP API).
var recorded = llm.Request{
	System: "You help customers.",
	Turns: []llm.Turn{
		{Role: "customer", Text: "refund A1"},
		{Role: "assistant", Text: "Looking.", Calls: []llm.Call{{ID: "c1", Tool: "get_order", Args: json.RawMessage(`{"order_id":"A1"}`)}, {ID: "c2", Tool: "refund", Args: json.RawMessage(`{not json`)}}},
		{Role: "tool", CallID: "c1", Text: `{"status":"delivered"}`, Result: &llm.ToolResult{Status: "succeeded"}},
		{Role: "tool", CallID: "c2", Text: `invalid arguments`, Result: &llm.ToolResult{Status: "invalid"}},
		{Role: "assistant", Calls: []llm.Call{{ID: "c3", Tool: "get_order", Args: json.RawMessage(`{"order_id":"A2"}`)}}},
		{Role: "tool", CallID: "c3", Text: `{"status":"paid"}`, Result: &llm.ToolResult{Status: "succeeded"}},
	},
	Tools: []llm.ToolSpec{{Name: "get_order", Description: "Look up an order.", Schema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string","pattern":"^A"}},"required":["order_id"],"additionalProperties":false}`)}},
}

func TestRequestsAreTheOnesTheSDKsMade(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		recording string
		answer    string
		model     func(llm.Config) llm.Model
	}{
		{"openai-go-3.98.0-request.json", `{"choices":[{"message":{"role":"assistant","content":"ok"}}]}`,
			func(c llm.Config) llm.Model { return llm.NewOpenAI(c) }},
		{"anthropic-sdk-go-2.15.0-request.json", `{"type":"message","content":[{"type":"text","text":"ok"}]}`,
			func(c llm.Config) llm.Model { return llm.NewAnthropic(c) }},
	} {
		p := &provider{replies: []reply{{200, c.answer}}}
		srv := httptest.NewServer(p)
		got, err := c.model(llm.Config{BaseURL: srv.URL, APIKey: "k", Model: "m"}).Next(context.Background(), recorded)
		srv.Close()
		if err != nil || got.Text != "ok" {
			t.Fatalf("%s: %+v, %v", c.recording, got, err)
		}
		raw, err := os.ReadFile(filepath.Join("testdata", c.recording))
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(p.bodies[0], want) {
			gotJSON, _ := json.MarshalIndent(p.bodies[0], "", " ")
			t.Errorf("%s: the request differs from the recording:\n%s", c.recording, gotJSON)
		}
	}
}

// A provider (or something in its place) that answers with a redirect is
// not followed: the key goes to one host only.
func TestARedirectTakesTheKeyNowhere(t *testing.T) {
	t.Parallel()
	var elsewhere sync.Map
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Store("hit", r.Header.Get("X-Api-Key")+r.Header.Get("Authorization"))
	}))
	defer other.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	for _, m := range []llm.Model{
		llm.NewOpenAI(llm.Config{BaseURL: redirect.URL, APIKey: conversationSecret}),
		llm.NewAnthropic(llm.Config{BaseURL: redirect.URL, APIKey: conversationSecret}),
	} {
		if _, err := m.Next(context.Background(), conversation); !errors.Is(err, llm.ErrModel) || !strings.Contains(err.Error(), "307") {
			t.Fatalf("a redirect: %v", err)
		}
	}
	if v, ok := elsewhere.Load("hit"); ok {
		t.Fatalf("the redirect was followed, carrying %q", v)
	}
}

// Retries stop at MaxRetries, and the wait the provider asks for is kept.
func TestRetriesAreBounded(t *testing.T) {
	t.Parallel()
	p := &provider{}
	srv := httptest.NewServer(p)
	defer srv.Close()
	m := llm.NewOpenAI(llm.Config{BaseURL: srv.URL, APIKey: "k", MaxRetries: 2})
	_, err := m.Next(context.Background(), conversation)
	if !errors.Is(err, llm.ErrModel) || !strings.Contains(err.Error(), "no more replies") {
		t.Fatalf("%v", err)
	}
	if len(p.bodies) != 3 {
		t.Fatalf("%d requests, want the first and 2 retries", len(p.bodies))
	}
}

// mockLLM starts @dwmkerr/mock-llm, an OpenAI-compatible server written
// by others (pinned in .ci/llm), with the given rules.
func mockLLM(t *testing.T, rules string) string {
	t.Helper()
	script, _ := filepath.Abs("../../.ci/llm/node_modules/@dwmkerr/mock-llm/dist/main.js")
	node, nodeErr := exec.LookPath("node")
	_, err := os.Stat(script)
	if nodeErr != nil || err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node or .ci/llm's mock-llm is missing (%v, %v): .ci/run installs them", nodeErr, err)
		}
		t.Skip("no node or no .ci/llm/node_modules: run make test, which installs them")
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "mock-llm.yaml")
	if err := os.WriteFile(config, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(node, script, "--config", config)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOST=127.0.0.1", "PORT="+strconv.Itoa(port))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base + "/v1"
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("mock-llm did not start: %s", out.String())
		}
	}
}

// The OpenAI adapter against an independent OpenAI-compatible server: the
// server answers only a request whose system prompt, key, tools and turns
// are where Chat Completions puts them (else a 400), first with a call,
// then, given the call's result, with text.
func TestOpenAIAgainstAnIndependentServer(t *testing.T) {
	t.Parallel()
	base := mockLLM(t, `
rules:
  - path: "/v1/chat/completions"
    match: "@"
    response:
      status: 400
      content: '{"error":{"message":"not the request the test expects","type":"invalid_request_error"}}'
  - path: "/v1/chat/completions"
    match: "body.model == 'shop-model' && headers.authorization == 'Bearer sk-mock' && body.messages[0].role == 'system' && body.tools[0].type == 'function' && body.tools[0].function.name == 'get_order' && body.tools[0].function.parameters.type == 'object' && body.messages[-1].role == 'user' && body.messages[-1].content == 'where is A1?'"
    response:
      status: 200
      content: '{"id":"chatcmpl-1","object":"chat.completion","model":"shop-model","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_order","arguments":"{\"order_id\":\"A1\"}"}}]}}]}'
  - path: "/v1/chat/completions"
    match: "headers.authorization == 'Bearer sk-mock' && body.messages[-2].role == 'assistant' && body.messages[-2].tool_calls[0].id == 'call_1' && body.messages[-2].tool_calls[0].function.arguments == '{\"order_id\":\"A1\"}' && body.messages[-1].role == 'tool' && body.messages[-1].tool_call_id == 'call_1'"
    response:
      status: 200
      content: '{"id":"chatcmpl-2","object":"chat.completion","model":"shop-model","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"A1 was {{jmes request body.messages[-1].content}}."}}]}'
`)
	m := llm.NewOpenAI(llm.Config{BaseURL: base, APIKey: "sk-mock", Model: "shop-model"})
	req := llm.Request{System: "You help customers.", Tools: conversation.Tools,
		Turns: []llm.Turn{{Role: "customer", Text: "where is A1?"}}}
	first, err := m.Next(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Calls) != 1 || first.Calls[0].ID != "call_1" || first.Calls[0].Tool != "get_order" || string(first.Calls[0].Args) != `{"order_id":"A1"}` {
		t.Fatalf("first turn: %+v", first)
	}
	req.Turns = append(req.Turns, llm.Turn{Role: "assistant", Calls: first.Calls},
		llm.Turn{Role: "tool", CallID: "call_1", Text: "delivered", Result: &llm.ToolResult{Status: "succeeded"}})
	second, err := m.Next(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if second.Text != "A1 was delivered." || len(second.Calls) != 0 {
		t.Fatalf("second turn: %+v", second)
	}
	// A request the server refuses is a model failure, with its words.
	_, err = llm.NewOpenAI(llm.Config{BaseURL: base, APIKey: "sk-wrong", Model: "shop-model"}).Next(context.Background(), req)
	if !errors.Is(err, llm.ErrModel) || !strings.Contains(err.Error(), "not the request the test expects") {
		t.Fatalf("a refused request: %v", err)
	}
}
