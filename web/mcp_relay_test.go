//lint:file-ignore SA1019 an upstream and clients that use what MCP 2026-07-28 deprecates, as real ones still do

package web_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
)

// deskServer is an upstream (MCP 2025-11-25) whose "ask" tool, during the
// call, reports progress, logs, and asks its client for a sampled message,
// a form and its roots; "hold" waits until release is closed.
func deskServer(t *testing.T, release chan struct{}) string {
	return offersServer(t, deskMCP(func(ctx context.Context) {
		select {
		case <-release:
		case <-ctx.Done():
		}
	}), "desk-token")
}

// deskMCP is the desk server; its "hold" tool returns when hold does.
func deskMCP(hold func(context.Context)) *mcp.Server {
	up := mcp.NewServer(&mcp.Implementation{Name: "desk", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}})
	read := &mcp.ToolAnnotations{ReadOnlyHint: true}
	up.AddTool(&mcp.Tool{Name: "ask", Description: "Asks the client", InputSchema: map[string]any{"type": "object"}, Annotations: read},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ss := req.Session
			for i := 1; i <= 3; i++ { // a while apart, as a slow tool says them
				if tok := req.Params.GetProgressToken(); tok != nil {
					_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i)})
				}
				_ = ss.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "desk", Data: fmt.Sprintf("looking it up (%d) with key desk-token", i)})
				_ = ss.Log(ctx, &mcp.LoggingMessageParams{Level: "debug", Logger: "desk", Data: "too fine for the client"})
				time.Sleep(50 * time.Millisecond)
			}
			var said []string
			if m, err := ss.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 50,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "summarize order A1001"}}}}); err != nil {
				said = append(said, "sampling failed: "+err.Error())
			} else if tc, ok := m.Content.(*mcp.TextContent); ok {
				said = append(said, "sampled: "+tc.Text)
			}
			if e, err := ss.Elicit(ctx, &mcp.ElicitParams{Message: "Which name?", RequestedSchema: map[string]any{"type": "object",
				"properties": map[string]any{"name": map[string]any{"type": "string", "default": "Ann"}}}}); err != nil {
				said = append(said, "elicitation failed: "+err.Error())
			} else {
				said = append(said, fmt.Sprintf("elicited: %s %v", e.Action, e.Content["name"]))
			}
			if r, err := ss.ListRoots(ctx, nil); err != nil {
				said = append(said, "roots failed: "+err.Error())
			} else {
				for _, root := range r.Roots {
					said = append(said, "root: "+root.URI)
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(said, "\n")}}}, nil
		})
	up.AddTool(&mcp.Tool{Name: "hold", Description: "Waits", InputSchema: map[string]any{"type": "object"}, Annotations: read},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			hold(ctx)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil
		})
	// "late" answers at once, then, 300 ms later, logs and asks for
	// sampling about that call (a late asker); "report" says what the
	// late ask got.
	var late struct {
		sync.Mutex
		got string
	}
	up.AddTool(&mcp.Tool{Name: "late", Description: "Asks late", InputSchema: map[string]any{"type": "object"}, Annotations: read},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ss := req.Session
			go func() {
				time.Sleep(300 * time.Millisecond)
				ctx := context.Background()
				_ = ss.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "desk", Data: "late: the first agent's order A1001"})
				got := ""
				if m, err := ss.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 50,
					Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "the first agent's order A1001"}}}}); err != nil {
					got = "late sampling failed: " + err.Error()
				} else if tc, ok := m.Content.(*mcp.TextContent); ok {
					got = "late sampled: " + tc.Text
				}
				late.Lock()
				late.got = got
				late.Unlock()
			}()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	up.AddTool(&mcp.Tool{Name: "report", Description: "What the late ask got", InputSchema: map[string]any{"type": "object"}, Annotations: read},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			late.Lock()
			defer late.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: late.got}}}, nil
		})
	return up
}

// deskOverStdio serves the desk server on stdin and stdout when this test
// binary is started as one (TestMain): its "hold" takes two seconds.
func deskOverStdio() bool {
	if os.Getenv("COUNTERSIGN_TEST_DESK_STDIO") == "" {
		return false
	}
	up := deskMCP(func(ctx context.Context) {
		select {
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
		}
	})
	if err := up.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return true
}

// relayClient is an agent speaking MCP 2025-11-25 to Countersign, with or
// without a model, a person and roots of its own, recording what it is
// told during its calls.
type relayClient struct {
	cs       *mcp.ClientSession
	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	logs     []*mcp.LoggingMessageParams
	asked    []string // what it was asked to sample
}

func newRelayClient(t *testing.T, url, key, name string, capable bool) *relayClient {
	rc := &relayClient{}
	opts := &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			rc.mu.Lock()
			rc.progress = append(rc.progress, r.Params)
			rc.mu.Unlock()
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			rc.mu.Lock()
			rc.logs = append(rc.logs, r.Params)
			rc.mu.Unlock()
		},
		Capabilities: &mcp.ClientCapabilities{},
	}
	if capable {
		opts.Capabilities = nil
		opts.CreateMessageHandler = func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			in := r.Params.Messages[0].Content.(*mcp.TextContent).Text
			rc.mu.Lock()
			rc.asked = append(rc.asked, in)
			rc.mu.Unlock()
			return &mcp.CreateMessageResult{Role: "assistant", Model: "client-model", Content: &mcp.TextContent{Text: "the " + name + "'s model read: " + in}}, nil
		}
		opts.ElicitationHandler = func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Bea"}}, nil
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, opts)
	if capable {
		client.AddRoots(&mcp.Root{URI: "file:///srv/shop", Name: "shop"})
	}
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	rc.cs = cs
	return rc
}

// What an upstream says and asks during a call reaches the agent that made
// it, through Countersign: progress under the agent's own token, log
// messages at the level the agent set (the tools file's secrets hidden in
// them, as in results), its sampling, elicitation and roots
// requests answered by that agent, whatever other agents' calls are in
// flight. An agent that cannot answer them gets the upstream's answer to
// that.
func TestMCPGatewayRelaysWhatTheUpstreamSaysAndAsksDuringACall(t *testing.T) {
	release := make(chan struct{})
	set, err := httptool.Load([]byte(`mcp_servers:
  - name: desk
    url: "`+deskServer(t, release)+`"
    headers: {Authorization: "Bearer ${DESK_TOKEN}"}
    prefix: false
`), "tools.yaml", httptool.Options{Env: func(string) (string, bool) { return "desk-token", true }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	go set.Keep() // reconnects, as the core keeps the set in force
	reg, _ := tools.NewRegistry(set.Tools()...)
	a := mcpApp(t, reg, nil, 200*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key, _, _ := a.accounts.AddAgent(ctx, "bot", models.Actor{ID: "test"})
	other, _, _ := a.accounts.AddAgent(ctx, "other", models.Actor{ID: "test"})

	capable := newRelayClient(t, a.srv.URL, key, "agent", true)
	if err := capable.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	params := &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}}
	params.SetProgressToken("agent-token-7")
	r, err := capable.cs.CallTool(ctx, params)
	if err != nil || r.IsError {
		t.Fatalf("ask: %v %+v", err, r)
	}
	got := textOf(r)
	for _, want := range []string{"sampled: the agent's model read: summarize order A1001", "elicited: accept Bea", "root: file:///srv/shop"} {
		if !strings.Contains(got, want) {
			t.Errorf("the upstream did not get %q from the agent: %s", want, got)
		}
	}
	capable.mu.Lock()
	if len(capable.progress) != 3 || capable.progress[2].ProgressToken != "agent-token-7" || capable.progress[2].Message != "step 3" || capable.progress[2].Total != 3 {
		t.Errorf("progress: %d %+v", len(capable.progress), capable.progress)
	}
	if len(capable.logs) != 3 || !strings.HasPrefix(fmt.Sprint(capable.logs[2].Data), "looking it up (3)") || capable.logs[0].Logger != "desk" ||
		strings.Contains(fmt.Sprint(capable.logs[2].Data), "desk-token") {
		t.Errorf("log messages (info and above): %d %+v", len(capable.logs), capable.logs)
	}
	capable.mu.Unlock()

	// An agent that declared no sampling, elicitation or roots: the
	// upstream is told so, and the agent gets what the upstream made of it.
	plain := newRelayClient(t, a.srv.URL, key, "plain", false)
	r, err = plain.cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}})
	if err != nil || r.IsError {
		t.Fatalf("ask, plain: %v %+v", err, r)
	}
	got = textOf(r)
	for _, want := range []string{"sampling failed", "does not support sampling", "elicitation failed", "roots failed"} {
		if !strings.Contains(got, want) {
			t.Errorf("plain agent: want %q in %s", want, got)
		}
	}
	plain.mu.Lock()
	if len(plain.progress) != 0 || len(plain.logs) != 0 {
		t.Errorf("an agent that asked for no progress and set no level was sent %+v %+v", plain.progress, plain.logs)
	}
	plain.mu.Unlock()

	// Another agent's call in flight on the same upstream: what the
	// upstream asks on a call's stream is that call's, so each agent is
	// asked only about its own call.
	held := newRelayClient(t, a.srv.URL, other, "other", true)
	if err := held.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := held.cs.CallTool(ctx, &mcp.CallToolParams{Name: "hold", Arguments: map[string]any{}})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // the hold reaches the upstream
	r, err = capable.cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"again": true}})
	close(release)
	if err != nil || r.IsError {
		t.Fatalf("ask beside a held call: %v %+v", err, r)
	}
	if got = textOf(r); !strings.Contains(got, "sampled: the agent's model read") || !strings.Contains(got, "root: file:///srv/shop") {
		t.Errorf("beside another agent's call: %s", got)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	held.mu.Lock()
	if len(held.logs) != 0 {
		t.Errorf("the other agent was sent the first agent's log messages: %+v", held.logs)
	}
	held.mu.Unlock()
}

// Over stdio nothing says which call an upstream's request or log message
// belongs to, and "the one call in flight" is a guess a late asker defeats:
// a stdio server is offered no sampling, elicitation or roots; its progress
// (under the token Countersign sent with the call) reaches the call's
// agent; what it logs or asks reaches no agent. A server that answered
// agent A and asks about A's call while only agent B's is in flight gets
// an error, and B hears nothing of it.
func TestMCPGatewayPassesNothingUnattributedOverStdio(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	set, err := httptool.Load([]byte(`mcp_servers:
  - name: desk
    command: "`+self+`"
    args: ["-test.run=^$"]
    env: {COUNTERSIGN_TEST_DESK_STDIO: "1"}
    prefix: false
`), "tools.yaml", httptool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	go set.Keep() // reconnects, as the core keeps the set in force
	reg, _ := tools.NewRegistry(set.Tools()...)
	if _, ok := reg.Get("ask"); !ok {
		t.Fatalf("the stdio desk server's tools were not listed: %v", set.Tools())
	}
	a := mcpApp(t, reg, nil, 200*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key, _, _ := a.accounts.AddAgent(ctx, "bot", models.Actor{ID: "test"})
	other, _, _ := a.accounts.AddAgent(ctx, "other", models.Actor{ID: "test"})

	alone := newRelayClient(t, a.srv.URL, key, "agent", true)
	if err := alone.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	params := &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}}
	params.SetProgressToken(7)
	r, err := alone.cs.CallTool(ctx, params)
	if err != nil || r.IsError {
		t.Fatalf("ask: %v %+v", err, r)
	}
	if got := textOf(r); !strings.Contains(got, "sampling failed") || !strings.Contains(got, "elicitation failed") || !strings.Contains(got, "roots failed") ||
		strings.Contains(got, "model read") || strings.Contains(got, "Bea") || strings.Contains(got, "file:///srv/shop") {
		t.Errorf("even alone, a stdio server's asks are not the agent's: %s", got)
	}
	alone.mu.Lock()
	if len(alone.progress) != 3 || alone.progress[0].ProgressToken != float64(7) || len(alone.logs) != 0 || len(alone.asked) != 0 {
		t.Errorf("alone over stdio: progress %+v (want its 3), logs %+v and asks %v (want none)", alone.progress, alone.logs, alone.asked)
	}
	alone.mu.Unlock()

	// The late asker: A's call is answered; B's is in flight when the
	// server logs and asks about A's.
	if r, err := alone.cs.CallTool(ctx, &mcp.CallToolParams{Name: "late", Arguments: map[string]any{}}); err != nil || textOf(r) != "done" {
		t.Fatalf("late: %v %+v", err, r)
	}
	held := newRelayClient(t, a.srv.URL, other, "other", true)
	if err := held.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	if r, err := held.cs.CallTool(ctx, &mcp.CallToolParams{Name: "hold", Arguments: map[string]any{}}); err != nil || textOf(r) != "released" {
		t.Fatalf("hold: %v %+v", err, r)
	}
	r, err = alone.cs.CallTool(ctx, &mcp.CallToolParams{Name: "report", Arguments: map[string]any{}})
	if err != nil || !strings.Contains(textOf(r), "late sampling failed") || !strings.Contains(textOf(r), "no client to ask for sampling") {
		t.Errorf("the late ask was not refused to the server: %v %s", err, textOf(r))
	}
	for _, c := range []*relayClient{held, alone} {
		c.mu.Lock()
		for _, l := range c.logs {
			if strings.Contains(fmt.Sprint(l.Data), "late") {
				t.Errorf("an agent was sent the late log line: %+v", l)
			}
		}
		for _, in := range c.asked {
			if strings.Contains(in, "first agent") {
				t.Errorf("an agent was asked to sample the late request: %q", in)
			}
		}
		c.mu.Unlock()
	}
}
