package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
)

// What a 2025-11-25 session may ask of tasks beside a held call: a call
// that ends at once is a task already completed, with its result; a tool
// not offered, a missing task id, an unknown one and a session that is not
// open are refused in the protocol's words; tools/list says each tool may
// be called as a task, and changes nothing else of the tool.
func TestTasksAtTheEdges(t *testing.T) {
	set, _ := gateAPITools(t)
	a := mcpApp(t, set, nil, 300*time.Millisecond)
	key, _, _ := a.accounts.AddAgent(context.Background(), "edges", models.Actor{ID: "test"})
	cs, err := mcpSessionClient(t, a.srv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	send := func(session, msg string) (int, map[string]any) {
		t.Helper()
		r := a.doWith("POST", "/mcp", key, msg, "Mcp-Session-Id", session, "Mcp-Protocol-Version", "2025-11-25",
			"Accept", "application/json, text/event-stream")
		raw := r.Raw
		for _, line := range strings.Split(raw, "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				raw = data
			}
		}
		var out map[string]any
		_ = json.Unmarshal([]byte(raw), &out)
		return r.Status, out
	}
	errorOf := func(out map[string]any) string {
		e, _ := out["error"].(map[string]any)
		b, _ := json.Marshal(e)
		return string(b)
	}

	_, list := send(cs.ID(), `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)
	tools, _ := list["result"].(map[string]any)["tools"].([]any)
	if len(tools) != 2 {
		t.Fatalf("tools/list: %v", list)
	}
	for _, tl := range tools {
		m := tl.(map[string]any)
		if ex, _ := json.Marshal(m["execution"]); string(ex) != `{"taskSupport":"optional"}` || m["inputSchema"] == nil || m["name"] == "" {
			t.Fatalf("a tool as listed: %v", m)
		}
	}

	_, made := send(cs.ID(), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lookup_order","arguments":{"order_id":"A7"},"task":{}}}`)
	task, _ := made["result"].(map[string]any)["task"].(map[string]any)
	if task["status"] != "completed" || task["taskId"] == nil {
		t.Fatalf("a call that ended at once: %v", made)
	}
	_, res := send(cs.ID(), `{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"`+task["taskId"].(string)+`"}}`)
	if b, _ := json.Marshal(res["result"]); !strings.Contains(string(b), `order_id`) || !strings.Contains(string(b), `A7`) {
		t.Fatalf("its result: %v", res)
	}

	// A tool not offered over MCP is a tool error result, not a task.
	_, out := send(cs.ID(), `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"escalate_to_human","arguments":{"why":"x"},"task":{}}}`)
	if res, _ := out["result"].(map[string]any); res["isError"] != true || res["task"] != nil || !strings.Contains(fmt.Sprint(res["content"]), `unknown tool "escalate_to_human"`) {
		t.Fatalf("a tool not offered over MCP: %v", out)
	}
	if _, out := send(cs.ID(), `{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":{}}`); !strings.Contains(errorOf(out), "needs params.taskId") {
		t.Fatalf("no task id: %v", out)
	}
	if _, out := send(cs.ID(), `{"jsonrpc":"2.0","id":6,"method":"tasks/get","params":{"taskId":"call_<script>"}}`); !strings.Contains(errorOf(out), "-32602") || !strings.Contains(errorOf(out), "was not found") {
		t.Fatalf("an unknown task: %v", out)
	}
	if status, _ := send("not-a-session", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"refund_order","arguments":{"order_id":"A1","amount":5},"task":{}}}`); status != 404 {
		t.Fatalf("a task asked for in a session that is not open: HTTP %d", status)
	}
	if pending, _ := a.store.PendingActions(context.Background(), models.ActionFilter{}); len(pending) != 0 {
		t.Fatalf("a refused request made an action: %+v", pending)
	}
}

// rewriting is a response writer that changes what an upstream writes,
// one write at a time.
type rewriting struct {
	http.ResponseWriter
	old, new string
}

func (w rewriting) Write(b []byte) (int, error) {
	_, err := w.ResponseWriter.Write([]byte(strings.ReplaceAll(string(b), w.old, w.new)))
	return len(b), err
}

func (w rewriting) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// A tool whose server lists it with execution.taskSupport "forbidden" is
// listed so to the client and never run as a task: a tools/call asking for
// one is refused with -32601 and nothing is decided or run; the same call
// without a task runs.
func TestATaskForbiddenToolIsNotRunAsATask(t *testing.T) {
	up := mcp.NewServer(&mcp.Implementation{Name: "strict", Version: "1"}, nil)
	var ran atomic.Int32
	up.AddTool(&mcp.Tool{Name: "no_tasks", Description: "Never a task", InputSchema: map[string]any{"type": "object"},
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ran.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(rewriting{w, `"name":"no_tasks"`, `"execution":{"taskSupport":"forbidden"},"name":"no_tasks"`}, r)
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	set, err := httptool.Load([]byte("mcp_servers:\n  - name: strict\n    url: \""+srv.URL+"\"\n    prefix: false\n"), "tools.yaml", httptool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	go set.Keep() // reconnects, as the core keeps the set in force
	reg, _ := tools.NewRegistry(set.Tools()...)
	a := mcpApp(t, reg, nil, 300*time.Millisecond)
	key, _, _ := a.accounts.AddAgent(context.Background(), "strict", models.Actor{ID: "test"})
	cs, err := mcpSessionClient(t, a.srv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	send := func(msg string) map[string]any {
		t.Helper()
		r := a.doWith("POST", "/mcp", key, msg, "Mcp-Session-Id", cs.ID(), "Mcp-Protocol-Version", "2025-11-25",
			"Accept", "application/json, text/event-stream")
		raw := r.Raw
		for _, line := range strings.Split(raw, "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				raw = data
			}
		}
		var out map[string]any
		_ = json.Unmarshal([]byte(raw), &out)
		return out
	}
	list := send(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)
	if b, _ := json.Marshal(list); !strings.Contains(string(b), `"taskSupport":"forbidden"`) || strings.Contains(string(b), `"optional"`) {
		t.Fatalf("the tool as listed: %s", b)
	}
	out := send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"no_tasks","arguments":{},"task":{}}}`)
	if e, _ := out["error"].(map[string]any); e["code"] != float64(-32601) || !strings.Contains(fmt.Sprint(e["message"]), "forbidden") {
		t.Fatalf("a task asked of a tool that forbids them: %v", out)
	}
	if ran.Load() != 0 {
		t.Fatal("the tool ran for a task it forbids")
	}
	n := 0
	_ = a.store.EachCallRecord(context.Background(), func(*models.CallRecord) error { n++; return nil })
	if n != 0 {
		t.Fatalf("a refused task was recorded as %d calls", n)
	}
	out = send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"no_tasks","arguments":{}}}`)
	if b, _ := json.Marshal(out["result"]); !strings.Contains(string(b), "ran") || ran.Load() != 1 {
		t.Fatalf("the same call without a task: %v", out)
	}
}
