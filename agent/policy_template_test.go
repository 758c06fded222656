package agent

import (
	"context"
	"testing"
)

// The fast path for plain field placeholders must render exactly what the
// CEL evaluation renders.
func TestTemplateFastPathMatchesCEL(t *testing.T) {
	in := Input{Tool: "issue_refund", Risk: "high_write", Args: map[string]any{"amount": 900.5, "order_id": "A1002", "n": 3.0},
		Facts: StaticFacts{C: CustomerFacts{ID: "cus_alice", Name: "Alice <&>", Refunded24h: 1234.5}, R: RunFacts{Calls: 7, Channel: "api"}}}
	for _, src := range []string{
		"{{ tool }}", "{{ risk }}", "{{ args.amount }}", "{{money(args.amount)}}", "{{ money( args.amount ) }}", "{{ args.order_id }}",
		"{{ customer.name }}", "{{ money(customer.refunded_24h) }}", "{{ run.calls }}", "{{ run.channel }}", "{{ args.missing }}",
		"{{ money(args.order_id) }}", "{{ money(run.calls) }}", "{{ customer.signed_in }}", "x {{ args.n }} y {{ tool }} z",
	} {
		tpl, err := compileTemplate(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		fast := tpl.render(newActivation(context.Background(), in))
		slow := *tpl
		slow.paths = make([]*fieldPath, len(tpl.paths)) // all through CEL
		viaCEL := slow.render(newActivation(context.Background(), in))
		if fast != viaCEL {
			t.Errorf("%s: fast %q, CEL %q", src, fast, viaCEL)
		}
		if tpl.paths[0] == nil && src != "x {{ args.n }} y {{ tool }} z" {
			t.Errorf("%s did not take the fast path", src)
		}
	}
}

// The direct comparison must agree with CEL on every value it answers for,
// and leave to CEL every value it cannot answer for.
func TestComparisonFastPathMatchesCEL(t *testing.T) {
	values := []any{0.0, 1.0, 49.99, 50.0, 50.01, 500.0, 1000.0, 1000.0001, -3.5, 1e21, int64(7), int64(50), int64(1) << 60, "50", true, nil}
	for _, expr := range []string{"args.amount > 1000", "args.amount <= 50", "args.amount >= 50", "args.amount < 0.5", "args.amount == 50", "args.amount != 50",
		"customer.refunded_24h > 500", "run.calls >= 7", "args.amount > -1"} {
		c := parseComparison(expr)
		if c == nil {
			t.Fatalf("%s: no fast path", expr)
		}
		prg, _, err := compileCEL(expr)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			args := map[string]any{"amount": v}
			if v == nil {
				args = map[string]any{}
			}
			in := Input{Args: args, Facts: StaticFacts{C: CustomerFacts{Refunded24h: 600}, R: RunFacts{Calls: 7}}}
			if f, ok := v.(float64); ok && expr == "customer.refunded_24h > 500" {
				in.Facts = StaticFacts{C: CustomerFacts{Refunded24h: f}}
			}
			fast, ok := c.eval(newActivation(context.Background(), in))
			out, _, celErr := prg.Eval(newActivation(context.Background(), in))
			if !ok {
				continue // CEL decides these; nothing to compare
			}
			if celErr != nil {
				t.Errorf("%s with %#v: fast path answered %v where CEL fails: %v", expr, v, fast, celErr)
				continue
			}
			if want := out.Value().(bool); fast != want {
				t.Errorf("%s with %#v: fast %v, CEL %v", expr, v, fast, want)
			}
		}
	}
	for _, expr := range []string{"args.amount > 1000 && args.amount < 2", "size(args.order_id) > 3", "args.amount > customer.refunded_24h", "tool == 'x'"} {
		if parseComparison(expr) != nil {
			t.Errorf("%s took the fast path", expr)
		}
	}
}
