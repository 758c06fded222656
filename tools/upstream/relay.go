//lint:file-ignore SA1019 sampling, elicitation, roots and logging are deprecated in MCP 2026-07-28 but in use: a drop-in gateway passes them on

package upstream

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Relay is the MCP client a call came from, while its request is open:
// what the upstream says during the call (progress, log messages) and asks
// of the client (sampling, elicitation, its roots) goes to it, on the
// client's own request.
type Relay struct {
	// Session is the client's session with Countersign.
	Session *mcp.ServerSession
	// Ctx is the client's request: what is sent with it goes on that
	// request's stream.
	Ctx context.Context
	// Token is the progress token the client sent (nil: it asked for no
	// progress).
	Token any
	// Modern: the client speaks ModernProtocol (no session). Its call goes
	// to a server that speaks it too at that revision, with the keys of
	// Meta the server reads (the client's capabilities and log level) and
	// the answers to an input-required result (InputResponses, with the
	// RequestState that came with it); an input-required result is the
	// client's to answer (modern.go).
	Modern         bool
	Meta           mcp.Meta
	InputResponses mcp.InputResponseMap
	RequestState   string
	// Questions, for a Modern client whose call goes to a 2025 server:
	// what the server asks of the client during the call waits there for
	// the client's answer, given in an input-required round trip
	// (questions.go).
	Questions *Questions

	mu     sync.Mutex
	result *mcp.CallToolResult // the server's result, decoded, and
	raw    []byte              // as Countersign encoded it
	rpc    *jsonrpc.Error      // or its JSON-RPC error, the call not taken
}

// refused keeps the server's JSON-RPC error not taking the call this
// client made (r may be nil: no client waits).
func (r *Relay) refused(e *jsonrpc.Error) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rpc = e
}

// Refused is the server's JSON-RPC error when it did not take the call
// this client made (nil: it did, or answered otherwise): the client is
// answered with it as the server sent it.
func (r *Relay) Refused() *jsonrpc.Error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rpc
}

// ran keeps the result of the call this client made, as decoded.
func (r *Relay) ran(res *mcp.CallToolResult, raw []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.result, r.raw = res, raw
}

// Result is the server's result of the call this client made, decoded,
// when recorded is its encoding (nil otherwise: decode what was recorded).
// It is handed out once.
func (r *Relay) Result(recorded string) *mcp.CallToolResult {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.result
	if res == nil || string(r.raw) != recorded {
		return nil
	}
	r.result, r.raw = nil, nil
	return res
}

type relayKey struct{}

// WithRelay says that calls made with ctx were asked by r's client.
func WithRelay(ctx context.Context, r *Relay) context.Context {
	return context.WithValue(ctx, relayKey{}, r)
}

func relayOf(ctx context.Context) *Relay {
	r, _ := ctx.Value(relayKey{}).(*Relay)
	return r
}

// begin counts a call in flight on the server (its relay may be nil: a
// call run after a person approved it, with no client waiting on it) and
// returns the progress token Countersign sends the upstream for it.
func (u *Server) begin(r *Relay) string {
	id := "countersign-" + rand.Text() // not to be guessed by another call's server
	u.mu.Lock()
	if u.calls == nil {
		u.calls = map[string]*Relay{}
	}
	u.calls[id] = r
	u.mu.Unlock()
	return id
}

func (u *Server) end(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	r := u.calls[id]
	delete(u.calls, id)
	if r == nil {
		return
	}
	for key, rs := range u.asked { // asked on its stream, never handled
		if rs = slices.DeleteFunc(rs, func(x *Relay) bool { return x == r }); len(rs) == 0 {
			delete(u.asked, key)
		} else {
			u.asked[key] = rs
		}
	}
}

// relayFor is the client a request of the upstream is for, when
// Countersign knows whose call it belongs to. One made as part of a call's
// answer (a 2026 input-required round trip) carries the call's own
// context. Over HTTP, one sent on a call's own stream was noted as that
// call's when it came (watchedBody). Over stdio nothing says which call a
// request or a log message belongs to, and "the one call in flight" is a
// guess that a server asking late defeats (it answered agent A, then asked
// while only B's call was open): such a server is offered no sampling,
// elicitation or roots, and what it asks or logs anyway reaches no agent
// (unattributed).
func (u *Server) relayFor(ctx context.Context, method string, params any) *Relay {
	if r := relayOf(ctx); r != nil {
		return r
	}
	if !u.watched {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	key := askedKey(method, params)
	if rs := u.asked[key]; len(rs) > 0 {
		u.asked[key] = rs[1:]
		if len(rs) == 1 {
			delete(u.asked, key)
		}
		return rs[0]
	}
	return nil
}

// unattributed logs what a server said or asked that no agent's call is
// known to own, and answers a request with the error the server gets.
func (u *Server) unattributed(what, method string) error {
	via := "over stdio, where nothing names the call it is for"
	if u.watched {
		via = "outside a call whose client waits on it"
	}
	if method == "" { // a log line: a chatty server says many
		u.logger().Debug("an MCP server's "+what+" reached no agent: "+via, "server", u.spec.Name)
		return nil
	}
	u.logger().Warn("an MCP server's "+what+" was refused: "+via, "server", u.spec.Name, "method", method)
	return fmt.Errorf("countersign: no client to ask for %s: the request came %s", what, via)
}

// askedKey is a request of the upstream's as its method and parameters.
func askedKey(method string, params any) string {
	b, _ := json.Marshal(params)
	if string(b) == "null" {
		b = []byte("{}")
	}
	return method + " " + string(b)
}

// progress passes an upstream's progress on a call to its client, under
// the client's own token; on is the call whose stream it came on (nil:
// none known, stdio).
func (u *Server) progress(p *mcp.ProgressNotificationParams, on *Relay) {
	tok, _ := p.ProgressToken.(string)
	u.mu.Lock()
	r := u.calls[tok]
	u.mu.Unlock()
	if r == nil || r.Token == nil || (on != nil && on != r) {
		return
	}
	q := redacted(u, p)
	q.ProgressToken = r.Token
	_ = r.Session.NotifyProgress(r.Ctx, q)
}

// watchedBody is an HTTP upstream's answer to a call as it streams: the
// progress and log messages on it reach the call's client in the order the
// upstream sent them, before the call's result (the SDK hands its client
// notifications on a goroutine of their own, after the result at times),
// and its requests to the client are noted as this call's (relayFor). When
// the call's result is asked for (raw), the stream reaches the SDK an
// event at a time, each as it came but the one that answers the call with
// a big result, whose result the SDK gets a stand-in for (lightAnswer).
type watchedBody struct {
	io.ReadCloser
	u           *Server
	relay       *Relay     // nil: no client waits on the call
	raw         *rawResult // nil: its result is not asked for
	line, event []byte
	// With raw: the event being read as it came (whole), its lines that
	// are not data, and what the SDK is to read next.
	whole, fields, out []byte
	in                 []byte
	err                error
}

func (b *watchedBody) Read(p []byte) (int, error) {
	if b.raw == nil {
		if len(b.out) > 0 { // held before an event grew too big to hold
			n := copy(p, b.out)
			b.out = b.out[n:]
			return n, nil
		}
		n, err := b.ReadCloser.Read(p)
		b.feed(p[:n])
		return n, err
	}
	for len(b.out) == 0 && b.err == nil {
		if b.in == nil {
			b.in = make([]byte, 32<<10)
		}
		n, err := b.ReadCloser.Read(b.in)
		b.feed(b.in[:n])
		if err != nil {
			b.err = err
			b.out = append(append(b.out, b.whole...), b.line...) // an event cut short, as it came
			b.whole, b.line = nil, nil
		}
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	if len(b.out) == 0 {
		b.out = nil
		if n == 0 {
			return 0, b.err
		}
	}
	return n, nil
}

// feed takes what was read of the stream, a line at a time. An event
// longer than the SDK reads (mcp.DefaultMaxEventSize: a server that never
// ends one) is not held: it and the rest of the stream reach the SDK as
// they come, which refuses it.
func (b *watchedBody) feed(rest []byte) {
	if b.raw != nil && len(b.whole)+len(b.line)+len(rest) > mcp.DefaultMaxEventSize {
		b.out = append(append(append(b.out, b.whole...), b.line...), rest...)
		b.raw, b.whole, b.fields, b.line, b.event = nil, nil, nil, nil, nil
		return
	}
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			if len(b.line)+len(rest) <= maxWatchedLine || b.raw != nil {
				b.line = append(b.line, rest...)
			}
			return
		}
		b.line = append(b.line, rest[:i]...)
		rest = rest[i+1:]
		if b.raw != nil {
			b.whole = append(append(b.whole, b.line...), '\n')
		}
		line := bytes.TrimSuffix(b.line, []byte("\r"))
		switch {
		case len(line) == 0:
			b.dispatch()
		case bytes.HasPrefix(line, []byte("data:")):
			if len(b.event) > 0 {
				b.event = append(b.event, '\n')
			}
			b.event = append(b.event, bytes.TrimPrefix(line[5:], []byte(" "))...)
		case b.raw != nil:
			b.fields = append(append(b.fields, b.line...), '\n')
		}
		b.line = b.line[:0]
	}
}

// maxWatchedLine bounds what is kept of one line of a stream to look at:
// a longer one (a big result) is not a notification to pass on, and is
// kept only when the result is asked for (the SDK bounds an event).
const maxWatchedLine = 1 << 20

// dispatch acts on an event read whole, and hands it on to the SDK.
func (b *watchedBody) dispatch() {
	data := b.event
	b.event = b.event[:0]
	if b.raw != nil {
		whole, fields := b.whole, b.fields
		b.whole, b.fields = nil, nil
		if light, answer := b.raw.lightAnswer(data); answer {
			if len(light) != len(data) { // a stand-in for a big result
				whole = append(append(append(fields, "data: "...), light...), "\n\n"...)
			}
			b.out = append(b.out, whole...)
			return
		}
		b.out = append(b.out, whole...)
	}
	if len(data) == 0 || (len(data) > maxWatchedLine && b.raw == nil) {
		return
	}
	var m response
	if json.Unmarshal(data, &m) != nil || m.Method == "" {
		return // a response: only its result was wanted (raw)
	}
	u, r := b.u, b.relay
	if r == nil {
		return
	}
	switch {
	case m.ID == nil && m.Method == "notifications/progress":
		var p mcp.ProgressNotificationParams
		if json.Unmarshal(m.Params, &p) == nil {
			u.progress(&p, r)
		}
	case m.ID == nil && m.Method == "notifications/message":
		var p mcp.LoggingMessageParams
		if json.Unmarshal(m.Params, &p) == nil {
			_ = r.Session.Log(r.Ctx, redacted(u, &p)) // at the level the client set
		}
	case m.ID != nil:
		b.asked(m)
	}
}

// asked notes a request of the server to the client on the call's stream
// as the call's (relayFor).
func (b *watchedBody) asked(m response) {
	var params any
	switch m.Method {
	case "sampling/createMessage":
		params = &mcp.CreateMessageWithToolsParams{}
	case "elicitation/create":
		params = &mcp.ElicitParams{}
	case "roots/list":
		params = &mcp.ListRootsParams{}
	default:
		return
	}
	if len(m.Params) > 0 && json.Unmarshal(m.Params, params) != nil {
		return
	}
	key := askedKey(m.Method, params)
	u, r := b.u, b.relay
	u.mu.Lock()
	if u.asked == nil {
		u.asked = map[string][]*Relay{}
	}
	u.asked[key] = append(u.asked[key], r)
	u.mu.Unlock()
}

// watching is an HTTP upstream's transport: a call's answer that streams
// is read through watchedBody when the call's client waits on it.
type watching struct {
	u    *Server
	next http.RoundTripper
}

func (w watching) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	r, raw := relayOf(req.Context()), rawResultOf(req.Context())
	if raw != nil {
		raw.sent(req)
	}
	switch ct := resp.Header.Get("Content-Type"); {
	case isListen(req) && strings.HasPrefix(ct, "application/json"):
		return listenAnswer(resp), nil // listen.go
	case (r != nil || raw != nil) && strings.HasPrefix(ct, "text/event-stream"):
		resp.Body = &watchedBody{ReadCloser: resp.Body, u: w.u, relay: r, raw: raw}
	case (r != nil || raw != nil) && strings.HasPrefix(ct, "application/json"):
		return w.jsonAnswer(resp, r, raw)
	}
	return resp, nil
}
