package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/web"
	"github.com/countersign/countersign/web/doorkit"
	"github.com/countersign/countersign/web/mcpgate"
)

// bearer adds an agent key to every request of an MCP client.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpClient connects the Go SDK's client as it comes (it speaks the
// stateless 2026-07-28 revision, where it can).
func mcpClient(t *testing.T, url, key string) (*mcp.ClientSession, error) {
	return mcpClientOf(t, url, key, "")
}

// mcpSessionClient connects with a 2025 revision: with an MCP session.
func mcpSessionClient(t *testing.T, url, key string) (*mcp.ClientSession, error) {
	return mcpClientOf(t, url, key, "2025-11-25")
}

func mcpClientOf(t *testing.T, url, key, version string) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil)
	return c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key}}, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: version})
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

// An MCP client (the official Go SDK) sees the tools in force and every
// call goes through the gate: reads run, a refund waits for a person and,
// asked again after approval, returns its outcome without a second request.
func TestMCPClientCallsGoThroughTheGate(t *testing.T) {
	// The gate API's tools, with a short hold so the test need not wait 50 s.
	set, refunds := gateAPITools(t)
	a := mcpApp(t, set, nil, 300*time.Millisecond)
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "desktop", models.Actor{ID: "test"})
	a.accounts.AddStaff(ctx, "ann@x.test", "Ann", models.Approver, password, models.Actor{ID: "test"})
	staffTok, _ := a.accounts.CreateAPIToken(ctx, "ann@x.test", models.Actor{})

	if _, err := mcpClient(t, a.srv.URL, "csa_wrong"); err == nil {
		t.Fatal("a wrong agent key connected")
	}
	cs, err := mcpClient(t, a.srv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "lookup_order,refund_order" {
		t.Fatalf("tools %v (decision-only tools are not offered over MCP)", names)
	}

	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup_order", Arguments: map[string]any{"order_id": "A7"}})
	if err != nil || r.IsError || !strings.Contains(textOf(r), `"order_id":"A7"`) {
		t.Fatalf("read: %v %+v", err, r)
	}
	r, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund_order", Arguments: map[string]any{"order_id": "A7", "amount": -1}})
	if !r.IsError || !strings.Contains(textOf(r), "amount") {
		t.Fatalf("invalid args: %+v", textOf(r))
	}

	args := map[string]any{"order_id": "A7", "amount": 900}
	r, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund_order", Arguments: args})
	if r.IsError || !strings.Contains(textOf(r), "Waiting for a person") || refunds.Load() != 0 {
		t.Fatalf("refund before a decision: %s (backend saw %d)", textOf(r), refunds.Load())
	}
	pending, _ := a.store.PendingActions(ctx, models.ActionFilter{})
	if len(pending) != 1 || pending[0].Agent != "agent:desktop" {
		t.Fatalf("queue: %+v", pending)
	}
	// Asked again while it waits: the same call, no second one.
	cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund_order", Arguments: args})
	if again, _ := a.store.PendingActions(ctx, models.ActionFilter{}); len(again) != 1 {
		t.Fatalf("asking again made %d pending calls", len(again))
	}
	if r := a.do("POST", "/api/v1/actions/"+pending[0].ID+"/approve", staffTok, `{}`); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Raw)
	}
	r, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund_order", Arguments: args})
	var out map[string]any
	_ = json.Unmarshal([]byte(textOf(r)), &out)
	if r.IsError || out["refund_id"] != "rf_1" || refunds.Load() != 1 {
		t.Fatalf("after approval: %s (backend saw %d)", textOf(r), refunds.Load())
	}

	// Rejected: the client reads the reason.
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund_order", Arguments: map[string]any{"order_id": "A8", "amount": 50}}); err != nil {
		t.Fatal(err)
	}
	waitingCalls, _ := a.store.PendingActions(ctx, models.ActionFilter{})
	if len(waitingCalls) != 1 {
		t.Fatalf("pending: %d", len(waitingCalls))
	}
	a.do("POST", "/api/v1/actions/"+waitingCalls[0].ID+"/reject", staffTok, `{"reason":"not eligible"}`)
	r, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund_order", Arguments: map[string]any{"order_id": "A8", "amount": 50}})
	if !r.IsError || !strings.Contains(textOf(r), "not eligible") {
		t.Fatalf("rejected: %s", textOf(r))
	}
	if refunds.Load() != 1 {
		t.Fatalf("the backend was sent %d refunds", refunds.Load())
	}

	// A revoked key is refused at once.
	a.accounts.RevokeAgent(ctx, "desktop", models.Actor{ID: "test"})
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup_order", Arguments: map[string]any{"order_id": "A7"}}); err == nil {
		t.Fatal("a revoked key still calls tools")
	}
}

// A client that gives a progress token hears that its call waits for a
// person while it is held.
func TestMCPHeldCallSendsProgress(t *testing.T) {
	set, _ := gateAPITools(t)
	a := mcpApp(t, set, nil, 1200*time.Millisecond)
	key, _, _ := a.accounts.AddAgent(context.Background(), "desktop", models.Actor{ID: "test"})
	notes := make(chan string, 20)
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case notes <- req.Params.Message:
			default:
			}
		}})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: a.srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "refund_order", Arguments: map[string]any{"order_id": "A1", "amount": 900}}
	params.SetProgressToken("refund-1")
	r, err := cs.CallTool(context.Background(), params)
	if err != nil || !strings.Contains(textOf(r), "Waiting for a person") {
		t.Fatalf("held call: %v %s", err, textOf(r))
	}
	select {
	case msg := <-notes:
		if !strings.Contains(msg, "waiting for a person") {
			t.Fatalf("progress said %q", msg)
		}
	default:
		t.Fatal("no progress notification while the call was held")
	}
}

// A client of the 2026-07-28 revision (no initialize, no session: it asks
// server/discover, then each request stands alone) is served over /mcp
// beside the 2025 ones: it lists, reads, waits and gets the outcome; a
// conversation named in _meta ties its calls to one run.
func TestMCPStatelessRevisionOverHTTP(t *testing.T) {
	set, refunds := gateAPITools(t)
	a := mcpApp(t, set, nil, 300*time.Millisecond)
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "modern", models.Actor{ID: "test"})
	a.accounts.AddStaff(ctx, "ann@x.test", "Ann", models.Approver, password, models.Actor{ID: "test"})
	staffTok, _ := a.accounts.CreateAPIToken(ctx, "ann@x.test", models.Actor{})

	c := mcp.NewClient(&mcp.Implementation{Name: "modern-agent", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: a.srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key}}, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: mcpgate.ModernMCP})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != mcpgate.ModernMCP {
		t.Fatalf("negotiated %q, not the stateless revision", v)
	}
	if cs.ID() != "" {
		t.Fatalf("a stateless client was given session %q", cs.ID())
	}
	list, err := cs.ListTools(ctx, nil)
	if err != nil || len(list.Tools) != 2 {
		t.Fatalf("list: %v %+v", err, list)
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup_order", Arguments: map[string]any{"order_id": "A7"}})
	if err != nil || r.IsError || !strings.Contains(textOf(r), `"order_id":"A7"`) {
		t.Fatalf("read: %v %+v", err, r)
	}
	params := &mcp.CallToolParams{Name: "refund_order", Arguments: map[string]any{"order_id": "A7", "amount": 900},
		Meta: mcp.Meta{"countersign/session": "ticket-42"}}
	r, err = cs.CallTool(ctx, params)
	if err != nil || !strings.Contains(textOf(r), "Waiting for a person") {
		t.Fatalf("write: %v %s", err, textOf(r))
	}
	pending, _ := a.store.PendingActions(ctx, models.ActionFilter{})
	if len(pending) != 1 {
		t.Fatalf("pending: %+v", pending)
	}
	call, _ := a.store.ToolCall(ctx, pending[0].ID)
	run, _ := a.store.Run(ctx, call.RunID)
	if run.Session != "mcp:ticket-42" {
		t.Fatalf("the call's run is session %q, not the conversation the request named", run.Session)
	}
	if r := a.do("POST", "/api/v1/actions/"+pending[0].ID+"/approve", staffTok, `{}`); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Raw)
	}
	r, _ = cs.CallTool(ctx, params)
	if r.IsError || !strings.Contains(textOf(r), "rf_1") || refunds.Load() != 1 {
		t.Fatalf("after approval: %s (backend saw %d)", textOf(r), refunds.Load())
	}
}

// /mcp refuses what a web page of another origin sends (DNS rebinding,
// cross-site use), on every method; a request from its own origin, or with
// no Origin (MCP clients that are not browsers), is served.
func TestMCPRefusesOtherOrigins(t *testing.T) {
	set, _ := gateAPITools(t)
	pol, err := policy.LoadPolicy(policy.DefaultPolicyYAML, "test", set)
	if err != nil {
		t.Fatal(err)
	}
	a := startApp(t, appConfig{Store: openStore(t), Tools: set, Policy: pol, Log: discardLog(),
		Web: web.Config{MCPWait: 300 * time.Millisecond, MCPOrigins: []string{"http://localhost:6274"}}}, false)
	key, _, _ := a.accounts.AddAgent(context.Background(), "desktop", models.Actor{ID: "test"})
	post := func(headers map[string]string) int {
		req, _ := http.NewRequest("POST", a.srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for name, h := range map[string]map[string]string{
		"another origin":     {"Origin": "http://evil.example"},
		"a null origin":      {"Origin": "null"},
		"a cross-site fetch": {"Sec-Fetch-Site": "cross-site"},
	} {
		if code := post(h); code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, code)
		}
	}
	for name, h := range map[string]map[string]string{
		"no origin":      {},
		"its origin":     {"Origin": a.srv.URL},
		"a named origin": {"Origin": "http://localhost:6274", "Sec-Fetch-Site": "cross-site"},
	} {
		if code := post(h); code != http.StatusOK {
			t.Errorf("%s: %d, want 200", name, code)
		}
	}
}

// A call's arguments may be as large as MCP servers commonly take (1 MiB),
// through /mcp and the gate API alike; past that the answer says the limit.
func TestLargeArgumentsPassThrough(t *testing.T) {
	set, _ := gateAPITools(t)
	a := mcpApp(t, set, nil, 300*time.Millisecond)
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "big", models.Actor{ID: "test"})
	cs, err := mcpClient(t, a.srv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	long := strings.Repeat("x", 200<<10)
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup_order", Arguments: map[string]any{"order_id": long}})
	if err != nil || r.IsError || !strings.Contains(textOf(r), long) {
		t.Fatalf("200 KiB of arguments over MCP: %v %.200s", err, textOf(r))
	}
	body := `{"tool":"escalate_to_human","args":{"why":"` + strings.Repeat("y", 600<<10) + `"},"session":"s1"}`
	if res := a.do("POST", "/api/v1/calls", key, body); res.Status != 201 || callOf(t, res)["status"] != "allowed" {
		t.Fatalf("600 KiB of arguments over the gate API: %d %.300s", res.Status, res.Raw)
	}
	body = `{"tool":"escalate_to_human","args":{"why":"` + strings.Repeat("y", 3<<20) + `"},"session":"s1"}`
	if res := a.do("POST", "/api/v1/calls", key, body); res.Status != 413 || !strings.Contains(res.Raw, "at most 1048576 bytes") {
		t.Fatalf("3 MiB: %d %.300s", res.Status, res.Raw)
	}
}

// A call over the body limit of /mcp is answered as a tool error naming
// the limit, not an HTTP error the SDKs throw; the session goes on, and a
// call over the arguments' limit but under the body's is refused the same
// way by the gate. Both session and stateless clients.
func TestMCPOversizedCallsAreToolErrors(t *testing.T) {
	set, _ := gateAPITools(t)
	a := mcpApp(t, set, nil, 300*time.Millisecond)
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "desktop", models.Actor{ID: "test"})
	for _, version := range []string{"2025-11-25", ""} {
		cs, err := mcpClientOf(t, a.srv.URL, key, version)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			size int
			want string
		}{
			{3 << 20, fmt.Sprintf("over Countersign's limit of %d bytes for one MCP message", doorkit.BodyLimit())},
			{(1 << 20) + 100, "over the limit of 1048576 bytes"},
		} {
			r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup_order", Arguments: map[string]any{"order_id": strings.Repeat("A", tc.size)}})
			if err != nil || !r.IsError || !strings.Contains(textOf(r), tc.want) {
				t.Fatalf("%s, %d bytes: %v %+v", version, tc.size, err, r)
			}
		}
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup_order", Arguments: map[string]any{"order_id": "A1"}})
		if err != nil || r.IsError {
			t.Fatalf("%s: after the big calls: %v %+v", version, err, r)
		}
		cs.Close()
	}
}

// A message over the body limit whose id comes after its params (as both
// TypeScript SDKs write it) is answered with that id, so the client reads
// the tool error instead of throwing on an answer to no request.
func TestMCPOversizedCallAnswersTheIDWrittenLast(t *testing.T) {
	set, _ := gateAPITools(t)
	a := mcpApp(t, set, nil, 300*time.Millisecond)
	key, _, _ := a.accounts.AddAgent(context.Background(), "ts", models.Actor{ID: "test"})
	for _, id := range []string{`"req-77"`, `77`} {
		msg := `{"method":"tools/call","params":{"name":"lookup_order","arguments":{"order_id":"` + strings.Repeat("A", 3<<20) + `"}},"jsonrpc":"2.0","id":` + id + `}`
		r := a.doWith("POST", "/mcp", key, msg, "Mcp-Protocol-Version", "2026-07-28", "Accept", "application/json, text/event-stream")
		var out map[string]any
		if err := json.Unmarshal([]byte(r.Raw), &out); err != nil {
			t.Fatalf("%d %.300s", r.Status, r.Raw)
		}
		if got, _ := json.Marshal(out["id"]); string(got) != id || !strings.Contains(r.Raw, `"isError":true`) || !strings.Contains(r.Raw, "over Countersign's limit") {
			t.Fatalf("id %s written last: %d %.300s", id, r.Status, r.Raw)
		}
	}
}
