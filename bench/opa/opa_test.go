// Package opa compares Countersign's policy decision with the same rules in
// Rego, evaluated by the OPA Go library. It is a separate module so that OPA
// is no dependency of the application.
package opa

import (
	"context"
	_ "embed"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/tools"
)

//go:embed policy.rego
var module string

type decisionCase struct {
	name     string
	tool     string
	risk     tools.Risk
	args     map[string]any
	refunded float64 // totals.refunded_24h; the order's total is the same
}

var cases = []decisionCase{
	{"read", "get_order_status", tools.RiskRead, map[string]any{"order_id": "A1002"}, 0},
	{"refund20", "issue_refund", tools.RiskHighWrite, map[string]any{"order_id": "A1001", "amount": 20.0}, 0},
	{"refund900", "issue_refund", tools.RiskHighWrite, map[string]any{"order_id": "A1002", "amount": 900.0}, 0},
	{"refund1200", "issue_refund", tools.RiskHighWrite, map[string]any{"order_id": "B2001", "amount": 1200.0}, 0},
	{"refund10-after-600", "issue_refund", tools.RiskHighWrite, map[string]any{"order_id": "A1001", "amount": 10.0}, 600},
	{"refund500-after-600", "issue_refund", tools.RiskHighWrite, map[string]any{"order_id": "A1001", "amount": 500.0}, 600},
	{"refund20-after-470", "issue_refund", tools.RiskHighWrite, map[string]any{"order_id": "A1001", "amount": 20.0}, 470},
	{"cancel", "cancel_order", tools.RiskHighWrite, map[string]any{"order_id": "A1003"}, 0},
}

func countersignPolicy(tb testing.TB) *policy.FilePolicy {
	reg, err := tools.NewRegistry(shop.Tools(nil)...)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := policy.LoadPolicy(shop.PolicyYAML, "default", reg)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func opaQuery(tb testing.TB) rego.PreparedEvalQuery {
	pq, err := rego.New(rego.Query("data.countersign.decision"), rego.Module("policy.rego", module)).PrepareForEval(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return pq
}

func (c decisionCase) input() policy.Input {
	return policy.Input{Tool: c.tool, Risk: c.risk, Args: c.args,
		Facts: policy.StaticFacts{C: policy.CustomerFacts{ID: "cus_alice", SignedIn: true},
			T: map[string]float64{"refunded_24h": c.refunded, "refunded_on_order": c.refunded}}}
}

func (c decisionCase) opaInput() map[string]any {
	return map[string]any{"tool": c.tool, "risk": string(c.risk), "args": c.args,
		"customer": map[string]any{"id": "cus_alice", "signed_in": true},
		"totals":   map[string]any{"refunded_24h": c.refunded, "refunded_on_order": c.refunded}}
}

// The two policies must agree, or the comparison means nothing.
func TestRegoMatchesTheDefaultPolicy(t *testing.T) {
	p, pq := countersignPolicy(t), opaQuery(t)
	ctx := context.Background()
	for _, c := range cases {
		ours, err := p.Decide(ctx, c.input())
		if err != nil {
			t.Fatal(err)
		}
		rs, err := pq.Eval(ctx, rego.EvalInput(c.opaInput()))
		if err != nil || len(rs) != 1 {
			t.Fatalf("%s: %v %v", c.name, rs, err)
		}
		theirs := rs[0].Expressions[0].Value.(map[string]any)
		if string(ours.Verdict) != theirs["verdict"] || ours.Rule != theirs["rule"] {
			t.Errorf("%s: countersign %s/%s, rego %v/%v", c.name, ours.Verdict, ours.Rule, theirs["verdict"], theirs["rule"])
		}
	}
}

func BenchmarkDecide(b *testing.B) {
	p, pq := countersignPolicy(b), opaQuery(b)
	ctx := context.Background()
	for _, c := range []decisionCase{cases[0], cases[2]} {
		in, opaIn := c.input(), c.opaInput()
		b.Run("countersign/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Decide(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("opa/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := pq.Eval(ctx, rego.EvalInput(opaIn)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
