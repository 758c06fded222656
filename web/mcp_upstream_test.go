package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
	"github.com/countersign/countersign/web"
)

// filesystemTools are the filesystem server's tools on dir, through a tools
// file, as Countersign offers them; the server stops with the test.
func filesystemTools(t *testing.T, script, dir string) *tools.Registry {
	t.Helper()
	reg, err := tools.NewRegistry(filesystemSet(t, script, dir).Tools()...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// filesystemSet is the tools file with the filesystem server on dir.
func filesystemSet(t *testing.T, script, dir string) *httptool.Set {
	t.Helper()
	set, err := httptool.Load([]byte(`mcp_servers:
  - name: fs
    command: node
    args: ["`+script+`", "`+dir+`"]
`), "tools.yaml", httptool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	go set.Keep() // reconnects, as the core keeps the set in force
	return set
}

// mcpApp serves those tools under a policy (nil: the built-in default),
// holding calls that need a person for wait (0: the default 50 s).
func mcpApp(t *testing.T, reg *tools.Registry, policyYAML []byte, wait time.Duration) *app {
	t.Helper()
	if policyYAML == nil {
		policyYAML = policy.DefaultPolicyYAML
	}
	pol, err := policy.LoadPolicy(policyYAML, "test", reg)
	if err != nil {
		t.Fatal(err)
	}
	return startApp(t, appConfig{Store: openStore(t), Tools: reg, Policy: pol, Log: discardLog(), Web: web.Config{MCPWait: wait}}, false)
}

// filesystemServer is the official MCP filesystem server from the npm
// registry, pinned in .ci/mcp (installed by .ci/run and make test).
func filesystemServer(t *testing.T) string {
	t.Helper()
	script, _ := filepath.Abs("../.ci/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
	_, nodeErr := exec.LookPath("node")
	if _, err := os.Stat(script); err != nil || nodeErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the MCP filesystem server is not installed (%v, %v): .ci/run installs it", err, nodeErr)
		}
		t.Skip("no node or no .ci/mcp/node_modules: run make test, which installs them")
	}
	return script
}

// A real MCP server (the filesystem one) behind Countersign, reached by an
// MCP client through /mcp: reads run, writes wait for a person and happen
// exactly once when approved, a rejected write never happens.
func TestMCPGatewayInFrontOfTheFilesystemServer(t *testing.T) {
	script := filesystemServer(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello from the share"), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := filesystemTools(t, script, dir)
	read, ok := reg.Get("fs__read_text_file")
	write, ok2 := reg.Get("fs__write_file")
	if !ok || !ok2 || read.Risk != tools.RiskRead || write.Risk != tools.RiskHighWrite || !strings.Contains(read.Origin, "readOnlyHint") {
		t.Fatalf("upstream tools: read %v %v, write %v", ok, read, ok2)
	}
	a := mcpApp(t, reg, nil, 300*time.Millisecond)
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "claude-desktop", models.Actor{ID: "test"})
	a.accounts.AddStaff(ctx, "ann@x.test", "Ann", models.Approver, password, models.Actor{ID: "test"})
	staffTok, _ := a.accounts.CreateAPIToken(ctx, "ann@x.test", models.Actor{})
	cs, err := mcpClient(t, a.srv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs__read_text_file", Arguments: map[string]any{"path": filepath.Join(dir, "notes.txt")}})
	if err != nil || r.IsError || !strings.Contains(textOf(r), "hello from the share") {
		t.Fatalf("read: %v %s", err, textOf(r))
	}

	target := filepath.Join(dir, "approved.txt")
	args := map[string]any{"path": target, "content": "written once"}
	r, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs__write_file", Arguments: args})
	if !strings.Contains(textOf(r), "Waiting for a person") {
		t.Fatalf("write before a decision: %s", textOf(r))
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatal("the file was written before anyone approved")
	}
	pending, _ := a.store.PendingActions(ctx, models.ActionFilter{})
	if len(pending) != 1 {
		t.Fatalf("pending: %d", len(pending))
	}
	// The approver's page names the agent, its MCP session and the server
	// that will carry the call out.
	_, page := a.signIn("ann@x.test").get("/actions/" + pending[0].ID)
	if !strings.Contains(page, "claude-desktop") || !strings.Contains(page, "<code>mcp</code>") || !strings.Contains(page, "over MCP") ||
		!regexp.MustCompile(`(?i)<h1 data-testid="action-summary">write file: `).MatchString(page) ||
		!regexp.MustCompile(`the MCP server <strong>fs</strong>`).MatchString(page) {
		t.Fatalf("the action page does not say who asked and where it runs:\n%s", page)
	}
	if r := a.do("POST", "/api/v1/actions/"+pending[0].ID+"/approve", staffTok, `{}`); r.Status != 200 {
		t.Fatalf("approve: %s", r.Raw)
	}
	r, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs__write_file", Arguments: args})
	if r.IsError {
		t.Fatalf("after approval: %s", textOf(r))
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "written once" {
		t.Fatalf("the approved file: %q %v", b, err)
	}
	if n, _ := a.store.AuditCalls(ctx, models.AuditQuery{Status: models.CallSucceeded, Limit: 100}); len(n) != 2 {
		t.Fatalf("%d calls ran; a read and one write should have", len(n))
	}

	// Rejected: no file, and the client reads the reason.
	other := map[string]any{"path": filepath.Join(dir, "rejected.txt"), "content": "no"}
	cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs__write_file", Arguments: other})
	pending, _ = a.store.PendingActions(ctx, models.ActionFilter{})
	a.do("POST", "/api/v1/actions/"+pending[0].ID+"/reject", staffTok, `{"reason":"not in the shared folder, please"}`)
	r, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs__write_file", Arguments: other})
	if !r.IsError || !strings.Contains(textOf(r), "not in the shared folder") {
		t.Fatalf("rejected: %s", textOf(r))
	}
	if _, err := os.Stat(filepath.Join(dir, "rejected.txt")); err == nil {
		t.Fatal("a rejected write happened")
	}

	// Edited and approved: the edited content is written, and the client
	// asking again with what it first sent gets that outcome.
	draft := map[string]any{"path": filepath.Join(dir, "edited.txt"), "content": "draft with a typo"}
	cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs__write_file", Arguments: draft})
	pending, _ = a.store.PendingActions(ctx, models.ActionFilter{})
	edit := `{"args":{"path":"` + filepath.Join(dir, "edited.txt") + `","content":"final text"}}`
	if r := a.do("POST", "/api/v1/actions/"+pending[0].ID+"/approve", staffTok, edit); r.Status != 200 {
		t.Fatalf("edit and approve: %s", r.Raw)
	}
	r, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs__write_file", Arguments: draft})
	if r.IsError || !strings.HasPrefix(textOf(r), "A person changed the arguments before approving this call: content from \"draft with a typo\" to \"final text\".") ||
		!strings.Contains(textOf(r), "Successfully wrote") {
		t.Fatalf("after the edit the agent must read what the person changed, then the server's answer: %s", textOf(r))
	}
	// Clients that read only structured content learn it from _meta.
	if ch, _ := r.Meta["countersign/changed"].(map[string]any); ch == nil || !strings.Contains(fmt.Sprint(ch["note"]), "content from") ||
		fmt.Sprint(ch["ran"].(map[string]any)["content"]) != "final text" || fmt.Sprint(ch["asked"].(map[string]any)["content"]) != "draft with a typo" {
		t.Fatalf("the change is not in _meta: %v", r.Meta)
	}
	// The filesystem server's output schema forbids other keys: its
	// structured content comes as it sent it (the TypeScript client
	// checks it against the schema).
	if sc, _ := r.StructuredContent.(map[string]any); len(sc) != 1 || !strings.Contains(fmt.Sprint(sc["content"]), "Successfully wrote") {
		t.Fatalf("structured content after an edit: %v", r.StructuredContent)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "edited.txt")); string(b) != "final text" {
		t.Fatalf("edited file %q", b)
	}
	if again, _ := a.store.PendingActions(ctx, models.ActionFilter{}); len(again) != 0 {
		t.Fatalf("asking again after an edit made %d new pending calls", len(again))
	}
}

// A policy rule over an MCP tool's arguments denies, and the client reads why.
func TestMCPGatewayDeniesByPolicy(t *testing.T) {
	script := filesystemServer(t)
	dir := t.TempDir()
	reg := filesystemTools(t, script, dir)
	a := mcpApp(t, reg, []byte(`rules:
  - name: no-secrets-folder
    tool: fs__write_file
    when: args.path.contains("/secrets/")
    decision: deny
    reason: "Nothing is written under secrets/"
`), 0)
	key, _, _ := a.accounts.AddAgent(context.Background(), "bot", models.Actor{ID: "test"})
	cs, err := mcpClient(t, a.srv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	r, _ := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fs__write_file",
		Arguments: map[string]any{"path": filepath.Join(dir, "secrets", "x.txt"), "content": "k"}})
	if !r.IsError || !strings.Contains(textOf(r), "Nothing is written under secrets/") {
		t.Fatalf("denied: %s", textOf(r))
	}
}

// tsClient runs the official TypeScript SDK's Client (pinned in .ci/mcp)
// against /mcp: it lists the tools and makes one call.
func tsClient(t *testing.T, url, key, tool string, args map[string]any) (names []string, result map[string]any) {
	t.Helper()
	filesystemServer(t) // the same install; fails in CI when missing
	script, _ := filepath.Abs("../.ci/mcp/client.mjs")
	raw, _ := json.Marshal(args)
	out, err := exec.Command("node", script, url+"/mcp", key, tool, string(raw)).Output()
	var got struct {
		Tools  []string       `json:"tools"`
		Result map[string]any `json:"result"`
		Error  string         `json:"error"`
	}
	if jerr := json.Unmarshal(out, &got); jerr != nil || err != nil {
		t.Fatalf("the TypeScript client: %v %v\n%s", err, jerr, out)
	}
	return got.Tools, got.Result
}

// The official TypeScript SDK client, over streamable HTTP, through the
// gateway to the filesystem server.
func TestMCPGatewayWithTheTypeScriptClient(t *testing.T) {
	script := filesystemServer(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("read by TypeScript"), 0o600)
	reg := filesystemTools(t, script, dir)
	a := mcpApp(t, reg, nil, 200*time.Millisecond)
	key, _, _ := a.accounts.AddAgent(context.Background(), "ts-agent", models.Actor{ID: "test"})
	names, res := tsClient(t, a.srv.URL, key, "fs__read_text_file", map[string]any{"path": filepath.Join(dir, "a.txt")})
	raw, _ := json.Marshal(res)
	if !slices.Contains(names, "fs__write_file") || res["isError"] == true || !strings.Contains(string(raw), "read by TypeScript") {
		t.Fatalf("tools %v, result %s", names, raw)
	}
	_, res = tsClient(t, a.srv.URL, key, "fs__write_file", map[string]any{"path": filepath.Join(dir, "b.txt"), "content": "x"})
	raw, _ = json.Marshal(res)
	if !strings.Contains(string(raw), "Waiting for a person") {
		t.Fatalf("write: %s", raw)
	}
	if _, err := os.Stat(filepath.Join(dir, "b.txt")); err == nil {
		t.Fatal("written before approval")
	}
	// A revoked key: the client cannot connect.
	a.accounts.RevokeAgent(context.Background(), "ts-agent", models.Actor{ID: "test"})
	out, _ := exec.Command("node", mustAbs("../.ci/mcp/client.mjs"), a.srv.URL+"/mcp", key, "fs__read_text_file", `{}`).Output()
	if !strings.Contains(string(out), `"error"`) || !strings.Contains(string(out), "agent key is not valid") || strings.Contains(string(out), "<html") {
		t.Fatalf("revoked key: %s", out)
	}
}

func mustAbs(p string) string {
	abs, _ := filepath.Abs(p)
	return abs
}

// An upstream killed mid-run: its calls end at once with a clear error,
// Countersign keeps serving, and the server is started again (reconnected
// with backoff): its tools work again.
func TestMCPGatewayUpstreamKilled(t *testing.T) {
	script := filesystemServer(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("before"), 0o600)
	set := filesystemSet(t, script, dir)
	reg, _ := tools.NewRegistry(set.Tools()...)
	pol, _ := policy.LoadPolicy(policy.DefaultPolicyYAML, "test", reg)
	a := startApp(t, appConfig{Store: openStore(t), Tools: reg, Policy: pol, Log: discardLog(),
		Web: web.Config{Upstreams: set.Upstreams}}, false)
	a.staff(models.Admin, "ada@x.test", "Ada")
	admin := a.signIn("ada@x.test")
	toolsPage := func() string {
		_, page := admin.get("/tools")
		return page
	}
	if page := toolsPage(); !strings.Contains(page, "connected since") || !strings.Contains(page, "Spoken to at MCP 2025-11-25; clients of 2026-07-28") {
		t.Fatalf("the tools page does not say the server is connected:\n%s", page)
	}
	key, _, _ := a.accounts.AddAgent(context.Background(), "bot", models.Actor{ID: "test"})
	cs, err := mcpClient(t, a.srv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	read := &mcp.CallToolParams{Name: "fs__read_text_file", Arguments: map[string]any{"path": filepath.Join(dir, "a.txt")}}
	if r, _ := cs.CallTool(context.Background(), read); r.IsError {
		t.Fatalf("before: %s", textOf(r))
	}
	// Kill the upstream process: the one started with this test's folder.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	killed := 0
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), script) && strings.Contains(string(b), dir) {
			pid, _ := strconv.Atoi(strings.Split(p, "/")[2])
			if proc, err := os.FindProcess(pid); err == nil && proc.Kill() == nil {
				killed++
			}
		}
	}
	if killed == 0 {
		t.Skip("could not find the upstream process to kill (no /proc)")
	}
	done := make(chan *mcp.CallToolResult, 1)
	go func() { r, _ := cs.CallTool(context.Background(), read); done <- r }()
	select {
	case r := <-done:
		if r == nil || !r.IsError || !strings.Contains(textOf(r), "not answering") {
			t.Fatalf("after the upstream died: %+v", r)
		}
		if st := set.Upstreams(); !st[0].Connected && !strings.Contains(toolsPage(), "not answering since") {
			t.Fatalf("the tools page does not say the server is down (%+v)", st)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a call to a dead upstream hangs")
	}
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatalf("Countersign stopped serving: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := cs.CallTool(context.Background(), read)
		if err == nil && !r.IsError && strings.Contains(textOf(r), "before") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the filesystem server was not started again: %v %+v", err, r)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// An upstream over streamable HTTP with a header from the environment:
// its tools are offered, with the tools file's risk override, and its
// answers come back.
func TestMCPGatewayStreamableHTTPUpstream(t *testing.T) {
	up := mcp.NewServer(&mcp.Implementation{Name: "crm", Version: "1"}, nil)
	type lookupIn struct {
		Email string `json:"email"`
	}
	mcp.AddTool(up, &mcp.Tool{Name: "find_contact", Description: "Find a contact",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in lookupIn) (*mcp.CallToolResult, map[string]any, error) {
			return nil, map[string]any{"email": in.Email, "name": "Ines"}, nil
		})
	mcp.AddTool(up, &mcp.Tool{Name: "delete_contact", Description: "Delete a contact",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, // a lying hint: the file overrides it
		func(_ context.Context, _ *mcp.CallToolRequest, in lookupIn) (*mcp.CallToolResult, map[string]any, error) {
			return nil, map[string]any{"deleted": in.Email}, nil
		})
	var sawToken atomic.Bool
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer crm-token-9" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		sawToken.Store(true)
		h.ServeHTTP(w, r)
	}))
	// Closed last: the gateway's session keeps a stream open to it.
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	set, err := httptool.Load([]byte(`mcp_servers:
  - name: crm
    url: "`+srv.URL+`"
    headers: {Authorization: "Bearer ${CRM_TOKEN}"}
    tools:
      delete_contact: {risk: high_write}
`), "tools.yaml", httptool.Options{Env: func(string) (string, bool) { return "crm-token-9", true }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	go set.Keep() // reconnects, as the core keeps the set in force
	reg, _ := tools.NewRegistry(set.Tools()...)
	del, _ := reg.Get("crm__delete_contact")
	if find, ok := reg.Get("crm__find_contact"); !ok || find.Risk != tools.RiskRead || del == nil || del.Risk != tools.RiskHighWrite ||
		!strings.Contains(del.Origin, "tools file") {
		t.Fatalf("tools: %v %v", find, del)
	}
	a := mcpApp(t, reg, nil, 200*time.Millisecond)
	key, _, _ := a.accounts.AddAgent(context.Background(), "bot", models.Actor{ID: "test"})
	cs, err := mcpClient(t, a.srv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	r, _ := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "crm__find_contact", Arguments: map[string]any{"email": "i@x.test"}})
	if r.IsError || !strings.Contains(textOf(r), `"name":"Ines"`) || !sawToken.Load() {
		t.Fatalf("find: %s", textOf(r))
	}
	r, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "crm__delete_contact", Arguments: map[string]any{"email": "i@x.test"}})
	if !strings.Contains(textOf(r), "Waiting for a person") {
		t.Fatalf("delete (high_write by the file's override) did not wait: %s", textOf(r))
	}
}

// What a client gets through Countersign is what the filesystem server
// sends straight: the tool list with titles, output schemas and
// annotations, a text file's content blocks and structured content, an
// image as an image block.
func TestMCPGatewayPassesTheServersAnswersOnUnchanged(t *testing.T) {
	script := filesystemServer(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("line one\nline two\n"), 0o600)
	// A 1×1 PNG.
	png := []byte{0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48, 0x44, 0x52, 0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0, 0x1f, 0x15, 0xc4,
		0x89, 0, 0, 0, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0, 1, 0, 0, 5, 0, 1, 0x0d, 0x0a, 0x2d, 0xb4, 0, 0, 0, 0, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82}
	os.WriteFile(filepath.Join(dir, "dot.png"), png, 0o600)
	ctx := context.Background()
	straight, err := mcp.NewClient(&mcp.Implementation{Name: "straight", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: exec.Command("node", script, dir)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer straight.Close()
	a := mcpApp(t, filesystemTools(t, script, dir), nil, 0)
	key, _, _ := a.accounts.AddAgent(ctx, "desk", models.Actor{ID: "test"})
	through, err := mcpClient(t, a.srv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	defer through.Close()
	asJSON := func(v any) string { b, _ := json.Marshal(v); return string(b) }

	offered := map[string]*mcp.Tool{}
	for tool, err := range through.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		offered[tool.Name] = tool
	}
	withOutput := 0
	for tool, err := range straight.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		got := offered["fs__"+strings.ReplaceAll(tool.Name, "-", "_")]
		if got == nil {
			t.Errorf("%s is not offered", tool.Name)
			continue
		}
		if got.Title != tool.Title || got.Description != tool.Description || asJSON(got.OutputSchema) != asJSON(tool.OutputSchema) ||
			asJSON(got.Annotations) != asJSON(tool.Annotations) || asJSON(got.InputSchema) != asJSON(tool.InputSchema) {
			t.Errorf("%s is listed as\n%s\nnot as the server lists it\n%s", tool.Name, asJSON(got), asJSON(tool))
		}
		if tool.OutputSchema != nil {
			withOutput++
		}
	}
	if withOutput == 0 {
		t.Fatal("the server lists no output schema: the comparison above proves nothing about them")
	}
	for _, c := range []struct{ tool, path string }{{"read_text_file", "notes.txt"}, {"read_media_file", "dot.png"}} {
		args := map[string]any{"path": filepath.Join(dir, c.path)}
		want, err := straight.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		got, err := through.CallTool(ctx, &mcp.CallToolParams{Name: "fs__" + c.tool, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		if asJSON(got.Content) != asJSON(want.Content) || asJSON(got.StructuredContent) != asJSON(want.StructuredContent) || got.IsError != want.IsError {
			t.Errorf("%s through Countersign:\n%s\n%s\nstraight:\n%s\n%s", c.tool, asJSON(got.Content), asJSON(got.StructuredContent),
				asJSON(want.Content), asJSON(want.StructuredContent))
		}
	}
}

// With prefix: false a client calls the filesystem server's tools through
// Countersign by the names it would use straight: the same list of names,
// a read answered, a write held for a person.
func TestMCPGatewayUnprefixedOffersTheServersOwnNames(t *testing.T) {
	script := filesystemServer(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("line one\n"), 0o600)
	ctx := context.Background()
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil).Connect(ctx,
		&mcp.CommandTransport{Command: exec.Command("node", script, dir)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	var want []string
	for tool, err := range direct.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, tool.Name)
	}
	set, err := httptool.Load([]byte("mcp_servers:\n  - name: fs\n    command: node\n    args: [\""+script+"\", \""+dir+"\"]\n    prefix: false\n"),
		"tools.yaml", httptool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	go set.Keep() // reconnects, as the core keeps the set in force
	reg, err := tools.NewRegistry(set.Tools()...)
	if err != nil {
		t.Fatal(err)
	}
	a := mcpApp(t, reg, nil, 200*time.Millisecond)
	key, _, _ := a.accounts.AddAgent(ctx, "bot", models.Actor{ID: "test"})
	cs, err := mcpClient(t, a.srv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var got []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, tool.Name)
	}
	slices.Sort(want)
	slices.Sort(got)
	if len(want) < 5 || !slices.Equal(got, want) {
		t.Fatalf("through Countersign %v, direct %v", got, want)
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": filepath.Join(dir, "notes.txt")}})
	if err != nil || r.IsError || !strings.Contains(textOf(r), "line one") {
		t.Fatalf("read: %v %+v", err, r)
	}
	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": filepath.Join(dir, "new.txt"), "content": "x"}})
	if err != nil || !strings.Contains(textOf(r), "Waiting for a person") {
		t.Fatalf("write was not held: %v %+v", err, r)
	}
	if _, err := os.Stat(filepath.Join(dir, "new.txt")); err == nil {
		t.Fatal("the held write ran")
	}
}
