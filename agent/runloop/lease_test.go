package runloop_test

import (
	"context"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/tools"
)

// stuckModel answers only when its context ends, and says that it did.
type stuckModel struct{ stopped chan error }

func (m stuckModel) Next(ctx context.Context, _ llm.Request) (llm.Reply, error) {
	<-ctx.Done()
	m.stopped <- ctx.Err()
	return llm.Reply{}, ctx.Err()
}

// A step whose lease another instance took stops: the model call it was
// making is cancelled, rather than going on beside the new holder.
func TestAStepStopsWhenItsLeaseIsLost(t *testing.T) {
	if !storetest.Postgres() {
		t.Skip("needs PostgreSQL (" + storetest.Env + "): leases are how instances share runs")
	}
	dsn := storetest.DSN(t)
	store, err := storage.Open(dsn, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	reg, err := tools.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.LoadPolicy(policy.DefaultPolicyYAML, "default", reg)
	if err != nil {
		t.Fatal(err)
	}
	m := stuckModel{stopped: make(chan error, 1)}
	co, err := core.New(core.Config{Store: store, Tools: reg, Policy: pol, Model: m})
	if err != nil {
		t.Fatal(err)
	}
	runner := co.Runner
	runner.Lease = 600 * time.Millisecond
	t.Cleanup(runner.Close)
	ctx := context.Background()
	id := models.NewID("run")
	if err := store.Write(ctx, func(tx *storage.Tx) error {
		if err := tx.CreateRun(&models.Run{ID: id, CustomerID: "cus_1", Channel: "test", Status: models.RunActive}); err != nil {
			return err
		}
		return tx.AppendTurn(&models.Turn{RunID: id, Role: models.RoleCustomer, Text: "hello"})
	}); err != nil {
		t.Fatal(err)
	}
	done := runner.Kick(id)
	// The step holds the lease and waits on the model; another instance
	// takes the run as if this one had not renewed in time.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if r, err := store.Run(ctx, id); err == nil && r.Worker == store.Instance() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the step never leased the run")
		}
	}
	storetest.Tamper(t, dsn, `UPDATE runs SET worker = 'inst_thief', lease_until = now() + interval '1 hour' WHERE id = '`+id+`'`)
	select {
	case err := <-m.stopped:
		if err != context.Canceled {
			t.Fatalf("the model call ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the step went on after its lease was lost")
	}
	<-done
	if r, _ := store.Run(ctx, id); r.Worker != "inst_thief" {
		t.Fatalf("the run's holder is %q: the step that lost it let go of the new holder's lease", r.Worker)
	}
}
