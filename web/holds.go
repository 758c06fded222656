package web

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/web/doorkit"
)

// Held requests: a long poll (GET /api/v1/calls/:id?wait=) or an MCP
// request (a call held while a person decides, a client's event stream)
// keeps a connection, a goroutine and memory for up to a minute or for
// ever. They are capped per agent key and in all, so one agent (or one
// leaked key) cannot take the file descriptors that /healthz, the back
// office and everyone else need: over the cap a request is answered at once
// with 429 and Retry-After. Each held request's context is ended when its
// agent's key is revoked (the core's bus tells, Changes.AgentRevoked: at
// once when revoked on any instance, within a sweep when by the command
// line).

// Defaults for the caps (Config.MaxHeldPerAgent, Config.MaxHeld).
const (
	MaxHeldPerAgent = 64
	MaxHeld         = 2048
)

// Defaults for the calls one agent key may send (Config.AgentCallsPerSecond,
// Config.AgentCallBurst): room for a coding agent reading a project's files
// at once, not for a flood.
const (
	AgentCallsPerSecond = 20
	AgentCallBurst      = 100
)

// agentRate is an agent's limit: its own (countersign agent add
// --calls-per-second, --call-burst) or the instance's.
func (s *Server) agentRate(ag *models.Agent) (perSecond, burst int) {
	return cmp.Or(ag.CallsPerSecond, s.cfg.AgentCallsPerSecond), cmp.Or(ag.CallBurst, s.cfg.AgentCallBurst)
}

// agentAllowed takes one of an agent's calls from its bucket.
func (s *Server) agentAllowed(ag *models.Agent) bool {
	perSecond, burst := s.agentRate(ag)
	return s.agentCalls.AllowAt(ag.ID, time.Second/time.Duration(perSecond), burst)
}

// agentTooFast is the answer to an agent key over its rate.
func (s *Server) agentTooFast(ag *models.Agent) error {
	perSecond, burst := s.agentRate(ag)
	return fault.Errorf(fault.RateLimited, "this agent key sends calls faster than it may (%d a second after %d at once); slow down and try again",
		perSecond, burst)
}

type holds struct {
	mu       sync.Mutex
	total    int
	max      int
	perAgent int
	byAgent  map[string]map[*hold]struct{}
	// answering counts the held requests that end with an answer (a held
	// call, a long poll; not an event stream), idle is closed while none is.
	answering int
	idle      chan struct{}
}

type hold struct{ cancel context.CancelFunc }

func newHolds(max, perAgent int) *holds {
	return &holds{max: max, perAgent: perAgent, byAgent: map[string]map[*hold]struct{}{}}
}

// acquire takes a place for one held request of an agent; the context it
// returns ends when the request ends or the agent's key is revoked.
func (h *holds) acquire(ctx context.Context, agentID string) (context.Context, func(), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.byAgent[agentID]) >= h.perAgent {
		return nil, nil, fault.Errorf(fault.RateLimited,
			"this agent key already has %d requests waiting (long polls and MCP requests); finish or close some before waiting on more", h.perAgent)
	}
	if h.total >= h.max {
		return nil, nil, fault.Errorf(fault.Unavailable, "the server holds as many waiting requests as it can (%d); try again shortly", h.max)
	}
	ctx, cancel := context.WithCancel(ctx)
	one := &hold{cancel: cancel}
	if h.byAgent[agentID] == nil {
		h.byAgent[agentID] = map[*hold]struct{}{}
	}
	h.byAgent[agentID][one] = struct{}{}
	h.total++
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			cancel()
			h.mu.Lock()
			defer h.mu.Unlock()
			delete(h.byAgent[agentID], one)
			if len(h.byAgent[agentID]) == 0 {
				delete(h.byAgent, agentID)
			}
			h.total--
		})
	}, nil
}

// held is how many requests are held, in all and for one agent.
func (h *holds) held(agentID string) (total, agent int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total, len(h.byAgent[agentID])
}

// AgentRevoked implements core.Revoked: every request the agent holds
// ends.
func (h *holds) AgentRevoked(agentID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for one := range h.byAgent[agentID] {
		one.cancel()
	}
}

// HeldRequests is how many requests the server holds open now (long polls
// and MCP requests).
func (s *Server) HeldRequests() int {
	total, _ := s.holds.held("")
	return total
}

// answered counts one held request that ends with an answer until the
// function it returns is called.
func (h *holds) answered() func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.answering == 0 {
		h.idle = make(chan struct{})
	}
	h.answering++
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.answering--; h.answering == 0 {
				close(h.idle)
			}
		})
	}
}

// Drain waits until every held request that ends with an answer (a call
// held over MCP, a long poll) has been answered, or ctx ends. A stopping
// server calls it after Outside.StopWaiting, before it ends the requests
// it holds, so that each client hears where its call stands, not a
// dropped stream.
func (s *Server) Drain(ctx context.Context) {
	s.holds.mu.Lock()
	idle := s.holds.idle
	n := s.holds.answering
	s.holds.mu.Unlock()
	if n == 0 {
		return
	}
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

// holdRequest runs a held request of the current agent inside a place of
// the caps: the handler's request context ends with the hold. stream: the
// request is an event stream, which ends only with the client or the
// server, not with an answer.
func (s *Server) holdRequest(c echo.Context, stream bool, serve func() error) error {
	ag := doorkit.Agent(c)
	ctx, release, err := s.holds.acquire(c.Request().Context(), ag.ID)
	if err != nil {
		return err
	}
	defer release()
	if !stream {
		defer s.holds.answered()()
	}
	orig := c.Request()
	c.SetRequest(orig.WithContext(ctx))
	defer c.SetRequest(orig) // what follows the hold is not cut by its end
	return serve()
}
