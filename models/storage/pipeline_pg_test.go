package storage_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/models/storage/storetest/delayproxy"
)

// Across a network a unit's writes do not each wait for an answer: a unit
// that records eight calls, each with its audit event, costs PostgreSQL
// the same few round trips as one that records one (BEGIN with the
// chain's head, the rest with COMMIT), counted by a proxy between them.
func TestAUnitsWritesCostAFewRoundTripsWhateverTheirNumber(t *testing.T) {
	if !storetest.Postgres() {
		t.Skip("needs " + storetest.Env)
	}
	dsn := storetest.DSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := delayproxy.Start(u.Host, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	u.Host = proxy.Addr()
	s, err := storage.Open(u.String(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Write(ctx, func(tx *storage.Tx) error { return tx.CreateRun(&models.Run{ID: "run_rt", Status: "active"}) }); err != nil {
		t.Fatal(err)
	}
	record := func(n int, prefix string) int64 {
		before := proxy.Turns()
		if err := s.Write(ctx, func(tx *storage.Tx) error {
			for i := range n {
				id := fmt.Sprintf("call_%s%d", prefix, i)
				if err := tx.CreateToolCall(&models.ToolCall{ID: id, RunID: "run_rt", Tool: "t", Risk: "read", Args: "{}", RawArgs: "{}",
					Status: models.CallSucceeded, Decision: models.DecidedAllow}); err != nil {
					return err
				}
				if err := tx.Audit(models.Event{Actor: "test", Kind: "test.recorded", Subject: id}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return proxy.Turns() - before
	}
	record(1, "warm") // the statements' first use prepares them
	one, eight := record(1, "a"), record(8, "b")
	if one > 2 || eight != one {
		t.Fatalf("round trips to PostgreSQL: %d for one call and its event, %d for eight (want 2 each: BEGIN with the head, the rest with COMMIT)", one, eight)
	}
	for _, id := range []string{"call_a0", "call_b7"} {
		if _, err := s.ToolCall(ctx, id); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	if rep, err := s.VerifyAuditChain(ctx); err != nil || !rep.OK || rep.Events != 10 {
		t.Fatalf("the chain: %+v %v", rep, err)
	}
}
