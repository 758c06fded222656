package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/models/storage/storetest"
)

// scriptedModel is an OpenAI-compatible chat completions endpoint that
// pays invoice 1 until the tool's answer says it is paid, then says so:
// what a model does with "Waiting for a person… call this tool again".
type scriptedModel struct {
	mu    sync.Mutex
	saw   []string // the tool results it was shown
	tools []string // the tools it was offered, first request
	n     int
}

func (m *scriptedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, "not what an OpenAI client sends", http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.n++
	n := m.n
	if m.tools == nil {
		for _, t := range req.Tools {
			m.tools = append(m.tools, t.Function.Name)
		}
	}
	last := req.Messages[len(req.Messages)-1]
	said := fmt.Sprint(last.Content)
	if last.Role == "tool" {
		m.saw = append(m.saw, said)
	}
	m.mu.Unlock()
	message := map[string]any{"role": "assistant", "content": nil,
		"tool_calls": []any{map[string]any{"id": fmt.Sprintf("call_%d", n), "type": "function",
			"function": map[string]any{"name": "pay", "arguments": `{"n":1}`}}}}
	finish := "tool_calls"
	if last.Role == "tool" && strings.Contains(said, "paid") {
		message, finish = map[string]any{"role": "assistant", "content": "Invoice 1 is paid."}, "stop"
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": fmt.Sprintf("chatcmpl_%d", n), "object": "chat.completion", "created": 0, "model": "scripted",
		"choices": []any{map[string]any{"index": 0, "finish_reason": finish, "message": message}},
		"usage":   map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
}

// The OpenAI Agents JS SDK (@openai/agents, its streamable HTTP MCP server
// class), driven by a scripted OpenAI-compatible model, asks Countersign
// for a payment: it waits for a person, the agent asks again as told, a
// person approves, and the agent reads the approved result; paid once.
// agentsSDK is what the OpenAI Agents SDK's tests stand on (agentsSDKSetup): the
// script (skipped without its package, but not in CI), a server holding a
// waiting call for hold with the pay tool, an agent key and an approver's
// token, the scripted model and how many payments the backend made.
type agentsSDK struct {
	script, base, key, staffTok, modelURL string
	model                                 *scriptedModel
	paid                                  *atomic.Int32
}

func agentsSDKSetup(t *testing.T, hold time.Duration) agentsSDK {
	t.Helper()
	script := nodeScript(t, "openai-agent.mjs")
	if _, err := os.Stat(filepath.Join(filepath.Dir(script), "node_modules/@openai/agents")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("@openai/agents is not installed: .ci/run installs it (%v)", err)
		}
		t.Skip("no @openai/agents in .ci/mcp: run make test")
	}
	toolsFile, paid := payTools(t)
	model := &scriptedModel{}
	modelServer := httptest.NewServer(model)
	t.Cleanup(modelServer.Close)
	db := storetest.DSN(t)
	app := serveApp(t, config{Addr: "127.0.0.1:0", DB: db, Tools: toolsFile, MCPHold: hold}, io.Discard)
	key, staffTok := agentAndApprover(t, db, "billing")
	return agentsSDK{script: script, base: "http://" + app.Addr(), key: key, staffTok: staffTok, modelURL: modelServer.URL + "/v1", model: model, paid: paid}
}

func TestTheOpenAIAgentsSDKThroughAPendingWrite(t *testing.T) {
	sdk := agentsSDKSetup(t, 2*time.Second)
	script, base, key, staffTok, model, paid := sdk.script, sdk.base, sdk.key, sdk.staffTok, sdk.model, sdk.paid

	type answer struct {
		Final   string `json:"final"`
		Outputs []any  `json:"outputs"`
		Error   string `json:"error"`
	}
	answered := make(chan answer, 1)
	go func() {
		out, err := exec.Command("node", script, base+"/mcp", key, sdk.modelURL).Output()
		var a answer
		if jerr := json.Unmarshal(out, &a); jerr != nil {
			a.Error = fmt.Sprintf("%v %v: %s", err, jerr, out)
		}
		answered <- a
	}()
	var id string
	for deadline := time.Now().Add(60 * time.Second); id == ""; time.Sleep(100 * time.Millisecond) {
		_, pending := apiDo(t, "GET", base+"/api/v1/actions?status=pending", staffTok, "")
		if actions, _ := pending["actions"].([]any); len(actions) > 0 {
			if len(actions) != 1 {
				t.Fatalf("the agent asking again made %d actions", len(actions))
			}
			id = actions[0].(map[string]any)["id"].(string)
		}
		select {
		case a := <-answered:
			t.Fatalf("the agent ended before a person decided: %+v", a)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent's payment never waited for a person")
		}
	}
	// Let the agent hear that it waits, and ask again, at least once.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		model.mu.Lock()
		heard := len(model.saw) > 0 && strings.Contains(model.saw[0], "Waiting for a person")
		model.mu.Unlock()
		if heard {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the model was not told the call waits: %v", model.saw)
		}
	}
	if status, out := apiDo(t, "POST", base+"/api/v1/actions/"+id+"/approve", staffTok, `{}`); status != 200 {
		t.Fatalf("approve: %d %v", status, out)
	}
	var a answer
	select {
	case a = <-answered:
	case <-time.After(90 * time.Second):
		t.Fatal("the agent did not finish")
	}
	if a.Error != "" || a.Final != "Invoice 1 is paid." {
		t.Fatalf("the agent: %+v (the model saw %v)", a, model.saw)
	}
	if strings.Join(model.tools, ",") != "pay" {
		t.Fatalf("the model was offered %v", model.tools)
	}
	if n := paid.Load(); n != 1 {
		t.Fatalf("paid %d times", n)
	}
	_, pending := apiDo(t, "GET", base+"/api/v1/actions?status=pending", staffTok, "")
	if actions, _ := pending["actions"].([]any); len(actions) != 0 {
		t.Fatalf("left waiting: %v", actions)
	}
}

// The OpenAI Agents JS SDK with its own request timeout shorter than the
// hold (`timeout: 4000` against --mcp-hold 30s): its first request is gone
// before a person decides; the model asks again, a person approves, and
// the agent reads the approved result, not a second pending payment; paid
// once.
func TestTheOpenAIAgentsSDKThatGivesUpGetsTheOutcome(t *testing.T) {
	sdk := agentsSDKSetup(t, 30*time.Second)
	script, base, key, staffTok, model, paid := sdk.script, sdk.base, sdk.key, sdk.staffTok, sdk.model, sdk.paid
	type answer struct {
		Final string `json:"final"`
		Error string `json:"error"`
	}
	answered := make(chan answer, 1)
	go func() {
		out, err := exec.Command("node", script, base+"/mcp", key, sdk.modelURL, "4000").Output()
		var a answer
		if jerr := json.Unmarshal(out, &a); jerr != nil {
			a.Error = fmt.Sprintf("%v %v: %s", err, jerr, out)
		}
		answered <- a
	}()
	// The agent's first request times out (it hears an error), and it asks again.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		model.mu.Lock()
		gaveUp := len(model.saw) > 0
		model.mu.Unlock()
		if gaveUp {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent's request never timed out")
		}
	}
	_, pending := apiDo(t, "GET", base+"/api/v1/actions?status=pending", staffTok, "")
	actions, _ := pending["actions"].([]any)
	if len(actions) != 1 {
		t.Fatalf("%d actions wait, want 1: %v", len(actions), pending)
	}
	id := actions[0].(map[string]any)["id"].(string)
	if status, out := apiDo(t, "POST", base+"/api/v1/actions/"+id+"/approve", staffTok, `{}`); status != 200 {
		t.Fatalf("approve: %d %v", status, out)
	}
	var a answer
	select {
	case a = <-answered:
	case <-time.After(120 * time.Second):
		t.Fatal("the agent did not finish")
	}
	if a.Error != "" || a.Final != "Invoice 1 is paid." {
		t.Fatalf("the agent: %+v (the model saw %v)", a, model.saw)
	}
	if n := paid.Load(); n != 1 {
		t.Fatalf("paid %d times", n)
	}
	_, pending = apiDo(t, "GET", base+"/api/v1/actions?status=pending", staffTok, "")
	if actions, _ := pending["actions"].([]any); len(actions) != 0 {
		t.Fatalf("a second payment waits: %v", actions)
	}
}
