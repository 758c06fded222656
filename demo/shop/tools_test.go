package shop_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// shopAt is the demo shop's tools over a seeded store of the test's own.
func shopAt(t *testing.T) (*storage.Store, *tools.Registry) {
	t.Helper()
	store := open(t)
	if _, err := shop.On(store).Seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(shop.Tools(store)...)
	if err != nil {
		t.Fatal(err)
	}
	return store, reg
}

// run normalizes the arguments as the gate does and runs the tool for the
// customer, with the idempotency key.
func run(t *testing.T, reg *tools.Registry, name, customer, key, args string) (map[string]any, error) {
	t.Helper()
	tool, ok := reg.Get(name)
	if !ok {
		t.Fatalf("no tool %s", name)
	}
	norm, err := tool.Normalize([]byte(args))
	if err != nil {
		t.Fatalf("%s %s: %v", name, args, err)
	}
	out, err := tool.Run(context.Background(), tools.Call{ID: models.NewID("call"), IdempotencyKey: key, RunID: "run_1", CustomerID: customer}, norm)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m, nil
}

// Refunds add up in cents: ten refunds of $0.10 and one of $0.20 are $1.20
// refunded, which float64 dollars get wrong (0.1 added ten times is not 1).
// A refund asked twice with one idempotency key is one refund.
func TestRefundsAddUpInCentsAndRunOnce(t *testing.T) {
	t.Parallel()
	store, reg := shopAt(t)
	var floats float64
	for i := range 10 {
		if _, err := run(t, reg, "issue_refund", "cus_alice", "key_"+string(rune('a'+i)), `{"order_id":"A1001","amount":0.1}`); err != nil {
			t.Fatal(err)
		}
		floats += 0.1
	}
	if floats == 1.0 {
		t.Fatal("this test means to add sums that float64 gets wrong")
	}
	out, err := run(t, reg, "issue_refund", "cus_alice", "key_last", `{"order_id":"A1001","amount":0.2}`)
	if err != nil {
		t.Fatal(err)
	}
	again, err := run(t, reg, "issue_refund", "cus_alice", "key_last", `{"order_id":"A1001","amount":0.2}`)
	if err != nil {
		t.Fatal(err)
	}
	if out["order_refunded_total"] != "$1.20" || again["refund_id"] != out["refund_id"] || again["order_refunded_total"] != "$1.20" {
		t.Fatalf("first %v, again %v", out, again)
	}
	refunds, err := shop.On(store).OrderRefunds(context.Background(), "A1001")
	if err != nil || len(refunds) != 11 {
		t.Fatalf("refunds: %d %v", len(refunds), err)
	}
	facts, err := shop.Facts{Store: store}.CustomerFacts(context.Background(), "cus_alice")
	if err != nil || facts["refunded_24h"] != 1.2 {
		t.Fatalf("facts: %v %v", facts, err)
	}
}

// A tool acts only on the run's customer's orders, never refunds more than
// is left, and refuses in words the model can pass on.
func TestShopToolsRefuseWhatTheyMustNotDo(t *testing.T) {
	t.Parallel()
	store, reg := shopAt(t)
	cases := []struct{ tool, customer, args, want string }{
		{"issue_refund", "cus_bob", `{"order_id":"A1002","amount":10}`, "A1002"},
		{"issue_refund", "cus_alice", `{"order_id":"A1002","amount":950.01}`, "only $950.00 of order A1002 is left to refund"},
		{"issue_refund", "", `{"order_id":"A1002","amount":1}`, "customer"},
		{"cancel_order", "cus_alice", `{"order_id":"A1002"}`, "delivered"},
		{"update_shipping_address", "cus_bob", `{"order_id":"A1001","address":"1 Other Road, Leeds"}`, "A1001"},
	}
	for _, c := range cases {
		_, err := run(t, reg, c.tool, c.customer, models.NewID("key"), c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s by %q %s: %v (want it refused, saying %q)", c.tool, c.customer, c.args, err, c.want)
		}
	}
	if refunds, _ := shop.On(store).OrderRefunds(context.Background(), "A1002"); len(refunds) != 0 {
		t.Fatalf("a refused refund left %d refunds", len(refunds))
	}
	o, err := shop.On(store).CustomerOrder(context.Background(), "cus_alice", "A1001")
	if err != nil || o.ShippingAddress != "4 Mill Lane, York" {
		t.Fatalf("another customer changed the address: %+v %v", o, err)
	}
}
