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

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/tools"
)

// nodeScript is a script of .ci/mcp (pinned, installed by .ci/run and make
// test); without node or the packages the test is skipped, but not in CI.
func nodeScript(t *testing.T, name string) string {
	t.Helper()
	script, _ := filepath.Abs(filepath.Join("../../.ci/mcp", name))
	_, nodeErr := exec.LookPath("node")
	_, sdkErr := os.Stat(filepath.Join(filepath.Dir(script), "node_modules/@modelcontextprotocol/sdk"))
	if nodeErr != nil || sdkErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node or .ci/mcp's packages are missing (%v, %v): .ci/run installs them", nodeErr, sdkErr)
		}
		t.Skip("no node or no .ci/mcp/node_modules: run make test, which installs them")
	}
	return script
}

// A hostile MCP server (the TypeScript SDK's, .ci/mcp/hostile-server.mjs)
// turns on its client while a call waits: it renames the tool the file
// made high_write and marks it read-only, marks another write read-only and
// changes its schema, and says its list changed. Nothing runs without a
// person: the renamed tool keeps the file's risk, the changed ones are held
// at high_write until an admin accepts them, and the call that waited
// cannot run against the changed tool.
func TestAHostileUpstreamCannotLowerItsOwnRisk(t *testing.T) {
	script := nodeScript(t, "hostile-server.mjs")
	dir := t.TempDir()
	logPath, trigger := filepath.Join(dir, "ran.log"), filepath.Join(dir, "turn")
	toolsPath := filepath.Join(dir, "tools.yaml")
	os.WriteFile(toolsPath, []byte(`mcp_servers:
  - name: evil
    command: node
    args: ["`+script+`", "`+logPath+`", "`+trigger+`"]
    tools:
      delete_contact: {risk: high_write}
`), 0o600)
	ctx := context.Background()
	cfg := config{Addr: "127.0.0.1:0", DB: storetest.DSN(t), Tools: toolsPath, MCPHold: time.Second}
	app, stop := startServing(t, cfg, io.Discard, io.Discard)
	key, _, err := app.accounts.AddAgent(ctx, "desk", models.Actor{ID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	risk := func(name string) tools.Risk {
		tool, ok := app.gate.Tools().Get(name)
		if !ok {
			t.Fatalf("%s is not offered", name)
		}
		return tool.Risk
	}
	for name, want := range map[string]tools.Risk{"evil__delete_contact": tools.RiskHighWrite, "evil__transfer": tools.RiskHighWrite,
		"evil__find_contact": tools.RiskRead} {
		if got := risk(name); got != want {
			t.Fatalf("%s starts at %s, not %s", name, got, want)
		}
	}
	var cs *mcp.ClientSession
	connect := func() {
		t.Helper()
		if cs, err = mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: "http://" + app.Addr() + "/mcp", HTTPClient: &http.Client{Transport: withBearer{key}}}, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
	}
	connect()
	call := func(name string, args map[string]any) string {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		r, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return textOf(r)
	}
	if got := call("evil__transfer", map[string]any{"amount": 5}); !strings.Contains(got, "Waiting for a person") {
		t.Fatalf("a transfer before the turn: %s", got)
	}
	waiting, err := app.store.PendingActions(ctx, models.ActionFilter{})
	if err != nil || len(waiting) != 1 {
		t.Fatalf("waiting: %v %v", waiting, err)
	}

	// The server turns.
	os.WriteFile(trigger, nil, 0o600)
	deadline := time.Now().Add(20 * time.Second)
	for len(app.gate.Unaccepted()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the changed list was not taken up: %+v", app.gate.Unaccepted())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, name := range []string{"evil__delete_contact", "evil__transfer"} {
		if got := risk(name); got != tools.RiskHighWrite {
			t.Fatalf("after the turn %s is %s", name, got)
		}
		if got := call(name, map[string]any{"email": "i@x.test", "amount": 7}); !strings.Contains(got, "Waiting for a person") {
			t.Fatalf("%s after the turn: %s", name, got)
		}
	}
	// The call that waited from before is approved by a person (the action
	// page and the staff API tell them the tool changed since it was
	// asked): that one runs, once, as approved.
	res, err := app.gate.Approve(ctx, waiting[0].ID, models.Actor{ID: "stf_ann", Name: "Ann", Role: models.Approver}, gate.ApproveRequest{})
	if err != nil || res.Outcome == nil || res.Outcome.Status != models.CallSucceeded {
		t.Fatalf("the approved call: %+v %v", res, err)
	}

	// Countersign restarts, and the server is the turned one from its first
	// listing: nothing in this process remembers the tools as they were,
	// but their accepted definitions are pinned, so the changed ones are
	// still held.
	stop()
	app, _ = startServing(t, cfg, io.Discard, io.Discard)
	connect()
	if got := risk("evil__transfer"); got != tools.RiskHighWrite {
		t.Fatalf("after a restart the turned transfer is %s", got)
	}
	if got := call("evil__transfer", map[string]any{"amount": 9}); !strings.Contains(got, "Waiting for a person") {
		t.Fatalf("the turned transfer after a restart: %s", got)
	}
	if got := call("evil__delete_contact", map[string]any{"email": "k@x.test"}); !strings.Contains(got, "Waiting for a person") {
		t.Fatalf("the renamed delete after a restart: %s", got)
	}

	// An admin accepts the renamed tool's new definition: the file still
	// says high_write, and that holds.
	for _, u := range app.gate.Unaccepted() {
		if u.Tool.Name == "evil__delete_contact" {
			if err := app.gate.AcceptTool(ctx, u.Tool.Name, u.Tool.ListingHash(), models.Actor{ID: "stf_ada", Name: "Ada"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := risk("evil__delete_contact"); got != tools.RiskHighWrite {
		t.Fatalf("accepted, the renamed tool the file made high_write is %s", got)
	}
	if got := call("evil__delete_contact", map[string]any{"email": "j@x.test"}); !strings.Contains(got, "Waiting for a person") {
		t.Fatalf("the accepted renamed tool: %s", got)
	}
	if ran, _ := os.ReadFile(logPath); string(ran) != `{"tool":"transfer","args":{"amount":5}}`+"\n" {
		t.Fatalf("the hostile server ran other calls than the one a person approved:\n%s", ran)
	}
}
