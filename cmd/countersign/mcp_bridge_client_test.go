//lint:file-ignore SA1019 sampling, elicitation and roots are deprecated in MCP 2026-07-28 but in use: the bridge passes them on
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/models/storage/storetest"
)

// askingUpstream is an MCP server over HTTP whose read tool "ask", during
// the call, asks its client for a sampled message, a form and its roots,
// and answers with what it was told.
func askingUpstream(t *testing.T) string {
	up := mcp.NewServer(&mcp.Implementation{Name: "asking", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}})
	up.AddTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ss := req.Session
			_ = ss.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "asking", Data: "looking it up"})
			var said []string
			if m, err := ss.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 50,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "summarize A1001"}}}}); err != nil {
				said = append(said, "sampling failed: "+err.Error())
			} else if tc, ok := m.Content.(*mcp.TextContent); ok {
				said = append(said, "sampled: "+tc.Text)
			}
			if e, err := ss.Elicit(ctx, &mcp.ElicitParams{Message: "Which name?", RequestedSchema: map[string]any{"type": "object",
				"properties": map[string]any{"name": map[string]any{"type": "string"}}}}); err != nil {
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
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// What a server says and asks its client during a call reaches the client
// of the stdio bridge, and its answer the server: a log message at the
// level the client set, a sampled message, a form, the client's roots; a
// client that cannot answer (no sampling, no elicitation declared) is not
// asked.
func TestTheBridgePassesTheServersQuestions(t *testing.T) {
	toolsFile := filepath.Join(t.TempDir(), "tools.yaml")
	os.WriteFile(toolsFile, []byte("mcp_servers:\n  - name: asking\n    url: \""+askingUpstream(t)+"\"\n    prefix: false\n"), 0o600)
	db := storetest.DSN(t)
	app := serveAppLogging(t, config{Addr: "127.0.0.1:0", DB: db, Tools: toolsFile}, io.Discard, io.Discard)
	key, _ := runCmd(t, "agent", "add", "--name", "desk", "--db", db)
	for _, capable := range []bool{true, false} {
		toBridge, clientOut := io.Pipe()
		clientIn, fromBridge := io.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			_ = run(ctx, []string{"mcp", "--url", "http://" + app.Addr(), "--agent-key", strings.TrimSpace(key)}, toBridge, fromBridge, io.Discard)
			fromBridge.Close()
		}()
		logged := make(chan string, 8)
		opts := &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{},
			LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) { logged <- fmt.Sprint(r.Params.Data) }}
		if capable {
			opts.Capabilities = nil
			opts.CreateMessageHandler = func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
				in := r.Params.Messages[0].Content.(*mcp.TextContent).Text
				return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "the model read: " + in}}, nil
			}
			opts.ElicitationHandler = func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Bea"}}, nil
			}
		}
		client := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, opts)
		if capable {
			client.AddRoots(&mcp.Root{URI: "file:///srv/shop", Name: "shop"})
		}
		cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: clientIn, Writer: clientOut}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatalf("logging/setLevel through the bridge: %v", err)
		}
		cctx, stop := context.WithTimeout(ctx, 60*time.Second)
		res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}})
		stop()
		if err != nil || res.IsError || len(res.Content) == 0 {
			t.Fatalf("capable %v: %+v %v", capable, res, err)
		}
		said := res.Content[0].(*mcp.TextContent).Text
		want := []string{"sampled: the model read: summarize A1001", "elicited: accept Bea", "root: file:///srv/shop"}
		if !capable {
			want = []string{"sampling failed", "elicitation failed"}
		}
		for _, w := range want {
			if !strings.Contains(said, w) {
				t.Errorf("capable %v: the server was told %q; want %q", capable, said, w)
			}
		}
		// The server's log message during the call, at the level set.
		select {
		case msg := <-logged:
			if msg != "looking it up" {
				t.Errorf("capable %v: logged %q", capable, msg)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("capable %v: the server's log message did not reach the client", capable)
		}
		cs.Close()
		cancel()
	}
}

// A 2026-07-28 client of the bridge is answered as the revision has it: a
// server that needs input before it goes on answers with an input-required
// result (no request to the client), which reaches the client as the
// server sent it; the client asks again with its answers and the server's
// state, which reach the server, and it finishes.
func TestTheBridgePassesInputRequiredToA2026Client(t *testing.T) {
	up := mcp.NewServer(&mcp.Implementation{Name: "mrtr", Version: "1"}, nil)
	up.AddTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if len(req.Params.InputResponses) == 0 {
				return &mcp.CallToolResult{RequestState: "state-1", InputRequests: mcp.InputRequestMap{"who": &mcp.ElicitParams{Message: "Which name?",
					RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}}}}, nil
			}
			e, _ := req.Params.InputResponses["who"].(*mcp.ElicitResult)
			said := fmt.Sprintf("state %s, elicited:", req.Params.RequestState)
			if e != nil {
				said += fmt.Sprintf(" %s %v", e.Action, e.Content["name"])
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: said}}}, nil
		})
	up.AddPrompt(&mcp.Prompt{Name: "greet"}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		if len(req.Params.InputResponses) == 0 {
			return &mcp.GetPromptResult{RequestState: "state-2", InputRequests: mcp.InputRequestMap{"who": &mcp.ElicitParams{Message: "Greet whom?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}}}}, nil
		}
		e, _ := req.Params.InputResponses["who"].(*mcp.ElicitResult)
		text := "state " + req.Params.RequestState + ", greet:"
		if e != nil {
			text += fmt.Sprintf(" %v", e.Content["name"])
		}
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}}}, nil
	})
	up.AddResource(&mcp.Resource{URI: "note://who", Name: "who"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		if len(req.Params.InputResponses) == 0 {
			return &mcp.ReadResourceResult{RequestState: "state-3", InputRequests: mcp.InputRequestMap{"who": &mcp.ElicitParams{Message: "Read for whom?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}}}}, nil
		}
		e, _ := req.Params.InputResponses["who"].(*mcp.ElicitResult)
		text := "state " + req.Params.RequestState + ", read:"
		if e != nil {
			text += fmt.Sprintf(" %v", e.Content["name"])
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "note://who", Text: text}}}, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	toolsFile := filepath.Join(t.TempDir(), "tools.yaml")
	os.WriteFile(toolsFile, []byte("mcp_servers:\n  - name: mrtr\n    url: \""+srv.URL+"\"\n    prefix: false\n"), 0o600)
	db := storetest.DSN(t)
	app := serveAppLogging(t, config{Addr: "127.0.0.1:0", DB: db, Tools: toolsFile}, io.Discard, io.Discard)
	key, _ := runCmd(t, "agent", "add", "--name", "desk", "--db", db)
	toBridge, clientOut := io.Pipe()
	clientIn, fromBridge := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_ = run(ctx, []string{"mcp", "--url", "http://" + app.Addr(), "--agent-key", strings.TrimSpace(key)}, toBridge, fromBridge, io.Discard)
		fromBridge.Close()
	}()
	asked := make(chan string, 4)
	client := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- r.Params.Message
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Bea"}}, nil
		}})
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: clientIn, Writer: clientOut}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	cctx, stop := context.WithTimeout(ctx, 60*time.Second)
	defer stop()
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}})
	if err != nil || res.IsError || len(res.Content) == 0 {
		t.Fatalf("the call through the bridge: %+v %v", res, err)
	}
	if said := res.Content[0].(*mcp.TextContent).Text; said != "state state-1, elicited: accept Bea" {
		t.Errorf("the server was told %q", said)
	}
	select {
	case m := <-asked:
		if m != "Which name?" {
			t.Errorf("the client was asked %q", m)
		}
	default:
		t.Error("the client was not asked")
	}
	// A prompt the same way.
	p, err := cs.GetPrompt(cctx, &mcp.GetPromptParams{Name: "greet"})
	if err != nil || len(p.Messages) != 1 {
		t.Fatalf("the prompt through the bridge: %+v %v", p, err)
	}
	if text := p.Messages[0].Content.(*mcp.TextContent).Text; text != "state state-2, greet: Bea" {
		t.Errorf("the server was told %q", text)
	}
	// A resource read the same way.
	r, err := cs.ReadResource(cctx, &mcp.ReadResourceParams{URI: "note://who"})
	if err != nil || len(r.Contents) != 1 {
		t.Fatalf("the read through the bridge: %+v %v", r, err)
	}
	if text := r.Contents[0].Text; text != "state state-3, read: Bea" {
		t.Errorf("the server was told %q", text)
	}
}
