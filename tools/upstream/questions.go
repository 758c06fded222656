package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Questions is where what a 2025 server asks of the client during a call
// (sampling, elicitation, its roots) waits for a ModernProtocol client,
// which takes no requests: the client is answered with an input-required
// result naming the questions (Pending), asks again with its answers
// (Answer), and the server's request is answered with them, while the
// call it belongs to runs on. The server's request waits at most TTL for
// its answer, and not once the client is gone (Close).
type Questions struct {
	// TTL is how long a question waits for the client's answer (0:
	// DefaultQuestionTTL); the server then gets an error.
	TTL time.Duration
	// Stop, when closed, ends every wait (the server is stopping).
	Stop <-chan struct{}

	mu      sync.Mutex
	next    int
	open    map[string]*question
	closed  string        // why no answer will come ("": one may)
	arrived chan struct{} // closed when a question is asked; replaced once read
}

// DefaultQuestionTTL is how long a question waits for its client: a person
// answering an elicitation takes minutes, not hours.
const DefaultQuestionTTL = 10 * time.Minute

type question struct {
	req    mcp.InputRequest
	sent   bool // named to the client in an input-required result
	answer chan mcp.InputResponse
}

// Arrived is closed once a question waits that the client was not yet
// shown.
func (q *Questions) Arrived() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.arrived == nil {
		q.arrived = make(chan struct{})
	}
	for _, x := range q.open {
		if !x.sent {
			select {
			case <-q.arrived:
			default:
				close(q.arrived)
			}
			break
		}
	}
	return q.arrived
}

// Pending is every question still waiting for the client's answer, under
// the ids it answers to; each is marked shown.
func (q *Questions) Pending() mcp.InputRequestMap {
	q.mu.Lock()
	defer q.mu.Unlock()
	m := mcp.InputRequestMap{}
	for id, x := range q.open {
		m[id] = x.req
		x.sent = true
	}
	q.arrived = nil
	return m
}

// Answer hands the client's answers to the questions they name; answers to
// questions not waiting (answered already, or never asked) are dropped.
func (q *Questions) Answer(answers mcp.InputResponseMap) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for id, a := range answers {
		if x := q.open[id]; x != nil && a != nil {
			delete(q.open, id)
			x.answer <- a // buffered: one answer each
		}
	}
}

// Close ends the wait of every question, now and after: why says why no
// answer will come.
func (q *Questions) Close(why string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed == "" {
		q.closed = why
	}
	for id, x := range q.open {
		delete(q.open, id)
		close(x.answer)
	}
	q.arrived = nil // nothing waits to be shown now, nor will
}

// ask puts the server's request to the client and waits for its answer.
func (q *Questions) ask(ctx context.Context, req mcp.InputRequest) (mcp.InputResponse, error) {
	x := &question{req: req, answer: make(chan mcp.InputResponse, 1)}
	q.mu.Lock()
	if q.closed != "" {
		q.mu.Unlock()
		return nil, errors.New("countersign: " + q.closed)
	}
	q.next++
	id := "countersign-" + strconv.Itoa(q.next)
	if q.open == nil {
		q.open = map[string]*question{}
	}
	q.open[id] = x
	if q.arrived != nil {
		select {
		case <-q.arrived:
		default:
			close(q.arrived)
		}
	}
	q.mu.Unlock()
	ttl := q.TTL
	if ttl <= 0 {
		ttl = DefaultQuestionTTL
	}
	timer := time.NewTimer(ttl)
	defer timer.Stop()
	select {
	case a, ok := <-x.answer:
		if ok {
			return a, nil
		}
		q.mu.Lock()
		why := q.closed
		q.mu.Unlock()
		return nil, errors.New("countersign: " + why)
	case <-timer.C:
		q.forget(id)
		return nil, fmt.Errorf("countersign: the client did not answer within %s", ttl)
	case <-q.Stop:
		q.forget(id)
		return nil, errors.New("countersign: the gateway is stopping; the client was not asked")
	case <-ctx.Done():
		q.forget(id)
		return nil, ctx.Err()
	}
}

func (q *Questions) forget(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.open, id)
}

// askModern asks r's ModernProtocol client what the server asked, if the
// client said it can answer it (the capability named in its request's
// _meta).
func askModern[T any, PT interface {
	*T
	mcp.InputResponse
}](ctx context.Context, r *Relay, capability string, req mcp.InputRequest) (PT, error) {
	if !r.Declares(capability) {
		return nil, fmt.Errorf("countersign: the client this call came from does not support %s", capability)
	}
	a, err := r.Questions.ask(ctx, req)
	if err != nil {
		return nil, err
	}
	res, ok := a.(PT)
	if !ok {
		return nil, fmt.Errorf("countersign: the client answered with %T where %T was asked for", a, PT(nil))
	}
	return res, nil
}

// Declares reports whether a ModernProtocol client's request says it can
// do capability (a key of its client capabilities in _meta).
func (r *Relay) Declares(capability string) bool {
	raw, err := json.Marshal(r.Meta[mcp.MetaKeyClientCapabilities])
	if err != nil {
		return false
	}
	var caps map[string]json.RawMessage
	if json.Unmarshal(raw, &caps) != nil {
		return false
	}
	_, ok := caps[capability]
	return ok
}
