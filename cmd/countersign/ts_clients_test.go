package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
)

// The test binary is also the countersign command: with
// COUNTERSIGN_TEST_AS_CLI=1 it runs main, so a client can start
// `countersign mcp` and a test can kill `countersign serve` for real.
func TestMain(m *testing.M) {
	if os.Getenv("COUNTERSIGN_TEST_AS_CLI") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// asCLI is the command and environment that run countersign itself.
func asCLI(t *testing.T) (string, map[string]string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self, map[string]string{"COUNTERSIGN_TEST_AS_CLI": "1"}
}

// tsOut is what .ci/mcp/ts-agent.mjs prints.
type tsOut struct {
	Tools    []map[string]any `json:"tools"`
	Result   map[string]any   `json:"result"`
	Progress []map[string]any `json:"progress"`
	Attempts int              `json:"attempts"`
	Error    string           `json:"error"`
	Asked    []map[string]any `json:"asked"`
}

func (o tsOut) text() string {
	var b strings.Builder
	if o.Result != nil {
		content, _ := o.Result["content"].([]any)
		for _, c := range content {
			if m, _ := c.(map[string]any); m["type"] == "text" {
				b.WriteString(fmt.Sprint(m["text"]))
			}
		}
	}
	return b.String()
}

// tsAgent runs the official TypeScript SDK's client (.ci/mcp/ts-agent.mjs)
// with spec, in its own process.
func tsAgent(t *testing.T, spec map[string]any) tsOut {
	t.Helper()
	return tsAgentOf(t, "ts-agent.mjs", spec)
}

// tsAgentOf runs one of .ci/mcp's client scripts (ts-agent.mjs on the SDK
// v1, ts-agent-v2.mjs on v2) with spec.
func tsAgentOf(t *testing.T, name string, spec map[string]any) tsOut {
	t.Helper()
	script := nodeScript(t, name)
	raw, _ := json.Marshal(spec)
	var stderr bytes.Buffer
	cmd := exec.Command("node", script, string(raw))
	cmd.Stderr = &stderr
	stdout, _ := cmd.Output()
	var out tsOut
	if err := json.Unmarshal(stdout, &out); err != nil {
		t.Fatalf("the TypeScript client printed %q (%v)\n%s", stdout, err, stderr.String())
	}
	return out
}

func asJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// The official TypeScript SDK client, over streamable HTTP and over stdio
// (through `countersign mcp`), in front of the filesystem server: the tool
// list and the content of a read (text, and an image) are what the server
// gives straight; a write asked with onprogress (a numeric token) hears
// progress while it is held; asked again by a new client process, over
// either transport, it is the same action; approved, the next asking gets
// the result, and the file is written once. Asked once more after that,
// by a new process, it is that outcome again, marked as a replay, and
// nothing is written; asked with _meta["countersign/new-intent"], it is a
// new action: writing the same file twice on purpose still works.
func TestTheTypeScriptClientThroughHTTPAndStdio(t *testing.T) {
	fsScript, _ := filepath.Abs("../../.ci/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
	nodeScript(t, "ts-agent.mjs")
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("line one\nline two\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "dot.png"), onePixelPNG, 0o600)
	toolsFile := filepath.Join(t.TempDir(), "tools.yaml")
	os.WriteFile(toolsFile, []byte(`mcp_servers:
  - name: fs
    command: node
    args: ["`+fsScript+`", "`+dir+`"]
`), 0o600)
	db := storetest.DSN(t)
	app := serveApp(t, config{Addr: "127.0.0.1:0", DB: db, Tools: toolsFile, MCPHold: 2 * time.Second}, io.Discard)
	base := "http://" + app.Addr()
	key, staffTok := agentAndApprover(t, db, "ts")
	self, env := asCLI(t)
	overHTTP := func(spec map[string]any) map[string]any {
		spec["http"], spec["key"] = base+"/mcp", key
		return spec
	}
	overStdio := func(spec map[string]any) map[string]any {
		spec["stdio"], spec["args"], spec["env"] = self, []string{"mcp", "--url", base, "--agent-key", key}, env
		return spec
	}
	straight := func(spec map[string]any) map[string]any {
		spec["stdio"], spec["args"] = "node", []string{fsScript, dir}
		return spec
	}

	// The list and two reads, straight and through each transport.
	want := tsAgent(t, straight(map[string]any{"list": true}))
	if want.Error != "" || len(want.Tools) < 10 {
		t.Fatalf("the filesystem server straight: %+v", want)
	}
	reads := map[string]string{"read_text_file": "notes.txt", "read_media_file": "dot.png"}
	straightReads := map[string]tsOut{}
	for tool, file := range reads {
		straightReads[tool] = tsAgent(t, straight(map[string]any{"call": map[string]any{"name": tool, "arguments": map[string]any{"path": filepath.Join(dir, file)}}}))
	}
	for via, through := range map[string]func(map[string]any) map[string]any{"HTTP": overHTTP, "stdio": overStdio} {
		got := tsAgent(t, through(map[string]any{"list": true}))
		if got.Error != "" {
			t.Fatalf("%s: %s", via, got.Error)
		}
		offered := map[string]map[string]any{}
		for _, tool := range got.Tools {
			offered[tool["name"].(string)] = tool
		}
		withOutput := 0
		for _, tool := range want.Tools {
			name := "fs__" + strings.ReplaceAll(tool["name"].(string), "-", "_")
			o := offered[name]
			if o == nil {
				t.Errorf("%s: %s is not offered", via, name)
				continue
			}
			for _, field := range []string{"title", "description", "inputSchema", "outputSchema", "annotations", "icons"} {
				if field == "annotations" {
					// The Go SDK (v1.8.0) writes readOnlyHint and
					// idempotentHint even when false, their default: the
					// same annotations, said explicitly.
					for _, a := range []any{o[field], tool[field]} {
						if m, ok := a.(map[string]any); ok {
							for _, hint := range []string{"readOnlyHint", "idempotentHint"} {
								if _, set := m[hint]; !set {
									m[hint] = false
								}
							}
						}
					}
				}
				if !reflect.DeepEqual(o[field], tool[field]) {
					t.Errorf("%s: %s %s is %s, the server's is %s", via, name, field, asJSON(o[field]), asJSON(tool[field]))
				}
			}
			if tool["outputSchema"] != nil {
				withOutput++
			}
		}
		if withOutput == 0 {
			t.Fatal("the server lists no output schema: the comparison proves nothing about them")
		}
		for tool, file := range reads {
			got := tsAgent(t, through(map[string]any{"call": map[string]any{"name": "fs__" + tool, "arguments": map[string]any{"path": filepath.Join(dir, file)}}}))
			w := straightReads[tool]
			if got.Error != "" || asJSON(got.Result["content"]) != asJSON(w.Result["content"]) ||
				asJSON(got.Result["structuredContent"]) != asJSON(w.Result["structuredContent"]) || got.Result["isError"] != w.Result["isError"] {
				t.Errorf("%s: %s through Countersign\n%s\nstraight\n%s", via, tool, asJSON(got), asJSON(w))
			}
		}
	}
	if !strings.Contains(asJSON(straightReads["read_media_file"].Result["content"]), `"type":"image"`) {
		t.Fatalf("the image read gave no image block: %s", asJSON(straightReads["read_media_file"]))
	}

	// A write, asked with progress over stdio, then again by new client
	// processes over HTTP and over stdio.
	target := filepath.Join(dir, "out.txt")
	write := map[string]any{"name": "fs__write_file", "arguments": map[string]any{"path": target, "content": "written once\n"}}
	first := tsAgent(t, overStdio(map[string]any{"call": write, "progress": true}))
	if first.Error != "" || !strings.Contains(first.text(), "Waiting for a person") || len(first.Progress) == 0 {
		t.Fatalf("a held write over stdio: %+v", first)
	}
	if p, ok := first.Progress[0]["progress"].(float64); !ok || p <= 0 || !strings.Contains(fmt.Sprint(first.Progress[0]["message"]), "waiting for a person") {
		t.Fatalf("progress: %v", first.Progress)
	}
	again := tsAgent(t, overHTTP(map[string]any{"call": write, "progress": true}))
	if !strings.Contains(again.text(), "Waiting for a person") || len(again.Progress) == 0 {
		t.Fatalf("the same write over HTTP: %+v", again)
	}
	_, pending := apiDo(t, "GET", base+"/api/v1/actions?status=pending", staffTok, "")
	actions, _ := pending["actions"].([]any)
	if len(actions) != 1 {
		t.Fatalf("one write asked by three client processes made %d actions: %v", len(actions), pending)
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatal("written before a person approved")
	}
	id := actions[0].(map[string]any)["id"].(string)
	// Asked first through the bridge, statelessly: its run is the bridge's
	// conversation, not one shared by every sessionless request.
	if call, err := app.store.ToolCall(context.Background(), id); err != nil {
		t.Fatal(err)
	} else if run, err := app.store.Run(context.Background(), call.RunID); err != nil || !strings.HasPrefix(run.Session, "mcp:bridge:br_") {
		t.Fatalf("the bridge's call is in session %q (%v)", run.Session, err)
	}
	if status, out := apiDo(t, "POST", base+"/api/v1/actions/"+id+"/approve", staffTok, `{}`); status != 200 {
		t.Fatalf("approve: %d %v", status, out)
	}
	done := tsAgent(t, overHTTP(map[string]any{"call": write}))
	if done.Result["isError"] == true || !strings.Contains(done.text(), "Successfully wrote") {
		c, _ := app.store.ToolCall(context.Background(), id)
		t.Fatalf("after approval: %+v (the approved call: %s %q)", done, c.Status, c.Error)
	}
	if b, _ := os.ReadFile(target); string(b) != "written once\n" {
		t.Fatalf("the file holds %q", b)
	}
	// Handed over: the same write once more is that outcome, replayed.
	replayed := tsAgent(t, overStdio(map[string]any{"call": write}))
	meta, _ := replayed.Result["_meta"].(map[string]any)
	if r, _ := meta["countersign/replay"].(map[string]any); r["call"] != id || !strings.Contains(replayed.text(), "Successfully wrote") {
		t.Fatalf("the same write asked after its outcome was handed over: %+v", replayed)
	}
	_, pending = apiDo(t, "GET", base+"/api/v1/actions?status=pending", staffTok, "")
	if actions, _ := pending["actions"].([]any); len(actions) != 0 {
		t.Fatalf("a replay made an action: %v", pending)
	}
	// Meant twice: a new action.
	twice := map[string]any{"name": write["name"], "arguments": write["arguments"], "_meta": map[string]any{"countersign/new-intent": true}}
	tsAgent(t, overStdio(map[string]any{"call": twice}))
	_, pending = apiDo(t, "GET", base+"/api/v1/actions?status=pending", staffTok, "")
	if actions, _ := pending["actions"].([]any); len(actions) != 1 || actions[0].(map[string]any)["id"] == id {
		t.Fatalf("the same write meant twice: %v", pending)
	}
}

// payTools is a tools file with pay, a high_write HTTP tool, on a backend
// that counts the payments it was sent.
func payTools(t *testing.T) (toolsFile string, paid *atomic.Int32) {
	t.Helper()
	paid = &atomic.Int32{}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			paid.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"paid":true}`)
	}))
	t.Cleanup(backend.Close)
	toolsFile = filepath.Join(t.TempDir(), "tools.yaml")
	os.WriteFile(toolsFile, []byte(`tools:
  - name: pay
    description: Pay an invoice
    risk: high_write
    input_schema: {type: object, properties: {n: {type: integer}}, required: [n], additionalProperties: false}
    http: {method: POST, url: "`+backend.URL+`/pay"}
`), 0o600)
	return toolsFile, paid
}

// agentAndApprover adds an agent (its key) and an approver (a staff API
// token) to the database, with the commands.
func agentAndApprover(t *testing.T, db, agent string) (key, staffTok string) {
	t.Helper()
	firstLine := func(s string) string { return strings.TrimSpace(strings.SplitN(s, "\n", 2)[0]) }
	key, _ = runCmd(t, "agent", "add", "--name", agent, "--db", db)
	runCmdIn(t, "correct horse battery staple\n", "user", "add", "--email", "ann@x.test", "--role", "approver", "--name", "Ann", "--db", db)
	staffTok, _ = runCmd(t, "token", "create", "--email", "ann@x.test", "--db", db)
	return firstLine(key), firstLine(staffTok)
}

var onePixelPNG = []byte{0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48, 0x44, 0x52, 0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0, 0x1f, 0x15, 0xc4,
	0x89, 0, 0, 0, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0, 1, 0, 0, 5, 0, 1, 0x0d, 0x0a, 0x2d, 0xb4, 0, 0, 0, 0, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82}

// `countersign serve` killed with SIGKILL while the TypeScript client
// waits for a write, and started again: the client, retrying as it would,
// gets the approved outcome, and the backend is paid once.
func TestAClientRetryAfterSIGKILLGetsTheOutcome(t *testing.T) {
	nodeScript(t, "ts-agent.mjs")
	toolsFile, paid := payTools(t)
	db := storetest.DSN(t)
	if s, err := storage.Open(db, storage.Options{}); err != nil { // the database, made
		t.Fatal(err)
	} else {
		s.Close()
	}
	key, staffTok := agentAndApprover(t, db, "ts")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	base := "http://" + addr
	self, env := asCLI(t)
	serve := func() *exec.Cmd {
		t.Helper()
		cmd := exec.Command(self, "serve", "--addr", addr, "--db", db, "--tools", toolsFile, "--mcp-hold", "20s")
		cmd.Env = append(os.Environ(), "COUNTERSIGN_TEST_AS_CLI="+env["COUNTERSIGN_TEST_AS_CLI"])
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if res, err := http.Get(base + "/healthz"); err == nil {
				res.Body.Close()
				if res.StatusCode == 200 {
					return cmd
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("countersign serve did not start")
			}
		}
	}
	server := serve()

	// The client asks, and keeps asking through errors for a minute.
	answered := make(chan tsOut, 1)
	go func() {
		answered <- tsAgent(t, map[string]any{"http": base + "/mcp", "key": key, "retryFor": 60000, "timeout": 60000,
			"call": map[string]any{"name": "pay", "arguments": map[string]any{"n": 1}}})
	}()
	var id string
	for deadline := time.Now().Add(30 * time.Second); id == ""; time.Sleep(100 * time.Millisecond) {
		_, pending := apiDo(t, "GET", base+"/api/v1/actions?status=pending", staffTok, "")
		if actions, _ := pending["actions"].([]any); len(actions) == 1 {
			id = actions[0].(map[string]any)["id"].(string)
		}
		if time.Now().After(deadline) {
			select {
			case got := <-answered:
				t.Fatalf("the client's write never waited for a person: %+v", got)
			default:
				t.Fatal("the client's write never waited for a person")
			}
		}
	}
	// Killed while the client's request is held.
	server.Process.Kill()
	server.Wait()
	serve() // on the same port: it answers /healthz once it is up
	if status, out := apiDo(t, "POST", base+"/api/v1/actions/"+id+"/approve", staffTok, `{}`); status != 200 {
		t.Fatalf("approve after the restart: %d %v", status, out)
	}
	var got tsOut
	select {
	case got = <-answered:
	case <-time.After(90 * time.Second):
		t.Fatal("the client got no answer")
	}
	if got.Error != "" || got.Attempts < 2 || got.Result["isError"] == true || !strings.Contains(got.text(), "paid") {
		t.Fatalf("the client after the restart: %+v", got)
	}
	if n := paid.Load(); n != 1 {
		t.Fatalf("the backend was paid %d times", n)
	}
	s, err := storage.Open(db, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if pending, _ := s.PendingActions(context.Background(), models.ActionFilter{}); len(pending) != 0 {
		t.Fatalf("a second action was made: %+v", pending)
	}
}
