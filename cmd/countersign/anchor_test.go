package main

import (
	"context"
	"database/sql"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// auditedDB runs a server with checkpoints, puts an approved refund, a
// rejected one and some chatting through it, stops it and returns the
// database, the checkpoint directory and the key file.
func auditedDB(t *testing.T) (db, dir, key string) {
	t.Helper()
	tmp := t.TempDir()
	db, dir, key = filepath.Join(tmp, "cs.db"), filepath.Join(tmp, "checkpoints"), filepath.Join(tmp, "audit.key")
	if out, code := runCmd(t, "audit", "keygen", "--out", key); code != 0 {
		t.Fatalf("keygen: %s", out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	app, err := NewApp(ctx, config{Addr: "127.0.0.1:0", DB: db, Demo: true, AuditKey: key, Checkpoints: dir}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	st, err := app.runner.StartRun(ctx, runloop.StartRequest{CustomerID: "cus_alice", CustomerName: "Alice", Message: "refund $900 on A1002. refund $60 on A1001"})
	if err != nil {
		t.Fatal(err)
	}
	<-st.Done
	calls, _ := app.store.RunCalls(ctx, st.Run.ID)
	ann := models.Actor{ID: "stf_test", Name: "Ann", Role: models.Supervisor}
	for i, c := range calls {
		if c.Status != models.CallPending {
			continue
		}
		if i == 0 {
			if _, err := app.gate.Approve(ctx, c.ID, ann, gate.ApproveRequest{Note: "ok"}); err != nil {
				t.Fatal(err)
			}
		} else if err := app.gate.Reject(ctx, c.ID, ann, "no"); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	<-done
	app.Close() // writes the last checkpoint
	return db, dir, key
}

// copyDB copies a closed database for one attack.
func copyDB(t *testing.T, db string) string {
	t.Helper()
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(out, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

func tamper(t *testing.T, db string, stmts ...string) {
	t.Helper()
	conn, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, s := range stmts {
		if _, err := conn.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// Wiping, rewinding or rewriting the chain is caught by the signed
// checkpoints kept outside the database; rows changed behind the gate's
// back are caught by comparing them with their events.
func TestAuditVerifyCatchesWhatTheChainAloneCannot(t *testing.T) {
	db, dir, key := auditedDB(t)
	verify := func(db string, withCheckpoints bool) (string, int) {
		args := []string{"audit", "verify", "--db", db}
		if withCheckpoints {
			args = append(args, "--checkpoints", dir, "--audit-public-key", key+".pub")
		}
		return runCmd(t, args...)
	}
	out, code := verify(db, true)
	if code != 0 || !strings.Contains(out, "holds all") || !strings.Contains(out, "records agree with the audit chain: 2 calls, 2 verdicts") {
		t.Fatalf("untouched database: %d\n%s", code, out)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "checkpoint-*.json"))
	if len(names) < 2 {
		t.Fatalf("%d checkpoints, want one at start and one at shutdown", len(names))
	}

	for _, tc := range []struct {
		name  string
		stmts []string
		// Without checkpoints, a wiped or rewound chain is itself intact:
		// here the calls left without their events give it away, and with
		// the calls gone too only the checkpoints tell (see "rewritten").
		caughtWithout bool
		want          string
	}{
		{"wiped", []string{"DELETE FROM audit_events", "DELETE FROM audit_heads"}, true, "events were removed or the chain was rewound"},
		{"rewound", []string{"DELETE FROM audit_events WHERE seq > 5", "UPDATE audit_heads SET seq = 5, hash = (SELECT hash FROM audit_events WHERE seq = 5)"}, true, "events were removed or the chain was rewound"},
		{"call row changed without an event", []string{"UPDATE tool_calls SET status = 'succeeded' WHERE status = 'rejected'"}, true, "the row says succeeded but its audit events say rejected"},
		{"approval removed", []string{"DELETE FROM approvals WHERE verdict = 'reject'"}, true, "approval rows but its audit events record 1 verdict"},
		{"arguments changed", []string{"UPDATE tool_calls SET args_hash = 'x' || args_hash WHERE status = 'succeeded'"}, true, "arguments are not the ones"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := copyDB(t, db)
			tamper(t, c, tc.stmts...)
			if out, code := verify(c, false); (code != 0) != tc.caughtWithout {
				t.Errorf("without checkpoints: %d\n%s", code, out)
			}
			out, code := verify(c, true)
			if code != 1 || !strings.Contains(out, tc.want) {
				t.Errorf("with checkpoints: %d, want %q\n%s", code, tc.want, out)
			}
		})
	}

	// Rewritten whole and re-hashed, as someone with the database (but not
	// the key) could: a valid chain, as long as the original, that is not
	// the one the checkpoints signed.
	t.Run("rewritten and re-hashed", func(t *testing.T) {
		c := copyDB(t, db)
		var n int64
		conn, _ := sql.Open("sqlite3", c)
		_ = conn.QueryRow("SELECT seq FROM audit_heads").Scan(&n)
		conn.Close()
		tamper(t, c, "DELETE FROM audit_events", "DELETE FROM audit_heads", "DELETE FROM approvals", "DELETE FROM turns", "DELETE FROM tool_calls")
		store, err := storage.Open(c, storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := int64(0); i < n; i++ {
			if err := store.Write(context.Background(), func(tx *storage.Tx) error {
				return tx.Audit(models.Event{Actor: "system", Kind: "note", Subject: "x", Payload: models.ShopOrdersAddedPayload{Count: int(i)}})
			}); err != nil {
				t.Fatal(err)
			}
		}
		store.Close()
		if out, code := verify(c, false); code != 0 {
			t.Fatalf("the rewritten chain should look intact on its own: %s", out)
		}
		if out, code := verify(c, true); code != 1 || !strings.Contains(out, "the chain was rewritten") {
			t.Errorf("with checkpoints: %d\n%s", code, out)
		}
	})

	t.Run("forged checkpoint", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "other.key")
		runCmd(t, "audit", "keygen", "--out", other)
		forged := filepath.Join(t.TempDir(), "forged")
		if err := os.CopyFS(forged, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
		if out, code := runCmd(t, "audit", "checkpoint", "--db", copyAndGrow(t, db), "--audit-key", other, "--checkpoints", forged); code != 0 {
			t.Fatalf("checkpoint: %s", out)
		}
		out, code := runCmd(t, "audit", "verify", "--db", db, "--checkpoints", forged, "--audit-public-key", key+".pub")
		if code != 1 || !strings.Contains(out, "is not signed by this key") {
			t.Errorf("a checkpoint of another key: %d\n%s", code, out)
		}
	})
}

// copyAndGrow is a copy of db with one more event, so that a checkpoint
// of it is new.
func copyAndGrow(t *testing.T, db string) string {
	t.Helper()
	c := copyDB(t, db)
	store, err := storage.Open(c, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Write(context.Background(), func(tx *storage.Tx) error {
		return tx.Audit(models.Event{Actor: "system", Kind: "note", Subject: "x", Payload: models.RunClosedPayload{Reason: time.Now().String()}})
	}); err != nil {
		t.Fatal(err)
	}
	return c
}
