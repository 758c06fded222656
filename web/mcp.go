package web

import (
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/agent/mcpgate"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
)

// mcpEndpoint serves MCP over streamable HTTP at /mcp for agents with a key:
// each agent has its own handler, so a session one agent opened is never
// served to another.
type mcpEndpoint struct {
	gw *mcpgate.Gateway
	mu sync.Mutex
	by map[string]*mcp.StreamableHTTPHandler // agent id -> its handler
	// servers are built once per agent and set of tools in force (the SDK
	// asks for the server on every request).
	servers map[string]agentServer
}

type agentServer struct {
	tools  *tools.Registry
	server *mcp.Server
}

// server is the agent's MCP server for the tools in force now.
func (ep *mcpEndpoint) server(ag *models.Agent) *mcp.Server {
	reg := ep.gw.Gate.Tools()
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if s, ok := ep.servers[ag.ID]; ok && s.tools == reg {
		return s.server
	}
	s := agentServer{tools: reg, server: ep.gw.Server(ag)}
	ep.servers[ag.ID] = s
	return s.server
}

func newMCPEndpoint(s *Server) *mcpEndpoint {
	return &mcpEndpoint{gw: &mcpgate.Gateway{Gate: s.cfg.Gate, Store: s.cfg.Store, Wait: s.cfg.MCPWait},
		by: map[string]*mcp.StreamableHTTPHandler{}, servers: map[string]agentServer{}}
}

// serveMCP is /mcp (GET, POST, DELETE), behind requireAgentKey.
func (s *Server) serveMCP(c echo.Context) error {
	ag := currentAgent(c)
	ep := s.mcp
	ep.mu.Lock()
	h := ep.by[ag.ID]
	if h == nil {
		h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ep.server(ag) }, nil)
		ep.by[ag.ID] = h
	}
	ep.mu.Unlock()
	// A call may be held while a person decides: no write deadline.
	allowLongWrite(c)
	h.ServeHTTP(c.Response(), c.Request())
	return nil
}
