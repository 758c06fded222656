package gate_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
)

// With COUNTERSIGN_TEST_POSTGRES set, BenchmarkGateCall measures one
// instance on PostgreSQL (its env opens the store there). These two give
// the rest of BENCHMARKS.md's PostgreSQL table: two instances on one
// database, and plain per-record transactions on the same server.

// BenchmarkGateCallTwoInstances is BenchmarkGateCall's callers16 with the 16
// callers split between two gates, each on a store of its own, on one
// PostgreSQL database.
func BenchmarkGateCallTwoInstances(b *testing.B) {
	if !storetest.Postgres() {
		b.Skip("needs " + storetest.Env)
	}
	dsn := storetest.DSN(b)
	var gates []*gate.Gate
	var runs []string
	for i := range 2 {
		s, g := instanceOn(b, dsn)
		if i == 0 {
			if _, err := shop.On(s).Seed(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		run := models.NewID("run")
		if err := s.Write(context.Background(), func(tx *storage.Tx) error {
			return tx.CreateRun(&models.Run{ID: run, CustomerID: "cus_alice", CustomerName: "Alice", Channel: "test", Status: "active"})
		}); err != nil {
			b.Fatal(err)
		}
		gates, runs = append(gates, g), append(runs, run)
	}
	ctx := context.Background()
	var next atomic.Int64
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((16 + procs - 1) / procs)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1) % 2)
		req := gate.CallRequest{RunID: runs[i], CustomerID: "cus_alice", Tool: "get_order_status", Args: []byte(`{"order_id":"A1002"}`)}
		for pb.Next() {
			if out, err := gates[i].Call(ctx, req); err != nil || out.Status != "succeeded" {
				b.Error(out, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
}

// BenchmarkPlainPostgresCall is BenchmarkPlainSQLCall on PostgreSQL with 16
// callers: the call row and an audit row, then the result and a second audit
// row, two transactions per call, with nothing else.
func BenchmarkPlainPostgresCall(b *testing.B) {
	if !storetest.Postgres() {
		b.Skip("needs " + storetest.Env)
	}
	dsn := storetest.DSN(b)
	s, err := storage.Open(dsn, storage.Options{Own: shop.Schema})
	if err != nil {
		b.Fatal(err)
	}
	runID := models.NewID("run")
	if err := s.Write(context.Background(), func(tx *storage.Tx) error { return tx.CreateRun(&models.Run{ID: runID, Status: "active"}) }); err != nil {
		b.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(16)
	var seq atomic.Int64
	audit := func(tx *sql.Tx, subject, payload string) error {
		n := seq.Add(1)
		sum := sha256.Sum256([]byte(fmt.Sprint(n) + subject + payload))
		_, err := tx.Exec(`INSERT INTO audit_events (seq, at, actor, kind, subject, payload, prev_hash, hash) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)`,
			n, time.Now().UTC(), "model", "call.allowed", subject, payload, "", hex.EncodeToString(sum[:]))
		return err
	}
	one := func() error {
		id := models.NewID("call")
		now := time.Now().UTC()
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO tool_calls (id, run_id, customer_id, tool, risk, raw_args, args, args_hash, status, decision, rule, reason, policy_version, required_approvals, idempotency_key, created_at, updated_at, decided_at)
			VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18)`, id, runID, "cus_alice", "get_order_status", "read", `{"order_id":"A1002"}`, `{"order_id":"A1002"}`,
			"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "executing", "allow", "default:read", "reads are allowed", "v1", 0, "k"+id, now, now, now); err != nil {
			tx.Rollback()
			return err
		}
		if err := audit(tx, id, `{"status":"executing"}`); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		if tx, err = db.Begin(); err != nil {
			return err
		}
		if _, err := tx.Exec(`UPDATE tool_calls SET status = $1, result = $2, updated_at = $3, finished_at = $4 WHERE id = $5 AND status = $6`,
			"succeeded", `{"order_id":"A1002","status":"delivered"}`, now, now, id, "executing"); err != nil {
			tx.Rollback()
			return err
		}
		if err := audit(tx, id, `{"status":"succeeded"}`); err != nil {
			tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((16 + procs - 1) / procs)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := one(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
}
