package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/countersign/countersign/tools"
)

// PolicyTestResult is the outcome of one test case carried by a policy file.
type PolicyTestResult struct {
	Name    string
	Passed  bool
	Got     Decision
	Problem string // why it failed, in words
}

// RunTests runs the policy file's own test cases.
func (p *FilePolicy) RunTests(ctx context.Context) []PolicyTestResult {
	out := make([]PolicyTestResult, 0, len(p.tests))
	for _, t := range p.tests {
		out = append(out, p.runTest(ctx, t.spec))
	}
	return out
}

func (p *FilePolicy) runTest(ctx context.Context, ts testSpec) PolicyTestResult {
	res := PolicyTestResult{Name: ts.Name}
	fail := func(format string, args ...any) PolicyTestResult {
		res.Problem = fmt.Sprintf(format, args...)
		return res
	}
	in := Input{Tool: ts.Tool, Risk: tools.Risk(ts.Risk), Args: ts.Args}
	if p.registry != nil {
		if tool, ok := p.registry.Get(ts.Tool); ok {
			if in.Risk == "" {
				in.Risk = tool.Risk
			}
			raw, err := json.Marshal(nonNil(ts.Args))
			if err != nil {
				return fail("args: %v", err)
			}
			norm, err := tool.Normalize(raw)
			if err != nil {
				return fail("the test's args are not valid for %s: %v", ts.Tool, err)
			}
			in.Args = norm.Map
		} else if ts.Risk == "" {
			return fail("no tool is named %q (give a risk to test a tool this build does not have)", ts.Tool)
		}
	}
	if !in.Risk.Valid() {
		return fail("risk %q is not read, low_write or high_write", in.Risk)
	}
	facts := StaticFacts{}
	if ts.Customer != nil {
		c, err := customerOf(ts.Customer)
		if err != nil {
			return fail("%v", err)
		}
		facts.C = c
	}
	if r := ts.Run; r != nil {
		facts.R = RunFacts{Channel: r.Channel, Calls: r.Calls, CallsByTool: r.CallsByTool}
	}
	facts.T = ts.Totals
	in.Facts = facts
	d, err := p.Decide(ctx, in)
	if err != nil {
		return fail("%v", err)
	}
	res.Got = d
	var wrong []string
	if string(d.Verdict) != ts.Expect {
		wrong = append(wrong, fmt.Sprintf("expected %s, got %s", ts.Expect, d.Verdict))
	}
	if ts.Rule != "" && d.Rule != ts.Rule {
		wrong = append(wrong, fmt.Sprintf("expected rule %s, got %s", ts.Rule, d.Rule))
	}
	if ts.Approvals != 0 && d.Approvals != ts.Approvals {
		wrong = append(wrong, fmt.Sprintf("expected %d approvers, got %d", ts.Approvals, d.Approvals))
	}
	if ts.Role != "" && string(d.Role) != ts.Role {
		wrong = append(wrong, fmt.Sprintf("expected role %s, got %q", ts.Role, d.Role))
	}
	if len(wrong) > 0 {
		return fail("%s (rule %s: %q)", strings.Join(wrong, "; "), d.Rule, d.Reason)
	}
	res.Passed = true
	return res
}

func nonNil(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// customerOf reads a test's customer: id, name and attributes as the gate
// gives them, every other key a business fact.
func customerOf(m map[string]any) (CustomerFacts, error) {
	var c CustomerFacts
	for k, v := range m {
		switch k {
		case "id", "name":
			str, ok := v.(string)
			if !ok {
				return c, fmt.Errorf("customer.%s must be a string", k)
			}
			if k == "id" {
				c.ID = str
			} else {
				c.Name = str
			}
		case "attributes":
			attrs, ok := v.(map[string]any)
			if !ok {
				return c, fmt.Errorf("customer.attributes must be a map")
			}
			c.Attributes = attrs
		case "signed_in":
			return c, fmt.Errorf("customer.signed_in follows from customer.id; leave it out")
		default:
			if c.Business == nil {
				c.Business = map[string]any{}
			}
			c.Business[k] = number(v)
		}
	}
	c.SignedIn = c.ID != ""
	return c, nil
}

// number reads a YAML whole number as the float64 JSON gives the gate.
func number(v any) any {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int64:
		return float64(n)
	case uint64:
		return float64(n)
	}
	return v
}

// Failing is the results that did not pass.
func Failing(results []PolicyTestResult) []PolicyTestResult {
	var out []PolicyTestResult
	for _, r := range results {
		if !r.Passed {
			out = append(out, r)
		}
	}
	return out
}
