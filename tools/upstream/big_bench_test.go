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
// that answers in one JSON message: straight with the SDK's client, and
// through an upstream Server (what Countersign records and hands on).
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
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true}))
	b.Cleanup(hs.Close)
	ctx := context.Background()

	b.Run("direct", func(b *testing.B) {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		for b.Loop() {
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read", Arguments: map[string]any{}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("through", func(b *testing.B) {
		same := func(s string) string { return s }
		u, err := New(Spec{Name: "big", URL: hs.URL}, Config{Env: func(s string) (string, error) { return s, nil }, Redact: same,
			RedactJSON: func(b []byte) []byte { return b }, Taken: func(string) bool { return false }, Changed: func() {}, At: same})
		if err != nil {
			b.Fatal(err)
		}
		defer u.Close()
		for b.Loop() {
			out, err := u.call(ctx, "read", tools.RiskRead, map[string]any{})
			if err != nil || len(out.(tools.Encoded)) < len(text) {
				b.Fatal(err)
			}
		}
	})
}
