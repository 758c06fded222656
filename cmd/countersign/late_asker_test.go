package main

import (
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/receipts"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
)

// The first request is gone before a person decides (the TypeScript SDK's
// v1 and v2 clients gave up at their own timeout, over HTTP and through the
// stdio bridge; a client's process killed while it waited): a person approves, and the
// same call asked again by a new client process is that outcome, marked as
// a replay with its receipt, not a second action. One action, one backend
// call, whoever asks again.
func TestTheLateAskerGetsTheOutcomeNotASecondAction(t *testing.T) {
	nodeScript(t, "ts-agent.mjs")
	self, env := asCLI(t)
	for _, c := range []struct {
		name string
		// gone makes the first request and leaves it unanswered; held
		// waits until that request's action waits for a person.
		gone func(t *testing.T, spec map[string]any, held func())
		via  string // "http" or "stdio"
		// script is the client (.ci/mcp): "" the TypeScript SDK v1's.
		script string
	}{
		{"the client's own timeout over HTTP", func(t *testing.T, spec map[string]any, _ func()) {
			spec["timeout"] = 1500
			if got := tsAgent(t, spec); !strings.Contains(got.Error, "timed out") && !strings.Contains(got.Error, "Request timed out") {
				t.Fatalf("the first request did not time out: %+v", got)
			}
		}, "http", ""},
		{"the client's own timeout through the stdio bridge", func(t *testing.T, spec map[string]any, _ func()) {
			spec["timeout"] = 1500
			if got := tsAgent(t, spec); got.Error == "" {
				t.Fatalf("the first request did not time out: %+v", got)
			}
		}, "stdio", ""},
		{"the TypeScript SDK v2 client's own timeout over HTTP", func(t *testing.T, spec map[string]any, _ func()) {
			spec["timeout"] = 1500
			if got := tsAgentOf(t, "ts-agent-v2.mjs", spec); got.Error == "" {
				t.Fatalf("the first request did not time out: %+v", got)
			}
		}, "http", "ts-agent-v2.mjs"},
		{"the TypeScript SDK v2 client's own timeout through the stdio bridge", func(t *testing.T, spec map[string]any, _ func()) {
			spec["timeout"] = 1500
			if got := tsAgentOf(t, "ts-agent-v2.mjs", spec); got.Error == "" {
				t.Fatalf("the first request did not time out: %+v", got)
			}
		}, "stdio", "ts-agent-v2.mjs"},
		{"the client process killed while it waits", func(t *testing.T, spec map[string]any, held func()) {
			raw, _ := json.Marshal(spec)
			cmd := exec.Command("node", nodeScript(t, "ts-agent.mjs"), string(raw))
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			held() // asked, and held
			cmd.Process.Kill()
			cmd.Wait()
		}, "http", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			toolsFile, paid := payTools(t)
			db := storetest.DSN(t)
			app := serveApp(t, config{Addr: "127.0.0.1:0", DB: db, Tools: toolsFile, MCPHold: 30 * time.Second}, io.Discard)
			base := "http://" + app.Addr()
			key, staffTok := agentAndApprover(t, db, "late")
			spec := func() map[string]any {
				s := map[string]any{"call": map[string]any{"name": "pay", "arguments": map[string]any{"n": 7}}}
				if c.via == "http" {
					s["http"], s["key"] = base+"/mcp", key
				} else {
					s["stdio"], s["args"], s["env"] = self, []string{"mcp", "--url", base, "--agent-key", key}, env
				}
				return s
			}
			c.gone(t, spec(), func() {
				deadline := time.Now().Add(60 * time.Second)
				for time.Now().Before(deadline) {
					_, pending := apiDo(t, "GET", base+"/api/v1/actions?status=pending", staffTok, "")
					if actions, _ := pending["actions"].([]any); len(actions) > 0 {
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
				t.Fatal("the first request's action never waited for a person")
			})
			_, pending := apiDo(t, "GET", base+"/api/v1/actions?status=pending", staffTok, "")
			actions, _ := pending["actions"].([]any)
			if len(actions) != 1 {
				t.Fatalf("%d actions wait, want 1: %v", len(actions), pending)
			}
			id := actions[0].(map[string]any)["id"].(string)
			if status, out := apiDo(t, "POST", base+"/api/v1/actions/"+id+"/approve", staffTok, `{}`); status != 200 {
				t.Fatalf("approve: %d %v", status, out)
			}
			// Nobody's request was open to take the outcome; a while later
			// the same call is asked again.
			time.Sleep(300 * time.Millisecond)
			script := c.script
			if script == "" {
				script = "ts-agent.mjs"
			}
			late := tsAgentOf(t, script, spec())
			meta, _ := late.Result["_meta"].(map[string]any)
			replay, _ := meta["countersign/replay"].(map[string]any)
			if late.Error != "" || late.Result["isError"] == true || !strings.Contains(late.text(), "paid") || replay["call"] != id {
				t.Fatalf("the late asker: %+v", late)
			}
			if n := paid.Load(); n != 1 {
				t.Fatalf("the backend was paid %d times", n)
			}
			_, pending = apiDo(t, "GET", base+"/api/v1/actions?status=pending", staffTok, "")
			if actions, _ := pending["actions"].([]any); len(actions) != 0 {
				t.Fatalf("asking again made a second action: %v", pending)
			}
			// Its receipt came with it, and checks against the published keys.
			jws, _ := meta["countersign/receipt"].(string)
			s, err := storage.Open(db, storage.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			keys, err := receipts.PublicKeys(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			if p, _, err := receipts.Verify(jws, keys); err != nil || p.Call != id || p.Status != "succeeded" {
				t.Fatalf("the replay's receipt: %+v %v", p, err)
			}
		})
	}
}
