package gate_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// BenchmarkGateCall is a whole gate call for an allowed read: validate,
// normalize, decide, commit the decision, run the tool, commit the result.
// "serial" is one caller; "callers16" is 16 concurrent callers.
func BenchmarkGateCall(b *testing.B) {
	for _, bc := range []struct {
		name    string
		callers int
	}{{"serial", 1}, {"callers16", 16}} {
		b.Run(bc.name, func(b *testing.B) {
			e := newEnv(b)
			run := e.NewRun("cus_alice", "Alice")
			req := gate.CallRequest{RunID: run, CustomerID: "cus_alice", Tool: "get_order_status", Args: []byte(`{"order_id":"A1002"}`)}
			b.ReportAllocs()
			before := e.Store.WriterStats()
			b.ResetTimer()
			callAllowedRead(context.Background(), b, e.Gate, req, bc.callers, nil)
			after := e.Store.WriterStats()
			b.ReportMetric(float64(after.Units-before.Units)/float64(after.Commits-before.Commits), "units/commit")
		})
	}
}

// callAllowedRead makes b.N gate calls of an allowed read with ctx, from one
// caller or from that many at once, each followed by then (nil: nothing),
// and reports calls/s.
func callAllowedRead(ctx context.Context, b *testing.B, g *gate.Gate, req gate.CallRequest, callers int, then func(gate.Outcome) error) {
	call := func() error {
		out, err := g.Call(ctx, req)
		if err != nil || out.Status != "succeeded" {
			return fmt.Errorf("%v %v", out, err)
		}
		if then != nil {
			return then(out)
		}
		return nil
	}
	start := time.Now()
	if callers == 1 {
		for i := 0; i < b.N; i++ {
			if err := call(); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		procs := runtime.GOMAXPROCS(0) // RunParallel starts parallelism x GOMAXPROCS goroutines
		b.SetParallelism((callers + procs - 1) / procs)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := call(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
}

// BenchmarkPlainSQLCall writes the same rows as an allowed gate call, by hand
// with the same driver and settings: the call row and a chained audit row,
// then the result and a second audit row, two transactions per call, one
// call after another. It is the yardstick for BenchmarkGateCall.
func BenchmarkPlainSQLCall(b *testing.B) {
	path := filepath.Join(b.TempDir(), "plain.db")
	// Let the application create the same schema, then close it.
	s, err := storage.Open(path, storage.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	runID := models.NewID("run")
	if err := s.Write(ctx, func(tx *storage.Tx) error { return tx.CreateRun(&models.Run{ID: runID, Status: "active"}) }); err != nil {
		b.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_busy_timeout=10000&_foreign_keys=on&_synchronous=NORMAL&_txlock=immediate&_cache_size=-65536")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var seq atomic.Int64
	prev := ""
	audit := func(tx *sql.Tx, subject, payload string) error {
		n := seq.Add(1)
		sum := sha256.Sum256([]byte(prev + "\n" + fmt.Sprint(n) + subject + payload))
		h := hex.EncodeToString(sum[:])
		_, err := tx.Exec(`INSERT INTO audit_events (seq, at, actor, kind, subject, payload, prev_hash, hash) VALUES (?,?,?,?,?,?,?,?)`,
			n, time.Now().UTC(), "model", "call.allowed", subject, payload, prev, h)
		prev = h
		return err
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		id := models.NewID("call")
		now := time.Now().UTC()
		tx, err := db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(`INSERT INTO tool_calls (id, run_id, customer_id, tool, risk, raw_args, args, args_hash, status, decision, rule, reason, policy_version, required_approvals, idempotency_key, created_at, updated_at, decided_at)
			VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, id, runID, "cus_alice", "get_order_status", "read", `{"order_id":"A1002"}`, `{"order_id":"A1002"}`,
			"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "executing", "allow", "default:read", "reads are allowed", "v1", 0, "k"+id, now, now, now); err != nil {
			b.Fatal(err)
		}
		if err := audit(tx, id, `{"status":"executing"}`); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		tx, err = db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(`UPDATE tool_calls SET status = ?, result = ?, updated_at = ?, finished_at = ? WHERE id = ? AND status = ?`,
			"succeeded", `{"order_id":"A1002","status":"delivered"}`, now, now, id, "executing"); err != nil {
			b.Fatal(err)
		}
		if err := audit(tx, id, `{"status":"succeeded"}`); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
}
