package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/models/storage/storetest"
)

// A client that asks for progress with a numeric token (what the TypeScript
// SDK and Claude Code send) is served through the stdio bridge: no crash,
// the gateway's progress reaches it under its own token while a person
// decides, and then the approved result.
func TestBridgeCarriesNumericProgressTokens(t *testing.T) {
	var paid atomic.Int32
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			paid.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"paid":true}`)
	}))
	defer backend.Close()
	dir := t.TempDir()
	toolsFile := filepath.Join(dir, "tools.yaml")
	os.WriteFile(toolsFile, []byte(`tools:
  - name: pay
    risk: high_write
    input_schema: {type: object, properties: {n: {type: integer}}, required: [n], additionalProperties: false}
    http: {method: POST, url: "`+backend.URL+`/pay"}
  - name: look
    risk: read
    http: {method: GET, url: "`+backend.URL+`/look"}
`), 0o600)
	db := storetest.DSN(t)
	app := serveAppLogging(t, config{Addr: "127.0.0.1:0", DB: db, Tools: toolsFile}, io.Discard, io.Discard)
	base := "http://" + app.Addr()
	key, _ := runCmd(t, "agent", "add", "--name", "desk", "--db", db)
	key = strings.TrimSpace(key)
	runCmdIn(t, "correct horse battery staple\n", "user", "add", "--email", "ann@x.test", "--role", "approver", "--name", "Ann", "--db", db)
	staffTok, _ := runCmd(t, "token", "create", "--email", "ann@x.test", "--db", db)
	staffTok = strings.TrimSpace(staffTok)

	toBridge, clientOut := io.Pipe()
	clientIn, fromBridge := io.Pipe()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	bridged := make(chan error, 1)
	go func() {
		bridged <- run(ctx, []string{"mcp", "--url", base, "--agent-key", key}, toBridge, fromBridge, io.Discard)
		fromBridge.Close()
	}()
	lines := make(chan map[string]any, 100)
	go func() {
		sc := bufio.NewScanner(clientIn)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
		close(lines)
	}()
	send := func(msg string) {
		t.Helper()
		if _, err := io.WriteString(clientOut, msg+"\n"); err != nil {
			t.Fatalf("write to the bridge: %v", err)
		}
	}
	next := func(within time.Duration, what string, match func(map[string]any) bool) map[string]any {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case m, ok := <-lines:
				if !ok {
					t.Fatalf("the bridge closed before %s (it said %v)", what, <-bridged)
				}
				if match(m) {
					return m
				}
			case <-deadline:
				t.Fatalf("no %s within %s", what, within)
			}
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"ts-like","version":"1"}}}`)
	next(10*time.Second, "answer to initialize", func(m map[string]any) bool { return m["id"] == 1.0 })
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pay","arguments":{"n":1},"_meta":{"progressToken":7}}}`)
	note := next(20*time.Second, "progress note", func(m map[string]any) bool { return m["method"] == "notifications/progress" })
	if p := note["params"].(map[string]any); p["progressToken"] != 7.0 || !strings.Contains(p["message"].(string), "waiting for a person") {
		t.Fatalf("progress: %v", note)
	}
	// While that call is held, another is answered: the bridge does not
	// take one request at a time.
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"look","arguments":{}}}`)
	if r := next(20*time.Second, "answer to a read sent while a write is held", func(m map[string]any) bool { return m["id"] == 3.0 || m["id"] == 2.0 }); r["id"] != 3.0 {
		t.Fatalf("the held write was answered before the read: %v", r)
	}
	_, pending := apiDo(t, "GET", base+"/api/v1/actions?status=pending", staffTok, "")
	actions, _ := pending["actions"].([]any)
	if len(actions) != 1 {
		t.Fatalf("pending actions: %v", pending)
	}
	id := actions[0].(map[string]any)["id"].(string)
	if status, out := apiDo(t, "POST", base+"/api/v1/actions/"+id+"/approve", staffTok, `{}`); status != 200 {
		t.Fatalf("approve: %d %v", status, out)
	}
	res := next(60*time.Second, "result of the call", func(m map[string]any) bool { return m["id"] == 2.0 })
	if r, _ := res["result"].(map[string]any); r == nil || r["isError"] == true || !strings.Contains(fmt.Sprint(r["content"]), "paid") || paid.Load() != 1 {
		t.Fatalf("result: %v (backend paid %d times)", res, paid.Load())
	}
	select {
	case err := <-bridged:
		t.Fatalf("the bridge stopped: %v", err)
	default:
	}
}

// --mcp-hold is how long a waiting call is held; outside 1s–10m the start
// is refused with why.
func TestMCPHoldIsBounded(t *testing.T) {
	for _, v := range []string{"500ms", "11m"} {
		out, code := runCmd(t, "serve", "--mcp-hold", v, "--db", storetest.DSN(t))
		if code != 2 || !strings.Contains(out, "between 1s and 10m") {
			t.Errorf("--mcp-hold %s: %d %s", v, code, out)
		}
	}
	db := storetest.DSN(t)
	toolsFile := filepath.Join(t.TempDir(), "tools.yaml")
	os.WriteFile(toolsFile, []byte("tools:\n  - name: pay\n    risk: high_write\n    http: {method: POST, url: \"http://127.0.0.1:9/pay\"}\n"), 0o600)
	app := serveAppLogging(t, config{Addr: "127.0.0.1:0", DB: db, Tools: toolsFile, MCPHold: time.Second}, io.Discard, io.Discard)
	key, _ := runCmd(t, "agent", "add", "--name", "desk", "--db", db)
	cs := mcpClientOf(t, app, key)
	defer cs.Close()
	// Well under the default hold of 50 s: the answer comes after --mcp-hold.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pay", Arguments: map[string]any{}})
	if err != nil || len(res.Content) == 0 || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "Waiting for a person") {
		t.Fatalf("a waiting call with --mcp-hold 1s: %+v %v", res, err)
	}
}

// stoppableApp is serveAppLogging with a way to stop the server mid-test
// (as a restart would).
func stoppableApp(t *testing.T, cfg config) (*App, func()) {
	t.Helper()
	return startServing(t, cfg, io.Discard, io.Discard)
}

// The bridge follows the server: a tool added by a reload reaches the
// client (tools/list_changed passed on), and when the server restarts the
// bridge connects again by itself and the client's calls work, without the
// client relaunching it.
func TestBridgeFollowsListChangesAndRestarts(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path":%q}`, r.URL.Path)
	}))
	defer backend.Close()
	toolsFile := filepath.Join(t.TempDir(), "tools.yaml")
	tool := func(name string) string {
		return "  - name: " + name + "\n    risk: read\n    http: {method: GET, url: \"" + backend.URL + "/" + name + "\"}\n"
	}
	os.WriteFile(toolsFile, []byte("tools:\n"+tool("first")), 0o600)
	db := storetest.DSN(t)
	cfg := config{Addr: "127.0.0.1:0", DB: db, Tools: toolsFile}
	app, stop := stoppableApp(t, cfg)
	key, _ := runCmd(t, "agent", "add", "--name", "desk", "--db", db)

	toBridge, clientOut := io.Pipe()
	clientIn, fromBridge := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bridged := make(chan error, 1)
	go func() {
		bridged <- run(ctx, []string{"mcp", "--url", "http://" + app.Addr(), "--agent-key", strings.TrimSpace(key)}, toBridge, fromBridge, io.Discard)
		fromBridge.Close()
	}()
	changed := make(chan struct{}, 4)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}).Connect(ctx, &mcp.IOTransport{Reader: clientIn, Writer: clientOut}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	names := func() []string {
		var out []string
		for t, err := range cs.Tools(ctx, nil) {
			if err == nil {
				out = append(out, t.Name)
			}
		}
		return out
	}
	if got := names(); len(got) != 1 || got[0] != "first" {
		t.Fatalf("tools at first: %v", got)
	}
	os.WriteFile(toolsFile, []byte("tools:\n"+tool("first")+tool("second")), 0o600)
	if err := app.core.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("the client was not told the tool list changed")
	}
	if got := names(); len(got) != 2 {
		t.Fatalf("tools after the reload: %v", got)
	}
	call := func(name string) (*mcp.CallToolResult, error) {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		return cs.CallTool(cctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
	}
	if res, err := call("second"); err != nil || res.IsError || !strings.Contains(fmt.Sprint(res.StructuredContent), "/second") {
		t.Fatalf("the new tool: %+v %v", res, err)
	}

	// The server restarts on the same address: the bridge carries on.
	addr := app.Addr()
	stop()
	cfg.Addr = addr
	stoppableApp(t, cfg)
	res, err := call("second")
	if err != nil || res.IsError || !strings.Contains(fmt.Sprint(res.StructuredContent), "/second") {
		t.Fatalf("a call after the server restarted: %+v %v", res, err)
	}
	select {
	case err := <-bridged:
		t.Fatalf("the bridge stopped: %v", err)
	default:
	}
}

// One action per intent survives a restart: a write that waits when the
// server stops is, asked again by a new client after the server started
// again, that same action.
func TestTheSameWriteAfterARestartIsTheSameAction(t *testing.T) {
	toolsFile := filepath.Join(t.TempDir(), "tools.yaml")
	os.WriteFile(toolsFile, []byte("tools:\n  - name: pay\n    risk: high_write\n    input_schema: {type: object, properties: {n: {type: integer}}}\n    http: {method: POST, url: \"http://127.0.0.1:9/pay\"}\n"), 0o600)
	db := storetest.DSN(t)
	cfg := config{Addr: "127.0.0.1:0", DB: db, Tools: toolsFile, MCPHold: time.Second}
	app, stop := stoppableApp(t, cfg)
	key, _ := runCmd(t, "agent", "add", "--name", "desk", "--db", db)
	ask := func(app *App) string {
		t.Helper()
		cs := mcpClientOf(t, app, key)
		defer cs.Close()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "pay", Arguments: map[string]any{"n": 1}})
		if err != nil || len(res.Content) == 0 {
			t.Fatalf("pay: %+v %v", res, err)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	first := ask(app)
	stop()
	app, _ = stoppableApp(t, cfg)
	again := ask(app)
	id := strings.Fields(strings.SplitN(first, "(call ", 2)[1])[0]
	if !strings.Contains(first, "Waiting for a person") || !strings.Contains(again, "(call "+id) {
		t.Fatalf("before the restart %q, after it %q", first, again)
	}
	out, _ := runCmd(t, "audit", "verify", "--db", db)
	if !strings.Contains(out, "records agree with the audit chain: 1 call,") {
		t.Fatalf("one call only, and the records agree: %s", out)
	}
}

// mcpClientOf is an MCP client of the app's /mcp with an agent key (as
// `agent add` printed it).
func mcpClientOf(t *testing.T, app *App, key string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: "http://" + app.Addr() + "/mcp",
			HTTPClient: &http.Client{Transport: bearerAuth(strings.TrimSpace(key))}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// A client's mistake gets a JSON-RPC error from the bridge, not the bridge
// gone: a line that is not JSON, `{}`, a batch; the bridge then answers
// the next message as before, and an id of any JSON type comes back as
// sent.
func TestTheBridgeAnswersMalformedLines(t *testing.T) {
	dir := t.TempDir()
	toolsFile := filepath.Join(dir, "tools.yaml")
	os.WriteFile(toolsFile, []byte(`tools:
  - name: look
    risk: read
    http: {method: GET, url: "http://127.0.0.1:9/look"}
mcp_servers:
  - name: ordered
    url: "`+orderedUpstream(t)+`"
    prefix: false
`), 0o600)
	db := storetest.DSN(t)
	app := serveAppLogging(t, config{Addr: "127.0.0.1:0", DB: db, Tools: toolsFile}, io.Discard, io.Discard)
	key, _ := runCmd(t, "agent", "add", "--name", "desk", "--db", db)
	toBridge, clientOut := io.Pipe()
	clientIn, fromBridge := io.Pipe()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	bridged := make(chan error, 1)
	go func() {
		bridged <- run(ctx, []string{"mcp", "--url", "http://" + app.Addr(), "--agent-key", strings.TrimSpace(key)}, toBridge, fromBridge, io.Discard)
		fromBridge.Close()
	}()
	lines := bufio.NewScanner(clientIn)
	reply := func(send string) map[string]any {
		t.Helper()
		if _, err := io.WriteString(clientOut, send+"\n"); err != nil {
			t.Fatalf("the bridge stopped reading after an earlier line: %v", err)
		}
		done := make(chan map[string]any, 1)
		go func() {
			var m map[string]any
			if lines.Scan() {
				_ = json.Unmarshal(lines.Bytes(), &m)
			}
			done <- m
		}()
		select {
		case m := <-done:
			return m
		case <-time.After(20 * time.Second):
			t.Fatalf("no answer to %s", send)
		}
		return nil
	}
	for _, c := range []struct {
		send string
		code float64
		id   any
	}{
		{`this is not json`, -32700, nil},
		{`{}`, -32600, nil},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, -32600, nil},
		{`{"jsonrpc":"1.0","id":"a","method":"ping"}`, -32600, "a"},
		{`{"jsonrpc":"1.0","id":{"b": [1.50]},"method":"ping"}`, -32600, map[string]any{"b": []any{1.5}}},
	} {
		m := reply(c.send)
		e, _ := m["error"].(map[string]any)
		if e == nil || e["code"] != c.code || fmt.Sprint(m["id"]) != fmt.Sprint(c.id) {
			t.Errorf("%s: answered %v; want error %v with id %v", c.send, m, c.code, c.id)
		}
	}
	init := reply(`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if init["id"] != 7.0 || init["result"] == nil {
		t.Fatalf("after the bad lines, initialize: %v", init)
	}
	if _, err := io.WriteString(clientOut, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	// The tools in the order they were listed: Countersign's own, then the
	// MCP server's in its order (not by name).
	var listed struct {
		Result struct{ Tools []struct{ Name string } }
	}
	if b, _ := json.Marshal(reply(`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}`)); json.Unmarshal(b, &listed) != nil ||
		fmt.Sprint(listed.Result.Tools) != "[{look} {zeta} {alpha}]" {
		t.Errorf("tools/list through the bridge: %s", b)
	}
	// A tool the server does not offer is an error result, as through /mcp.
	if m := reply(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"nope","arguments":{}}}`); fmt.Sprint(m["result"]) == "<nil>" ||
		m["result"].(map[string]any)["isError"] != true || !strings.Contains(fmt.Sprint(m["result"]), `unknown tool "nope"`) {
		t.Errorf("a tool not offered, through the bridge: %v", m)
	}
	// Ids of the types JSON-RPC allows come back as the client wrote them
	// (booleans, objects and arrays are refused: TestTheBridgeAtItsLimits).
	for _, id := range []string{`1.5`, `18446744073709551616`, `-0.0`, `"s"`, `12`} {
		sent := `{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`
		if _, err := io.WriteString(clientOut, sent+"\n"); err != nil {
			t.Fatal(err)
		}
		got := make(chan string, 1)
		go func() {
			if lines.Scan() {
				got <- lines.Text()
			}
		}()
		select {
		case line := <-got:
			var m map[string]json.RawMessage
			if json.Unmarshal([]byte(line), &m) != nil || string(m["id"]) != id || m["result"] == nil {
				t.Errorf("%s answered %s", sent, line)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("no answer to %s", sent)
		}
	}
	select {
	case err := <-bridged:
		t.Fatalf("the bridge stopped: %v", err)
	default:
	}
}

// orderedUpstream is an MCP server over HTTP, written by hand, that lists
// its two tools not by name (zeta, then alpha).
func orderedUpstream(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&m) != nil || len(m.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		result := `{}`
		switch m.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"ordered","version":"1"}}`
		case "tools/list":
			result = `{"tools":[{"name":"zeta","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},` +
				`{"name":"alpha","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}]}`
		case "server/discover":
			result = ""
		}
		w.Header().Set("Content-Type", "application/json")
		if result == "" {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`, m.ID)
			return
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// bridgeLines runs `countersign mcp` against base with the agent key and
// gives a way to write lines to it as a client does, and to wait for a
// line it writes back (raw, and decoded).
func bridgeRaw(t *testing.T, base, key string) (send func(string), next func(time.Duration, string, func(raw string, m map[string]any) bool) (string, map[string]any)) {
	toBridge, clientOut := io.Pipe()
	clientIn, fromBridge := io.Pipe()
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	bridged := make(chan error, 1)
	go func() {
		bridged <- run(ctx, []string{"mcp", "--url", base, "--agent-key", key}, toBridge, fromBridge, io.Discard)
		fromBridge.Close()
	}()
	type line struct {
		raw string
		m   map[string]any
	}
	lines := make(chan line, 100)
	go func() {
		sc := bufio.NewScanner(clientIn)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- line{sc.Text(), m}
			}
		}
		close(lines)
	}()
	send = func(msg string) {
		t.Helper()
		if _, err := io.WriteString(clientOut, msg+"\n"); err != nil {
			t.Fatalf("write to the bridge: %v", err)
		}
	}
	next = func(within time.Duration, what string, match func(string, map[string]any) bool) (string, map[string]any) {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the bridge closed before %s (it said %v)", what, <-bridged)
				}
				if match(l.raw, l.m) {
					return l.raw, l.m
				}
			case <-deadline:
				t.Fatalf("no %s within %s", what, within)
			}
		}
	}
	return send, next
}

// The stdio bridge at the edges of what a client may send: a line over
// 8 MiB is answered with an error carrying its id (written after its
// params) and the next line is read; an id past 2^53 comes back as the
// client wrote it; id null, an object or an array get an error; a progress
// token 2.5 gets its notifications under 2.5; and a request the client
// cancelled is not answered.
func TestTheBridgeAtItsLimits(t *testing.T) {
	dir := t.TempDir()
	toolsFile := filepath.Join(dir, "tools.yaml")
	os.WriteFile(toolsFile, []byte(`tools:
  - name: pay
    risk: high_write
    input_schema: {type: object, properties: {n: {type: integer}}, required: [n], additionalProperties: false}
    http: {method: POST, url: "http://127.0.0.1:9/pay"}
`), 0o600)
	db := storetest.DSN(t)
	app := serveAppLogging(t, config{Addr: "127.0.0.1:0", DB: db, Tools: toolsFile}, io.Discard, io.Discard)
	key, _ := runCmd(t, "agent", "add", "--name", "desk", "--db", db)
	send, next := bridgeRaw(t, "http://"+app.Addr(), strings.TrimSpace(key))
	answerTo := func(id string) func(string, map[string]any) bool {
		return func(raw string, m map[string]any) bool {
			return m["method"] == nil && strings.Contains(raw, `"id":`+id+`,`) || strings.HasSuffix(raw, `"id":`+id+`}`)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"edge","version":"1"}}}`)
	next(10*time.Second, "answer to initialize", answerTo("1"))
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	send(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"pay","arguments":{"n":"` + strings.Repeat("9", 9<<20) + `"}},"id":2}`)
	if _, m := next(20*time.Second, "answer to a 9 MiB line", answerTo("2")); m["error"] == nil || !strings.Contains(fmt.Sprint(m["error"]), "over 8 MiB") {
		t.Fatalf("a 9 MiB line: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`)
	if raw, m := next(10*time.Second, "answer to a big id", answerTo("9007199254740993")); m["error"] != nil {
		t.Fatalf("a big id: %s", raw)
	}
	for _, id := range []string{`null`, `{"a":1}`, `[1]`} {
		send(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`)
		if raw, m := next(10*time.Second, "answer to id "+id, answerTo("null")); m["error"] == nil || !strings.Contains(fmt.Sprint(m["error"]), "-32600") {
			t.Fatalf("id %s: %s", id, raw)
		}
	}

	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"pay","arguments":{"n":1},"_meta":{"progressToken":2.5}}}`)
	if raw, m := next(20*time.Second, "progress under 2.5", func(_ string, m map[string]any) bool { return m["method"] == "notifications/progress" }); m["params"].(map[string]any)["progressToken"] != 2.5 {
		t.Fatalf("progress: %s", raw)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"the user moved on"}}`)
	send(`{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	time.Sleep(500 * time.Millisecond) // the cancelled call's handler ends meanwhile
	send(`{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	for _, want := range []string{"4", "5"} {
		if raw, _ := next(10*time.Second, "answer to ping "+want, func(raw string, m map[string]any) bool {
			return m["method"] == nil && m["id"] != nil
		}); !strings.Contains(raw, `"id":`+want) {
			t.Fatalf("a cancelled request was answered, or the pings out of order: %s", raw)
		}
	}
}
