package storage_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
)

// Two instances on one PostgreSQL database append to chains of their own:
// one holding its chain's head for as long as it likes does not hold up the
// other; a call's events stay in the chain of the instance that recorded
// it when the other instance acts on it, even in a batch of the other's own
// units; a unit that would write to two chains is refused whole; the
// verification walks both chains and names the chain of a tampered event;
// an instance that goes is replaced on its chain, which goes on from its
// head.
func TestInstancesAppendToChainsOfTheirOwn(t *testing.T) {
	if !storetest.Postgres() {
		t.Skip("several instances need " + storetest.Env)
	}
	ctx := context.Background()
	dsn := storetest.DSN(t)
	open := func() *storage.Store {
		s, err := storage.Open(dsn, storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(), open()
	defer a.Close()
	if a.Chain() != 0 || b.Chain() != 1 {
		t.Fatalf("chains claimed: %d and %d, want 0 and 1", a.Chain(), b.Chain())
	}
	audit := func(s *storage.Store, kind models.EventKind, subject string) error {
		return s.Write(ctx, func(tx *storage.Tx) error {
			return tx.Audit(models.Event{Actor: "test", Kind: kind, Subject: subject})
		})
	}
	runWithCall(t, a, "run_a", "call_a")
	runWithCall(t, b, "run_b", "call_b")
	for _, w := range []struct {
		s    *storage.Store
		call string
	}{{a, "call_a"}, {b, "call_b"}} {
		if err := audit(w.s, models.EventCallAllowed, w.call); err != nil {
			t.Fatal(err)
		}
	}

	// A holds chain 0's head in a unit that waits; B appends meanwhile.
	holding, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- a.Write(ctx, func(tx *storage.Tx) error {
			if err := tx.Audit(models.Event{Actor: "test", Kind: "test.holding", Subject: "x"}); err != nil {
				return err
			}
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding
	done := make(chan error, 1)
	go func() { done <- audit(b, "test.meanwhile", "y") }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("B waited for A's transaction: the instances share a head")
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}

	// B acts on A's call while it writes its own events, all at once.
	var wg sync.WaitGroup
	errs := make(chan error, 17)
	for i := range 16 {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- audit(b, "test.own", fmt.Sprintf("own_%d", i)) }()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs <- b.Write(ctx, func(tx *storage.Tx) error {
			if _, err := tx.ToolCall("call_a"); err != nil {
				return err
			}
			return tx.Audit(models.Event{Actor: "test", Kind: models.EventCallSucceeded, Subject: "call_a"})
		})
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	events := func(subject string) []models.AuditEvent {
		evs, err := a.AuditEventsFor(ctx, subject)
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	for _, e := range events("call_a") {
		if e.Chain != 0 {
			t.Fatalf("call_a's %s went to chain %d, not its own (0)", e.Kind, e.Chain)
		}
	}
	if evs := events("own_3"); len(evs) != 1 || evs[0].Chain != 1 {
		t.Fatalf("B's own event: %+v", evs)
	}

	// One unit, two chains: refused, nothing of it written.
	err := b.Write(ctx, func(tx *storage.Tx) error {
		if err := tx.Audit(models.Event{Actor: "test", Kind: models.EventCallSucceeded, Subject: "call_b"}); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: "test", Kind: models.EventCallSucceeded, Subject: "call_a"})
	})
	if err == nil || !strings.Contains(err.Error(), "two audit chains") {
		t.Fatalf("a unit writing to two chains: %v", err)
	}
	if n := len(events("call_b")); n != 1 {
		t.Fatalf("the refused unit left %d events of call_b, want the 1 before it", n)
	}

	rep, err := a.VerifyAuditChain(ctx)
	if err != nil || !rep.OK || len(rep.Heads) != 2 || rep.Heads[0].Chain != 0 || rep.Heads[1].Chain != 1 {
		t.Fatalf("both chains verify: %+v %v", rep, err)
	}

	// Chain 0: call_a allowed, A's holding unit, call_a succeeded (on B);
	// chain 1: call_b allowed, B's event meanwhile, its 16 own; and, below,
	// the next instance's.
	// B goes; the next instance takes its chain and goes on from its head.
	b.Close()
	c := open()
	defer c.Close()
	if c.Chain() != 1 {
		t.Fatalf("the instance after B claimed chain %d, want B's (1)", c.Chain())
	}
	if err := audit(c, "test.after", "z"); err != nil {
		t.Fatal(err)
	}
	if rep, err := c.VerifyAuditChain(ctx); err != nil || !rep.OK || rep.Heads[0].Seq != 3 || rep.Heads[1].Seq != 19 {
		t.Fatalf("after B was replaced: %+v %v", rep, err)
	}

	storetest.Tamper(t, dsn, `UPDATE audit_events SET actor = 'someone else' WHERE chain = 1 AND seq = 2`)
	rep, err = c.VerifyAuditChain(ctx)
	if err != nil || rep.OK || rep.BadChain != 1 || rep.BadSeq != 2 || !strings.Contains(rep.Problem, "event 2 of chain 1 was altered") {
		t.Fatalf("a tampered event of chain 1: %+v %v", rep, err)
	}
}
