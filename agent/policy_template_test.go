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
