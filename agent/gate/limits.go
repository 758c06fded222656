package gate

import (
	"fmt"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models/storage"
)

// Limits bound what one conversation or customer can put in front of
// people. Zero values take the defaults.
type Limits struct {
	// MaxPendingPerRun is how many actions one run may have waiting (3).
	MaxPendingPerRun int
	// MaxPendingPerCustomer is how many one signed-in customer may have
	// waiting across their runs (10).
	MaxPendingPerCustomer int
	// MaxPendingPerAgent is how many one outside agent may have waiting
	// across its sessions and the customers it names (50), and
	// MaxPendingPerSession how many in one of its sessions (10: a coding
	// agent writing several files at once); MaxPendingPerRun is for the
	// conversations Countersign runs itself.
	MaxPendingPerAgent, MaxPendingPerSession int
}

// limitPending turns a needs_approval decision into a refusal when the run
// or the customer already has as many actions waiting as the gate allows:
// nobody can bury the queue, and the model is told to wait.
func (g *Gate) limitPending(tx *storage.Tx, req CallRequest, d policy.Decision) (policy.Decision, error) {
	inRun, forCustomer, err := tx.PendingActionCounts(req.RunID, req.CustomerID)
	if err != nil {
		return d, err
	}
	deny := func(rule, reason string) policy.Decision {
		return policy.Decision{Verdict: policy.Deny, Rule: rule, Reason: reason, PolicyVersion: d.PolicyVersion}
	}
	if req.AgentID != "" {
		// An outside agent's session (an MCP session, a gate API session)
		// is told in words for an agent, not for a customer.
		if n := g.Limits.pendingPerSession(); inRun >= int64(n) {
			return deny("limit:pending_per_session", fmt.Sprintf("limit reached, not a policy decision: this session already has %d calls waiting for a person, "+
				"the most a session may have waiting; wait for those to be decided (asking for one of them again returns it), then ask for more", inRun)), nil
		}
	} else if n := g.Limits.pendingPerRun(); inRun >= int64(n) {
		return deny("limit:pending_per_run", fmt.Sprintf("this conversation already has %d requests waiting for a team member; "+
			"do not ask again: tell the customer they will hear back once those are decided", inRun)), nil
	}
	if n := g.Limits.pendingPerCustomer(); req.CustomerID != "" && forCustomer >= int64(n) {
		return deny("limit:pending_per_customer", fmt.Sprintf("this customer already has %d requests waiting for a team member; "+
			"do not ask again: tell the customer they will hear back once those are decided", forCustomer)), nil
	}
	if req.AgentID != "" {
		// An agent naming a new customer (or session) each time must not
		// get past the limits above: it has a limit of its own, counted
		// one of its calls at a time on every instance.
		if err := tx.Serialize("agent:" + req.AgentID); err != nil {
			return d, err
		}
		forAgent, err := tx.PendingActionsOfAgent(req.AgentID)
		if err != nil {
			return d, err
		}
		n := g.Limits.pendingPerAgent()
		if own, err := tx.AgentMaxWaiting(req.AgentID); err != nil {
			return d, err
		} else if own > 0 {
			n = own
		}
		if forAgent >= int64(n) {
			return deny("limit:pending_per_agent", fmt.Sprintf("limit reached, not a policy decision: this agent already has %d calls waiting for a person, "+
				"the most an agent may have waiting; wait for those to be decided, then ask again", forAgent)), nil
		}
	}
	return d, nil
}

func (l Limits) pendingPerSession() int {
	if l.MaxPendingPerSession > 0 {
		return l.MaxPendingPerSession
	}
	return 10
}

func (l Limits) pendingPerAgent() int {
	if l.MaxPendingPerAgent > 0 {
		return l.MaxPendingPerAgent
	}
	return 50
}

func (l Limits) pendingPerRun() int {
	if l.MaxPendingPerRun > 0 {
		return l.MaxPendingPerRun
	}
	return 3
}

func (l Limits) pendingPerCustomer() int {
	if l.MaxPendingPerCustomer > 0 {
		return l.MaxPendingPerCustomer
	}
	return 10
}
