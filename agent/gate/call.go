package gate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/agent/telemetry"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// Call is the entry point for a tool call, in five steps: normalize and
// check the arguments, decide, record (deciding again where the first
// decision read earlier calls, with grants and limits applied), and only
// then execute. The decision is committed before the tool runs; the result
// after. Only storage failures return an error: an invalid, denied or
// failed call is an Outcome the model should see.
func (g *Gate) Call(ctx context.Context, req CallRequest) (Outcome, error) {
	if req.RunID == "" {
		return Outcome{}, fault.Errorf(fault.Invalid, "a tool call needs a run")
	}
	name := tools.Truncate(req.Tool, 64)
	spanName := name // a name an agent made up does not become a span's name
	if _, ok := g.Tools().Get(name); !ok {
		spanName = "(unknown tool)"
	}
	ctx, span := telemetry.ToolSpan(ctx, spanName)
	c, invalid := g.check(ctx, req)
	if invalid != nil {
		out, err := g.recordInvalid(ctx, req, invalid.risk, invalid.reason)
		telemetry.EndTool(span, telemetry.ToolCall{Tool: name, ID: out.CallID, Status: string(out.Status)})
		return out, err
	}
	c.trace = telemetry.Parent(ctx)
	if err := g.decideAndRecord(ctx, c); err != nil {
		var j *joined
		if errors.As(err, &j) {
			out := j.outcome()
			telemetry.EndTool(span, telemetry.ToolCall{Tool: name, ID: out.CallID, Verdict: string(out.Decision.Verdict),
				Rule: out.Decision.Rule, PolicyVersion: out.Decision.PolicyVersion, Status: string(out.Status)})
			return out, nil
		}
		span.End()
		return Outcome{}, err
	}
	d := c.rec.decision
	g.metrics.Decided(string(d.Verdict), c.tool.Name, d.Rule)
	out, err := g.settle(ctx, c)
	telemetry.EndTool(span, telemetry.ToolCall{Tool: name, ID: c.call.ID, Verdict: string(d.Verdict), Rule: d.Rule,
		PolicyVersion: d.PolicyVersion, Status: string(out.Status)})
	return out, err
}

// decideAndRecord is the decision, in a span of its own: the policy asked,
// and the call recorded with what it decided.
func (g *Gate) decideAndRecord(ctx context.Context, c *gateCall) error {
	ctx, span := telemetry.Tracer().Start(ctx, "decide")
	defer span.End()
	if err := g.decide(ctx, c); err != nil {
		return err
	}
	return g.record(ctx, c)
}

// gateCall is one call on its way through the gate's steps.
type gateCall struct {
	req CallRequest
	// trace is the call's span, kept with it (telemetry.Parent).
	trace string
	tool  *tools.Tool
	norm  tools.Normalized
	// pol is the policy in force when the call came, with tool from the
	// same moment.
	pol   policy.Policy
	in    policy.Input
	facts *gateFacts
	// decided is the first decision, first what it records, call the record.
	decided policy.Decision
	first   recordedDecision
	call    *models.ToolCall
	// rec is what was recorded, granted the standing grant that allowed
	// the call instead of a person, if one did.
	rec     recordedDecision
	granted *grantUse
	// asked is the audit event that recorded the call, as stored.
	asked models.AuditEvent
}

// invalidCall is a call that cannot run as asked, and why, in words for
// the model.
type invalidCall struct {
	risk   tools.Risk
	reason string
}

// check finds the tool, normalizes the arguments against its schema and
// asks the tool's own check whether the call can succeed at all.
func (g *Gate) check(ctx context.Context, req CallRequest) (*gateCall, *invalidCall) {
	now := g.inForce.Load() // the tools and the policy of one moment
	tool, ok := now.tools.Get(req.Tool)
	if !ok {
		return nil, &invalidCall{reason: fmt.Sprintf("there is no tool named %q; the tools are: %s",
			tools.Truncate(req.Tool, 64), strings.Join(g.toolNames(), ", "))}
	}
	norm, err := tool.Normalize(req.Args)
	if err != nil {
		return nil, &invalidCall{risk: tool.Risk, reason: err.Error()}
	}
	if tool.HasCheck() {
		cerr := tool.Check(ctx, tools.Call{RunID: req.RunID, CustomerID: req.CustomerID, CustomerName: req.CustomerName}, norm)
		var refusal *tools.RefusalError
		switch {
		case errors.As(cerr, &refusal):
			// It cannot succeed: the model is told why, and no person is asked.
			return nil, &invalidCall{risk: tool.Risk, reason: refusal.Message}
		case cerr != nil:
			g.log.Warn("tool check failed; deciding without it", "tool", tool.Name, "err", cerr)
		}
	}
	return &gateCall{req: req, tool: tool, norm: norm, pol: now.policy}, nil
}

// decide asks the policy, with the facts as the store has them now, and
// prepares the call's record.
func (g *Gate) decide(ctx context.Context, c *gateCall) error {
	c.facts = &gateFacts{store: g.store, business: g.business, req: c.req}
	c.in = policy.Input{Tool: c.tool.Name, Risk: c.tool.Risk, Args: c.norm.Map, Facts: c.facts}
	d, err := c.pol.Decide(ctx, c.in)
	if err != nil {
		return fault.Wrap(err, "the policy could not decide")
	}
	c.decided, c.call = d, newCallRecord(c.req, c.tool, c.norm)
	c.call.Trace = c.trace
	c.first, err = prepareDecision(c.call, d, c.tool.Executes())
	return err
}

func newCallRecord(req CallRequest, tool *tools.Tool, norm tools.Normalized) *models.ToolCall {
	call := callRecord(req, tool.Name, tool.Risk)
	call.Args, call.ArgsHash, call.ToolHash = string(norm.JSON), norm.Hash, tool.DefinitionHash()
	call.AgentKey, call.Context = req.AgentKey, req.Context
	return call
}

// callRecord is a new call's record as every call has it: its ids, where
// it came from and what the model sent.
func callRecord(req CallRequest, tool string, risk tools.Risk) *models.ToolCall {
	call := &models.ToolCall{ID: models.NewID("call"), RunID: req.RunID, CustomerID: req.CustomerID, TurnID: req.TurnID,
		ModelCallID: req.ModelCallID, Tool: tool, Risk: string(risk), RawArgs: rawForRecord(req.Args)}
	call.IdempotencyKey = IdempotencyKey(call.ID)
	return call
}

// record commits the call with its decision and audit event. A decision
// that read earlier calls (totals, counts), or that asks for a person, is
// made again in the transaction that records the call, where every earlier
// call is visible, so concurrent calls cannot all slip under one threshold
// (decideAgain). It returns a *joined when the call was already asked for.
func (g *Gate) record(ctx context.Context, c *gateCall) error {
	err := g.store.Write(ctx, func(tx *storage.Tx) error {
		c.rec, c.granted = c.first, nil
		if c.facts.used || c.decided.Verdict == policy.NeedsApproval {
			if err := g.decideAgain(ctx, tx, c); err != nil {
				return err
			}
		}
		return insertCall(tx, c)
	})
	if err == nil {
		return nil
	}
	var j *joined
	var e *fault.Error
	switch {
	case errors.As(err, &j):
		return j
	case errors.As(err, &e):
		return e
	}
	return fault.Wrap(err, "the tool call could not be recorded")
}

// decideAgain decides the call again inside the transaction, one call of
// the customer (or anonymous run) at a time on every instance; then joins
// the same call an outside agent already asked for, applies a standing
// grant, and the limits on waiting actions.
func (g *Gate) decideAgain(ctx context.Context, tx *storage.Tx, c *gateCall) error {
	req := c.req
	scope := "run:" + req.RunID
	if req.CustomerID != "" {
		scope = "customer:" + req.CustomerID
	}
	if err := tx.Serialize(scope); err != nil {
		return err
	}
	c.in.Facts = &txFacts{tx: tx, gateFacts: gateFacts{store: g.store, business: g.business, req: req}}
	again, err := c.pol.Decide(ctx, c.in)
	if err != nil {
		return fault.Wrap(err, "the policy could not decide")
	}
	if again.Verdict == policy.NeedsApproval && req.JoinSame && !req.NewIntent && req.AgentID != "" {
		if err := joinSame(tx, c, g.intentWindow); err != nil {
			return err
		}
	}
	if again.Verdict == policy.NeedsApproval {
		if again, c.granted, err = grantFor(tx, req, c.tool, c.norm, again); err != nil {
			return err
		}
	}
	if again.Verdict == policy.NeedsApproval {
		if again, err = g.limitPending(tx, req, again); err != nil {
			return err
		}
	}
	if again != c.decided {
		c.rec, err = prepareDecision(c.call, again, c.tool.Executes())
	}
	return err
}

// joinSame makes one action per intent: an outside agent's call the same
// as one of its calls already waiting is that call (a *joined). It is
// looked for with the agent's calls taken one at a time, so two asking at
// once find each other.
func joinSame(tx *storage.Tx, c *gateCall, window time.Duration) error {
	if err := tx.Serialize("agent:" + c.req.AgentID); err != nil {
		return err
	}
	same, err := tx.SameAgentCall(c.req.AgentID, c.req.CustomerID, c.tool.Name, string(c.norm.JSON), c.norm.Hash, window)
	if err == nil {
		return &joined{call: same}
	}
	if errors.Is(err, models.ErrNotFound) {
		return nil
	}
	return err
}

// insertCall writes the call as decided, with its audit event (and the
// grant's use, when a grant allowed it).
func insertCall(tx *storage.Tx, c *gateCall) error {
	call := c.call
	c.rec.apply(call)
	if c.granted != nil {
		// What a person would have had to approve, for replays.
		call.RequiredApprovals, call.RequiredRole = 1, c.granted.ruled.Role
	}
	if d := c.rec.decision; d.Verdict == policy.NeedsApproval && d.Expires > 0 {
		at := tx.Now().Add(d.Expires)
		call.ExpiresAt = &at
	}
	if err := tx.CreateToolCall(call); err != nil {
		return err
	}
	actor := c.req.Actor
	if actor == "" {
		actor = "model"
	}
	if err := tx.Audit(models.Event{Actor: actor, Kind: c.rec.kind, Subject: call.ID, Payload: c.rec.payload}); err != nil {
		return err
	}
	c.asked = tx.LastEvent()
	if c.granted != nil {
		return c.granted.audit(tx, call)
	}
	return nil
}

// settle follows the recorded decision: the shadow policy tries the call,
// a waiting action is announced, and an allowed call of a tool Countersign
// runs is executed.
func (g *Gate) settle(ctx context.Context, c *gateCall) (Outcome, error) {
	d := c.rec.decision
	g.tryShadow(ctx, c.req, c.in, c.call)
	out := Outcome{CallID: c.call.ID, Status: c.call.Status, Decision: d, Error: c.call.Error}
	if d.Verdict == policy.NeedsApproval {
		g.notify.ActionChanged(c.call.ID)
	}
	if d.Verdict != policy.Allow || !c.tool.Executes() {
		return out, nil // a decision-only tool's allowed call is the agent's to carry out
	}
	if c.granted == nil && c.call.Decision == models.DecidedAllow {
		ctx = withAsked(ctx, c.asked) // its one event before the outcome's
	}
	return g.execute(ctx, c.call, c.req.CustomerName, c.tool, c.norm)
}
