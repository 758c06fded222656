package mcpgate

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
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/doorkit"
)

// Defaults for an agent's MCP sessions (Options.MaxSessionsPerAgent,
// Options.SessionIdle).
const (
	MaxSessionsPerAgent = 256
	SessionIdle         = 10 * time.Minute
)

// Options is how the MCP door is set up.
type Options struct {
	// Wait is how long a call that waits for a person holds its request
	// before the client is answered that it waits (Gateway.Wait);
	// QuestionTTL how long a server's question waits for a 2026 client's
	// answer (Gateway.QuestionTTL).
	Wait, QuestionTTL time.Duration
	// MaxSessionsPerAgent caps an agent's open sessions here (0:
	// MaxSessionsPerAgent); SessionIdle ends a session nobody used for
	// that long (0: SessionIdle).
	MaxSessionsPerAgent int
	SessionIdle         time.Duration
	// Origins are the web pages of other origins that may call /mcp.
	Origins []string
	// Receipt is a final call's receipt (Gateway.Receipt).
	Receipt func(ctx context.Context, call *models.ToolCall, fresh bool) (string, error)
}

// Door serves MCP over streamable HTTP at /mcp for agents with a key or
// an OAuth token: each agent has its own handler, so a session one agent
// opened is never served to another. It hears on the core's bus when the
// tools or what the servers offer change (core.Tools, core.Offers).
type Door struct {
	kit  *doorkit.Kit
	opts Options
	gw   *Gateway
	// answers are where tools/call results wait to be written in the
	// upstream's own bytes (door_answer.go).
	answers *Answers
	mu      sync.Mutex
	by      map[string]*mcp.StreamableHTTPHandler // agent id -> its handler
	// stateless serves the 2026-07-28 revision (no session; each request
	// carries what it needs), agent id -> its handler, over the same server.
	stateless map[string]*mcp.StreamableHTTPHandler
	// servers are built once per agent, revision and set of tools in
	// force (the SDK asks for the server on every request), by serverKey.
	servers map[string]agentServer
}

// Mount adds /mcp to e, behind the kit's agent check (a key or an OAuth
// token) and body budget, and listens on the core's bus.
func Mount(e *echo.Echo, kit *doorkit.Kit, opts Options) *Door {
	if opts.MaxSessionsPerAgent == 0 {
		opts.MaxSessionsPerAgent = MaxSessionsPerAgent
	}
	if opts.SessionIdle == 0 {
		opts.SessionIdle = SessionIdle
	}
	answers := &Answers{}
	co := kit.Core
	d := &Door{kit: kit, opts: opts, answers: answers,
		gw: &Gateway{Outside: co.Outside, Wait: opts.Wait, QuestionTTL: opts.QuestionTTL, Receipt: opts.Receipt, Servers: co.Servers, Answers: answers},
		by: map[string]*mcp.StreamableHTTPHandler{}, stateless: map[string]*mcp.StreamableHTTPHandler{}, servers: map[string]agentServer{}}
	e.Any(views.PathMCP, d.serve, kit.RequireAgent, kit.Bodies(Refuse))
	co.Bus.Listen(d)
	return d
}

type agentServer struct {
	agent  *models.Agent
	modern bool            // for the revisions without sessions
	tools  *tools.Registry // the tools it offers
	more   Offered         // and the MCP servers' prompts and resources
	server *mcp.Server
}

// server is the agent's MCP server for clients of the revisions with
// sessions (modern false) or without, offering the tools in force now
// that are offered to them (an upstream may list tools to one revision
// only, or otherwise to each).
func (ep *Door) server(ag *models.Agent, modern bool) *mcp.Server {
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

// ToolsChanged implements core.Tools: it offers the tools now in force, and what the MCP servers
// offer besides, on every agent's server: the SDK tells each connected
// client that a list changed.
func (ep *Door) ToolsChanged() {
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

// Told implements core.Offers: it tells the clients what an MCP server said for them to hear: that a
// resource they subscribed to changed, or that a list changed (one
// Countersign found the same: each agent's server offers that list again
// as it is, and the SDK tells the clients it changed).
func (ep *Door) Told(t upstream.Told) {
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

// ModernMCP is the first MCP revision without sessions (SEP-2575/2567):
// a request that names it, or a later one, in its Mcp-Protocol-Version
// header and carries no Mcp-Session-Id is served statelessly
// (server/discover, then each call on its own); the 2025 revisions keep
// their sessions.
const ModernMCP = "2026-07-28"

// serve is /mcp (GET, POST, DELETE), behind the kit's RequireAgent.
func (ep *Door) serve(c echo.Context) error {
	ag := doorkit.Agent(c)
	r := c.Request()
	if err := ep.origin(r); err != nil {
		return err
	}
	modern := r.Header.Get("Mcp-Session-Id") == "" && r.Header.Get("Mcp-Protocol-Version") >= ModernMCP
	ep.mu.Lock()
	handlers, opts := ep.by, &mcp.StreamableHTTPOptions{SessionTimeout: ep.opts.SessionIdle}
	if modern {
		handlers, opts = ep.stateless, &mcp.StreamableHTTPOptions{Stateless: true}
	}
	h := handlers[ag.ID]
	if h == nil {
		h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ep.server(ag, modern) }, opts)
		handlers[ag.ID] = h
	}
	ep.mu.Unlock()
	if r.Method == http.MethodPost {
		if err := ep.kit.Allow(ag); err != nil {
			return err
		}
	}
	var msg *rpcMessage // one JSON-RPC request, read once
	if r.Method == http.MethodPost {
		body, ok, err := readBody(c)
		if !ok {
			return err
		}
		msg = readMessage(body)
		if answered, err := ep.tasks(c, ag, msg, modern); answered {
			return err
		}
	}
	if r.Method == http.MethodPost && !modern && r.Header.Get("Mcp-Session-Id") == "" {
		if n := ep.sessions(ag); n >= ep.opts.MaxSessionsPerAgent {
			return fault.Errorf(fault.RateLimited, "this agent key has %d MCP sessions open, the most it may; close some (DELETE /mcp) or reuse one (an idle session ends after %s)",
				n, ep.opts.SessionIdle)
		}
	}
	// A call may be held while a person decides: no write deadline, but a
	// place among the held requests.
	return ep.kit.Hold(c, r.Method == http.MethodGet, func() error {
		doorkit.LongWrite(c)
		w, done := ep.taskCapable(c.Response(), r, ag, msg, modern)
		w, forget := ep.answerToolCalls(w, r, msg)
		defer forget()
		h.ServeHTTP(w, c.Request())
		done()
		return nil
	})
}

// origin refuses a request a web page of another origin sent (the MCP
// transport's rule against DNS rebinding and cross-site use, on every
// method): an Origin header that is not this server's own nor one of
// --mcp-origins, or a browser's Sec-Fetch-Site saying cross-site. MCP
// clients that are not browsers send neither.
func (ep *Door) origin(r *http.Request) error {
	refused := fault.Errorf(fault.Forbidden, "/mcp does not serve web pages of another origin")
	o := r.Header.Get("Origin")
	if slices.Contains(ep.opts.Origins, o) {
		return nil // a web page the operator allows
	}
	if o != "" {
		u, err := url.Parse(o)
		if o == "null" || err != nil || u.Host != ep.kit.PublicHost(r) {
			return refused
		}
	}
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return refused
	}
	return nil
}

// sessions is how many MCP sessions the agent has open on this instance.
func (ep *Door) sessions(ag *models.Agent) int {
	n := 0
	for range ep.server(ag, false).Sessions() {
		n++
	}
	return n
}

// OffersChanged implements core.Offers: the servers' prompts and
// resources are offered again.
func (ep *Door) OffersChanged() { ep.ToolsChanged() }
