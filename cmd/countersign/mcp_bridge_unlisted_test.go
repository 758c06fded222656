package main

import (
	"context"
	"encoding/json"
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

// Through the bridge, at either revision: a call to a tool the server
// does not list reaches it when its entry forwards such calls
// (unlisted_tools), and the server's saying that its tool, prompt or
// resource list changed reaches the client though the lists are the same
// (the resources: a template and no resource).
func TestTheBridgePassesCallsToUnlistedToolsAndSaidChanges(t *testing.T) {
	up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	look := &mcp.Tool{Name: "look", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}
	looked := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "looked"}}}, nil
	}
	greet := &mcp.Prompt{Name: "greet"}
	greeted := func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}, nil
	}
	page := &mcp.ResourceTemplate{URITemplate: "note://{id}", Name: "page"}
	paged := func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "page"}}}, nil
	}
	up.AddTool(look, looked)
	up.AddPrompt(greet, greeted)
	up.AddResourceTemplate(page, paged) // a template, and no resource
	up.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			call, ok := req.(*mcp.CallToolRequest)
			if method != "tools/call" || !ok || (call.Params.Name != "poke" && call.Params.Name != "nudge" && call.Params.Name != "turn") {
				return next(ctx, method, req)
			}
			switch call.Params.Name { // the same list, said to have changed
			case "poke":
				up.AddTool(look, looked)
			case "nudge":
				up.AddPrompt(greet, greeted)
			default:
				up.AddResourceTemplate(page, paged)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: call.Params.Name + "d"}}}, nil
		}
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	toolsFile := filepath.Join(t.TempDir(), "tools.yaml")
	os.WriteFile(toolsFile, []byte("mcp_servers:\n  - name: up\n    url: \""+srv.URL+"\"\n    prefix: false\n    unlisted_tools: low_write\n"), 0o600)
	db := storetest.DSN(t)
	app := serveAppLogging(t, config{Addr: "127.0.0.1:0", DB: db, Tools: toolsFile}, io.Discard, io.Discard)
	key, _ := runCmd(t, "agent", "add", "--name", "desk", "--db", db)

	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		toBridge, clientOut := io.Pipe()
		clientIn, fromBridge := io.Pipe()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		go func() {
			_ = run(ctx, []string{"mcp", "--url", "http://" + app.Addr(), "--agent-key", strings.TrimSpace(key)}, toBridge, fromBridge, io.Discard)
			fromBridge.Close()
		}()
		tools, prompts, resources := make(chan struct{}, 8), make(chan struct{}, 8), make(chan struct{}, 8)
		client := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, &mcp.ClientOptions{
			ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { tools <- struct{}{} },
			PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { prompts <- struct{}{} },
			ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { resources <- struct{}{} },
		})
		cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: clientIn, Writer: clientOut}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.ListPrompts(ctx, nil); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			told chan struct{}
		}{{"poke", tools}, {"nudge", prompts}, {"turn", resources}} {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.name, Arguments: map[string]any{}})
			if b, _ := json.Marshal(res); err != nil || res.IsError || !strings.Contains(string(b), c.name+"d") {
				t.Fatalf("%s: %s through the bridge: %s %v", version, c.name, b, err)
			}
			select {
			case <-c.told:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: the server said a list changed after %s; the bridge's client was not told", version, c.name)
			}
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "LOOK", Arguments: map[string]any{}})
		if b, _ := json.Marshal(res); err != nil || !res.IsError || !strings.Contains(string(b), "unknown tool") {
			t.Fatalf("%s: LOOK through the bridge: %s %v", version, b, err)
		}
		cs.Close()
		cancel()
	}
}
