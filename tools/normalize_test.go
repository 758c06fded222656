package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/countersign/countersign/tools"
)

type refundIn struct {
	OrderID string  `json:"order_id" jsonschema:"pattern=^[A-Z][0-9]+$,maxLength=12"`
	Amount  float64 `json:"amount" jsonschema:"exclusiveMinimum=0,maximum=5000,multipleOf=0.01"`
	Reason  string  `json:"reason,omitempty" jsonschema:"maxLength=20"`
	Speed   string  `json:"speed,omitempty" jsonschema:"enum=standard,enum=express,default=standard"`
}

var refundTool = tools.MustNew(tools.Definition[refundIn]{
	Name: "issue_refund", Description: "Refund.", Risk: tools.RiskHighWrite,
	Run: func(ctx context.Context, call tools.Call, in refundIn) (any, error) { return in, nil },
})

func TestNormalizeProblems(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, args string
		want       string // the whole error, or "" when valid
	}{
		{"valid", `{"order_id":"A1002","amount":900}`, ""},
		{"missing both", `{}`, "amount: required; order_id: required"},
		{"zero amount", `{"order_id":"A1002","amount":0}`, "amount: must be > 0"},
		{"too much", `{"order_id":"A1002","amount":5000.01}`, "amount: must be ≤ 5000"},
		{"fractions of a cent", `{"order_id":"A1002","amount":1.005}`, "amount: must be a multiple of 0.01"},
		{"string amount", `{"order_id":"A1002","amount":"900"}`, "amount: must be a number, got string"},
		{"bad order id", `{"order_id":"a1002","amount":1}`, `order_id: "a1002" does not match the pattern ^[A-Z][0-9]+$`},
		{"unknown field", `{"order_id":"A1002","amount":1,"account":"x"}`, "account: unknown field; leave it out"},
		{"enum", `{"order_id":"A1002","amount":1,"speed":"warp"}`, `speed: must be one of "standard", "express"`},
		{"everything wrong", `{"amount":-1,"reason":"aaaaaaaaaaaaaaaaaaaaaaaaa","x":1}`,
			"amount: must be > 0; order_id: required; reason: must be at most 20 characters, got 25; x: unknown field; leave it out"},
		{"not JSON", `{"order_id":`, "arguments: not valid JSON (the document ends too early)"},
		{"trailing data", `{"order_id":"A1","amount":1} {}`, "arguments: not valid JSON (invalid character after top-level value)"},
		{"array", `[]`, "arguments: must be a JSON object, got an array"},
		{"null", `null`, "arguments: must be a JSON object, got null"},
		{"huge", `{"reason":"` + strings.Repeat("x", tools.MaxArgsBytes) + `"}`, "arguments: 1048589 bytes is over the limit of 1048576 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := refundTool.Normalize([]byte(c.args))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != c.want {
				t.Fatalf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

func TestNormalizeIsCanonical(t *testing.T) {
	t.Parallel()
	a, err := refundTool.Normalize([]byte(`{"amount": 900.00, "order_id": "A1002"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := refundTool.Normalize([]byte("{\n  \"order_id\":\"A1002\",\n  \"amount\":9e2\n}"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"amount":900,"order_id":"A1002","speed":"standard"}`
	if string(a.JSON) != want || string(b.JSON) != want {
		t.Fatalf("canonical forms differ:\n%s\n%s\nwant %s", a.JSON, b.JSON, want)
	}
	if a.Hash != b.Hash || len(a.Hash) != 64 {
		t.Fatalf("hashes %s %s", a.Hash, b.Hash)
	}
	if a.Map["amount"] != 900.0 || a.Value.(refundIn).OrderID != "A1002" {
		t.Fatalf("decoded %+v %+v", a.Map, a.Value)
	}
}

func TestNormalizeDoesNotEscapeHTML(t *testing.T) {
	t.Parallel()
	n, err := refundTool.Normalize([]byte(`{"order_id":"A1","amount":1,"reason":"<b>&\"x\""}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(n.JSON), `"reason":"<b>&\"x\""`) {
		t.Fatalf("got %s", n.JSON)
	}
}

func TestSchemaIsWhatTheModelSees(t *testing.T) {
	t.Parallel()
	s := string(refundTool.Schema)
	for _, want := range []string{`"additionalProperties":false`, `"required":["order_id","amount"]`, `"exclusiveMinimum":0`, `"maximum":5000`, `"pattern":"^[A-Z][0-9]+$"`} {
		if !strings.Contains(s, want) {
			t.Errorf("schema %s lacks %s", s, want)
		}
	}
}

func TestNewRefusesBadDefinitions(t *testing.T) {
	t.Parallel()
	run := func(context.Context, tools.Call, refundIn) (any, error) { return nil, nil }
	for _, d := range []tools.Definition[refundIn]{
		{Name: "Bad Name", Risk: tools.RiskRead, Run: run},
		{Name: "ok", Risk: "dangerous", Run: run},
		{Name: "ok", Risk: tools.RiskRead},
	} {
		if _, err := tools.New(d); err == nil {
			t.Errorf("%+v accepted", d)
		}
	}
	if _, err := tools.NewRegistry(refundTool, refundTool); err == nil {
		t.Error("duplicate tool names accepted")
	}
}

var sortedTool = tools.MustNew(tools.Definition[sortedRefundIn]{Name: "issue_refund", Risk: tools.RiskHighWrite,
	Run: func(context.Context, tools.Call, sortedRefundIn) (any, error) { return nil, nil }})

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{`{"order_id":"A1002","amount":900}`, `{}`, `[]`, `null`, `{"amount":1e400}`,
		`{"order_id":"A1","amount":0.01,"reason":"\u0000"}`, `{"order_id":"A1","amount":-0}`, `{"a":{"b":[1,2,{"c":null}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		n, err := refundTool.Normalize(raw)
		if err != nil {
			msg := err.Error()
			if msg == "" || !strings.Contains(msg, ": ") {
				t.Fatalf("unreadable error %q for %q", msg, raw)
			}
			return
		}
		// The order the input's fields are declared in changes nothing.
		if sorted, err := sortedTool.Normalize(raw); err != nil || string(sorted.JSON) != string(n.JSON) {
			t.Fatalf("declaration order changed %q: %s vs %s (%v)", raw, sorted.JSON, n.JSON, err)
		}
		// A normalized argument set normalizes to itself.
		again, err := refundTool.Normalize(n.JSON)
		if err != nil || string(again.JSON) != string(n.JSON) || again.Hash != n.Hash {
			t.Fatalf("not stable: %s -> %s (%v)", n.JSON, again.JSON, err)
		}
	})
}

// The same input with its fields declared in another order normalizes to
// the same bytes, hash and values: the canonical form sorts keys itself.
type sortedRefundIn struct {
	Amount  float64 `json:"amount" jsonschema:"exclusiveMinimum=0,maximum=5000,multipleOf=0.01"`
	OrderID string  `json:"order_id" jsonschema:"pattern=^[A-Z][0-9]+$,maxLength=12"`
	Reason  string  `json:"reason,omitempty" jsonschema:"maxLength=20"`
	Speed   string  `json:"speed,omitempty" jsonschema:"enum=standard,enum=express,default=standard"`
}

func TestDeclarationOrderDoesNotChangeNormalization(t *testing.T) {
	t.Parallel()
	sorted := tools.MustNew(tools.Definition[sortedRefundIn]{Name: "issue_refund", Risk: tools.RiskHighWrite,
		Run: func(context.Context, tools.Call, sortedRefundIn) (any, error) { return nil, nil }})
	for _, args := range []string{`{"order_id":"A1","amount":12.5}`, `{"amount":1e3,"order_id":"B22","reason":"<&>\"é","speed":"express"}`, `{"amount":0.01,"order_id":"C3","reason":""}`} {
		a, errA := refundTool.Normalize([]byte(args))
		b, errB := sorted.Normalize([]byte(args))
		if errA != nil || errB != nil {
			t.Fatalf("%s: %v %v", args, errA, errB)
		}
		if string(a.JSON) != string(b.JSON) || a.Hash != b.Hash || len(a.Map) != len(b.Map) {
			t.Fatalf("%s:\n one order   %s %v\n the other %s %v", args, a.JSON, a.Map, b.JSON, b.Map)
		}
		for k, v := range a.Map {
			if b.Map[k] != v {
				t.Fatalf("%s: map[%s] %v vs %v", args, k, v, b.Map[k])
			}
		}
	}
}

// Awkward strings and numbers normalize alike whatever the declaration
// order.
func TestAwkwardValuesNormalizeAlike(t *testing.T) {
	t.Parallel()
	sorted := tools.MustNew(tools.Definition[sortedRefundIn]{Name: "issue_refund", Risk: tools.RiskHighWrite,
		Run: func(context.Context, tools.Call, sortedRefundIn) (any, error) { return nil, nil }})
	compared := 0
	for _, reason := range []string{"plain", `quo"te \\ back`, "tab\tnew\nline\rcr\bbs\fff", "\u0001\u001f ctl", "<b>&amp;</b>", "é ü 中文 🙂",
		"line\u2028sep\u2029par", string([]byte{'b', 'a', 'd', 0xff, 'x'})} {
		for _, amount := range []string{"1", "0.01", "4999.99", "1e3", "12.5"} {
			args := fmt.Sprintf(`{"order_id":"A1","amount":%s,"reason":%q}`, amount, reason)
			if !json.Valid([]byte(args)) {
				continue
			}
			a, errA := refundTool.Normalize([]byte(args))
			b, errB := sorted.Normalize([]byte(args))
			if (errA == nil) != (errB == nil) {
				t.Fatalf("%s: %v vs %v", args, errA, errB)
			}
			if errA == nil && string(a.JSON) != string(b.JSON) {
				t.Fatalf("%s:\n one order %s\n the other %s", args, a.JSON, b.JSON)
			}
			if errA == nil {
				compared++
			}
		}
	}
	if compared < 20 {
		t.Fatalf("only %d cases compared", compared)
	}
}
