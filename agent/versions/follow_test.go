package versions_test

import (
	"context"
	"testing"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/agent/versions"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/tools"
)

// An instance that cannot read which version is in force when it starts
// decides nothing with its file: it fails closed, as its log says (it kept
// the file's policy while the log said every call was denied).
func TestStartingWithoutReadingTheVersionInForceFailsClosed(t *testing.T) {
	store := storetest.Open(t)
	reg, err := tools.NewRegistry(shop.Tools(nil)...)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.LoadPolicy(shop.PolicyYAML, "shop", reg)
	if err != nil {
		t.Fatal(err)
	}
	g := gate.New(gate.Config{Store: store, Tools: reg, Policy: p})
	vs, err := versions.New(versions.Config{Store: store, Gate: g, Host: "h1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store.Close() // the database does not answer

	if err := vs.Sync(ctx); err == nil {
		t.Fatal("Sync read a closed database")
	}
	if _, ok := g.Policy().(*policy.NotLoaded); !ok {
		t.Fatalf("the gate decides with %T after failing to read the version in force", g.Policy())
	}
}
