package policy_test

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/countersign/countersign/agent/policy"
)

// A 758-byte alias bomb in a test's args stands for billions of values:
// refused at load, with its line, before anything expands it (it ended the
// server with "out of memory" when its tests ran on a proposal).
func TestAliasBombIsRefusedAtLoad(t *testing.T) {
	bomb := "a: &a [x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		bomb += n + ": &" + n + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n"
		prev = n
	}
	yml := "rules:\n  - name: r\n    tool: get_order_status\n    decision: allow\ntests:\n  - name: boom\n    tool: get_order_status\n    expect: allow\n    args:\n" +
		indent(bomb, "      ")
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := policy.LoadPolicy([]byte(yml), "bomb", shopRegistry(t))
	if err == nil || !strings.Contains(err.Error(), "aliases expand to more than") || !strings.Contains(err.Error(), "line ") {
		t.Fatalf("an alias bomb: %v", err)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Fatalf("refusing the bomb allocated %d MiB", grew>>20)
	}

	// A few aliases that stay small load as before.
	small := "rules:\n  - &r\n    name: r\n    tool: get_order_status\n    decision: allow\ntests:\n  - name: ok\n    tool: get_order_status\n    expect: allow\n    args: &args {order_id: A1}\n  - name: again\n    tool: get_order_status\n    expect: allow\n    args: *args\n"
	if _, err := policy.LoadPolicy([]byte(small), "small", shopRegistry(t)); err != nil {
		t.Fatalf("small aliases: %v", err)
	}
}

func indent(s, by string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(by + l + "\n")
	}
	return b.String()
}

// A condition whose worst case runs millions of steps is refused at load,
// naming the rule and its line; ordinary conditions, the demo's included,
// load; and the cost limit stops an evaluation that would pass it.
func TestConditionCostIsBoundedAtLoad(t *testing.T) {
	list := "[" + strings.Repeat("1,", 200) + "1]"
	heavy := "rules:\n  - name: cheap\n    tool: get_order_status\n    when: args.order_id == 'A1'\n    decision: allow\n" +
		"  - name: heavy\n    tool: get_order_status\n    when: \"" + list + ".all(x, " + list + ".all(y, " + list + ".all(z, x + y + z > 0)))\"\n    decision: allow\n"
	_, err := policy.LoadPolicy([]byte(heavy), "heavy", shopRegistry(t))
	if err == nil || !strings.Contains(err.Error(), `rule "heavy" (line 6)`) || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("a condition of millions of steps: %v", err)
	}
	// Over what a call can bring, a loop over its arguments is fine.
	fine := "rules:\n  - name: scan\n    tool: get_order_status\n    when: args.order_id.size() < 100 && args.exists(k, k == 'order_id')\n    decision: allow\n"
	p, err := policy.LoadPolicy([]byte(fine), "fine", shopRegistry(t))
	if err != nil {
		t.Fatalf("an ordinary condition: %v", err)
	}
	d, err := p.Decide(context.Background(), policy.Input{Tool: "get_order_status", Risk: "read", Args: map[string]any{"order_id": "A1"}})
	if err != nil || d.Verdict != policy.Allow {
		t.Fatalf("decide: %+v %v", d, err)
	}
	defaultPolicy(t)
}
