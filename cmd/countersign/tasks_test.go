package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/web/mcpgate"
)

// tasksClient runs .ci/mcp/tasks-client.mjs (the TypeScript SDK 1.32's
// experimental tasks client) and hands over each line it prints as it
// prints it; the channel closes when the client exits.
func tasksClient(t *testing.T, base, key string, n int, mode string) <-chan map[string]any {
	t.Helper()
	cmd := exec.Command("node", nodeScript(t, "tasks-client.mjs"), base+"/mcp", key, "pay", `{"n":`+asJSON(n)+`}`, mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan map[string]any, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 0, 64*1024), 8<<20)
		for sc.Scan() {
			var v map[string]any
			if json.Unmarshal(sc.Bytes(), &v) == nil {
				lines <- v
			}
		}
	}()
	return lines
}

// next is the client's next line (fails after a minute, or if it exits).
func next(t *testing.T, lines <-chan map[string]any) map[string]any {
	t.Helper()
	select {
	case v, ok := <-lines:
		if !ok {
			t.Fatal("the tasks client exited before saying what was expected")
		}
		return v
	case <-time.After(60 * time.Second):
		t.Fatal("the tasks client said nothing for a minute")
	}
	return nil
}

// decideAction is a staff member's verdict on an action over the API
// (approve or reject, with its body), and the HTTP status it got.
func decideAction(t *testing.T, base, staffTok, id, verdict, body string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/api/v1/actions/"+id+"/"+verdict, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+staffTok)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// untilType skips taskStatus lines (polls while it works) to the next of
// another type.
func untilType(t *testing.T, lines <-chan map[string]any) map[string]any {
	t.Helper()
	for {
		if v := next(t, lines); v["type"] != "taskStatus" || v["task"].(map[string]any)["status"] != "working" {
			return v
		}
	}
}

// A client that can wait as a task (the TypeScript SDK's experimental tasks
// client, asking for one on tools/call) is given a task at once for a call
// that waits for a person, working with a status naming the wait, and the
// outcome when a person decided: approved, the backend's result (paid
// once); rejected, the reason; cancelled by the client, the action
// cancelled and never run.
func TestHeldCallsBecomeTasksForClientsThatAskForOne(t *testing.T) {
	toolsFile, paid := payTools(t)
	db := storetest.DSN(t)
	// A hold far longer than the test: a task is answered at once anyway.
	app := serveApp(t, config{Addr: "127.0.0.1:0", DB: db, Tools: toolsFile, MCPHold: 10 * time.Minute}, io.Discard)
	base := "http://" + app.Addr()
	key, staffTok := agentAndApprover(t, db, "tasker")
	decide := func(id, verdict, body string) int { return decideAction(t, base, staffTok, id, verdict, body) }
	created := func(t *testing.T, lines <-chan map[string]any) string {
		t.Helper()
		hello := next(t, lines)["connected"].(map[string]any)
		if caps, _ := hello["tasks"].(map[string]any); caps == nil || hello["taskSupport"] != "optional" {
			t.Fatalf("the server does not say it takes tasks: %v", hello)
		}
		first := next(t, lines)
		task, _ := first["task"].(map[string]any)
		if first["type"] != "taskCreated" || task["status"] != "working" || !strings.Contains(asJSON(task["statusMessage"]), "Waiting for a person") {
			t.Fatalf("not a working task: %v", first)
		}
		return task["taskId"].(string)
	}

	t.Run("approved", func(t *testing.T) {
		lines := tasksClient(t, base, key, 1, "")
		id := created(t, lines)
		if paid.Load() != 0 {
			t.Fatal("paid before a person decided")
		}
		// The call's record says which way the agent is answered.
		st, err := storage.Open(db, storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		events, _ := st.AuditEventsFor(context.Background(), id)
		st.Close()
		if len(events) == 0 || events[0].Actor != "agent:tasker ("+mcpgate.AsTask+")" {
			t.Fatalf("the call's record: %+v", events)
		}
		if got := asJSON(next(t, lines)); !strings.Contains(got, `"taskStatus"`) || !strings.Contains(got, `"working"`) {
			t.Fatalf("while it waits: %s", got)
		}
		if code := decide(id, "approve", `{}`); code != 200 {
			t.Fatalf("approve: %d", code)
		}
		if v := untilType(t, lines); v["type"] != "taskStatus" || v["task"].(map[string]any)["status"] != "completed" {
			t.Fatalf("after approval: %v", v)
		}
		res := next(t, lines)
		got := asJSON(res)
		if res["type"] != "result" || !strings.Contains(got, `\"paid\":true`) || !strings.Contains(got, `"io.modelcontextprotocol/related-task":{"taskId":"`+id+`"}`) ||
			!strings.Contains(got, `"countersign/receipt"`) || strings.Contains(got, `"isError":true`) {
			t.Fatalf("the result: %s", got)
		}
		if paid.Load() != 1 {
			t.Fatalf("paid %d times", paid.Load())
		}
	})

	t.Run("rejected", func(t *testing.T) {
		lines := tasksClient(t, base, key, 2, "")
		id := created(t, lines)
		if code := decide(id, "reject", `{"reason":"not this month"}`); code != 200 {
			t.Fatalf("reject: %d", code)
		}
		untilType(t, lines) // completed
		got := asJSON(next(t, lines))
		if !strings.Contains(got, `"isError":true`) || !strings.Contains(got, "not this month") {
			t.Fatalf("the rejection: %s", got)
		}
	})

	t.Run("cancelled by the client", func(t *testing.T) {
		lines := tasksClient(t, base, key, 3, "cancel")
		id := created(t, lines)
		c := next(t, lines)["cancelled"].(map[string]any)
		if c["taskId"] != id || c["status"] != "cancelled" {
			t.Fatalf("cancelled: %v", c)
		}
		if v := untilType(t, lines); v["type"] != "taskStatus" || v["task"].(map[string]any)["status"] != "cancelled" {
			t.Fatalf("after cancelling: %v", v)
		}
		if v := next(t, lines); v["type"] != "error" || !strings.Contains(asJSON(v), "cancelled") {
			t.Fatalf("the client's end: %v", v)
		}
		if code := decide(id, "approve", `{}`); code != http.StatusConflict {
			t.Fatalf("approving a cancelled action: %d", code)
		}
	})
	if paid.Load() != 1 {
		t.Fatalf("the backend was paid %d times; once was approved", paid.Load())
	}
}

// rpc posts one JSON-RPC message to /mcp as a 2025-11-25 client would and
// returns the reply (read from JSON or an event stream) and the session id.
func rpc(t *testing.T, base, key, session, msg string) (map[string]any, string) {
	t.Helper()
	return rpcAt(t, "2025-11-25", base, key, session, msg)
}

// rpcAt is rpc for a client of protocol revision version.
func rpcAt(t *testing.T, version, base, key, session, msg string) (map[string]any, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(msg))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", version)
	if version >= "2026-07-28" { // the standard headers (SEP-2243)
		var m struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal([]byte(msg), &m)
		req.Header.Set("Mcp-Method", m.Method)
		if m.Method == "tools/call" {
			req.Header.Set("Mcp-Name", m.Params.Name)
		}
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 && res.StatusCode != 202 {
		t.Fatalf("%s: HTTP %d %s", msg, res.StatusCode, body)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			body = []byte(data)
		}
	}
	var reply map[string]any
	if res.StatusCode == 200 {
		if err := json.Unmarshal(body, &reply); err != nil {
			t.Fatalf("%s: %v %s", msg, err, body)
		}
	}
	return reply, res.Header.Get("Mcp-Session-Id")
}

// A task outlives the instance that created it: Countersign stopped while a
// task waits for a person and started again, the task is there (its MCP
// session is not), a person approves, and its result is the call's; the
// backend is paid once. Another agent cannot see it, read its result or
// cancel it.
func TestATaskOutlivesARestart(t *testing.T) {
	toolsFile, paid := payTools(t)
	db := storetest.DSN(t)
	cfg := config{Addr: "127.0.0.1:0", DB: db, Tools: toolsFile}
	app, stop := startServing(t, cfg, io.Discard, io.Discard)
	base := "http://" + app.Addr()
	key, staffTok := agentAndApprover(t, db, "tasker")
	other, _ := runCmd(t, "agent", "add", "--name", "other", "--db", db)
	other = strings.TrimSpace(strings.SplitN(other, "\n", 2)[0])

	hello, session := rpc(t, base, key, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if got := asJSON(hello); !strings.Contains(got, `"tasks":{"cancel":{},"requests":{"tools":{"call":{}}}}`) || session == "" {
		t.Fatalf("initialize: %s (session %q)", got, session)
	}
	rpc(t, base, key, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	made, _ := rpc(t, base, key, session, `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"pay","arguments":{"n":9},"task":{"ttl":60000}}}`)
	task, _ := made["result"].(map[string]any)["task"].(map[string]any)
	id, _ := task["taskId"].(string)
	if made["id"] != "a" || task["status"] != "working" || id == "" || task["pollInterval"] != 2000.0 {
		t.Fatalf("tools/call with a task: %s", asJSON(made))
	}
	stop()

	app = serveApp(t, cfg, io.Discard)
	base = "http://" + app.Addr()
	for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		r, _ := rpc(t, base, other, "", `{"jsonrpc":"2.0","id":7,"method":"`+m+`","params":{"taskId":"`+id+`"}}`)
		if e, _ := r["error"].(map[string]any); e == nil || e["code"] != -32602.0 || !strings.Contains(asJSON(e), "was not found") {
			t.Fatalf("another agent's %s: %s", m, asJSON(r))
		}
	}
	got, _ := rpc(t, base, key, session, `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"`+id+`"}}`)
	if r := got["result"].(map[string]any); r["taskId"] != id || r["status"] != "working" {
		t.Fatalf("after the restart: %s", asJSON(got))
	}
	done := make(chan map[string]any, 1)
	go func() { // tasks/result waits for the outcome
		r, _ := rpc(t, base, key, session, `{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"`+id+`"}}`)
		done <- r
	}()
	time.Sleep(300 * time.Millisecond)
	if code := decideAction(t, base, staffTok, id, "approve", `{}`); code != 200 {
		t.Fatalf("approve: %d", code)
	}
	select {
	case r := <-done:
		if got := asJSON(r); !strings.Contains(got, `\"paid\":true`) || !strings.Contains(got, `"io.modelcontextprotocol/related-task":{"taskId":"`+id+`"}`) {
			t.Fatalf("tasks/result: %s", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("tasks/result did not answer after the approval")
	}
	got, _ = rpc(t, base, key, "", `{"jsonrpc":"2.0","id":4,"method":"tasks/cancel","params":{"taskId":"`+id+`"}}`)
	if e, _ := got["error"].(map[string]any); e == nil || !strings.Contains(asJSON(e), "already ended") {
		t.Fatalf("cancelling an ended task: %s", asJSON(got))
	}
	if paid.Load() != 1 {
		t.Fatalf("paid %d times", paid.Load())
	}
}

// A 2026-07-28 client that declares the tasks extension (SEP-2663) in a
// request's _meta: a call that waits for a person is answered with a task
// (flat, resultType "task"), tasks/get holds the result once a person
// approved, tasks/cancel is an acknowledgement that withdraws a waiting
// call and changes nothing once it ended; without the extension declared,
// the tasks methods are a missing-capability error.
func TestA2026ClientThatDeclaresTasksGetsOne(t *testing.T) {
	toolsFile, paid := payTools(t)
	db := storetest.DSN(t)
	app := serveApp(t, config{Addr: "127.0.0.1:0", DB: db, Tools: toolsFile, MCPHold: 10 * time.Minute}, io.Discard)
	base := "http://" + app.Addr()
	key, staffTok := agentAndApprover(t, db, "modern")
	const declared = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	const undeclared = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":{}}`
	ask := func(msg string) map[string]any {
		t.Helper()
		r, _ := rpcAt(t, "2026-07-28", base, key, "", msg)
		return r
	}
	if got := asJSON(ask(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + declared + `}}`)); !strings.Contains(got, `"io.modelcontextprotocol/tasks":{}`) {
		t.Fatalf("server/discover: %s", got)
	}
	made := ask(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pay","arguments":{"n":20},` + declared + `}}`)
	task, _ := made["result"].(map[string]any)
	id, _ := task["taskId"].(string)
	if task["resultType"] != "task" || task["status"] != "working" || id == "" || task["pollIntervalMs"] != 2000.0 || task["task"] != nil ||
		task["content"] != nil || !strings.Contains(asJSON(task["statusMessage"]), "Waiting for a person") {
		t.Fatalf("a call that waits: %s", asJSON(made))
	}
	if e, _ := ask(`{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"` + id + `",` + undeclared + `}}`)["error"].(map[string]any); e == nil || e["code"] != -32021.0 {
		t.Fatalf("tasks/get without the extension: %v", e)
	}
	get := func() map[string]any {
		t.Helper()
		r := ask(`{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"taskId":"` + id + `",` + declared + `}}`)
		res, _ := r["result"].(map[string]any)
		if res == nil {
			t.Fatalf("tasks/get: %s", asJSON(r))
		}
		return res
	}
	if got := get(); got["status"] != "working" || got["result"] != nil {
		t.Fatalf("while it waits: %s", asJSON(got))
	}
	if code := decideAction(t, base, staffTok, id, "approve", `{}`); code != 200 {
		t.Fatalf("approve: %d", code)
	}
	done := get()
	if got := asJSON(done); done["status"] != "completed" || !strings.Contains(got, `\"paid\":true`) || strings.Contains(got, "related-task") {
		t.Fatalf("after approval: %s", got)
	}
	// Cancelled while it waits: an acknowledgement, then cancelled, never run.
	made = ask(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"pay","arguments":{"n":21},` + declared + `}}`)
	second, _ := made["result"].(map[string]any)["taskId"].(string)
	for range 2 { // the second time, on a task that ended: the same ack
		ack := ask(`{"jsonrpc":"2.0","id":6,"method":"tasks/cancel","params":{"taskId":"` + second + `",` + declared + `}}`)
		if asJSON(ack["result"]) != `{"resultType":"complete"}` {
			t.Fatalf("tasks/cancel: %s", asJSON(ack))
		}
	}
	id = second
	if got := get(); got["status"] != "cancelled" {
		t.Fatalf("after cancelling: %s", asJSON(got))
	}
	if e, _ := ask(`{"jsonrpc":"2.0","id":7,"method":"tasks/cancel","params":{"taskId":"call_nope",` + declared + `}}`)["error"].(map[string]any); e == nil || e["code"] != -32602.0 {
		t.Fatalf("an unknown task: %v", e)
	}
	if paid.Load() != 1 {
		t.Fatalf("paid %d times", paid.Load())
	}
}
