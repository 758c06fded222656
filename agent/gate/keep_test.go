package gate_test

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/audit"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/tools"
)

// The database goes away while a tool runs: the caller hears that the call
// ran and its outcome is kept (503, not a failure), and the same instance
// records the outcome once the database answers again, with no restart and
// no second run. (PostgreSQL: connections are refused and cut, as when the
// server stops; a SQLite file does not go away so.)
func TestAnOutcomeIsRecordedWhenTheDatabaseComesBack(t *testing.T) {
	if !storetest.Postgres() {
		t.Skip("needs PostgreSQL (" + storetest.Env + "): the outage is the server refusing and cutting connections")
	}
	dsn := storetest.DSN(t)
	u, _ := url.Parse(dsn)
	name := strings.TrimPrefix(u.Path, "/")
	admin, err := sql.Open("pgx", os.Getenv(storetest.Env))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	outage := func(on bool) {
		t.Helper()
		allow := "true"
		if on {
			allow = "false"
		}
		if _, err := admin.Exec("ALTER DATABASE " + name + " ALLOW_CONNECTIONS " + allow); err != nil {
			t.Fatal(err)
		}
		if on {
			if _, err := admin.Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() { outage(false) })
	store, err := storage.Open(dsn, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })

	var runs atomic.Int64
	started, finish := make(chan struct{}), make(chan struct{})
	tool, err := tools.FromSpec(tools.Spec{Name: "post_note", Risk: tools.RiskLowWrite,
		Schema: []byte(`{"type":"object","properties":{"text":{"type":"string"}},"additionalProperties":false}`),
		Run: func(context.Context, tools.Call, map[string]any) (any, error) {
			runs.Add(1)
			close(started)
			<-finish
			return map[string]any{"posted": true}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	g := gateOver(t, store, tool)
	ctx := context.Background()
	runID := models.NewID("run")
	if err := store.Write(ctx, func(tx *storage.Tx) error {
		return tx.CreateRun(&models.Run{ID: runID, Channel: "test", Status: models.RunActive})
	}); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		out gate.Outcome
		err error
	}
	done := make(chan answer, 1)
	go func() {
		out, err := g.Call(ctx, gate.CallRequest{RunID: runID, Tool: "post_note", Args: []byte(`{"text":"hi"}`)})
		done <- answer{out, err}
	}()
	<-started
	outage(true)
	close(finish)
	a := <-done
	if fault.CodeOf(a.err) != fault.Unavailable || !strings.Contains(a.err.Error(), "keeps the outcome") || a.out.CallID == "" {
		t.Fatalf("the call that ran while the database was away: %+v %v", a.out, a.err)
	}
	if g.KeptOutcomes() != 1 {
		t.Fatalf("%d outcomes kept", g.KeptOutcomes())
	}
	time.Sleep(500 * time.Millisecond) // a few tries fail meanwhile
	outage(false)
	deadline := time.Now().Add(30 * time.Second)
	for g.KeptOutcomes() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the kept outcome was not recorded after the database came back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, err := store.ToolCall(ctx, a.out.CallID)
	if err != nil || c.Status != models.CallSucceeded || !strings.Contains(c.Result, `"posted":true`) || runs.Load() != 1 {
		t.Fatalf("after the outage: %+v %v, ran %d times", c, err, runs.Load())
	}
	if recs, err := audit.VerifyRecords(ctx, store); err != nil || !recs.OK {
		t.Fatalf("records: %+v %v", recs, err)
	}
}
