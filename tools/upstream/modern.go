package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"sort"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/tools"
)

// ModernProtocol is the MCP revision without sessions (SEP-2575). An
// upstream over HTTP that speaks it is spoken to at it as well, beside the
// 2025-11-25 session: a server may offer other tools (or the same tools
// otherwise) to clients of each revision, and at this one asks the client
// for input only by answering a call with an input-required result, which
// a client of this revision is handed as it is and answers by calling
// again (SEP-2322).
const ModernProtocol = "2026-07-28"

// modernSide is a server as spoken to at ModernProtocol: the session and
// what it lists there.
type modernSide struct {
	session *mcp.ClientSession
	tools   []*tools.Tool
	skipped []string
	offers  Offers
	// offersSkipped: what of its prompts and resources could not be listed.
	offersSkipped []string
}

// connectModern opens the stateless side of an HTTP server and lists its
// tools, prompts and resources there: nil when the server does not speak
// ModernProtocol (it is not an error: the 2025 session serves every
// client then).
func (u *Server) connectModern(ctx context.Context) *modernSide {
	opts := &mcp.ClientOptions{
		// An input-required result is the client's to answer.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		// Progress and log messages on a call's stream reach its client
		// as the server sent them (watchedBody), as at 2025-11-25.
	}
	u.listHandlers(opts, u.relistModern) // told.go
	client := mcp.NewClient(&mcp.Implementation{Name: "countersign", Version: "1"}, opts)
	s, err := client.Connect(ctx, u.transport(), &mcp.ClientSessionOptions{ProtocolVersion: ModernProtocol})
	if err != nil {
		return nil
	}
	if ir := s.InitializeResult(); ir == nil || ir.ProtocolVersion < ModernProtocol {
		_ = s.Close() // it answered at 2025-11-25: the session already open serves
		return nil
	}
	list, skipped, err := u.list(ctx, s)
	if err != nil {
		_ = s.Close()
		return nil
	}
	offers, offersSkipped := u.listOffers(ctx, s)
	return &modernSide{session: s, tools: list, skipped: skipped, offers: offers, offersSkipped: offersSkipped}
}

// relistModern takes up a tool list the server says has changed at
// ModernProtocol.
func (u *Server) relistModern(s *mcp.ClientSession) {
	ctx, cancel := context.WithTimeout(u.ctx, ConnectTimeout)
	defer cancel()
	list, skipped, err := u.list(ctx, s)
	u.mu.Lock()
	if u.modern != s || err != nil {
		u.mu.Unlock()
		return
	}
	u.modernTools, u.modernSkipped = list, skipped
	changed := u.use(u.legacyTools, u.legacySkipped)
	u.mu.Unlock()
	u.listed(ListTools, changed, nil)
}

// merged is the server's tools for clients of every revision (u.mu held):
// those of the 2025-11-25 list, each with the bytes the server lists it in
// at ModernProtocol when it lists it there too (and the higher of the two
// risks they give it), else offered to 2025 clients only; and those it
// lists only at ModernProtocol, offered to those clients only.
func (u *Server) merged(legacy []*tools.Tool) []*tools.Tool {
	if u.modern == nil {
		return legacy
	}
	modern := map[string]*tools.Tool{}
	for _, t := range u.modernTools {
		modern[t.Name] = t
	}
	out := make([]*tools.Tool, 0, len(legacy)+len(u.modernTools))
	for _, t := range legacy {
		m := modern[t.Name]
		delete(modern, t.Name)
		if m == nil {
			out = append(out, t.ForRevisions(tools.LegacyOnly, nil))
			continue
		}
		if m.Risk.Above(t.Risk) { // each revision's clients run the same tool
			t = t.WithRisk(m.Risk, "as listed at "+ModernProtocol)
		}
		wire := m.Wire
		if wire == nil {
			wire = m.Listing
		}
		both := t.ForRevisions("", wire)
		both.ModernPlace = m.Place
		out = append(out, both)
	}
	for _, t := range modern {
		out = append(out, t.ForRevisions(ModernProtocol, nil))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// sessionFor is the session a call goes on (u.mu held): at ModernProtocol
// for a client that speaks it and for a tool the server offers only
// there; else the 2025 session.
func (u *Server) sessionFor(name string, r *Relay) *mcp.ClientSession {
	if u.modern == nil {
		return u.session
	}
	if r != nil && r.Modern {
		return u.modern
	}
	for _, t := range u.tools {
		if t.Name == name && t.Revision == ModernProtocol {
			return u.modern
		}
	}
	return u.session
}

// modernParams adds to a call what a ModernProtocol client's request
// carries for the server: its capabilities and log level (so the server
// asks it only for what it can give, and logs only when asked) and the
// answers to an input-required result with the state that came with it.
func modernParams(p *mcp.CallToolParams, r *Relay) {
	if r == nil || !r.Modern {
		return
	}
	//lint:ignore SA1019 deprecated in 2026-07-28 but in use: a drop-in gateway passes it on
	for _, k := range []string{mcp.MetaKeyClientCapabilities, mcp.MetaKeyLogLevel} {
		if v, ok := r.Meta[k]; ok {
			if p.Meta == nil {
				p.Meta = mcp.Meta{}
			}
			p.Meta[k] = v
		}
	}
	p.InputResponses, p.RequestState = r.InputResponses, r.RequestState
}

// inputRequired refuses an input-required result for a caller that cannot
// answer it (the agent's own model, the gate API, a 2025 client): only a
// ModernProtocol client gets it, to answer.
func (u *Server) inputRequired(res *mcp.CallToolResult, r *Relay) error {
	if res.InputRequests == nil || (r != nil && r.Modern) {
		return nil
	}
	kinds, _ := json.Marshal(res.InputRequests)
	return tools.Refuse("the %s MCP server asks the client for input before it goes on (%s), which only an MCP client speaking %s can give; the call did not finish",
		u.spec.Name, tools.Truncate(u.cfg.Redact(string(kinds)), 300), ModernProtocol)
}

// notAccepted is the server's JSON-RPC error answering a call when it says
// the call was not taken (malformed, an unknown method, invalid params, a
// capability or header the client lacks, an unsupported revision): nothing
// ran, and the client is answered with the same error. Other errors (an
// internal error during a write) leave the outcome unknown.
func notAccepted(err error) *jsonrpc.Error {
	var rpc *jsonrpc.Error
	if err == nil || !errors.As(err, &rpc) {
		return nil
	}
	switch rpc.Code {
	case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams,
		codeHeaderMismatch, mcp.CodeMissingRequiredClientCapabilities, mcp.CodeUnsupportedProtocolVersion:
		return rpc
	}
	return nil
}

// codeHeaderMismatch is SEP-2575's error for an MCP-Protocol-Version
// header the request's _meta does not match.
const codeHeaderMismatch = -32020
