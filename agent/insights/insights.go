// Package insights says what the recorded calls show about the policy: per
// tool and rule how calls went and how long people took, per approver how
// they decide, and the changes the history suggests, each with its
// evidence and a draft policy a person can propose (agent/versions), to be
// countersigned like any other change.
package insights

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// MinEvidence is the least number of decided calls a suggestion stands
// on.
const MinEvidence = 20

// MostlyRejected is the share of a rule's decided calls rejected above
// which denying them is suggested.
const MostlyRejected = 0.8

// Query chooses the calls an insight reads: made since Since, of one tool
// when Tool is given, split into bands of the numeric argument Field at
// Bands (50, 200 gives "under 50", "50 to 200", "200 and over", besides
// "no amount").
type Query struct {
	Since time.Time
	Tool  string
	Field string
	Bands []float64
}

// rows is the query as the store reads it.
func (q Query) rows() storage.InsightsQuery {
	return storage.InsightsQuery{Since: q.Since, Tool: q.Tool, Field: q.Field, Bands: q.Bands}
}

// Rule is one tool and rule's calls, as the API gives them.
type Rule struct {
	Rule      string   `json:"rule"`
	Tool      string   `json:"tool"`
	Band      string   `json:"band,omitempty"`
	Calls     int64    `json:"calls"`
	Allowed   int64    `json:"allowed"`
	Denied    int64    `json:"denied"`
	Held      int64    `json:"held"`
	Approved  int64    `json:"approved"`
	Edited    int64    `json:"edited"`
	Rejected  int64    `json:"rejected"`
	Expired   int64    `json:"expired"`
	Cancelled int64    `json:"cancelled"`
	Waiting   int64    `json:"waiting"`
	P50       *float64 `json:"decision_p50_s"`
	P90       *float64 `json:"decision_p90_s"`
}

// Approver is one person's decisions.
type Approver struct {
	StaffID       string   `json:"staff_id"`
	Name          string   `json:"name"`
	Decisions     int64    `json:"decisions"`
	Approved      int64    `json:"approved"`
	Rejected      int64    `json:"rejected"`
	Edited        int64    `json:"edited"`
	ShareApproved float64  `json:"share_approved"`
	Under3s       int64    `json:"under_3s"`
	ShareUnder3s  float64  `json:"share_under_3s"`
	MedianS       *float64 `json:"median_s"`
}

// Suggestion is a change the history suggests, with its evidence and the
// draft policy that makes it.
type Suggestion struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"` // "allow_up_to", "allow", "deny"
	Tool    string `json:"tool"`
	Rule    string `json:"rule"`
	Text    string `json:"text"`
	Warning string `json:"warning,omitempty"` // what it lowers, in words
	// TestsFail says which of the policy's own tests the draft fails: it
	// must be edited before it can be proposed.
	TestsFail string   `json:"tests_fail,omitempty"`
	YAML      string   `json:"yaml"`
	Evidence  Evidence `json:"evidence"`
}

// Evidence is what a suggestion stands on: the calls it names are exactly
// those its draft decides otherwise.
type Evidence struct {
	Since    time.Time `json:"since"`
	Decided  int64     `json:"decided"`
	Approved int64     `json:"approved"`
	Rejected int64     `json:"rejected"`
	Edited   int64     `json:"edited"`
	Expired  int64     `json:"expired"`
	MedianS  *float64  `json:"median_staff_s,omitempty"`
	Field    string    `json:"field,omitempty"`
	UpTo     *float64  `json:"up_to,omitempty"`
	// Calls are the first EvidenceCalls ids whose decision the draft
	// changes (oldest first), of CallsTotal.
	Calls      []string `json:"calls"`
	CallsTotal int      `json:"calls_total"`
}

// EvidenceCalls is how many call ids a suggestion's evidence lists: the
// rest are counted (a rule that held 100,000 calls made a 1.5 MB answer).
const EvidenceCalls = 50

// Report is what the insights page and GET /api/v1/insights show.
type Report struct {
	Since       time.Time    `json:"since"`
	Rules       []Rule       `json:"rules"`
	Approvers   []Approver   `json:"approvers"`
	Suggestions []Suggestion `json:"suggestions"`
	// Vouched are pairs of co-signers one of whom was made able to sign on
	// the other's proposal.
	Vouched []Vouched `json:"vouched"`
	// CountedAt is how fresh the calls' counts are: those of the hours
	// before the current one are summed by the audit log's follower
	// (storage.Store.Follow), which had read every change made before
	// then. Absent with bands: every call is read, so they are exact.
	CountedAt *time.Time `json:"counted_at,omitempty"`
}

func secs(x float64) *float64 {
	if x < 0 {
		return nil
	}
	x = math.Round(x*10) / 10
	return &x
}

func share(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return math.Round(float64(n)/float64(of)*1000) / 1000
}

// Read reads the insights the query chooses and, without bands, the
// suggestions for the policy in force (a FilePolicy; none for another).
func Read(ctx context.Context, store *storage.Store, reg *tools.Registry, p policy.Policy, q Query) (Report, error) {
	rules, people, err := analyse(ctx, store, q.rows())
	if err != nil {
		return Report{}, err
	}
	rep := Report{Since: q.Since.UTC(), Rules: []Rule{}, Approvers: []Approver{}, Suggestions: []Suggestion{}}
	if rep.Vouched, err = VouchedPairs(ctx, store, q.Since); err != nil {
		return Report{}, err
	}
	for _, r := range rules {
		rep.Rules = append(rep.Rules, Rule{Rule: r.Rule, Tool: r.Tool, Band: r.Band, Calls: r.Calls, Allowed: r.Allowed, Denied: r.Denied,
			Held: r.Held, Approved: r.Approved, Edited: r.Edited, Rejected: r.Rejected, Expired: r.Expired, Cancelled: r.Cancelled,
			Waiting: r.Waiting, P50: secs(r.DecisionP50), P90: secs(r.DecisionP90)})
	}
	for _, a := range people {
		rep.Approvers = append(rep.Approvers, Approver{StaffID: a.StaffID, Name: a.Name, Decisions: a.Decisions, Approved: a.Approved,
			Rejected: a.Rejected, Edited: a.Edited, ShareApproved: share(a.Approved, a.Decisions), Under3s: a.Quick,
			ShareUnder3s: share(a.Quick, a.Decisions), MedianS: secs(a.MedianSeconds)})
	}
	if len(q.Bands) == 0 {
		at, err := store.HoursCountedAt(ctx)
		if err != nil {
			return Report{}, err
		}
		rep.CountedAt = &at
	}
	fp, ok := p.(*policy.FilePolicy)
	if !ok || len(q.Bands) > 0 {
		return rep, nil
	}
	rep.Suggestions, err = suggest(ctx, store, reg, fp, q, rules)
	return rep, err
}

// suggest looks at every rule of the policy in force that holds calls for
// a person, with enough decided calls in the period, none waiting:
//
//   - all approved, none edited: allow them (up to the highest amount
//     asked, for a tool with an amount), by a rule put just above it, so
//     that nothing the rules above decide changes;
//   - mostly rejected: deny them, by a rule put just above it.
//
// Mixed outcomes suggest nothing.
func suggest(ctx context.Context, store *storage.Store, reg *tools.Registry, p *policy.FilePolicy, q Query, stats []ruleStats) ([]Suggestion, error) {
	infos, _ := p.Rules()
	byName := map[string]policy.RuleInfo{}
	for _, r := range infos {
		byName[r.Name] = r
	}
	out := []Suggestion{}
	for _, st := range stats {
		r, ok := byName[st.Rule]
		if !ok || r.Decision != string(policy.NeedsApproval) || st.Tool == "" {
			continue
		}
		decided := st.Approved + st.Rejected + st.Expired
		if decided < MinEvidence || st.Waiting > 0 || st.Cancelled > 0 {
			continue
		}
		ev := Evidence{Since: q.Since.UTC(), Decided: decided, Approved: st.Approved, Rejected: st.Rejected, Edited: st.Edited,
			Expired: st.Expired, MedianS: secs(st.DecisionP50), Calls: []string{}}
		held, err := store.HeldCalls(ctx, st.Tool, st.Rule, q.Since, 100_000)
		if err != nil {
			return nil, err
		}
		ev.CallsTotal = len(held)
		for _, h := range held[:min(len(held), EvidenceCalls)] {
			ev.Calls = append(ev.Calls, h.ID)
		}
		days := max(int(math.Round(time.Since(q.Since).Hours()/24)), 1)
		var s *Suggestion
		switch {
		case st.Approved == decided && st.Edited == 0:
			s = allowSuggestion(reg, r, st, held, &ev, days)
		case float64(st.Rejected)/float64(decided) >= MostlyRejected:
			s = denySuggestion(r, st, &ev, days)
		}
		if s == nil {
			continue
		}
		draft, err := insertBefore(p.YAML(), r.Name, s.YAML)
		if err != nil {
			continue // a layout we cannot edit safely: no suggestion
		}
		dp, err := policy.LoadPolicy([]byte(draft), "suggestion", reg)
		if err != nil {
			continue
		}
		if failed := policy.Failing(dp.RunTests(ctx)); len(failed) > 0 {
			s.TestsFail = fmt.Sprintf("The draft fails %d of the policy's tests (first: %s: %s): adopt it to edit them before proposing it.",
				len(failed), failed[0].Name, failed[0].Problem)
		}
		s.YAML, s.Evidence = draft, ev
		sum := sha256.Sum256([]byte(p.Version() + "\x00" + draft))
		s.ID = "sug_" + hex.EncodeToString(sum[:8])
		out = append(out, *s)
	}
	return out, nil
}

func num(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

func allowSuggestion(reg *tools.Registry, r policy.RuleInfo, st ruleStats, held []storage.HeldCall, ev *Evidence, days int) *Suggestion {
	field := ""
	if t, ok := reg.Get(st.Tool); ok {
		field = t.Amount
	}
	when := r.When
	name := "suggested-allow-" + r.Name
	what := fmt.Sprintf("%s calls that rule %s holds", st.Tool, r.Name)
	kind := "allow"
	if field != "" {
		most := math.Inf(-1)
		for _, h := range held {
			var args map[string]any
			if json.Unmarshal([]byte(h.Args), &args) != nil {
				return nil
			}
			v, ok := args[field].(float64)
			if !ok {
				return nil // one without an amount: the limit would not say what it lets through
			}
			most = max(most, v)
		}
		if math.IsInf(most, -1) {
			return nil
		}
		limit := "args." + field + " <= " + num(most)
		if when != "" {
			when = "(" + when + ") && " + limit
		} else {
			when = limit
		}
		name += "-up-to-" + strings.ReplaceAll(num(most), ".", "_")
		what = fmt.Sprintf("%s up to %s %s (calls that rule %s holds)", st.Tool, field, num(most), r.Name)
		kind = "allow_up_to"
		ev.Field, ev.UpTo = field, &most
	}
	text := fmt.Sprintf("Let %s through on their own: %d of %d such calls were approved unedited in the last %d days", what, st.Approved, ev.Decided, days)
	if ev.MedianS != nil {
		text += fmt.Sprintf(", after a median %s s of staff time each", num(*ev.MedianS))
	}
	text += "; a rule allowing them just above it would have let them through and changed nothing else."
	s := &Suggestion{Kind: kind, Tool: st.Tool, Rule: r.Name, Text: text}
	if r.Approvals >= 2 || r.Role != "" {
		need := fmt.Sprintf("%d people", max(r.Approvals, 1))
		if r.Approvals < 2 {
			need = "one person"
		}
		if r.Role != "" {
			need += ", one of them a " + r.Role
		}
		s.Warning = fmt.Sprintf("Rule %s asks for %s before these calls run; this suggestion lets them run with nobody's approval.", r.Name, need)
	}
	reason := fmt.Sprintf("Allowed by a suggestion: %d of %d such calls were approved unedited", st.Approved, ev.Decided)
	s.YAML = ruleYAML(name, "Suggested from the history of "+r.Name+".", st.Tool, when, "allow", reason)
	return s
}

func denySuggestion(r policy.RuleInfo, st ruleStats, ev *Evidence, days int) *Suggestion {
	text := fmt.Sprintf("Deny the %s calls that rule %s holds: %d of %d were rejected in the last %d days", st.Tool, r.Name, st.Rejected, ev.Decided, days)
	if st.Approved > 0 {
		text += fmt.Sprintf("; the %d approved ones would have been refused too", st.Approved)
	}
	text += "."
	reason := fmt.Sprintf("Denied by a suggestion: people rejected %d of %d such calls", st.Rejected, ev.Decided)
	return &Suggestion{Kind: "deny", Tool: st.Tool, Rule: r.Name, Text: text,
		YAML: ruleYAML("suggested-deny-"+r.Name, "Suggested from the history of "+r.Name+".", st.Tool, r.When, "deny", reason)}
}

// ruleYAML is one rule as a list item, at the indentation insertBefore
// gives it.
func ruleYAML(name, description, tool, when, decision, reason string) string {
	q := func(s string) string { // a JSON string is a YAML one
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		return strings.TrimSuffix(b.String(), "\n")
	}
	lines := []string{"- name: " + q(name), "  description: " + q(description), "  tool: " + q(tool)}
	if when != "" {
		lines = append(lines, "  when: "+q(when))
	}
	lines = append(lines, "  decision: "+decision, "  reason: "+q(reason))
	return strings.Join(lines, "\n")
}

// insertBefore puts a rule (ruleYAML) in the policy's rules just before
// the rule named before, at that rule's indentation, leaving the rest of
// the file as it was written.
func insertBefore(src, before, rule string) (string, error) {
	file, err := parser.ParseBytes([]byte(src), 0)
	if err != nil || len(file.Docs) == 0 {
		return "", fmt.Errorf("parse the policy: %v", err)
	}
	top, ok := file.Docs[0].Body.(*ast.MappingNode)
	if !ok {
		return "", fmt.Errorf("the policy is not a mapping")
	}
	for _, kv := range top.Values {
		if kv.Key.String() != "rules" {
			continue
		}
		seq, ok := kv.Value.(*ast.SequenceNode)
		if !ok || seq.IsFlowStyle {
			return "", fmt.Errorf("rules is not a block list")
		}
		for _, item := range seq.Values {
			m, ok := item.(*ast.MappingNode)
			if !ok {
				continue
			}
			named := false
			for _, f := range m.Values {
				if f.Key.String() == "name" && strings.Trim(f.Value.String(), `"'`) == before {
					named = true
				}
			}
			if !named {
				continue
			}
			lines := strings.Split(src, "\n")
			at := item.GetToken().Position.Line - 1
			if at < 0 || at >= len(lines) {
				return "", fmt.Errorf("rule %s: no line", before)
			}
			indent, _, ok := strings.Cut(lines[at], "- ")
			if !ok || strings.TrimSpace(indent) != "" {
				return "", fmt.Errorf("rule %s does not start its line", before)
			}
			var ins []string
			for _, l := range strings.Split(rule, "\n") {
				ins = append(ins, indent+l)
			}
			ins = append(ins, "")
			out := append(append(append([]string{}, lines[:at]...), ins...), lines[at:]...)
			return strings.Join(out, "\n"), nil
		}
	}
	return "", fmt.Errorf("no rule %s", before)
}
