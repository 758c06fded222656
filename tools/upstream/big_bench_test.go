package upstream

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/tools"
)

// BenchmarkBigHTTPResult reads a 3 MB text from an MCP server over HTTP
// that answers in one JSON message (json) or an event stream (sse):
// straight with the SDK's client, and through an upstream Server (what
// Countersign records and hands on).
// Compare the two in one run:
//
//	go test -tags=sqlite_fts5 -run XXX -bench BigHTTPResult -count 5 ./tools/upstream
func BenchmarkBigHTTPResult(b *testing.B) {
	text := strings.Repeat("a line of a big file, with <tags> & \"quotes\"\n", 3<<20/46)
	srv := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "read", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
		})
	for _, answer := range []string{"json", "sse"} {
		hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: answer == "json"}))
		b.Cleanup(hs.Close)
		b.Run(answer+"/direct", func(b *testing.B) { direct(b, hs.URL) })
		b.Run(answer+"/through", func(b *testing.B) { through(b, hs.URL, len(text)) })
	}
}

func direct(b *testing.B, url string) {
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	for b.Loop() {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read", Arguments: map[string]any{}}); err != nil {
			b.Fatal(err)
		}
	}
}

func through(b *testing.B, url string, size int) {
	same := func(s string) string { return s }
	u, err := New(Spec{Name: "big", URL: url}, Config{Env: func(s string) (string, error) { return s, nil }, Redact: same,
		RedactJSON: func(b []byte) []byte { return b }, Taken: func(string) bool { return false }, Changed: func() {}, At: same})
	if err != nil {
		b.Fatal(err)
	}
	defer u.Close()
	for b.Loop() {
		out, err := u.call(context.Background(), "read", tools.RiskRead, map[string]any{})
		if err != nil || len(out.(tools.Encoded)) < size {
			b.Fatal(err)
		}
	}
}
