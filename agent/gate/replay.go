package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// Replay is what a candidate policy would have decided about the calls
// recorded since a time, against what was decided: each call is decided
// again with the arguments the agent sent and the facts as they stood then
// (totals and run counts over the calls made before it).
type Replay struct {
	Since     time.Time `json:"since"`
	Calls     int       `json:"calls"` // decided calls replayed
	Unchanged int       `json:"unchanged"`
	// Changes are the decisions that would change, most common first.
	Changes []ReplayChange `json:"changes"`
	// Failed counts calls the candidate could not decide (an error), with
	// the first error.
	Failed    int    `json:"failed"`
	FirstFail string `json:"first_fail,omitempty"`
}

// ReplayChange is one kind of change, for one tool: from one decision (by
// one rule) to another (by another).
type ReplayChange struct {
	Tool     string          `json:"tool"`
	From     string          `json:"from"` // "allow", "deny", "needs_approval (2, supervisor)"
	FromRule string          `json:"from_rule"`
	To       string          `json:"to"`
	ToRule   string          `json:"to_rule"`
	Count    int             `json:"count"`
	Examples []ReplayExample `json:"examples"` // the first few
}

// ReplayExample is one call whose decision would change: its id and what
// it asked, in words (the tool's summary).
type ReplayExample struct {
	ID      string `json:"id"`
	Summary string `json:"summary"`
}

// ReplayPolicy decides again, with the candidate, every call recorded since
// a time. Business facts (what the business's own systems say about a
// customer, such as the demo's refunded_24h) cannot be had as they were:
// a rule that reads them sees none.
func ReplayPolicy(ctx context.Context, store *storage.Store, reg *tools.Registry, candidate policy.Policy, since time.Time) (Replay, error) {
	rep := Replay{Since: since, Changes: []ReplayChange{}}
	byChange := map[[5]string]*ReplayChange{}
	runs := map[string]*models.Run{}
	var lastAt time.Time
	lastID := ""
	for {
		calls, err := store.CallsDecidedSince(ctx, since, lastAt, lastID, 500)
		if err != nil {
			return rep, err
		}
		for i := range calls {
			c := &calls[i]
			lastAt, lastID = c.CreatedAt, c.ID
			run := runs[c.RunID]
			if run == nil {
				if run, err = store.Run(ctx, c.RunID); err != nil {
					return rep, fmt.Errorf("run of %s: %w", c.ID, err)
				}
				runs[c.RunID] = run
			}
			rep.Calls++
			from, fromRule, err := decidedThen(ctx, store, c)
			var d policy.Decision
			if err == nil {
				d, err = decideAgain(ctx, store, reg, candidate, c, run)
			}
			if err != nil {
				if rep.Failed++; rep.FirstFail == "" {
					rep.FirstFail = fmt.Sprintf("%s (%s): %v", c.ID, c.Tool, err)
				}
				continue
			}
			to := verdictText(string(d.Verdict), d.Approvals, string(d.Role))
			if from == to {
				rep.Unchanged++
				continue
			}
			k := [5]string{c.Tool, from, fromRule, to, d.Rule}
			ch := byChange[k]
			if ch == nil {
				ch = &ReplayChange{Tool: c.Tool, From: from, FromRule: fromRule, To: to, ToRule: d.Rule}
				byChange[k] = ch
			}
			if ch.Count++; len(ch.Examples) < 3 {
				ch.Examples = append(ch.Examples, ReplayExample{ID: c.ID, Summary: summaryOf(reg, c.Tool, decidedArgs(c))})
			}
		}
		if len(calls) < 500 {
			break
		}
	}
	for _, ch := range byChange {
		rep.Changes = append(rep.Changes, *ch)
	}
	sort.Slice(rep.Changes, func(i, j int) bool {
		a, b := rep.Changes[i], rep.Changes[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return a.Tool+a.From+a.To < b.Tool+b.From+b.To
	})
	return rep, nil
}

// decidedArgs are the arguments a call was first decided on: what the agent
// asked for, before a person edited them.
func decidedArgs(c *models.ToolCall) string {
	if c.OriginalArgs != "" {
		return c.OriginalArgs
	}
	return c.Args
}

// decidedThen is what the policy decided of the arguments the call was
// first decided on, and by which rule. An edited call's row holds the
// requirements its edit raised, so its first decision is read from its
// call.pending event: like is compared with like.
func decidedThen(ctx context.Context, store *storage.Store, c *models.ToolCall) (string, string, error) {
	if c.OriginalArgs == "" {
		return ruledText(c), c.Rule, nil
	}
	events, err := store.AuditEventsFor(ctx, c.ID)
	if err != nil {
		return "", "", err
	}
	for _, e := range events {
		if e.Kind != models.EventCallPending {
			continue
		}
		var p models.CallDecidedPayload
		if err := json.Unmarshal([]byte(e.Payload), &p); err != nil {
			return "", "", fmt.Errorf("its first decision: %w", err)
		}
		return verdictText(p.Verdict, p.RequiredApprovals, string(p.RequiredRole)), p.Rule, nil
	}
	return ruledText(c), c.Rule, nil
}

func summaryOf(reg *tools.Registry, tool, args string) string {
	if t, ok := reg.Get(tool); ok {
		return t.Summarize(args)
	}
	return tool
}

func decideAgain(ctx context.Context, store *storage.Store, reg *tools.Registry, p policy.Policy, c *models.ToolCall, run *models.Run) (policy.Decision, error) {
	var args map[string]any
	if err := json.Unmarshal([]byte(decidedArgs(c)), &args); err != nil {
		return policy.Decision{}, fmt.Errorf("arguments: %w", err)
	}
	risk := tools.Risk(c.Risk)
	if t, ok := reg.Get(c.Tool); ok {
		risk = t.Risk
	}
	return p.Decide(ctx, policy.Input{Tool: c.Tool, Risk: risk, Args: args, Facts: &replayFacts{store: store, call: c, run: run}})
}

// ruledText is what the policy decided of a recorded call: a call a
// standing grant allowed was one the policy wanted a person to approve.
func ruledText(c *models.ToolCall) string {
	if _, ok := GrantOf(c.Rule); ok {
		return verdictText(string(policy.NeedsApproval), int(c.RequiredApprovals), string(c.RequiredRole))
	}
	return verdictText(c.Decision, int(c.RequiredApprovals), string(c.RequiredRole))
}

func verdictText(verdict string, approvals int, role string) string {
	if verdict != string(policy.NeedsApproval) {
		return verdict
	}
	if approvals < 1 {
		approvals = 1
	}
	if role == "" {
		return fmt.Sprintf("%s (%d)", verdict, approvals)
	}
	return fmt.Sprintf("%s (%d, %s)", verdict, approvals, role)
}

// replayFacts are the facts as they stood when a recorded call was decided.
type replayFacts struct {
	store *storage.Store
	call  *models.ToolCall
	run   *models.Run
}

func (f *replayFacts) Customer(context.Context) (policy.CustomerFacts, error) {
	return policy.CustomerFacts{ID: f.run.CustomerID, Name: f.run.CustomerName, SignedIn: f.run.CustomerID != ""}, nil
}

func (f *replayFacts) Run(ctx context.Context) (policy.RunFacts, error) {
	counts, err := f.store.RunCallCountsBefore(ctx, f.run.ID, f.call.CreatedAt)
	r := policy.RunFacts{ID: f.run.ID, Channel: f.run.Channel, CallsByTool: counts}
	for _, n := range counts {
		r.Calls += n
	}
	return r, err
}

func (f *replayFacts) Total(ctx context.Context, q policy.TotalQuery) (float64, error) {
	t := models.CallTotal{Tool: q.Tool, Field: q.Field, Same: q.Same, CustomerID: f.run.CustomerID, RunID: f.run.ID,
		Before: f.call.CreatedAt, ExcludeID: f.call.ID}
	if q.Within > 0 {
		t.Since = f.call.CreatedAt.Add(-q.Within)
	}
	return f.store.SumCallArgs(ctx, t)
}
