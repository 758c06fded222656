package web

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/upstream"
	"github.com/countersign/countersign/web/mcpgate"
)

// Defaults for an agent's MCP sessions (Config.MaxMCPSessionsPerAgent,
// Config.MCPSessionIdle).
const (
	MaxMCPSessionsPerAgent = 256
	MCPSessionIdle         = 10 * time.Minute
)

// mcpEndpoint serves MCP over streamable HTTP at /mcp for agents with a key:
// each agent has its own handler, so a session one agent opened is never
// served to another.
type mcpEndpoint struct {
	gw *mcpgate.Gateway
	// answers are where tools/call results wait to be written in the
	// upstream's own bytes (mcp_answer.go).
	answers *mcpgate.Answers
	mu      sync.Mutex
	by      map[string]*mcp.StreamableHTTPHandler // agent id -> its handler
	// stateless serves the 2026-07-28 revision (no session; each request
	// carries what it needs), agent id -> its handler, over the same server.
	stateless map[string]*mcp.StreamableHTTPHandler
	// servers are built once per agent, revision and set of tools in
	// force (the SDK asks for the server on every request), by serverKey.
	servers map[string]agentServer
}

type agentServer struct {
	agent  *models.Agent
	modern bool            // for the revisions without sessions
	tools  *tools.Registry // the tools it offers
	more   mcpgate.Offered // and the MCP servers' prompts and resources
	server *mcp.Server
}

// server is the agent's MCP server for clients of the revisions with
// sessions (modern false) or without, offering the tools in force now
// that are offered to them (an upstream may list tools to one revision
// only, or otherwise to each).
func (ep *mcpEndpoint) server(ag *models.Agent, modern bool) *mcp.Server {
	reg := ep.gw.Outside.Gate.Tools()
	key := serverKey(ag, modern)
	ep.mu.Lock()
	defer ep.mu.Unlock()
	s, ok := ep.servers[key]
	if !ok {
		s = agentServer{agent: ag, modern: modern, tools: reg, server: ep.gw.Server(ag, modern)}
		s.more = ep.gw.OfferMore(s.server, modern, nil)
		ep.servers[key] = s
	} else if s.tools != reg {
		ep.gw.Offer(s.server, ag, modern, s.tools, reg)
		s.tools = reg
		ep.servers[key] = s
	}
	return s.server
}

func serverKey(ag *models.Agent, modern bool) string {
	if modern {
		return ag.ID + " " + ModernMCP
	}
	return ag.ID
}

// toolsChanged offers the tools now in force, and what the MCP servers
// offer besides, on every agent's server: the SDK tells each connected
// client that a list changed.
func (ep *mcpEndpoint) toolsChanged() {
	reg := ep.gw.Outside.Gate.Tools()
	ep.mu.Lock()
	defer ep.mu.Unlock()
	for id, s := range ep.servers {
		if s.tools != reg {
			ep.gw.Offer(s.server, s.agent, s.modern, s.tools, reg)
			s.tools = reg
		}
		s.more = ep.gw.OfferMore(s.server, s.modern, s.more)
		ep.servers[id] = s
	}
}

// told tells the clients what an MCP server said for them to hear: that a
// resource they subscribed to changed, or that a list changed (one
// Countersign found the same: each agent's server offers that list again
// as it is, and the SDK tells the clients it changed).
func (ep *mcpEndpoint) told(t upstream.Told) {
	if t.List != "" {
		ep.mu.Lock()
		defer ep.mu.Unlock()
		for id, s := range ep.servers {
			if t.List == upstream.ListTools {
				ep.gw.Retell(s.server, s.agent, s.modern, s.tools)
			} else {
				s.more = ep.gw.OfferMore(s.server, s.modern, s.more.Without(t.List))
				ep.servers[id] = s
			}
		}
		return
	}
	ep.mu.Lock()
	var servers []*mcp.Server
	for _, s := range ep.servers {
		servers = append(servers, s.server)
	}
	ep.mu.Unlock()
	for _, s := range servers {
		_ = s.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: t.Updated})
	}
}

func newMCPEndpoint(s *Server) *mcpEndpoint {
	answers := &mcpgate.Answers{}
	ep := &mcpEndpoint{gw: &mcpgate.Gateway{Outside: s.core.Outside, Wait: s.cfg.MCPWait, QuestionTTL: s.cfg.MCPQuestionTTL, Receipt: s.receiptJWS, Servers: s.core.Servers, Answers: answers},
		answers: answers, by: map[string]*mcp.StreamableHTTPHandler{}, stateless: map[string]*mcp.StreamableHTTPHandler{}, servers: map[string]agentServer{}}
	if s.changes != nil {
		s.changes.mu.Lock()
		s.changes.mcp = ep
		s.changes.mu.Unlock()
	}
	return ep
}

// ModernMCP is the first MCP revision without sessions (SEP-2575/2567):
// a request that names it, or a later one, in its Mcp-Protocol-Version
// header and carries no Mcp-Session-Id is served statelessly
// (server/discover, then each call on its own); the 2025 revisions keep
// their sessions.
const ModernMCP = "2026-07-28"

// serveMCP is /mcp (GET, POST, DELETE), behind requireAgentKey.
func (s *Server) serveMCP(c echo.Context) error {
	ag := currentAgent(c)
	ep := s.mcp
	r := c.Request()
	if err := s.mcpOrigin(r); err != nil {
		return err
	}
	modern := r.Header.Get("Mcp-Session-Id") == "" && r.Header.Get("Mcp-Protocol-Version") >= ModernMCP
	ep.mu.Lock()
	handlers, opts := ep.by, &mcp.StreamableHTTPOptions{SessionTimeout: s.cfg.MCPSessionIdle}
	if modern {
		handlers, opts = ep.stateless, &mcp.StreamableHTTPOptions{Stateless: true}
	}
	h := handlers[ag.ID]
	if h == nil {
		h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ep.server(ag, modern) }, opts)
		handlers[ag.ID] = h
	}
	ep.mu.Unlock()
	if r.Method == http.MethodPost && !s.agentAllowed(ag) {
		return s.agentTooFast(ag)
	}
	var msg *rpcMessage // one JSON-RPC request, read once
	if r.Method == http.MethodPost {
		body, ok, err := mcpBody(c)
		if !ok {
			return err
		}
		msg = readMessage(body)
		if answered, err := s.mcpTasks(c, ag, msg, modern); answered {
			return err
		}
	}
	if r.Method == http.MethodPost && !modern && r.Header.Get("Mcp-Session-Id") == "" {
		if n := ep.sessions(ag); n >= s.cfg.MaxMCPSessionsPerAgent {
			return fault.Errorf(fault.RateLimited, "this agent key has %d MCP sessions open, the most it may; close some (DELETE /mcp) or reuse one (an idle session ends after %s)",
				n, s.cfg.MCPSessionIdle)
		}
	}
	// A call may be held while a person decides: no write deadline, but a
	// place among the held requests.
	return s.holdRequest(c, r.Method == http.MethodGet, func() error {
		allowLongWrite(c)
		w, done := ep.taskCapable(c.Response(), r, ag, msg, modern)
		w, forget := ep.answerToolCalls(w, r, msg)
		defer forget()
		h.ServeHTTP(w, c.Request())
		done()
		return nil
	})
}

// mcpOrigin refuses a request a web page of another origin sent (the MCP
// transport's rule against DNS rebinding and cross-site use, on every
// method): an Origin header that is not this server's own nor one of
// --mcp-origins, or a browser's Sec-Fetch-Site saying cross-site. MCP
// clients that are not browsers send neither.
func (s *Server) mcpOrigin(r *http.Request) error {
	refused := fault.Errorf(fault.Forbidden, "/mcp does not serve web pages of another origin")
	o := r.Header.Get("Origin")
	if slices.Contains(s.cfg.MCPOrigins, o) {
		return nil // a web page the operator allows
	}
	if o != "" {
		u, err := url.Parse(o)
		if o == "null" || err != nil || u.Host != s.publicHost(r) {
			return refused
		}
	}
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return refused
	}
	return nil
}

// sessions is how many MCP sessions the agent has open on this instance.
func (ep *mcpEndpoint) sessions(ag *models.Agent) int {
	n := 0
	for range ep.server(ag, false).Sessions() {
		n++
	}
	return n
}
