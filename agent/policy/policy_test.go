package policy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
)

func shopRegistry(t testing.TB) *tools.Registry {
	t.Helper()
	reg, err := tools.NewRegistry(shop.Tools(nil)...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func defaultPolicy(t testing.TB) *policy.FilePolicy {
	t.Helper()
	p, err := policy.LoadPolicy(shop.PolicyYAML, "default", shopRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultPolicyDecisions(t *testing.T) {
	t.Parallel()
	p := defaultPolicy(t)
	cases := []struct {
		name       string
		tool       string
		risk       tools.Risk
		args       map[string]any
		refunded   float64
		want       policy.Verdict
		rule       string
		approvals  int
		role       models.StaffRole
		reasonPart string
	}{
		{"article: a read is allowed", "get_order_status", tools.RiskRead, map[string]any{"order_id": "A1"}, 0, policy.Allow, "default:read", 0, "", ""},
		{"article: $20 refund allowed", "issue_refund", tools.RiskHighWrite, map[string]any{"amount": 20.0}, 0, policy.Allow, "small-refund", 0, "", "$20.00"},
		{"article: $900 refund needs approval", "issue_refund", tools.RiskHighWrite, map[string]any{"amount": 900.0}, 0, policy.NeedsApproval, "refund-needs-approval", 1, "", "Refund of $900.00"},
		{"$50 is the limit", "issue_refund", tools.RiskHighWrite, map[string]any{"amount": 50.0}, 0, policy.Allow, "small-refund", 0, "", ""},
		{"$50.01 is over it", "issue_refund", tools.RiskHighWrite, map[string]any{"amount": 50.01}, 0, policy.NeedsApproval, "refund-needs-approval", 1, "", ""},
		{"over $1,000 two people", "issue_refund", tools.RiskHighWrite, map[string]any{"amount": 1000.01}, 0, policy.NeedsApproval, "refund-over-1000-two-person", 2, models.Supervisor, "$1,000.01"},
		{"refunded $500.01 today", "issue_refund", tools.RiskHighWrite, map[string]any{"amount": 1.0}, 500.01, policy.NeedsApproval, "refund-customer-over-500-in-24h", 1, "", "in the last 24 hours, paid or waiting for approval, would come to $501.01"},
		{"refunded $500 today, $1 more passes it", "issue_refund", tools.RiskHighWrite, map[string]any{"amount": 1.0}, 500, policy.NeedsApproval, "refund-customer-over-500-in-24h", 1, "", "would come to $501.00"},
		{"refunded $499 today, $1 more reaches it", "issue_refund", tools.RiskHighWrite, map[string]any{"amount": 1.0}, 499, policy.Allow, "small-refund", 0, "", ""},
		{"$20 on an order refunded $990: over $1,000 on the order", "issue_refund", tools.RiskHighWrite, map[string]any{"amount": 20.0, "order_id": "A1"}, 0, policy.NeedsApproval, "refund-over-1000-two-person", 2, models.Supervisor, "would come to $1,010.00"},
		{"low write", "update_shipping_address", tools.RiskLowWrite, map[string]any{}, 0, policy.Allow, "default:low_write", 0, "", ""},
		{"other high write", "cancel_order", tools.RiskHighWrite, map[string]any{}, 0, policy.NeedsApproval, "default:high_write", 1, "", "High-risk tool: cancel_order"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := p.Decide(context.Background(), policy.Input{Tool: c.tool, Risk: c.risk, Args: c.args,
				Facts: policy.StaticFacts{C: policy.CustomerFacts{ID: "cus_alice", SignedIn: true},
					T: map[string]float64{"refunded_24h": c.refunded, "refunded_on_order": orderTotal(c.args)}}})
			if err != nil {
				t.Fatal(err)
			}
			if d.Verdict != c.want || d.Rule != c.rule || (c.want == policy.NeedsApproval && (d.Approvals != c.approvals || d.Role != c.role)) {
				t.Fatalf("got %+v", d)
			}
			if !strings.Contains(d.Reason, c.reasonPart) || d.PolicyVersion != p.Version() {
				t.Fatalf("reason %q version %q", d.Reason, d.PolicyVersion)
			}
		})
	}
}

func TestDefaultPolicyCarriesPassingTests(t *testing.T) {
	t.Parallel()
	p := defaultPolicy(t)
	results := p.RunTests(context.Background())
	if len(results) < 5 {
		t.Fatalf("only %d tests", len(results))
	}
	for _, r := range results {
		if !r.Passed {
			t.Errorf("%s: %s", r.Name, r.Problem)
		}
	}
}

func TestPolicyLoadErrorsNameTheProblem(t *testing.T) {
	t.Parallel()
	reg := shopRegistry(t)
	cases := []struct{ name, yaml, want string }{
		{"bad CEL", "rules:\n  - name: broken\n    when: args.amount >>> 3\n    decision: deny\n", `rule "broken" (line 2): condition does not compile`},
		{"undeclared", "rules:\n  - name: typo\n    when: argz.amount > 3\n    decision: deny\n", `undeclared reference to 'argz'`},
		{"not boolean", "rules:\n  - name: num\n    when: 1 + 2\n    decision: deny\n", `rule "num" (line 2): condition gives int`},
		{"unknown tool", "rules:\n  - name: r\n    tool: issue_refnd\n    decision: deny\n", `no tool is named "issue_refnd"`},
		{"unknown field", "rules:\n  - name: r\n    decison: deny\n", `[3:5] unknown field "decison"`},
		{"bad decision", "rules:\n  - name: r\n    decision: maybe\n", `decision "maybe" must be allow, needs_approval or deny`},
		{"approvals on allow", "rules:\n  - name: r\n    decision: allow\n    approvals: 2\n", "only apply to needs_approval"},
		{"bad role", "rules:\n  - name: r\n    decision: needs_approval\n    role: auditor\n", `role "auditor" cannot approve`},
		{"bad expiry", "rules:\n  - name: r\n    decision: needs_approval\n    expires: soon\n", `expires "soon" is not a duration`},
		{"duplicate", "rules:\n  - name: r\n    decision: deny\n  - name: r\n    decision: deny\n", "the name is used twice"},
		{"bad placeholder", "rules:\n  - name: r\n    decision: deny\n    reason: \"{{ args. }}\"\n", "reason: placeholder"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := policy.LoadPolicy([]byte(c.yaml), "test.yaml", reg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want it to mention %q", err, c.want)
			}
		})
	}
}

func TestFailingPolicyTestIsReported(t *testing.T) {
	t.Parallel()
	p, err := policy.LoadPolicy([]byte(`
rules:
  - name: all-refunds-allowed
    tool: issue_refund
    decision: allow
tests:
  - name: a $900 refund needs approval
    tool: issue_refund
    args: {order_id: A1002, amount: 900}
    expect: needs_approval
`), "loose.yaml", shopRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	r := p.RunTests(context.Background())
	if len(r) != 1 || r[0].Passed || !strings.Contains(r[0].Problem, "expected needs_approval, got allow (rule all-refunds-allowed") {
		t.Fatalf("got %+v", r)
	}
}

func TestConditionErrorSendsToAPerson(t *testing.T) {
	t.Parallel()
	p, err := policy.LoadPolicy([]byte(`
rules:
  - name: uses-missing-field
    when: args.nope > 3
    decision: allow
`), "x.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := p.Decide(context.Background(), policy.Input{Tool: "get_order_status", Risk: tools.RiskRead, Args: map[string]any{}})
	if err != nil || d.Verdict != policy.NeedsApproval || d.Rule != "uses-missing-field" {
		t.Fatalf("got %+v %v", d, err)
	}
}

func TestRunFactsInConditions(t *testing.T) {
	t.Parallel()
	p, err := policy.LoadPolicy([]byte(`
rules:
  - name: too-many-lookups
    tool: get_order_status
    when: run.calls_by_tool.get_order_status >= 20 || run.calls > 100
    decision: deny
    reason: "{{ customer.name }} looked up {{ run.calls_by_tool.get_order_status }} orders in one chat"
`), "x.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := p.Decide(context.Background(), policy.Input{Tool: "get_order_status", Risk: tools.RiskRead,
		Facts: policy.StaticFacts{C: policy.CustomerFacts{Name: "Mallory"}, R: policy.RunFacts{Calls: 25, CallsByTool: map[string]int64{"get_order_status": 25}}}})
	if err != nil || d.Verdict != policy.Deny || d.Reason != "Mallory looked up 25 orders in one chat" {
		t.Fatalf("got %+v %v", d, err)
	}
}

func BenchmarkPolicyDecide(b *testing.B) {
	p := defaultPolicy(b)
	ctx := context.Background()
	facts := policy.StaticFacts{C: policy.CustomerFacts{ID: "cus_alice", SignedIn: true}}
	for _, bc := range []struct {
		name string
		in   policy.Input
	}{
		{"read", policy.Input{Tool: "get_order_status", Risk: tools.RiskRead, Args: map[string]any{"order_id": "A1002"}, Facts: facts}},
		{"refund900", policy.Input{Tool: "issue_refund", Risk: tools.RiskHighWrite, Args: map[string]any{"order_id": "A1002", "amount": 900.0}, Facts: facts}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Decide(ctx, bc.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGateInMemory measures what a call costs before it touches the
// disk: look up, validate, normalize, decide.
func BenchmarkGateInMemory(b *testing.B) {
	p := defaultPolicy(b)
	reg := shopRegistry(b)
	ctx := context.Background()
	facts := policy.StaticFacts{C: policy.CustomerFacts{ID: "cus_alice", SignedIn: true}}
	for _, bc := range []struct{ name, tool, args string }{
		{"read", "get_order_status", `{"order_id":"A1002"}`},
		{"refund900", "issue_refund", `{"order_id":"A1002","amount":900,"reason":"arrived broken"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			raw := []byte(bc.args)
			for b.Loop() {
				tool, _ := reg.Get(bc.tool)
				n, err := tool.Normalize(raw)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := p.Decide(ctx, policy.Input{Tool: tool.Name, Risk: tool.Risk, Args: n.Map, Facts: facts}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// orderTotal is what the test cases say an order was already refunded:
// order A1 had $990.
func orderTotal(args map[string]any) float64 {
	if args["order_id"] == "A1" {
		return 990
	}
	return 0
}
