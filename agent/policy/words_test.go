package policy

import "testing"

// A condition reads as words where every part of it can, and is refused
// (shown as written) where one part cannot: words never say less.
func TestConditionsReadAsWords(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]string{
		"":                  "always",
		"args.amount <= 50": "the amount is at most 50",
		"args.amount + totals.refunded_on_order > 1000":                      "the amount plus the total refunded on order is more than 1,000",
		"totals.refunded_24h > 0 && args.amount + totals.refunded_24h > 500": "the total refunded 24h is more than 0 and the amount plus the total refunded 24h is more than 500",
		"customer.signed_in && !(args.amount > 10 || tool == 'x')":           `the customer is signed in and not (the amount is more than 10 or the tool is "x")`,
		"args.order_id in ['A1', 'B2']":                                      `the order ID is one of "A1", "B2"`,
		"has(args.note)":                                                     "the note is given",
		"size(args.items) > 3":                                               "the number of items is more than 3",
		"(args.a + args.b) * 2 > 1250.5":                                     "(the a plus the b) times 2 is more than 1,250.5",
		"args.a - (args.b - args.c) == 0":                                    "the a minus (the b minus the c) is 0",
		"customer.attributes.tier != 'gold'":                                 `the customer's attributes tier is not "gold"`,
		"run.calls_by_tool['issue_refund'] >= 2":                             `the run's calls by tool for "issue_refund" is at least 2`,
	} {
		got, ok := ConditionWords(expr)
		if !ok || got != want {
			t.Errorf("%s:\n got %q (%v)\nwant %q", expr, got, ok, want)
		}
	}
	for _, expr := range []string{"args.x.startsWith('a')", "args.items.exists(i, i > 2)", "args.a ? 1 : 2", "customer", "args["} {
		if got, ok := ConditionWords(expr); ok {
			t.Errorf("%s was put in words: %q", expr, got)
		}
	}
}

// A reason reads with its placeholders in words, and keeps one it cannot say.
func TestReasonsReadAsWords(t *testing.T) {
	t.Parallel()
	for reason, want := range map[string]string{
		"Refund of {{ money(args.amount) }}":                        "Refund of [the amount, in dollars]",
		"High-risk tool: {{ tool }}":                                "High-risk tool: [the tool]",
		"over {{ money(args.amount + totals.refunded_24h) }} today": "over [the amount plus the total refunded 24h, in dollars] today",
		"{{ args.x.startsWith('a') }} stays":                        "{{ args.x.startsWith('a') }} stays",
		"no placeholder":                                            "no placeholder",
	} {
		if got := ReasonWords(reason); got != want {
			t.Errorf("%s:\n got %q\nwant %q", reason, got, want)
		}
	}
}
