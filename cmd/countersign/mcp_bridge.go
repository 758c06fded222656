package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

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
	client := mcp.NewClient(&mcp.Implementation{Name: "countersign-mcp-bridge", Version: "1"}, nil)
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
			if tok := req.Params.GetProgressToken(); tok != nil {
				params.SetProgressToken(tok)
			}
			return remote.CallTool(ctx, params)
		})
	}
	return local.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
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
