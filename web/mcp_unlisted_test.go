package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools/httptool"
)

// pokeServer is an MCP server with one listed tool, look, that also takes
// calls to poke, which it does not list: a poke says the tool list changed
// (it offers look again as it is, so the list stays the same). pokes
// counts the pokes it ran, with their n.
func pokeServer(t *testing.T, pokes *atomic.Int64) string {
	up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	look := &mcp.Tool{Name: "look", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}
	lookRuns := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "looked"}}}, nil
	}
	up.AddTool(look, lookRuns)
	up.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			call, ok := req.(*mcp.CallToolRequest)
			if method != "tools/call" || !ok || call.Params.Name != "poke" {
				return next(ctx, method, req)
			}
			var args struct{ N int64 }
			_ = json.Unmarshal(call.Params.Arguments, &args)
			pokes.Add(args.N)
			up.AddTool(look, lookRuns) // the same list, said to have changed
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "poked"}}}, nil
		}
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv.URL
}

// A call to a tool an MCP server does not list reaches it only when its
// entry says so (unlisted_tools), gated at the risk the entry gives: run
// at once at low_write, held for a person at high_write, refused as an
// unknown tool without the key, even by a server with prefix: false that
// takes the others' unlisted names. A name the server lists in another
// case is not an unlisted tool. The server's saying that its tool list
// changed reaches the client, though the list is the same. /tools says
// which servers forward such calls, and at what risk, and the gate API
// reaches them by name as well.
func TestMCPGatewayForwardsCallsToToolsAServerDoesNotList(t *testing.T) {
	var own, held, shut atomic.Int64
	a := upstreamsApp(t, `mcp_servers:
  - name: own
    url: "`+pokeServer(t, &own)+`"
    prefix: false
    unlisted_tools: low_write
  - name: held
    url: "`+pokeServer(t, &held)+`"
    unlisted_tools: high_write
  - name: shut
    url: "`+pokeServer(t, &shut)+`"
`, httptool.Options{}, 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key, _, _ := a.accounts.AddAgent(ctx, "bot", models.Actor{ID: "test"})
	told := make(chan struct{}, 8)
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { told <- struct{}{} },
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: a.srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if slices.Sort(names); strings.Join(names, " ") != "held__look look shut__look" {
		t.Fatalf("listed %v: an unlisted tool is never offered", names)
	}

	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "poke", Arguments: map[string]any{"n": 1}})
	if err != nil || r.IsError || textOf(r) != "poked" || own.Load() != 1 {
		t.Fatalf("an unlisted tool at low_write: %v %+v, the server ran %d", err, r, own.Load())
	}
	select {
	case <-told:
	case <-time.After(10 * time.Second):
		t.Fatal("the server said its tool list changed; the client was not told")
	}
	calls, _ := a.store.AuditCalls(ctx, models.AuditQuery{Tool: "poke", Limit: 10})
	if len(calls) != 1 || calls[0].Risk != "low_write" || calls[0].Status != models.CallSucceeded {
		t.Fatalf("the call is recorded as %+v", calls)
	}

	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "held__poke", Arguments: map[string]any{"n": 1}})
	if err != nil || !strings.Contains(textOf(r), "Waiting for a person") || held.Load() != 0 {
		t.Fatalf("an unlisted tool at high_write was not held: %v %+v, the server ran %d", err, r, held.Load())
	}

	for _, name := range []string{"shut__poke", "LOOK", "held__LOOK", "held__"} {
		r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"n": 1}})
		if err != nil || !r.IsError || !strings.Contains(textOf(r), "unknown tool") {
			t.Fatalf("%s: %v %+v", name, err, r)
		}
	}
	// The gate API reaches it by name too.
	if r := a.do("POST", "/api/v1/calls", key, `{"tool":"poke","args":{"n":10},"session":"api-1"}`); r.Status != http.StatusCreated ||
		!strings.Contains(r.Raw, `"status":"succeeded"`) || !strings.Contains(r.Raw, "poked") || own.Load() != 11 {
		t.Fatalf("through the gate API: %d %s, the server ran %d", r.Status, r.Raw, own.Load())
	}
	own.Add(-10)
	if own.Load() != 1 || held.Load() != 0 || shut.Load() != 0 {
		t.Fatalf("the servers ran %d, %d, %d pokes", own.Load(), held.Load(), shut.Load())
	}

	a.staff(models.Admin, "ada@x.test", "Ada")
	ada := a.signIn("ada@x.test")
	rows, _ := a.store.PendingActions(ctx, models.ActionFilter{})
	if len(rows) != 1 || rows[0].Tool != "held__poke" || rows[0].Risk != "high_write" {
		t.Fatalf("waiting: %+v", rows)
	}
	if _, page := ada.get("/actions/" + rows[0].ID); !strings.Contains(page, "which does not list this tool") {
		t.Fatalf("the held call's page does not say its server does not list the tool:\n%s", page)
	}
	_, page := ada.get("/tools")
	for _, want := range []string{"Calls to tools it does not list (any name no other tool has) are forwarded to it, decided as low_write",
		"Calls to tools it does not list (named held__…) are forwarded to it, decided as high_write"} {
		if !strings.Contains(page, want) {
			t.Fatalf("/tools does not say %q:\n%s", want, page)
		}
	}
	if strings.Count(page, `data-testid="upstream-unlisted"`) != 2 {
		t.Fatal("/tools says a server without unlisted_tools forwards calls to tools it does not list")
	}
}
