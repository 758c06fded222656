package mcpgate

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/upstream"
)

// A ModernProtocol client takes no requests from a server, but a 2025
// server asks its client during a call (sampling, elicitation, roots). The
// call then runs apart from the client's request (Outside.AskApart); what
// the server asks is the client's input-required result, with a
// requestState that names the call's round here; the client's next
// request with its answers hands them to the server and follows the call
// on, to its result or the next question. The call is one call, decided
// and recorded once, whatever the number of rounds.
type rounds struct {
	mu   sync.Mutex
	open map[string]*round
}

// round is a call whose client was asked something and has yet to answer.
type round struct {
	agent   string
	tool    *tools.Tool
	relay   *upstream.Relay
	asked   <-chan gate.AskResult
	expires time.Time
}

// roundState begins every requestState Countersign gives: others are an
// upstream's own, passed to it.
const roundState = "countersign-round-"

// MaxRoundsPerAgent is how many calls of one agent may wait at once for
// its answers to what their servers asked: each holds its server's request
// and a call running. Past it, the server is told no answer will come.
const MaxRoundsPerAgent = 32

// keep files rd under a new requestState ("": the agent has
// MaxRoundsPerAgent waiting already).
func (rs *rounds) keep(rd *round) string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	now := time.Now()
	mine := 0
	for k, x := range rs.open {
		if now.After(x.expires) {
			delete(rs.open, k)
		} else if x.agent == rd.agent {
			mine++
		}
	}
	if mine >= MaxRoundsPerAgent {
		return ""
	}
	if rs.open == nil {
		rs.open = map[string]*round{}
	}
	ttl := rd.relay.Questions.TTL
	if ttl <= 0 {
		ttl = upstream.DefaultQuestionTTL
	}
	rd.expires = now.Add(ttl)
	state := roundState + rand.Text()
	rs.open[state] = rd
	return state
}

// take is the round state names when agent asked it (nil: none open).
func (rs *rounds) take(state, agent string) *round {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rd := rs.open[state]
	if rd == nil || rd.agent != agent || time.Now().After(rd.expires) {
		return nil
	}
	delete(rs.open, state)
	return rd
}

// asksApart reports whether a call is to run apart from the request: a
// ModernProtocol client that can answer something a 2025 server asks
// (it declares sampling, elicitation or roots), calling an MCP server's
// tool.
func asksApart(relay *upstream.Relay, tool *tools.Tool) bool {
	if !relay.Modern || tool.Upstream == "" || tool.Revision == upstream.ModernProtocol {
		return false
	}
	return relay.Declares("sampling") || relay.Declares("elicitation") || relay.Declares("roots")
}

// apart puts the call through the gate apart from this request and
// follows it.
func (gw *Gateway) apart(ctx context.Context, ag *models.Agent, tool *tools.Tool, req *mcp.CallToolRequest, relay *upstream.Relay) (*mcp.CallToolResult, error) {
	relay.Questions = &upstream.Questions{TTL: gw.QuestionTTL, Stop: gw.Outside.Stopping()}
	meta := req.Params.GetMeta()
	done := gw.Outside.AskApart(ctx, gw.outsideCall(ag, tool, meta, req.Session.ID(), req.Params.Arguments, false))
	return gw.follow(ctx, req, &round{agent: ag.ID, tool: tool, relay: relay, asked: done})
}

// nextRound is a client's answers to what the server asked in the round
// its requestState names.
func (gw *Gateway) nextRound(ctx context.Context, ag *models.Agent, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	rd := gw.rounds.take(req.Params.RequestState, ag.ID)
	if rd == nil || rd.tool.Name != req.Params.Name {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "countersign: this requestState names no question that is open: " +
			"answered already, expired, or asked by another Countersign instance; call the tool again"}
	}
	rd.relay.Questions.Answer(req.Params.InputResponses)
	return gw.follow(ctx, req, rd)
}

// follow waits for the call to end (or to wait for a person) or for its
// server to ask the client something, whichever comes first.
func (gw *Gateway) follow(ctx context.Context, req *mcp.CallToolRequest, rd *round) (*mcp.CallToolResult, error) {
	q := rd.relay.Questions
	select {
	case r := <-rd.asked:
		return gw.roundEnded(ctx, req, rd, r)
	default:
	}
	select {
	case r := <-rd.asked:
		return gw.roundEnded(ctx, req, rd, r)
	case <-q.Arrived():
		state := gw.rounds.keep(rd)
		if state == "" {
			// Too many of this agent's calls wait for its answers: the
			// server hears that none will come, and the call goes on.
			q.Close(fmt.Sprintf("the agent has %d calls waiting for its answers already; answer those first", MaxRoundsPerAgent))
			return gw.follow(ctx, req, rd)
		}
		return &mcp.CallToolResult{InputRequests: q.Pending(), RequestState: state}, nil
	case <-ctx.Done():
		q.Close("the client stopped waiting for the call before it could be asked")
		return nil, ctx.Err()
	}
}

// roundEnded answers the call once the gate is done with it.
func (gw *Gateway) roundEnded(ctx context.Context, req *mcp.CallToolRequest, rd *round, r gate.AskResult) (*mcp.CallToolResult, error) {
	rd.relay.Questions.Close("the call ended before the client answered")
	if r.Err != nil {
		return nil, r.Err
	}
	return gw.finish(ctx, req, rd.tool, rd.relay, r.Asked, false)
}

// ourRound reports whether a requestState is one Countersign gave.
func ourRound(state string) bool { return strings.HasPrefix(state, roundState) }
