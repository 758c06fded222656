package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

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
// blocks come back as calls; the key goes as the SDK sends it (a bearer
// token in this version) and in no error.
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
	if p.headers[1].Get("Authorization") != "Bearer "+conversationSecret {
		t.Fatalf("authorization %q", p.headers[1].Get("Authorization"))
	}
	p.replies = []reply{{401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`}}
	if _, err := m.Next(context.Background(), conversation); !errors.Is(err, llm.ErrModel) || strings.Contains(err.Error(), conversationSecret) {
		t.Fatalf("a refused key: %v", err)
	}
}
