package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// cmdMCP bridges stdio to a running server's /mcp, for MCP clients that only
// start processes (Claude Desktop, Claude Code): the tools are the server's,
// every call goes through its gate, with this agent key.
func cmdMCP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, _ := newFlagSet("mcp", stderr)
	url := fs.String("url", "http://127.0.0.1:8080", "the running Countersign server")
	key := fs.String("agent-key", "", "the agent key (countersign agent add); env COUNTERSIGN_AGENT_KEY")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *key == "" {
		return usageError("mcp needs --agent-key (or COUNTERSIGN_AGENT_KEY)")
	}
	// Progress the server sends for a call goes back to the client that
	// asked, under the client's own token.
	var asking sync.Map // progressKey(token) -> *mcp.ServerSession
	client := mcp.NewClient(&mcp.Implementation{Name: "countersign-mcp-bridge", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			if ss, ok := asking.Load(progressKey(req.Params.ProgressToken)); ok {
				_ = ss.(*mcp.ServerSession).NotifyProgress(ctx, req.Params)
			}
		}})
	remote, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: strings.TrimSuffix(*url, "/") + "/mcp",
		HTTPClient: &http.Client{Transport: bearerAuth(*key)}}, nil)
	if err != nil {
		return fmt.Errorf("connect to %s/mcp: %w", *url, err)
	}
	defer remote.Close()
	local := mcp.NewServer(&mcp.Implementation{Name: "countersign", Version: "1"}, nil)
	for t, err := range remote.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list the tools: %w", err)
		}
		name := t.Name
		local.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			params := &mcp.CallToolParams{Name: name, Arguments: req.Params.Arguments}
			if tok, ok := progressToken(req.Params.GetProgressToken()); ok {
				params.SetProgressToken(tok)
				key := progressKey(tok)
				asking.Store(key, req.Session)
				defer asking.Delete(key)
			}
			return remote.CallTool(ctx, params)
		})
	}
	return local.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
}

// progressToken is a client's progress token as the SDK sends it on: a
// string, or a whole number (JSON numbers arrive as float64, which the SDK
// refuses); anything else is no token (the spec allows only those two).
func progressToken(t any) (any, bool) {
	switch v := t.(type) {
	case string:
		return v, true
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v), true
		}
	case int, int32, int64:
		return v, true
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n, true
		}
	}
	return nil, false
}

// progressKey is a token as a map key, the same for 7 and 7.0.
func progressKey(t any) string {
	if n, ok := progressToken(t); ok {
		return fmt.Sprintf("%T:%v", n, n)
	}
	return fmt.Sprint(t)
}

// bearerAuth adds the agent key to every request.
type bearerAuth string

func (k bearerAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(k))
	return http.DefaultTransport.RoundTrip(r)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
