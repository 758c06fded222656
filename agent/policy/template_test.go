package policy

import (
	"context"
	"testing"
)

// A reason's placeholders are CEL: money() reads dollars as people do, a
// number as written, a missing argument as "?".
func TestReasonTemplates(t *testing.T) {
	t.Parallel()
	in := Input{Tool: "issue_refund", Args: map[string]any{"amount": 900.5, "order_id": "A1002", "n": 3.0, "tiny": 0.125}}
	for tpl, want := range map[string]string{
		"Refund of {{ money(args.amount) }} on {{ args.order_id }}": "Refund of $900.50 on A1002",
		"{{ args.n }} items, {{ args.amount * 2.0 }}":               "3 items, 1801",
		"{{ money(args.tiny) }} rounds half away from zero":         "$0.13 rounds half away from zero",
		"missing: {{ args.nope }} and {{ money(args.nope) }}":       "missing: ? and ?",
		"{{ tool }} has no placeholders to fail":                    "issue_refund has no placeholders to fail",
		"none at all":                                               "none at all",
	} {
		c, err := compileTemplate(tpl)
		if err != nil {
			t.Fatalf("%s: %v", tpl, err)
		}
		if got := c.render(newActivation(context.Background(), in)); got != want {
			t.Errorf("%s: got %q, want %q", tpl, got, want)
		}
	}
}
