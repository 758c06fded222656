package gate

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// Outside is how agents that Countersign does not run have their calls
// gated, over the gate API and over MCP alike: each call is recorded in its
// session's run; the same intent asked again while it waits, or within the
// intent window after a person decided it, is that call, never a second
// action, whether or not the first request was there to receive the
// outcome; a caller may wait for the outcome; an agent that means a second
// identical action says so (OutsideCall.NewIntent).
type Outside struct {
	Gate  *Gate
	Store *storage.Store
	// Changed, when set, tells when a call changed, here or on another
	// instance (the core's bus, whose catch-up signals every watched call
	// when notices may have been lost); it returns a stop function. The
	// call is read again only then.
	Changed func(callID string) (<-chan struct{}, func())
	// Recheck is how often a waited-for call is read again besides (0:
	// never with Changed; 250 ms without).
	Recheck time.Duration

	stopMu sync.Mutex
	stop   chan struct{} // closed by StopWaiting
}

// StopWaiting ends every Wait, now and after: a server that stops answers
// each request it holds with the call as it stands (the client asks again,
// of another instance or after the restart: the same action), before its
// streams end. The call itself waits on for its person.
func (o *Outside) StopWaiting() {
	o.stopMu.Lock()
	defer o.stopMu.Unlock()
	if o.stop == nil {
		o.stop = make(chan struct{})
	}
	select {
	case <-o.stop:
	default:
		close(o.stop)
	}
}

// stopped is closed once StopWaiting was called.
func (o *Outside) stopped() <-chan struct{} {
	o.stopMu.Lock()
	defer o.stopMu.Unlock()
	if o.stop == nil {
		o.stop = make(chan struct{})
	}
	return o.stop
}

// OutsideCall is one call an outside agent asks for.
type OutsideCall struct {
	Agent *models.Agent
	// Session is the agent's conversation (the gate API's session, an MCP
	// session or the conversation a request names): one run each.
	Session    string
	CustomerID string
	// Context is what the agent says about the call, for the approver.
	Context string
	Tool    string
	Args    []byte // JSON; empty is {}
	// IdempotencyKey is the agent's Idempotency-Key, as it sent it (""
	// none): see keyed.
	IdempotencyKey string
	// Key is the Idempotency-Key scoped to the agent (set by Ask).
	Key string
	// NewIntent: the agent means a second identical action (a new
	// Idempotency-Key, _meta["countersign/new-intent"]).
	NewIntent bool
}

// Asked is the call an Ask made or joined.
type Asked struct {
	// Outcome is the gate's answer.
	Outcome Outcome
	// Call is the call as recorded, read back when it waits or was joined
	// (nil for a call that ended at once: Record reads it).
	Call *models.ToolCall
	// Session is the session of the call's run: the one asked for, or, for
	// a joined call, the session it was first asked in.
	Session string
	// Joined: the same call, asked before and still waiting or decided
	// within the intent window, rather than a new one.
	Joined bool
	// SameKey: the call the same Idempotency-Key made, for the same
	// request asked again (Call and Session are that call's).
	SameKey bool
}

// Replay reports whether the answer is a call a person decided before,
// replayed: it ended already (Joined, and no longer under way).
func (a Asked) Replay() bool { return a.Joined && a.Call != nil && !a.Call.Status.UnderWay() }

type viaKey struct{}

// WithVia is ctx saying how the agent came (an OAuth client and the person
// who authorized it): the calls it asks for are recorded as the agent's,
// with those words beside its name in the audit log.
func WithVia(ctx context.Context, via string) context.Context {
	return context.WithValue(ctx, viaKey{}, via)
}

// ViaOf is what WithVia said ("" nothing).
func ViaOf(ctx context.Context) string {
	v, _ := ctx.Value(viaKey{}).(string)
	return v
}

// Ask records the call in its session's run and puts it through the gate;
// a call sent with an Idempotency-Key follows the key's rules (keyed).
func (o *Outside) Ask(ctx context.Context, req OutsideCall) (Asked, error) {
	if strings.TrimSpace(req.IdempotencyKey) != "" {
		return o.keyed(ctx, req)
	}
	return o.ask(ctx, req)
}

func (o *Outside) ask(ctx context.Context, req OutsideCall) (Asked, error) {
	run, err := o.Store.AgentRun(ctx, req.Agent, req.Session, req.CustomerID)
	if err != nil {
		if errors.Is(err, models.ErrConflict) {
			return Asked{}, fault.Errorf(fault.Conflict, "session %s belongs to another customer; use a session per conversation", tools.Truncate(req.Session, 64))
		}
		return Asked{}, err
	}
	args := req.Args
	if len(args) == 0 {
		args = []byte("{}")
	}
	actor := "agent:" + req.Agent.Name
	if via := ViaOf(ctx); via != "" {
		actor = tools.Truncate(actor+" ("+via, 198) + ")" // the audit's actor holds 200
	}
	out, err := o.Gate.Call(ctx, CallRequest{RunID: run.ID, CustomerID: req.CustomerID, Channel: run.Channel, Tool: req.Tool, Args: args,
		Actor: actor, AgentID: req.Agent.ID, AgentKey: req.Key, Context: req.Context, JoinSame: true, NewIntent: req.NewIntent})
	if err != nil {
		return Asked{}, err
	}
	asked := Asked{Outcome: out, Session: req.Session, Joined: out.Joined}
	if !out.Joined && !out.Status.Open() {
		return asked, nil // ended at once: not read back (the gateway's hot path)
	}
	if asked.Call, err = o.Store.ToolCall(ctx, out.CallID); err != nil {
		return Asked{}, err
	}
	if out.Joined && asked.Call.RunID != run.ID {
		first, err := o.Store.Run(ctx, asked.Call.RunID)
		if err != nil {
			return Asked{}, err
		}
		asked.Session = first.Session
	}
	return asked, nil
}

// AskResult is how an Ask ended.
type AskResult struct {
	Asked Asked
	Err   error
}

// AskApart is Ask run apart from its asker, who may stop waiting and come
// back (a ModernProtocol client answering what the tool's server asked of
// it in an input-required round trip): the call is decided, recorded and,
// when allowed, run to its end, and how the Ask ended is sent once.
func (o *Outside) AskApart(ctx context.Context, req OutsideCall) <-chan AskResult {
	done := make(chan AskResult, 1)
	o.Gate.inflight.Add(1)
	go func() {
		defer o.Gate.inflight.Done()
		asked, err := o.Ask(context.WithoutCancel(ctx), req)
		done <- AskResult{asked, err}
	}()
	return done
}

// Stopping is closed once StopWaiting was called: what waits on a client
// ends.
func (o *Outside) Stopping() <-chan struct{} { return o.stopped() }

// AgentsCall is the call callID with its run when the agent ag asked for
// it; another agent's call, or none, is not found (alike, so that an agent
// learns nothing of another's).
func (o *Outside) AgentsCall(ctx context.Context, ag *models.Agent, callID string) (*models.ToolCall, *models.Run, error) {
	call, err := o.Store.ToolCall(ctx, callID)
	if err == nil {
		var run *models.Run
		if run, err = o.Store.Run(ctx, call.RunID); err == nil && run.AgentID == ag.ID {
			return call, run, nil
		}
	}
	if err != nil && !errors.Is(err, models.ErrNotFound) {
		return nil, nil, fault.Wrap(err, "could not read the call")
	}
	return nil, nil, fault.Errorf(fault.NotFound, "call %s was not found", tools.Truncate(callID, 64))
}

// Record is the asked call as recorded.
func (o *Outside) Record(ctx context.Context, asked Asked) (*models.ToolCall, error) {
	if asked.Call != nil {
		return asked.Call, nil
	}
	if c := asked.Outcome.Call; c != nil {
		return c, nil // as its outcome was committed: no read back
	}
	return o.Store.ToolCall(ctx, asked.Outcome.CallID)
}

// Brief is the asked call as far as the gate's outcome tells it, without
// reading it back when it ended at once: id, status, result, error, and
// the decision's rule and reason.
func (a Asked) Brief() *models.ToolCall {
	if a.Call != nil {
		return a.Call
	}
	out := a.Outcome
	return &models.ToolCall{ID: out.CallID, Status: out.Status, Result: string(out.Result), Error: out.Error,
		Decision: string(out.Decision.Verdict), Reason: out.Decision.Reason, Rule: out.Decision.Rule}
}

// Waiting tells a call whose outcome is still to come: a person has not
// decided, or Countersign is about to run it or runs it. (An approved call
// of a decision-only tool is the agent's to carry out: not waiting.)
func (o *Outside) Waiting(c *models.ToolCall) bool {
	if c.Status == models.CallApproved {
		// Approved, a decision-only tool is the agent's to carry out.
		t, ok := o.Gate.Tools().Get(c.Tool)
		return ok && t.Executes()
	}
	return c.Status.Open()
}

// Wait holds until the call's outcome is known, d has passed or ctx ends,
// and returns the call as it stands then. tick, when set, is called every
// `every` while it still waits (to tell a client it is not forgotten).
func (o *Outside) Wait(ctx context.Context, call *models.ToolCall, d time.Duration, every time.Duration, tick func(*models.ToolCall)) *models.ToolCall {
	if !o.Waiting(call) {
		return call
	}
	changed := make(<-chan struct{})
	recheck := o.Recheck
	if o.Changed != nil {
		ch, stop := o.Changed(call.ID)
		defer stop()
		changed = ch
		// What changed between the read the caller holds and the watch.
		if now, err := o.Store.ToolCall(ctx, call.ID); err == nil {
			call = now
		}
		if !o.Waiting(call) {
			return call
		}
	} else if recheck == 0 {
		recheck = 250 * time.Millisecond
	}
	stopping := o.stopped()
	timer := time.NewTimer(d)
	defer timer.Stop()
	var again <-chan time.Time
	if recheck > 0 {
		t := time.NewTicker(recheck)
		defer t.Stop()
		again = t.C
	}
	var ticks <-chan time.Time
	if tick != nil && every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		ticks = t.C
	}
	for {
		select {
		case <-ctx.Done():
			// Ended early (the agent's key revoked, the server stopping,
			// the client gone): the call as it stands, read once more.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			if now, err := o.Store.ToolCall(rctx, call.ID); err == nil {
				call = now
			}
			return call
		case <-timer.C:
			return call
		case <-stopping:
			return call
		case <-ticks:
			tick(call)
			continue
		case <-changed:
		case <-again:
		}
		if now, err := o.Store.ToolCall(ctx, call.ID); err == nil {
			call = now
		}
		if !o.Waiting(call) {
			return call
		}
	}
}

// HandedOver records when the agent was first handed the outcome of a call
// that waited for a person, for the people reading the record. It decides
// nothing: the same intent asked again is that call within the intent
// window, handed over or not.
func (o *Outside) HandedOver(ctx context.Context, call *models.ToolCall) error {
	if call.Decision != models.DecidedNeedsApproval || o.Waiting(call) || call.DeliveredAt != nil {
		return nil
	}
	return o.Store.MarkDelivered(ctx, call.ID)
}
