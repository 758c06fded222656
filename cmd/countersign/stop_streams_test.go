package main

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/models/storage/storetest"
)

// A call held for a person over a 2025 HTTP session (the TypeScript SDK's
// client, which resumes a stream that ends unanswered) while Countersign
// stops: the client is answered at once where the call stands (waiting
// for a person: ask again), not left to its own timeout on a stream that
// ended; asked again after the restart, the call is the same action, still
// waiting for its person.
func TestAHeldCallIsAnsweredWhenCountersignStops(t *testing.T) {
	script := nodeScript(t, "ts-agent.mjs")
	toolsFile, _ := payTools(t)
	db := storetest.DSN(t)
	cfg := config{Addr: "127.0.0.1:0", DB: db, Tools: toolsFile, MCPHold: 10 * time.Minute}
	app, stop := startServing(t, cfg, io.Discard, io.Discard)
	base := "http://" + app.Addr()
	key, staffTok := agentAndApprover(t, db, "stops")
	spec, _ := json.Marshal(map[string]any{"http": base + "/mcp", "key": key, "timeout": 300000,
		"call": map[string]any{"name": "pay", "arguments": map[string]any{"n": 7}}})
	cmd := exec.Command("node", script, string(spec))
	out := make(chan []byte, 1)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b, _ := io.ReadAll(stdout); _ = cmd.Wait(); out <- b }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	pending := func() []any {
		_, got := apiDo(t, "GET", base+"/api/v1/actions?status=pending", staffTok, "")
		actions, _ := got["actions"].([]any)
		return actions
	}
	for deadline := time.Now().Add(60 * time.Second); len(pending()) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the call never waited for a person")
		}
	}
	first := pending()
	stop()
	var got tsOut
	select {
	case b := <-out:
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("the client printed %q", b)
		}
	case <-time.After(120 * time.Second): // the client's own timeout is 300 s
		t.Fatal("the client was not answered when Countersign stopped")
	}
	if got.Error != "" || !strings.Contains(got.text(), "Waiting for a person to decide") {
		t.Fatalf("the client's end: %+v", got)
	}
	// Asked again of the restarted server, it is the same action.
	cfg.MCPHold = time.Second
	again := serveApp(t, cfg, io.Discard)
	base = "http://" + again.Addr()
	later := tsAgent(t, map[string]any{"http": base + "/mcp", "key": key, "call": map[string]any{"name": "pay", "arguments": map[string]any{"n": 7}}})
	if id := first[0].(map[string]any)["id"].(string); later.Error != "" || !strings.Contains(later.text(), id) || len(pending()) != 1 {
		t.Fatalf("asked again after the restart: %+v (%d actions wait)", later, len(pending()))
	}
}
