package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
)

// Replay is what a candidate policy would have decided about the calls
// recorded since a time, against what was decided: each call is decided
// again with the arguments the agent sent and the facts as they stood then
// (totals and run counts over the calls made before it).
type Replay struct {
	Since     time.Time
	Calls     int // decided calls replayed
	Unchanged int
	// Changes are the decisions that would change, most common first.
	Changes []ReplayChange
	// Failed counts calls the candidate could not decide (an error), with
	// the first error.
	Failed    int
	FirstFail string
}

// ReplayChange is one kind of change: from one decision to another.
type ReplayChange struct {
	From, To string // "allow", "deny", "needs_approval (2, supervisor)"
	Count    int
	Examples []string // call ids, the first few
}

// ReplayPolicy decides again, with the candidate, every call recorded since
// a time. Business facts (what the business's own systems say about a
// customer, such as the demo's refunded_24h) cannot be had as they were:
// a rule that reads them sees none.
func ReplayPolicy(ctx context.Context, store *models.Store, reg *tools.Registry, candidate policy.Policy, since time.Time) (Replay, error) {
	rep := Replay{Since: since}
	byChange := map[[2]string]*ReplayChange{}
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
			d, err := decideAgain(ctx, store, reg, candidate, c, run)
			rep.Calls++
			if err != nil {
				if rep.Failed++; rep.FirstFail == "" {
					rep.FirstFail = fmt.Sprintf("%s (%s): %v", c.ID, c.Tool, err)
				}
				continue
			}
			from := ruledText(c)
			to := verdictText(string(d.Verdict), d.Approvals, string(d.Role))
			if from == to {
				rep.Unchanged++
				continue
			}
			ch := byChange[[2]string{from, to}]
			if ch == nil {
				ch = &ReplayChange{From: from, To: to}
				byChange[[2]string{from, to}] = ch
			}
			if ch.Count++; len(ch.Examples) < 3 {
				ch.Examples = append(ch.Examples, c.ID)
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
		return a.From+a.To < b.From+b.To
	})
	return rep, nil
}

func decideAgain(ctx context.Context, store *models.Store, reg *tools.Registry, p policy.Policy, c *models.ToolCall, run *models.Run) (policy.Decision, error) {
	raw := c.Args
	if c.OriginalArgs != "" {
		raw = c.OriginalArgs // what the agent asked for, before a person edited it
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
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
	store *models.Store
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
