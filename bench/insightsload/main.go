// Command insightsload measures what people reading insights cost the
// gate: over a history of 300,000 recorded calls, the gate's latency for
// allowed reads through POST /api/v1/calls, alone and then while 8
// requests for heavy insights (bands over a month, and the page without
// parameters) run at once and again as each ends, in one run. The target:
// the gate's p95 with the readers within 3x of its p95 without.
// BENCHMARKS.md.
//
//	go run ./bench/insightsload -calls 300000 -n 1500
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/bench/internal/measure"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
	"github.com/countersign/countersign/web"
	"github.com/countersign/countersign/web/webtest"
)

func main() {
	calls := flag.Int("calls", 300_000, "recorded calls in the history")
	n := flag.Int("n", 1500, "gate calls measured in each phase")
	readers := flag.Int("readers", 8, "people reading insights at once")
	flag.Parse()
	if err := run(*calls, *n, *readers); err != nil {
		log.Fatal(err)
	}
}

func run(calls, n, readers int) error {
	b, cleanup, err := setUp(calls)
	defer cleanup()
	if err != nil {
		return err
	}
	for i := range 200 { // warm up
		if _, err := b.gated(i); err != nil {
			return err
		}
	}
	alone, err := b.phase("the gate alone:", 1000, n)
	if err != nil {
		return err
	}
	r := b.read(readers)
	time.Sleep(500 * time.Millisecond)
	loaded, err := b.phase(fmt.Sprintf("with %d insights readers:", readers), 1_000_000, n)
	r.stop()
	if err != nil {
		return err
	}
	fmt.Printf("insights answered: %d (slowest %.1f s), told to come back (503): %d, other answers: %d\n",
		r.done.Load(), r.slowest().Seconds(), r.busy.Load(), r.other.Load())
	p95 := measure.Percentile
	fmt.Printf("gate p95 with readers / alone: %.2f (target <= 3)\n", float64(p95(loaded, .95))/float64(p95(alone, .95)))
	return nil
}

// bench is a server over a seeded history, with an agent's key and an
// auditor's token.
type bench struct {
	srv        *httptest.Server
	key, token string
	client     *http.Client
}

// setUp seeds a history of calls and serves the gate over it; cleanup
// undoes what was made (also when it fails part way).
func setUp(calls int) (*bench, func(), error) {
	var undo []func()
	cleanup := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"delivered"}`))
	}))
	undo = append(undo, backend.Close)
	set, err := httptool.Load([]byte(`tools:
  - name: lookup_order
    risk: read
    idempotent: true
    input_schema: {type: object, properties: {order_id: {type: string}}, required: [order_id], additionalProperties: false}
    http: {method: GET, url: "`+backend.URL+`/orders/{order_id}"}
  - name: issue_refund
    risk: high_write
    amount: amount
    input_schema: {type: object, properties: {order_id: {type: string}, amount: {type: number}}, required: [order_id, amount], additionalProperties: false}
    http: {method: POST, url: "`+backend.URL+`/refunds"}
`), "bench", httptool.Options{})
	if err != nil {
		return nil, cleanup, err
	}
	dir, err := os.MkdirTemp("", "insightsload")
	if err != nil {
		return nil, cleanup, err
	}
	undo = append(undo, func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "cs.db")
	store, err := storage.Open(path, storage.Options{})
	if err != nil {
		return nil, cleanup, err
	}
	undo = append(undo, func() { store.Close() })
	start := time.Now()
	if err := seed(path, calls); err != nil {
		return nil, cleanup, err
	}
	// The seed wrote past the store (no event names its calls): the
	// derived data (counts by hour, the search's index) is made from them.
	if err := store.Rederive(context.Background()); err != nil {
		return nil, cleanup, err
	}
	fmt.Printf("seeded %d calls in %s\n", calls, time.Since(start).Round(time.Second))
	reg, _ := tools.NewRegistry(set.Tools()...)
	pol, err := policy.LoadPolicy([]byte(`rules:
  - name: issue_refund-held
    tool: issue_refund
    decision: needs_approval
`), "bench", reg)
	if err != nil {
		return nil, cleanup, err
	}
	app, site := webtest.New(core.Config{Store: store, Tools: reg, Policy: pol, Log: slog.New(slog.DiscardHandler)},
		web.Config{AgentCallsPerSecond: 1_000_000, AgentCallBurst: 1_000_000})
	undo = append(undo, func() { app.Close() })
	srv := httptest.NewServer(site.Handler())
	undo = append(undo, srv.Close)
	b := &bench{srv: srv, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
	b.key, b.token, err = people(app)
	return b, cleanup, err
}

// people adds the agent that calls and the auditor who reads insights.
func people(app *core.Core) (key, token string, err error) {
	ctx := context.Background()
	if key, _, err = app.Accounts.AddAgent(ctx, "bench", models.Actor{ID: "bench"}); err != nil {
		return "", "", err
	}
	if _, err := app.Accounts.AddStaff(ctx, "audit@bench.test", "Audit", models.Auditor, "a long enough password 1", models.Actor{ID: "bench"}); err != nil {
		return "", "", err
	}
	token, err = app.Accounts.CreateAPIToken(ctx, "audit@bench.test", models.Actor{ID: "bench"})
	return key, token, err
}

// get sends req and reads its answer away.
func (b *bench) get(req *http.Request) (int, error) {
	res, err := b.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, nil
}

// gated is one allowed read through the gate API, timed.
func (b *bench) gated(i int) (time.Duration, error) {
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+"/api/v1/calls",
		strings.NewReader(fmt.Sprintf(`{"tool":"lookup_order","args":{"order_id":"A%d"},"session":"s%d"}`, i, i%50)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+b.key)
	t0 := time.Now()
	status, err := b.get(req)
	if err == nil && status/100 != 2 {
		err = fmt.Errorf("POST /api/v1/calls: %d", status)
	}
	return time.Since(t0), err
}

// phase times n gated calls and prints their percentiles.
func (b *bench) phase(name string, from, n int) ([]time.Duration, error) {
	lat := make([]time.Duration, 0, n)
	for i := range n {
		d, err := b.gated(from + i)
		if err != nil {
			return nil, err
		}
		lat = append(lat, d)
	}
	p := measure.Percentile
	fmt.Printf("%-34s p50 %7.3f ms  p95 %7.3f ms  p99 %7.3f ms  max %7.3f ms\n", name,
		measure.MS(p(lat, .5)), measure.MS(p(lat, .95)), measure.MS(p(lat, .99)), measure.MS(p(lat, 1)))
	return lat, nil
}

// readers are people asking for heavy insights, again as each answer
// comes, until stopped.
type readers struct {
	quit              chan struct{}
	wg                sync.WaitGroup
	done, busy, other atomic.Int64
	took              sync.Map
}

// read starts n readers.
func (b *bench) read(n int) *readers {
	queries := []string{"since=720h&bands=50,200,1000", "since=720h&tool=issue_refund&field=amount&bands=50,200,1000", ""}
	r := &readers{quit: make(chan struct{})}
	for i := range n {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for k := 0; ; k++ {
				select {
				case <-r.quit:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodGet, b.srv.URL+"/api/v1/insights?"+queries[(i+k)%len(queries)], nil)
				req.Header.Set("Authorization", "Bearer "+b.token)
				t0 := time.Now()
				status, err := b.get(req)
				switch {
				case err == nil && status == http.StatusOK:
					r.done.Add(1)
					r.took.Store(r.done.Load(), time.Since(t0))
				case err == nil && status == http.StatusServiceUnavailable:
					r.busy.Add(1)
					time.Sleep(time.Second) // as Retry-After asks, sooner
				default:
					r.other.Add(1)
				}
			}
		}()
	}
	return r
}

func (r *readers) stop() { close(r.quit); r.wg.Wait() }

// slowest is the longest an answered reader waited.
func (r *readers) slowest() time.Duration {
	var d time.Duration
	r.took.Range(func(_, v any) bool { d = max(d, v.(time.Duration)); return true })
	return d
}

// seed writes a month of calls straight into the tables: 80% allowed
// reads, 15% refunds held for a person (most approved), 5% denied.
func seed(path string, n int) error {
	db, err := sql.Open("sqlite3", path+"?_busy_timeout=10000")
	if err != nil {
		return err
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	if _, err := tx.Exec(`INSERT INTO runs (id, customer_id, customer_name, channel, status, created_at, updated_at) VALUES ('run_seed', 'cus_s', 'S', 'api', 'active', ?, ?)`, now, now); err != nil {
		return err
	}
	call, err := tx.Prepare(`INSERT INTO tool_calls (id, run_id, customer_id, tool, risk, args, status, decision, rule, policy_version, created_at, updated_at)
		VALUES (?, 'run_seed', 'cus_s', ?, ?, ?, ?, ?, ?, 'v', ?, ?)`)
	if err != nil {
		return err
	}
	appr, err := tx.Prepare(`INSERT INTO approvals (tool_call_id, staff_id, staff_name, staff_role, verdict, edited, created_at, tool, rule, took_s, settled_s)
		VALUES (?, ?, ?, 'approver', ?, 0, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(1, 2))
	begin := now.Add(-29 * 24 * time.Hour)
	step := 29 * 24 * time.Hour / time.Duration(n)
	for i := range n {
		at := begin.Add(time.Duration(i) * step)
		id := fmt.Sprintf("call_seed%09d", i)
		tool, risk, rule, decision, status := "lookup_order", "read", "", "allow", "succeeded"
		args := fmt.Sprintf(`{"order_id":"A%d"}`, r.IntN(100000))
		switch x := r.IntN(100); {
		case x < 5:
			rule, decision, status = "denied", "deny", "denied"
		case x < 20:
			tool, risk, rule, decision = "issue_refund", "high_write", "issue_refund-held", "needs_approval"
			args = fmt.Sprintf(`{"order_id":"A%d","amount":%d}`, r.IntN(100000), r.IntN(2000))
			if r.IntN(100) < 85 {
				status = "succeeded"
			} else {
				status = "rejected"
			}
		}
		if _, err := call.Exec(id, tool, risk, args, status, decision, rule, at, at); err != nil {
			return err
		}
		if decision != "needs_approval" {
			continue
		}
		verdict := "approve"
		if status == "rejected" {
			verdict = "reject"
		}
		when := at.Add(time.Duration(1+r.IntN(120)) * time.Second)
		took := when.Sub(at).Seconds()
		if _, err := appr.Exec(id, fmt.Sprintf("stf_%d", r.IntN(12)), "Person", verdict, when, tool, rule, took, took); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	_, err = db.Exec("ANALYZE")
	return err
}
