package policy

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/interpreter"
	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
)

// DefaultPolicyYAML is the built-in policy for any tools: it decides by risk
// alone. The demo shop's own policy is shop.PolicyYAML.
//
//go:embed default.yaml
var DefaultPolicyYAML []byte

// FilePolicy is a policy loaded from YAML: ordered rules whose conditions are
// CEL expressions compiled once at load, defaults by risk, and its own tests.
type FilePolicy struct {
	Source   string
	yaml     string // the file as loaded
	version  string
	rules    []*rule
	defaults map[tools.Risk]*outcome
	defSpecs map[tools.Risk]outcomeSpec
	tests    []policyTest
	totals   []*total
	registry *tools.Registry
}

type outcomeSpec struct {
	Decision  string `yaml:"decision"`
	Reason    string `yaml:"reason"`
	Approvals int    `yaml:"approvals"`
	Role      string `yaml:"role"`
	Expires   string `yaml:"expires"`
	// Passkey: every approval, rejection and edit of these actions is
	// signed with the person's passkey, over what they were shown.
	Passkey bool `yaml:"passkey"`
}

type ruleSpec struct {
	Name        string      `yaml:"name"`
	Description string      `yaml:"description"`
	Tool        string      `yaml:"tool"`
	Risk        string      `yaml:"risk"`
	When        string      `yaml:"when"`
	Outcome     outcomeSpec `yaml:",inline"`
}

type testSpec struct {
	Name string         `yaml:"name"`
	Tool string         `yaml:"tool"`
	Risk string         `yaml:"risk"`
	Args map[string]any `yaml:"args"`
	// Customer: id, name, attributes, and any business fact by its name.
	Customer map[string]any `yaml:"customer"`
	Run      *struct {
		Channel     string           `yaml:"channel"`
		Calls       int64            `yaml:"calls"`
		CallsByTool map[string]int64 `yaml:"calls_by_tool"`
	} `yaml:"run"`
	Totals    map[string]float64 `yaml:"totals"`
	Expect    string             `yaml:"expect"`
	Rule      string             `yaml:"rule"`
	Approvals int                `yaml:"approvals"`
	Role      string             `yaml:"role"`
}

type fileSpec struct {
	Totals   map[string]totalSpec   `yaml:"totals"`
	Defaults map[string]outcomeSpec `yaml:"defaults"`
	Rules    []ruleSpec             `yaml:"rules"`
	Tests    []testSpec             `yaml:"tests"`
}

type outcome struct {
	verdict   Verdict
	reason    *template
	approvals int
	role      models.StaffRole
	expires   time.Duration
	passkey   bool
}

type rule struct {
	name    string
	tool    string
	risk    tools.Risk
	when    cel.Program // nil: always
	outcome *outcome
	spec    ruleSpec // as written, for people to read
}

type policyTest struct {
	spec testSpec
}

// Normalize is a policy's text as it is hashed, stored, tested and diffed,
// whichever way it came (a browser's text area posts CRLF, an editor may
// add a byte-order mark): no byte-order mark, every line ended by "\n"
// alone (CRLF and lone CR become LF), and exactly one final newline, no
// blank lines after the last. Nothing inside a line changes: trailing
// spaces can matter in a YAML block scalar.
func Normalize(data []byte) []byte {
	s := strings.TrimPrefix(string(data), "\uFEFF")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return []byte(s + "\n")
}

// LoadPolicy parses and compiles a policy file. The registry, when given,
// lets it refuse rules that name unknown tools and normalize test arguments.
func LoadPolicy(data []byte, source string, registry *tools.Registry) (*FilePolicy, error) {
	data = Normalize(data)
	if err := countNodes(data); err != nil {
		return nil, fmt.Errorf("policy %s: %w", source, err)
	}
	var spec fileSpec
	if err := yaml.UnmarshalWithOptions(data, &spec, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("policy %s: %s", source, yaml.FormatError(err, false, true))
	}
	if len(spec.Rules) > MaxRules || len(spec.Tests) > MaxTests {
		return nil, fmt.Errorf("policy %s: it has %d rules and %d tests; at most %d of each", source, len(spec.Rules), len(spec.Tests), MaxRules)
	}
	var err error
	sum := sha256.Sum256(data)
	p := &FilePolicy{Source: source, yaml: string(data), version: hex.EncodeToString(sum[:]), registry: registry,
		defaults: map[tools.Risk]*outcome{}}

	builtin := map[tools.Risk]outcomeSpec{
		tools.RiskRead:      {Decision: string(Allow), Reason: "reads are allowed"},
		tools.RiskLowWrite:  {Decision: string(Allow), Reason: "low-risk writes are allowed"},
		tools.RiskHighWrite: {Decision: string(NeedsApproval), Reason: "High-risk tool: {{ tool }}"},
	}
	for risk, os := range spec.Defaults {
		if !tools.Risk(risk).Valid() {
			return nil, fmt.Errorf("policy %s: defaults: %q is not a risk level (read, low_write, high_write)", source, risk)
		}
		builtin[tools.Risk(risk)] = os
	}
	if p.totals, err = compileTotals(spec.Totals, registry); err != nil {
		return nil, fmt.Errorf("policy %s: %w", source, err)
	}
	p.defSpecs = builtin
	for risk, os := range builtin {
		o, err := compileOutcome(os)
		if err != nil {
			return nil, fmt.Errorf("policy %s: default for %s: %w", source, risk, err)
		}
		p.defaults[risk] = o
	}

	seen := map[string]bool{}
	for i, rs := range spec.Rules {
		where := fmt.Sprintf("policy %s: rule %d", source, i+1)
		if rs.Name == "" {
			return nil, fmt.Errorf("%s: every rule needs a name", where)
		}
		where = fmt.Sprintf("policy %s: rule %q%s", source, rs.Name, lineOf(data, fmt.Sprintf("$.rules[%d]", i)))
		if seen[rs.Name] {
			return nil, fmt.Errorf("%s: the name is used twice", where)
		}
		seen[rs.Name] = true
		r, err := compileRule(rs, registry)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		p.rules = append(p.rules, r)
	}
	for i, ts := range spec.Tests {
		if ts.Name == "" {
			ts.Name = fmt.Sprintf("test %d", i+1)
		}
		if !Verdict(ts.Expect).valid() {
			return nil, fmt.Errorf("policy %s: test %q: expect must be allow, needs_approval or deny", source, ts.Name)
		}
		p.tests = append(p.tests, policyTest{spec: ts})
	}
	return p, nil
}

// lineOf is " (line N)" for the node at a YAML path, or "".
func lineOf(data []byte, path string) string {
	p, err := yaml.PathString(path)
	if err != nil {
		return ""
	}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return ""
	}
	n, err := p.FilterFile(f)
	if err != nil || n == nil || n.GetToken() == nil {
		return ""
	}
	return fmt.Sprintf(" (line %d)", n.GetToken().Position.Line)
}

// compileRule checks a rule against the tools and compiles its condition
// and outcome.
func compileRule(rs ruleSpec, registry *tools.Registry) (*rule, error) {
	r := &rule{name: rs.Name, tool: rs.Tool, risk: tools.Risk(rs.Risk), spec: rs}
	if rs.Risk != "" && !r.risk.Valid() {
		return nil, fmt.Errorf("risk %q is not read, low_write or high_write", rs.Risk)
	}
	if rs.Tool != "" && registry != nil {
		if _, ok := registry.Get(rs.Tool); !ok {
			return nil, fmt.Errorf("no tool is named %q", rs.Tool)
		}
	}
	if strings.TrimSpace(rs.When) != "" {
		prg, ast, err := compileCEL(rs.When)
		if err != nil {
			return nil, fmt.Errorf("condition does not compile: %w", err)
		}
		if t := ast.OutputType(); t != cel.BoolType && t != cel.DynType {
			return nil, fmt.Errorf("condition gives %s, it must give true or false", t)
		}
		r.when = prg
	}
	o, err := compileOutcome(rs.Outcome)
	if err != nil {
		return nil, err
	}
	r.outcome = o
	return r, nil
}

func (v Verdict) valid() bool { return v == Allow || v == NeedsApproval || v == Deny }

func compileOutcome(os outcomeSpec) (*outcome, error) {
	o := &outcome{verdict: Verdict(os.Decision), approvals: os.Approvals, role: models.StaffRole(os.Role), passkey: os.Passkey}
	if !o.verdict.valid() {
		return nil, fmt.Errorf("decision %q must be allow, needs_approval or deny", os.Decision)
	}
	if o.verdict != NeedsApproval && (os.Approvals != 0 || os.Role != "" || os.Expires != "" || os.Passkey) {
		return nil, fmt.Errorf("approvals, role, expires and passkey only apply to needs_approval")
	}
	if o.verdict == NeedsApproval {
		if o.approvals == 0 {
			o.approvals = 1
		}
		if o.approvals < 1 || o.approvals > 5 {
			return nil, fmt.Errorf("approvals must be between 1 and 5")
		}
		if o.role != "" && !o.role.CanDecide() {
			return nil, fmt.Errorf("role %q cannot approve (approver, supervisor or admin)", os.Role)
		}
		if os.Expires != "" {
			d, err := parseDuration(os.Expires)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("expires %q is not a duration such as 30m, 24h or 2d", os.Expires)
			}
			o.expires = d
		}
	}
	reason := os.Reason
	if reason == "" {
		reason = string(o.verdict)
	}
	t, err := compileTemplate(reason)
	if err != nil {
		return nil, fmt.Errorf("reason: %w", err)
	}
	o.reason = t
	return o, nil
}

func parseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		return time.Duration(n) * 24 * time.Hour, err
	}
	return time.ParseDuration(s)
}

// Version is the SHA-256 of the policy file.
func (p *FilePolicy) Version() string { return p.version }

// YAML is the file as it was loaded.
func (p *FilePolicy) YAML() string { return p.yaml }

// Describe is the description of the rule named so ("" when it has none,
// or no rule is named so: a default, a grant, another version's rule).
func (p *FilePolicy) Describe(rule string) string {
	for _, r := range p.rules {
		if r.spec.Name == rule {
			return r.spec.Description
		}
	}
	return ""
}

// Decide checks the rules in order; the first that matches decides. When
// none matches, the default for the tool's risk applies. A condition that
// cannot be evaluated sends the call to a human rather than guessing.
func (p *FilePolicy) Decide(ctx context.Context, in Input) (Decision, error) {
	act := newActivation(ctx, in)
	act.totals = p.totals
	for _, r := range p.rules {
		if r.tool != "" && r.tool != in.Tool {
			continue
		}
		if r.risk != "" && r.risk != in.Risk {
			continue
		}
		if r.when != nil {
			out, _, err := r.when.Eval(act)
			if err != nil {
				return Decision{Verdict: NeedsApproval, Approvals: 1, Rule: r.name, PolicyVersion: p.version,
					Reason: fmt.Sprintf("policy rule %q could not be evaluated (%v), so a person must decide", r.name, err)}, nil
			}
			if b, ok := out.Value().(bool); !ok || !b {
				continue
			}
		}
		return r.outcome.decision(r.name, p.version, act), nil
	}
	o, ok := p.defaults[in.Risk]
	if !ok {
		return Decision{}, fmt.Errorf("tool %s has unknown risk %q", in.Tool, in.Risk)
	}
	return o.decision("default:"+string(in.Risk), p.version, act), nil
}

func (o *outcome) decision(rule, version string, act *activation) Decision {
	return Decision{Verdict: o.verdict, Reason: o.reason.render(act), Rule: rule, PolicyVersion: version,
		Approvals: o.approvals, Role: o.role, Expires: o.expires, Passkey: o.passkey}
}

// activation exposes the input to CEL. Customer and run facts are loaded
// only if a condition or reason looks at them, and at most once per decision.
// Values are plain Go maps: CEL reads a field of a map[string]any directly,
// and converts it only when an expression needs the whole map.
type activation struct {
	ctx      context.Context
	in       Input
	customer any
	run      any
	totals   []*total
	sums     any
}

var emptyArgs = map[string]any{}

func newActivation(ctx context.Context, in Input) *activation {
	return &activation{ctx: ctx, in: in}
}

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "tool":
		return a.in.Tool, true
	case "risk":
		return string(a.in.Risk), true
	case "args":
		if a.in.Args == nil {
			return emptyArgs, true
		}
		return a.in.Args, true
	case "customer":
		if a.customer == nil {
			a.customer = a.loadCustomer()
		}
		return a.customer, true
	case "run":
		if a.run == nil {
			a.run = a.loadRun()
		}
		return a.run, true
	case "totals":
		if a.sums == nil {
			a.sums = a.loadTotals()
		}
		return a.sums, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() interpreter.Activation { return nil }

func (a *activation) loadCustomer() any {
	c := CustomerFacts{}
	if a.in.Facts != nil {
		var err error
		if c, err = a.in.Facts.Customer(a.ctx); err != nil {
			return types.NewErr("customer facts: %v", err)
		}
	}
	attrs := c.Attributes
	if attrs == nil {
		attrs = emptyArgs
	}
	out := make(map[string]any, 4+len(c.Business))
	for k, v := range c.Business {
		out[k] = v
	}
	out["id"], out["name"], out["signed_in"], out["attributes"] = c.ID, c.Name, c.SignedIn, attrs
	return out
}

func (a *activation) loadRun() any {
	r := RunFacts{}
	if a.in.Facts != nil {
		var err error
		if r, err = a.in.Facts.Run(a.ctx); err != nil {
			return types.NewErr("run facts: %v", err)
		}
	}
	by := r.CallsByTool
	if by == nil {
		by = map[string]int64{}
	}
	return map[string]any{"id": r.ID, "channel": r.Channel, "calls": r.Calls, "calls_by_tool": by}
}

// RuleInfo is a rule as written, for people to read.
type RuleInfo struct {
	Name, Description, Tool, Risk, When, Decision, Reason, Role, Expires string
	Approvals                                                            int
	Passkey                                                              bool // its decisions are signed with a passkey
	// WhenWords is When in words (ConditionWords), "" when it cannot be;
	// ReasonWords the reason with its placeholders in words.
	WhenWords, ReasonWords string
}

// Rules lists the rules in order, then the defaults by risk.
func (p *FilePolicy) Rules() (rules, defaults []RuleInfo) {
	for _, r := range p.rules {
		sp := r.spec
		approvals := sp.Outcome.Approvals
		if sp.Outcome.Decision == string(NeedsApproval) && approvals == 0 {
			approvals = 1
		}
		words, _ := ConditionWords(sp.When)
		rules = append(rules, RuleInfo{Name: sp.Name, Description: sp.Description, Tool: sp.Tool, Risk: sp.Risk, When: sp.When, WhenWords: words,
			ReasonWords: ReasonWords(sp.Outcome.Reason),
			Decision:    sp.Outcome.Decision, Reason: sp.Outcome.Reason, Role: sp.Outcome.Role, Expires: sp.Outcome.Expires, Approvals: approvals, Passkey: sp.Outcome.Passkey})
	}
	for _, risk := range []tools.Risk{tools.RiskRead, tools.RiskLowWrite, tools.RiskHighWrite} {
		sp := p.defSpecs[risk]
		defaults = append(defaults, RuleInfo{Name: "default:" + string(risk), Risk: string(risk), Decision: sp.Decision, Reason: sp.Reason,
			ReasonWords: ReasonWords(sp.Reason), Role: sp.Role, Expires: sp.Expires, Approvals: max(sp.Approvals, 1), Passkey: sp.Passkey})
	}
	return rules, defaults
}

// AsksPasskey reports whether the rule of this name (or "default:<risk>")
// asks for a passkey signature on its decisions.
func (p *FilePolicy) AsksPasskey(rule string) bool {
	for _, r := range p.rules {
		if r.spec.Name == rule {
			return r.spec.Outcome.Passkey
		}
	}
	if risk, ok := strings.CutPrefix(rule, "default:"); ok {
		return p.defSpecs[tools.Risk(risk)].Passkey
	}
	return false
}
