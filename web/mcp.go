package web

import (
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/agent/mcpgate"
)

// mcpEndpoint serves MCP over streamable HTTP at /mcp for agents with a key:
// each agent has its own handler, so a session one agent opened is never
// served to another.
type mcpEndpoint struct {
	gw *mcpgate.Gateway
	mu sync.Mutex
	by map[string]*mcp.StreamableHTTPHandler // agent id -> its handler
}

func newMCPEndpoint(s *Server) *mcpEndpoint {
	return &mcpEndpoint{gw: &mcpgate.Gateway{Gate: s.cfg.Gate, Store: s.cfg.Store, Wait: s.cfg.MCPWait},
		by: map[string]*mcp.StreamableHTTPHandler{}}
}

// serveMCP is /mcp (GET, POST, DELETE), behind requireAgentKey.
func (s *Server) serveMCP(c echo.Context) error {
	ag := currentAgent(c)
	ep := s.mcp
	ep.mu.Lock()
	h := ep.by[ag.ID]
	if h == nil {
		h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ep.gw.Server(ag) }, nil)
		ep.by[ag.ID] = h
	}
	ep.mu.Unlock()
	// A call may be held while a person decides: no write deadline.
	allowLongWrite(c)
	h.ServeHTTP(c.Response(), c.Request())
	return nil
}
