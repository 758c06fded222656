package policy

import (
	"context"
	"math"
	"strconv"
	"testing"
)

// The fast path for plain field placeholders must render exactly what the
// CEL evaluation renders.
func TestTemplateFastPathMatchesCEL(t *testing.T) {
	in := Input{Tool: "issue_refund", Risk: "high_write", Args: map[string]any{"amount": 900.5, "order_id": "A1002", "n": 3.0},
		Facts: StaticFacts{C: CustomerFacts{ID: "cus_alice", Name: "Alice <&>", Business: map[string]any{"refunded_24h": 1234.5}}, R: RunFacts{Calls: 7, Channel: "api"}}}
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
			in := Input{Args: args, Facts: StaticFacts{C: CustomerFacts{Business: map[string]any{"refunded_24h": 600.0}}, R: RunFacts{Calls: 7}}}
			if f, ok := v.(float64); ok && expr == "customer.refunded_24h > 500" {
				in.Facts = StaticFacts{C: CustomerFacts{Business: map[string]any{"refunded_24h": f}}}
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

// The comparison fast path and CEL agree on any number, any operator and
// any threshold (go test -fuzz FuzzComparisonFastPathMatchesCEL ./agent/policy).
func FuzzComparisonFastPathMatchesCEL(f *testing.F) {
	for _, seed := range []struct {
		v, limit float64
		op       uint8
		totals   bool
	}{{900, 1000, 0, false}, {50, 50, 1, false}, {math.Copysign(0, -1), 0, 4, true}, {1e308, 1e308, 2, false}, {0.1 + 0.2, 0.3, 4, true}} {
		f.Add(seed.v, seed.limit, seed.op, seed.totals)
	}
	ops := []string{">", "<=", ">=", "<", "==", "!="}
	f.Fuzz(func(t *testing.T, v, limit float64, op uint8, totals bool) {
		if limit != limit || v != v { // NaN: not a number anyone writes in a policy
			return
		}
		lit := strconv.FormatFloat(limit, 'f', -1, 64)
		variable := "args.amount"
		in := Input{Args: map[string]any{"amount": v}}
		if totals {
			variable = "totals.sum"
			in = Input{Args: map[string]any{}, Facts: StaticFacts{T: map[string]float64{"sum": v}}}
		}
		expr := variable + " " + ops[int(op)%len(ops)] + " " + lit
		c := parseComparison(expr)
		if c == nil {
			return // a literal the fast path does not read (exponent, very long): CEL decides
		}
		prg, _, err := compileCEL(expr)
		if err != nil {
			return // a policy with it would not load (an int literal past int64)
		}
		act := newActivation(context.Background(), in)
		if totals {
			act.totals = []*total{{name: "sum", tool: "t", field: "amount"}}
		}
		fast, ok := c.eval(act)
		if !ok {
			return
		}
		act2 := newActivation(context.Background(), in)
		act2.totals = act.totals
		out, _, err := prg.Eval(act2)
		if err != nil {
			t.Fatalf("%s: fast path answered %v where CEL fails: %v", expr, fast, err)
		}
		if want := out.Value().(bool); fast != want {
			t.Fatalf("%s with %v: fast %v, CEL %v", expr, v, fast, want)
		}
	})
}

// The placeholder fast path renders what CEL renders for any string and any
// number (go test -fuzz FuzzTemplateFastPathMatchesCEL ./agent/policy).
func FuzzTemplateFastPathMatchesCEL(f *testing.F) {
	for _, seed := range []struct {
		s     string
		n     float64
		which uint8
	}{{"A1002", 900.5, 0}, {"<&>\"é", 1e21, 3}, {"", math.Copysign(0, -1), 5}, {"\xff", 0.1 + 0.2, 9}, {"🙂", 123456789.125, 11}} {
		f.Add(seed.s, seed.n, seed.which)
	}
	templates := []string{"{{ args.amount }}", "{{money(args.amount)}}", "{{ args.order_id }}", "{{ customer.name }}",
		"{{ money(customer.refunded_24h) }}", "{{ customer.refunded_24h }}", "{{ run.channel }}", "{{ money(args.order_id) }}",
		"{{ args.missing }}", "{{ tool }}", "a {{ args.order_id }} b", "{{ money( args.amount ) }}"}
	f.Fuzz(func(t *testing.T, s string, n float64, which uint8) {
		src := templates[int(which)%len(templates)]
		tpl, err := compileTemplate(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		in := Input{Tool: s, Args: map[string]any{"amount": n, "order_id": s},
			Facts: StaticFacts{C: CustomerFacts{ID: "c", Name: s, Business: map[string]any{"refunded_24h": n}}, R: RunFacts{Channel: s}}}
		fast := tpl.render(newActivation(context.Background(), in))
		slow := *tpl
		slow.paths = make([]*fieldPath, len(tpl.paths))
		if viaCEL := slow.render(newActivation(context.Background(), in)); fast != viaCEL {
			t.Fatalf("%s with %q, %v: fast %q, CEL %q", src, s, n, fast, viaCEL)
		}
	})
}

// What the fast paths buy over CEL, per evaluation (BENCHMARKS.md).
func BenchmarkFastPaths(b *testing.B) {
	in := Input{Tool: "issue_refund", Args: map[string]any{"amount": 900.0, "order_id": "A1002"}}
	tpl, err := compileTemplate("Refund of {{ money(args.amount) }} on {{ args.order_id }}")
	if err != nil {
		b.Fatal(err)
	}
	viaCEL := *tpl
	viaCEL.paths = make([]*fieldPath, len(tpl.paths))
	cmp := parseComparison("args.amount > 500")
	prg, _, err := compileCEL("args.amount > 500")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("reason/fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tpl.render(newActivation(context.Background(), in))
		}
	})
	b.Run("reason/cel", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			viaCEL.render(newActivation(context.Background(), in))
		}
	})
	b.Run("condition/fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			cmp.eval(newActivation(context.Background(), in))
		}
	})
	b.Run("condition/cel", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _, _ = prg.Eval(newActivation(context.Background(), in))
		}
	})
}
