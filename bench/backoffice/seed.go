package main

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/countersign/countersign/models/storage"
)

// The benchmark's database, behind the application's back: the history
// seeded with plain SQL, the query plans, and the raw connections.

// seed writes the history with plain SQL in large transactions: the schema
// is the application's own (storage.Open migrates it first).
func seed(path string, nCalls, nPending int) error {
	s, err := storage.Open(path, storage.Options{})
	if err != nil {
		return err
	}
	s.Close()
	db, err := openRaw(path, false)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	sd := &seeder{db: db, pg: storage.IsPostgres(path), rng: rand.New(rand.NewPCG(1, 2)),
		start: time.Now().UTC().Add(-90 * 24 * time.Hour), total: nCalls + nPending}
	if sd.pg {
		if _, err := db.Exec("SET synchronous_commit = off"); err != nil {
			return err
		}
	}
	if err := sd.insertRuns(20_000); err != nil {
		return err
	}
	if err := sd.insertCalls(nCalls, false, 0); err != nil {
		return err
	}
	if err := sd.insertCalls(nPending, true, nCalls); err != nil {
		return err
	}
	_, err = db.Exec("ANALYZE")
	return err
}

// seeder writes the benchmark's history straight into the tables, spread
// over the last 90 days, the same for every run (a fixed seed).
type seeder struct {
	db    *sql.DB
	pg    bool
	rng   *rand.Rand
	start time.Time
	total int // calls in all, decided and pending
	runs  []string
}

func (sd *seeder) prepare(tx *sql.Tx, q string) *sql.Stmt {
	if sd.pg {
		q = dollars(q)
	}
	st, err := tx.Prepare(q)
	if err != nil {
		panic(err)
	}
	return st
}

func (sd *seeder) insertRuns(n int) error {
	tx, err := sd.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	runStmt := sd.prepare(tx, `INSERT INTO runs (id, customer_id, customer_name, channel, status, token_hash, last_error, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?)`)
	sd.runs = make([]string, n)
	for i := range sd.runs {
		sd.runs[i] = fmt.Sprintf("run_bench%08d", i)
		at := sd.start.Add(time.Duration(i) * 90 * 24 * time.Hour / time.Duration(n))
		if _, err := runStmt.Exec(sd.runs[i], fmt.Sprintf("cus_%05d", i%5000), fmt.Sprintf("Customer %d", i%5000), "api", "waiting", fmt.Sprintf("h%d", i), "", at, at); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// benchCall is one call of the history and, if a person decided it, their verdict.
type benchCall struct {
	id, run, tool, args, status, decision, rule, reason, verdict string
	required                                                     int
	expires                                                      any
	at                                                           time.Time
}

// call makes the k-th call: reads allowed, refunds and cancels decided by a
// person (7 in 10 approved, 2 rejected, 1 expired), or waiting.
func (sd *seeder) call(k int, pending bool) benchCall {
	rng := sd.rng
	c := benchCall{id: fmt.Sprintf("call_bench%09d", k), run: sd.runs[rng.IntN(len(sd.runs))],
		at:   sd.start.Add(time.Duration(k) * 90 * 24 * time.Hour / time.Duration(sd.total)),
		tool: tools5[rng.IntN(len(tools5))], args: fmt.Sprintf(`{"order_id":"A%06d"}`, rng.IntN(999999)),
		status: "succeeded", decision: "allow", rule: "default:read", reason: "reads are allowed"}
	if c.tool == "issue_refund" || c.tool == "cancel_order" {
		c.args = fmt.Sprintf(`{"amount":%d,"order_id":"A%06d"}`, 51+rng.IntN(2000), rng.IntN(999999))
		c.decision, c.rule, c.reason, c.required = "needs_approval", "refund-needs-approval", "Refund", 1
		switch r := rng.IntN(10); {
		case r < 7:
			c.status, c.verdict = "succeeded", "approve"
		case r < 9:
			c.status, c.verdict = "rejected", "reject"
		default:
			c.status = "expired"
		}
	}
	if pending {
		c.tool, c.status, c.decision, c.required = "issue_refund", "pending", "needs_approval", 1
		c.args = fmt.Sprintf(`{"amount":%d,"order_id":"A%06d"}`, 51+rng.IntN(2000), rng.IntN(999999))
		c.rule, c.reason, c.verdict = "refund-needs-approval", "Refund of a bench order", ""
		c.expires = time.Now().UTC().Add(24 * time.Hour)
	}
	return c
}

// insertCalls writes n calls from the offset on, 20,000 to a transaction.
func (sd *seeder) insertCalls(n int, pending bool, offset int) error {
	var tx *sql.Tx
	var callStmt, apprStmt *sql.Stmt
	for i := 0; i < n; i++ {
		if i%20000 == 0 {
			if tx != nil {
				if err := tx.Commit(); err != nil {
					return err
				}
			}
			var err error
			if tx, err = sd.db.Begin(); err != nil {
				return err
			}
			callStmt = sd.prepare(tx, `INSERT INTO tool_calls (id, run_id, customer_id, turn_id, model_call_id, tool, risk, raw_args, args, args_hash, original_args,
				status, decision, rule, reason, policy_version, required_approvals, required_role, expires_at, idempotency_key, error, error_detail, result,
				created_at, updated_at, decided_at, finished_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`)
			apprStmt = sd.prepare(tx, `INSERT INTO approvals (tool_call_id, staff_id, staff_name, staff_role, verdict, note, args, args_hash, edited, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)`)
		}
		c := sd.call(offset+i, pending)
		if _, err := callStmt.Exec(c.id, c.run, "cus_x", 0, "", c.tool, "high_write", c.args, c.args, "hash", "", c.status, c.decision, c.rule, c.reason,
			"benchpolicyversion", c.required, "", c.expires, "k"+c.id, "", "", "", c.at, c.at, c.at, c.at); err != nil {
			return err
		}
		if c.verdict != "" {
			staff := []string{"Ann", "Ben", "Sam"}[sd.rng.IntN(3)]
			if _, err := apprStmt.Exec(c.id, "stf_"+staff, staff, "approver", c.verdict, "", c.args, "hash", false, c.at); err != nil {
				return err
			}
		}
	}
	if tx == nil {
		return nil
	}
	return tx.Commit()
}

func plans(path string) error {
	db, err := openRaw(path, true)
	if err != nil {
		return err
	}
	defer db.Close()
	pg := storage.IsPostgres(path)
	text := `SELECT tool_calls.* FROM tool_calls WHERE tool_calls.id IN (SELECT k.call_id FROM audit_text t JOIN audit_text_keys k ON k.id = t.rowid WHERE audit_text MATCH '"A123456"') ORDER BY tool_calls.created_at DESC, tool_calls.id DESC LIMIT 51`
	if pg {
		text = `SELECT tool_calls.* FROM tool_calls WHERE tool_calls.id IN (SELECT call_id FROM call_text WHERE args ILIKE '%A123456%' OR raw_args ILIKE '%A123456%') AND (tool_calls.args ILIKE '%A123456%' OR tool_calls.raw_args ILIKE '%A123456%') ORDER BY tool_calls.created_at DESC, tool_calls.id DESC LIMIT 51`
	}
	for _, q := range []struct{ name, sql string }{
		{"queue", `SELECT tool_calls.* FROM tool_calls JOIN runs ON runs.id = tool_calls.run_id WHERE tool_calls.status = 'pending' AND tool_calls.status <> 'succeeded' ORDER BY tool_calls.created_at, tool_calls.id LIMIT 100`},
		{"queue approvals", `SELECT COUNT(DISTINCT a.staff_id) FROM approvals a WHERE a.tool_call_id = 'x' AND a.verdict = 'approve' AND a.args_hash = 'h'`},
		{"audit page", `SELECT tool_calls.* FROM tool_calls JOIN runs ON runs.id = tool_calls.run_id WHERE (tool_calls.created_at, tool_calls.id) < ('2026-01-01', 'x') ORDER BY tool_calls.created_at DESC, tool_calls.id DESC LIMIT 51`},
		{"audit by tool", `SELECT tool_calls.* FROM tool_calls WHERE tool_calls.tool = 'cancel_order' ORDER BY tool_calls.created_at DESC, tool_calls.id DESC LIMIT 51`},
		{"audit by customer", `SELECT tool_calls.* FROM tool_calls WHERE tool_calls.customer_id = 'cus_x' ORDER BY tool_calls.created_at DESC, tool_calls.id DESC LIMIT 51`},
		{"audit by staff", `SELECT tool_calls.* FROM tool_calls JOIN runs ON runs.id = tool_calls.run_id WHERE (SELECT 1 FROM approvals a WHERE a.tool_call_id = tool_calls.id AND (a.staff_name LIKE '%Ben%' ESCAPE '\' OR a.staff_id = 'Ben') LIMIT 1) IS NOT NULL ORDER BY tool_calls.created_at DESC, tool_calls.id DESC LIMIT 51`},
		{"run transcript calls", `SELECT * FROM tool_calls WHERE run_id = 'x' ORDER BY created_at, id`},
		{"audit by text", text},
	} {
		explain := "EXPLAIN QUERY PLAN "
		if pg {
			explain = "EXPLAIN "
		}
		rows, err := db.Query(explain + q.sql)
		if err != nil {
			return err
		}
		var steps []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if pg {
				err = rows.Scan(&detail)
			} else {
				err = rows.Scan(&id, &parent, &notused, &detail)
			}
			if err != nil {
				return err
			}
			steps = append(steps, strings.TrimSpace(detail))
		}
		rows.Close()
		fmt.Printf("  %-22s %s\n", q.name, strings.Join(steps, " | "))
	}
	return nil
}

func deepCursor(path string, offset int) (string, error) {
	db, err := openRaw(path, true)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var at time.Time
	var id string
	q := `SELECT created_at, id FROM tool_calls ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET ?`
	if storage.IsPostgres(path) {
		q = dollars(q)
	}
	err = db.QueryRow(q, offset).Scan(&at, &id)
	return at.UTC().Format(time.RFC3339Nano) + "|" + id, err
}

// openRaw opens the benchmark's database behind the application's back:
// to seed it fast, or read only.
func openRaw(path string, readOnly bool) (*sql.DB, error) {
	if storage.IsPostgres(path) {
		return sql.Open("pgx", path)
	}
	if readOnly {
		return sql.Open("sqlite3", "file:"+path+"?mode=ro")
	}
	return sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_synchronous=OFF&_foreign_keys=off")
}

// dollars writes a query's ? placeholders as PostgreSQL's $1, $2, ….
func dollars(q string) string {
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// dbSize is the database's size in bytes.
func dbSize(path string) float64 {
	if !storage.IsPostgres(path) {
		fi, err := os.Stat(path)
		if err != nil {
			return 0
		}
		return float64(fi.Size())
	}
	db, err := openRaw(path, true)
	if err != nil {
		return 0
	}
	defer db.Close()
	var size int64
	db.QueryRow("SELECT pg_database_size(current_database())").Scan(&size)
	return float64(size)
}
