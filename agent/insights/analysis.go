package insights

import (
	"context"
	"math"
	"sort"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// QuickDecision is the time under which a decision counts as quick: the
// rubber-stamp signal.
const QuickDecision = 3 * time.Second

// ruleStats is how the calls one rule decided went.
type ruleStats struct {
	Tool, Rule string
	Band       string // "" without bands
	Calls      int64
	Allowed    int64 // the policy let them through
	Denied     int64
	Held       int64 // waited for a person
	Approved   int64
	Edited     int64 // approved with arguments a person changed
	Rejected   int64
	Expired    int64
	Cancelled  int64
	Waiting    int64
	// DecisionP50 and DecisionP90 are seconds from held to decided by
	// people (-1: none decided).
	DecisionP50, DecisionP90 float64
	settled                  []float64
}

// approverStats is how one person decided.
type approverStats struct {
	StaffID, Name string
	Decisions     int64
	Approved      int64
	Rejected      int64
	Edited        int64
	// Quick counts decisions made under QuickDecision after the action
	// reached them (it was held, or the approver before them signed).
	Quick int64
	// MedianSeconds is their median time to decide (-1: none).
	MedianSeconds float64
	took          []float64
}

type ruleKey struct{ tool, rule, band string }

// analysis sums the rows the store returns into rules and approvers.
type analysis struct {
	rules  map[ruleKey]*ruleStats
	people map[string]*approverStats
}

func (a *analysis) rule(tool, rule, band string) *ruleStats {
	k := ruleKey{tool, rule, band}
	r := a.rules[k]
	if r == nil {
		r = &ruleStats{Tool: tool, Rule: rule, Band: band, DecisionP50: -1, DecisionP90: -1}
		a.rules[k] = r
	}
	return r
}

func (a *analysis) person(id string) *approverStats {
	p := a.people[id]
	if p == nil {
		p = &approverStats{StaffID: id, MedianSeconds: -1}
		a.people[id] = p
	}
	return p
}

// analyse reads the calls and the verdicts the query chooses and sums
// them: per tool and rule (and band), how the calls went and how long
// people took; per approver, how they decide. Rules sort by tool, rule and
// band; approvers by decisions, most first.
func analyse(ctx context.Context, store *storage.Store, q storage.InsightsQuery) ([]ruleStats, []approverStats, error) {
	all := &analysis{rules: map[ruleKey]*ruleStats{}, people: map[string]*approverStats{}}
	counts, err := store.InsightCounts(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range counts {
		all.count(c)
	}
	var parts []*analysis
	err = store.InsightVerdicts(ctx, q, func(int) func(storage.Verdict) {
		part := &analysis{rules: map[ruleKey]*ruleStats{}, people: map[string]*approverStats{}}
		parts = append(parts, part)
		return part.verdict
	})
	if err != nil {
		return nil, nil, err
	}
	for _, part := range parts {
		all.merge(part)
	}
	if err := all.name(ctx, store); err != nil {
		return nil, nil, err
	}
	return all.sorted()
}

// count adds one count of calls.
func (a *analysis) count(c storage.InsightCount) {
	r := a.rule(c.Tool, c.Rule, c.Band)
	r.Calls += c.N
	switch c.Decision {
	case models.DecidedAllow:
		r.Allowed += c.N
	case models.DecidedDeny:
		r.Denied += c.N
	case models.DecidedNeedsApproval:
		r.Held += c.N
		switch c.Status {
		case models.CallApproved, models.CallExecuting, models.CallSucceeded, models.CallFailed, models.CallUnknown: // call_hours says approved
			r.Approved += c.N
		case models.CallRejected:
			r.Rejected += c.N
		case models.CallExpired:
			r.Expired += c.N
		case models.CallCancelled:
			r.Cancelled += c.N
		case models.CallPending:
			r.Waiting += c.N
		}
	}
}

// verdict adds one verdict.
func (a *analysis) verdict(v storage.Verdict) {
	p := a.person(v.StaffID)
	p.Decisions++
	p.took = append(p.took, v.TookS)
	if v.TookS < QuickDecision.Seconds() {
		p.Quick++
	}
	switch v.Verdict {
	case "approve":
		p.Approved++
	case "reject":
		p.Rejected++
	}
	r := a.rule(v.Tool, v.Rule, v.Band)
	if v.Edited {
		p.Edited++
		if v.Verdict == "approve" {
			r.Edited++
		}
	}
	if v.SettledS != nil {
		r.settled = append(r.settled, *v.SettledS)
	}
}

// merge adds what one part of the period's verdicts says.
func (a *analysis) merge(part *analysis) {
	for id, p := range part.people {
		all := a.person(id)
		all.Decisions, all.Approved, all.Rejected, all.Edited, all.Quick = all.Decisions+p.Decisions, all.Approved+p.Approved,
			all.Rejected+p.Rejected, all.Edited+p.Edited, all.Quick+p.Quick
		all.took = append(all.took, p.took...)
	}
	for k, r := range part.rules {
		all := a.rule(k.tool, k.rule, k.band)
		all.Edited += r.Edited
		all.settled = append(all.settled, r.settled...)
	}
}

// name gives every approver the name the store knows them by.
func (a *analysis) name(ctx context.Context, store *storage.Store) error {
	ids := make([]string, 0, len(a.people))
	for id := range a.people {
		ids = append(ids, id)
	}
	names, err := store.ApproverNames(ctx, ids)
	if err != nil {
		return err
	}
	for id, p := range a.people {
		p.Name = names[id]
	}
	return nil
}

// sorted are the rules that saw calls or edits, and the approvers, with
// their times' percentiles.
func (a *analysis) sorted() ([]ruleStats, []approverStats, error) {
	rules := make([]ruleStats, 0, len(a.rules))
	for _, r := range a.rules {
		r.DecisionP50, r.DecisionP90 = percentile(r.settled, 0.5), percentile(r.settled, 0.9)
		if r.Calls > 0 || r.Edited > 0 {
			rules = append(rules, *r)
		}
	}
	sort.Slice(rules, func(i, j int) bool {
		x, y := rules[i], rules[j]
		if x.Tool != y.Tool {
			return x.Tool < y.Tool
		}
		if x.Rule != y.Rule {
			return x.Rule < y.Rule
		}
		return x.Band < y.Band
	})
	people := make([]approverStats, 0, len(a.people))
	for _, p := range a.people {
		p.MedianSeconds = percentile(p.took, 0.5)
		people = append(people, *p)
	}
	sort.Slice(people, func(i, j int) bool {
		if people[i].Decisions != people[j].Decisions {
			return people[i].Decisions > people[j].Decisions
		}
		return people[i].Name < people[j].Name
	})
	return rules, people, nil
}

// percentile is the nearest-rank percentile of xs (-1 for none); xs is
// sorted in place.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return -1
	}
	sort.Float64s(xs)
	i := int(math.Ceil(float64(len(xs))*p)) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}
