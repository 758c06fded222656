package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage/storetest"
)

// The TypeScript SDK v2's stock client at 2026-07-28, which takes no
// requests from a server, calls the tools of the reference
// server-everything over HTTP (it speaks 2025 only) that ask their client
// for a sampling and an elicitation during the call: Countersign asks the
// client in an input-required round trip, with the server's own words,
// hands the client's answers to the server, and the client gets the
// server's result with them in it. Each call is one call in the audit,
// decided and run once, over HTTP and through the stdio bridge.
func TestA2026ClientAnswersWhatA2025ServerAsks(t *testing.T) {
	nodeScript(t, "ts-agent-v2.mjs")
	everything, _ := filepath.Abs("../../.ci/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	port := strings.TrimPrefix(freePort(t), "127.0.0.1:")
	ctx, stop := context.WithCancel(context.Background())
	ev := exec.CommandContext(ctx, "node", everything, "streamableHttp")
	ev.Env = append(os.Environ(), "PORT="+port)
	if err := ev.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(); _ = ev.Wait() })
	direct := "http://127.0.0.1:" + port + "/mcp"
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if r, err := http.Get(direct); err == nil {
			r.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("server-everything did not start")
		}
	}
	dir := t.TempDir()
	toolsFile, policyFile := filepath.Join(dir, "tools.yaml"), filepath.Join(dir, "policy.yaml")
	os.WriteFile(toolsFile, []byte("mcp_servers:\n  - name: ev\n    url: "+direct+"\n    prefix: false\n    trust_annotations: true\n"), 0o600)
	os.WriteFile(policyFile, []byte("defaults:\n  read: {decision: allow, reason: allowed}\n  low_write: {decision: allow, reason: allowed}\n  high_write: {decision: allow, reason: allowed}\n"), 0o600)
	db := storetest.DSN(t)
	app := serveApp(t, config{Addr: "127.0.0.1:0", DB: db, Tools: toolsFile, Policy: policyFile, MCPHold: 2 * time.Second}, io.Discard)
	key, _ := agentAndApprover(t, db, "v2")
	self, env := asCLI(t)
	for _, via := range []string{"http", "stdio"} {
		t.Run("over "+via, func(t *testing.T) { askedThrough(t, via, app.Addr(), key, self, env) })
	}
	calls, err := app.store.CallsDecidedSince(context.Background(), time.Time{}, time.Time{}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]int{}
	for _, c := range calls {
		if c.Status != models.CallSucceeded {
			t.Errorf("%s ended %s, want succeeded", c.Tool, c.Status)
		}
		ran[c.Tool]++
	}
	if ran["trigger-sampling-request"] != 2 || ran["trigger-elicitation-request"] != 2 || len(calls) != 4 {
		t.Errorf("calls recorded: %v, want each tool once a way", ran)
	}
}

// askedThrough calls the two tools that ask, over HTTP or the stdio bridge.
func askedThrough(t *testing.T, via, addr, key, self string, env map[string]string) {
	answers := map[string]any{"sampling": "a sampled answer from the client's own model",
		"elicitation": map[string]any{"name": "Ada Lovelace", "check": true}}
	call := func(name string, args map[string]any) tsOut {
		spec := map[string]any{"negotiate": "auto", "answers": answers, "call": map[string]any{"name": name, "arguments": args}, "timeout": 30000}
		if via == "http" {
			spec["http"], spec["key"] = "http://"+addr+"/mcp", key
		} else {
			spec["stdio"], spec["args"], spec["env"] = self, []string{"mcp", "--url", "http://" + addr, "--agent-key", key}, env
		}
		return tsAgentOf(t, "ts-agent-v2.mjs", spec)
	}

	got := call("trigger-sampling-request", map[string]any{"prompt": "say hello", "maxTokens": 20})
	if got.Error != "" || !strings.Contains(asJSON(got.Result), "a sampled answer from the client's own model") {
		t.Fatalf("sampling: %+v, want the client's answer in the server's result", got)
	}
	if a := asJSON(got.Asked); !strings.Contains(a, "sampling/createMessage") || !strings.Contains(a, "say hello") {
		t.Errorf("the client was asked %s, want the server's sampling request with its prompt", a)
	}

	got = call("trigger-elicitation-request", map[string]any{})
	if got.Error != "" || !strings.Contains(asJSON(got.Result), "Ada Lovelace") {
		t.Fatalf("elicitation: %+v, want the client's answer in the server's result", got)
	}
	if a := asJSON(got.Asked); !strings.Contains(a, "elicitation/create") || !strings.Contains(a, "Please provide inputs") {
		t.Errorf("the client was asked %s, want the server's elicitation with its words", a)
	}

}
