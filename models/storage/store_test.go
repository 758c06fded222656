package storage_test

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
)

// The audit page's text search finds a piece of text in the arguments
// whatever its case, on either database; on PostgreSQL a trigram index can
// answer it.
func TestAuditTextSearchIgnoresCase(t *testing.T) {
	dsn := storetest.DSN(t)
	s, err := storage.Open(dsn, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	run := models.NewID("run")
	err = s.Write(ctx, func(tx *storage.Tx) error {
		if err := tx.CreateRun(&models.Run{ID: run, Channel: "api", Status: models.RunActive}); err != nil {
			return err
		}
		for i, args := range []string{`{"note":"Parcel for MÜLLER at Gate 5"}`, `{"note":"nothing to see"}`} {
			c := &models.ToolCall{ID: models.NewID("call"), RunID: run, Tool: "note", Risk: "read",
				Args: args, RawArgs: args, Status: models.CallSucceeded, Decision: "allow", TurnID: int64(i)}
			if err := tx.CreateToolCall(c); err != nil {
				return err
			}
			if err := tx.Audit(models.Event{Actor: "model", Kind: models.EventCallAllowed, Subject: c.ID}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Before the follower has put them in the index and after.
	for _, followed := range []bool{false, true} {
		if followed {
			if err := s.FollowAll(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for _, q := range []string{"gate 5", "GATE 5", "parcel for"} {
			rows, err := s.AuditCalls(ctx, models.AuditQuery{Text: q, Limit: 10})
			if err != nil || len(rows) != 1 || !strings.Contains(rows[0].Args, "Gate 5") {
				t.Fatalf("followed %t, search %q: %d rows, %v", followed, q, len(rows), err)
			}
		}
	}
	if !s.Shared() {
		return
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.QueryContext(ctx, `EXPLAIN SELECT call_id FROM call_text WHERE args ILIKE '%gate 5%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		rows.Scan(&line)
		plan = append(plan, line)
	}
	if !strings.Contains(strings.Join(plan, "\n"), "idx_call_text_args_trgm") {
		t.Fatalf("the text search cannot use the trigram index:\n%s", strings.Join(plan, "\n"))
	}
}

// The writer's connection to PostgreSQL is cut (a restart, a proxy): the
// next write takes a new one, and nothing written before is lost.
func TestWriterReconnectsAfterLosingItsConnection(t *testing.T) {
	if !storetest.Postgres() {
		t.Skip("the connection that can be cut is PostgreSQL's")
	}
	dsn := storetest.DSN(t)
	s, err := storage.Open(dsn, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	audit := func(subject string) error {
		return s.Write(ctx, func(tx *storage.Tx) error {
			return tx.Audit(models.Event{Actor: "test", Kind: "test", Subject: subject})
		})
	}
	if err := audit("before"); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var cut int
	if err := db.QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&cut); err != nil || cut == 0 {
		t.Fatalf("cut %d connections: %v", cut, err)
	}
	if err := audit("after"); err != nil {
		t.Fatalf("a write after the connection was cut: %v", err)
	}
	if rep, err := s.VerifyAuditChain(ctx); err != nil || !rep.OK || rep.Events != 2 {
		t.Fatalf("chain: %+v %v", rep, err)
	}
}

// Amounts round to cents one way everywhere: half away from zero, negative
// amounts as positive ones.
func TestCentsRoundsHalfAwayFromZero(t *testing.T) {
	for dollars, want := range map[float64]models.Cents{0.005: 1, -0.005: -1, 12.345: 1235, -12.345: -1235, -0.004: 0, 1.1 + 2.2: 330, -900: -90000} {
		if got := models.CentsOf(dollars); got != want {
			t.Errorf("Cents(%v) = %d, want %d", dollars, got, want)
		}
	}
	if got := models.CentsOf(-1234.5).String(); got != "-$1,234.50" {
		t.Errorf("a negative amount reads %q", got)
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e300, -1e14} {
		if c, err := models.CentsFrom(f); err == nil {
			t.Errorf("CentsFrom(%v) = %d, want it refused", f, c)
		}
	}
	if c, err := models.CentsFrom(models.MaxDollars); err != nil || c != 1e15 {
		t.Errorf("CentsFrom(MaxDollars) = %d, %v", c, err)
	}
}

// A call moves only as the status table allows: a finished call cannot be
// put back to pending, nor a pending one run without approval, and a
// refused move changes nothing.
func TestACallMovesOnlyAsTheStatusTableAllows(t *testing.T) {
	s, err := storage.Open(storetest.DSN(t), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	run, done, waiting := models.NewID("run"), models.NewID("call"), models.NewID("call")
	err = s.Write(ctx, func(tx *storage.Tx) error {
		if err := tx.CreateRun(&models.Run{ID: run, Channel: "api", Status: models.RunActive}); err != nil {
			return err
		}
		for id, st := range map[string]models.CallStatus{done: models.CallSucceeded, waiting: models.CallPending} {
			if err := tx.CreateToolCall(&models.ToolCall{ID: id, RunID: run, Tool: "t", Risk: "high_write", Args: "{}", RawArgs: "{}",
				Status: st, Decision: models.DecidedNeedsApproval}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range []models.CallChange{
		{ID: done, From: []models.CallStatus{models.CallSucceeded}, To: models.CallPending},
		{ID: done, From: []models.CallStatus{models.CallSucceeded}, To: models.CallFailed},
		{ID: waiting, From: []models.CallStatus{models.CallPending}, To: models.CallExecuting},
		{ID: waiting, From: []models.CallStatus{models.CallPending}, To: models.CallSucceeded},
	} {
		err := s.Write(ctx, func(tx *storage.Tx) error { return tx.ChangeCallStatus(ch) })
		if err == nil || !strings.Contains(err.Error(), "never goes from") {
			t.Errorf("%v -> %s: %v", ch.From, ch.To, err)
		}
	}
	for id, want := range map[string]models.CallStatus{done: models.CallSucceeded, waiting: models.CallPending} {
		if c, err := s.ToolCall(ctx, id); err != nil || c.Status != want {
			t.Errorf("%s is %v (%v), want %s", id, c, err, want)
		}
	}
}

// An agent's key finds the agent as gorm reads it (every column, times
// included, on either database), and a revoked key finds nothing.
func TestAKeyFindsItsAgentUntilRevoked(t *testing.T) {
	s, err := storage.Open(storetest.DSN(t), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	a := &models.Agent{ID: "agt_1", Name: "bot", KeyHash: "h1"}
	if err := s.CreateAgent(ctx, a, "test"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetAgentLimits(ctx, "bot", models.AgentLimits{CallsPerSecond: 3, CallBurst: 7, MaxWaiting: 2}, models.Actor{ID: "test"}); err != nil {
		t.Fatal(err)
	}
	used := time.Date(2026, 12, 5, 10, 11, 12, 345678000, time.UTC)
	if err := s.Write(ctx, func(tx *storage.Tx) error {
		_, err := tx.Exec("UPDATE agents SET last_used_at = ? WHERE id = ?", used, a.ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	want, err := s.AgentByName(ctx, "bot")
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.AgentForKey(ctx, "h1")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != want.ID || got.Name != want.Name || got.KeyHash != want.KeyHash || !got.CreatedAt.Equal(want.CreatedAt) ||
		got.RevokedAt != nil || got.LastUsedAt == nil || !got.LastUsedAt.Equal(*want.LastUsedAt) || !got.LastUsedAt.Equal(used) ||
		got.CallsPerSecond != 3 || got.CallBurst != 7 || got.MaxWaiting != 2 {
		t.Errorf("the key found %+v; gorm reads %+v", got, want)
	}
	if _, err := s.AgentForKey(ctx, "h2"); err != models.ErrNotFound {
		t.Errorf("an unknown key: %v", err)
	}
	if _, err := s.RevokeAgent(ctx, a.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AgentForKey(ctx, "h1"); err != models.ErrNotFound {
		t.Errorf("a revoked key: %v", err)
	}
}

// An agent's session has one run, found again by every later call (kept
// once read) and by another instance on the same database; the session
// stays its customer's: a call naming another is refused, the first time
// and every time after.
func TestASessionsRunIsFoundAgainAndStaysItsCustomers(t *testing.T) {
	dsn := storetest.DSN(t)
	one, err := storage.Open(dsn, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	two, err := storage.Open(dsn, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer two.Close()
	ctx := context.Background()
	bot, other := &models.Agent{ID: "agt_1", Name: "bot"}, &models.Agent{ID: "agt_2", Name: "other"}
	first, err := one.AgentRun(ctx, bot, "conv-1", "cus_1")
	if err != nil || first.ID == "" || first.Channel != "agent:bot" || first.CustomerID != "cus_1" {
		t.Fatalf("the session's run: %+v, %v", first, err)
	}
	for i, s := range []*storage.Store{one, one, two, two} {
		again, err := s.AgentRun(ctx, bot, "conv-1", "cus_1")
		if err != nil || again.ID != first.ID || again.Channel != first.Channel {
			t.Errorf("call %d found %+v, %v; want run %s", i, again, err, first.ID)
		}
		if _, err := s.AgentRun(ctx, bot, "conv-1", "cus_2"); !errors.Is(err, models.ErrConflict) {
			t.Errorf("call %d: another customer in the session: %v, want a conflict", i, err)
		}
	}
	if run, err := one.Run(ctx, first.ID); err != nil || run.AgentID != bot.ID || run.Session != "conv-1" {
		t.Errorf("the run as kept: %+v, %v", run, err)
	}
	for _, c := range []struct {
		ag      *models.Agent
		session string
	}{{bot, "conv-2"}, {other, "conv-1"}} {
		if run, err := two.AgentRun(ctx, c.ag, c.session, "cus_1"); err != nil || run.ID == first.ID {
			t.Errorf("%s's session %s: %+v, %v; want a run of its own", c.ag.Name, c.session, run, err)
		}
	}
}
