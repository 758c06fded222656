package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/models/storage/storetest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/models"
)

type withBearer struct{ key string }

func (b withBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

type contactIn struct {
	Email string `json:"email"`
}

// crmServer is an MCP server over streamable HTTP on addr ("127.0.0.1:0"
// for any port), serving up; stop ends it and every connection to it.
func crmServer(t *testing.T, up *mcp.Server, addr string) (url string, stop func()) {
	t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port of a server just stopped may take a moment
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil)}
	go srv.Serve(ln)
	stop = func() { srv.Close() }
	t.Cleanup(stop)
	return "http://" + ln.Addr().String() + "/", stop
}

func textOf(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// An MCP server behind `serve` that changes its tools, goes away and comes
// back: the tools in force follow its list (audited), an MCP client connected
// to Countersign is told the list changed and can call the new tool, calls
// while it is away answer at once that it is not answering (the rest keep
// working), and it is reconnected when it is back.
func TestServeFollowsAnMCPServerThatChangesAndComesBack(t *testing.T) {
	up := mcp.NewServer(&mcp.Implementation{Name: "crm", Version: "1"}, nil)
	mcp.AddTool(up, &mcp.Tool{Name: "find_contact", Description: "Find a contact", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in contactIn) (*mcp.CallToolResult, map[string]any, error) {
			return nil, map[string]any{"email": in.Email, "name": "Ines"}, nil
		})
	url, stop := crmServer(t, up, "127.0.0.1:0")
	dir := t.TempDir()
	toolsPath := filepath.Join(dir, "tools.yaml")
	os.WriteFile(toolsPath, []byte(`tools:
  - name: note
    risk: read
    description: a decision-only tool of the file itself
mcp_servers:
  - name: crm
    url: "`+url+`"
`), 0o600)
	ctx := context.Background()
	app := serveApp(t, config{Addr: "127.0.0.1:0", DB: storetest.DSN(t), Tools: toolsPath, MCPHold: time.Second}, io.Discard)
	key, _, err := app.accounts.AddAgent(ctx, "desk", models.Actor{ID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	listChanged := make(chan struct{}, 10)
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { listChanged <- struct{}{} }})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + app.Addr() + "/mcp",
		HTTPClient: &http.Client{Transport: withBearer{key}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(name string) *mcp.CallToolResult {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		r, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"email": "i@x.test"}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r
	}
	if r := call("crm__find_contact"); r.IsError || !strings.Contains(textOf(r), "Ines") {
		t.Fatalf("find before: %s", textOf(r))
	}

	// The upstream adds a tool and says so.
	mcp.AddTool(up, &mcp.Tool{Name: "tag_contact", Description: "Tag a contact",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false)}},
		func(_ context.Context, _ *mcp.CallToolRequest, in contactIn) (*mcp.CallToolResult, map[string]any, error) {
			return nil, map[string]any{"tagged": in.Email}, nil
		})
	select {
	case <-listChanged:
	case <-time.After(20 * time.Second):
		t.Fatal("the client connected to Countersign was not told that the tools changed")
	}
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "crm__tag_contact") {
		t.Fatalf("the new tool is not offered: %v", names)
	}
	// A tool that is new since the server's first listing is held at
	// high_write until an admin accepts it: it waits for a person.
	if r := call("crm__tag_contact"); !strings.Contains(textOf(r), "Waiting for a person") { // an error result: the tool has an output schema
		t.Fatalf("a new tool nobody accepted: %s", textOf(r))
	}
	unaccepted := app.gate.Unaccepted()
	if len(unaccepted) != 1 || unaccepted[0].Tool.Name != "crm__tag_contact" || unaccepted[0].Pinned != nil {
		t.Fatalf("unaccepted: %+v", unaccepted)
	}
	if err := app.gate.AcceptTool(ctx, "crm__tag_contact", unaccepted[0].Tool.ListingHash(), models.Actor{ID: "stf_ada", Name: "Ada"}); err != nil {
		t.Fatal(err)
	}
	// Accepted: its own risk (low_write, allowed by the default policy).
	// The same arguments again make a new call (the waiting one was made
	// against the held definition), with other arguments too.
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	r, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "crm__tag_contact", Arguments: map[string]any{"email": "j@x.test"}})
	cancel()
	if err != nil || r.IsError || !strings.Contains(textOf(r), "tagged") {
		t.Fatalf("the accepted tool: %v %s", err, textOf(r))
	}
	if ev, _ := app.store.AuditEventsFor(ctx, "crm__tag_contact"); len(ev) != 1 || ev[0].Kind != models.EventToolAccepted || !strings.Contains(ev[0].Actor, "Ada") ||
		!strings.Contains(ev[0].Payload, unaccepted[0].Tool.ListingHash()) {
		t.Fatalf("the acceptance is not in the audit log: %+v", ev)
	}
	version := app.gate.ToolsVersion()
	events, err := app.store.AuditEventsFor(ctx, version)
	if err != nil || len(events) != 1 || events[0].Kind != models.EventToolsReloaded ||
		!strings.Contains(events[0].Payload, "an MCP server changed its tools") || !strings.Contains(events[0].Payload, "crm__tag_contact") {
		t.Fatalf("the change is not in the audit log: %v %v", events, err)
	}

	// The upstream goes away: its tools answer at once, the others work.
	stop()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if st := app.upstreams(); len(st) == 1 && !st[0].Connected {
			break
		}
		call("crm__find_contact") // a call may be the first to find it gone
		time.Sleep(50 * time.Millisecond)
	}
	if st := app.upstreams(); len(st) != 1 || st[0].Connected || st[0].Error == "" {
		t.Fatalf("the server that went away is not shown as down: %+v", st)
	}
	start := time.Now()
	r = call("crm__find_contact")
	if !r.IsError || !strings.Contains(textOf(r), "not answering") || time.Since(start) > 5*time.Second {
		t.Fatalf("a call to the server that is away: %q after %s", textOf(r), time.Since(start))
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("Countersign stopped serving: %v", err)
	}

	// It comes back on the same address: reconnected, its tools work again.
	crmServer(t, up, strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/"))
	deadline = time.Now().Add(30 * time.Second)
	for {
		r := call("crm__find_contact")
		if !r.IsError {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not reconnected: %s (%+v)", textOf(r), app.upstreams())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st := app.upstreams(); !st[0].Connected || st[0].Tools != 2 {
		t.Fatalf("after coming back: %+v", st)
	}
}
