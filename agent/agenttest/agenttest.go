// Package agenttest gives the gate's and the run loop's tests one core to
// work on: a real SQLite file with the demo shop, its default policy, the
// gate and the run loop wired by core.New, a clock the test moves, a model
// each test chooses, and a notifier that remembers.
package agenttest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/business"
	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/tools"
)

// Staff who decide in the tests, one of each role.
var (
	Approver1  = models.Actor{ID: "stf_ann", Name: "Ann", Role: models.Approver}
	Approver2  = models.Actor{ID: "stf_ben", Name: "Ben", Role: models.Approver}
	Supervisor = models.Actor{ID: "stf_sue", Name: "Sue", Role: models.Supervisor}
	Auditor    = models.Actor{ID: "stf_aud", Name: "Audrey", Role: models.Auditor}
)

// Env is a gate and a run loop on a real database (SQLite, or PostgreSQL:
// storetest) with a business's tables, data, tools, policy and facts (the
// demo shop's, demo.Shop, in most tests: the test names it).
type Env struct {
	T     testing.TB
	Store *storage.Store
	// DSN is the store's database, for a test that tampers with it.
	DSN   string
	Gate  *gate.Gate
	Run   *runloop.Runner
	Model *Swappable
	Notes *Notes
	Clock *Clock
	// Core is what they are wired in (receipts, evidence).
	Core *core.Core
	// Executions counts runs of each tool, through a wrapper registry.
	Executions map[string]*atomic.Int64
}

// Clock is the store's clock, moved by the test.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// Now is the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Advance moves the clock on.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// New opens the env on business b; it closes with the test. Each option
// may change the core's configuration before it is built (metrics, say).
func New(t testing.TB, b business.Business, options ...func(*core.Config)) *Env {
	t.Helper()
	store, dsn := storetest.OpenWith(t, storage.Options{Own: b.Schema})
	clk := &Clock{t: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)}
	if b.Seed != nil {
		store.Now = clk.Now
		if _, err := b.Seed(context.Background(), store); err != nil {
			t.Fatal(err)
		}
	}
	return build(t, b, store, dsn, clk, options)
}

// Another opens a second instance on first's database (PostgreSQL: an
// audit chain of its own), on first's clock; it closes with the test.
func Another(t testing.TB, first *Env, b business.Business, options ...func(*core.Config)) *Env {
	t.Helper()
	store, err := storage.Open(first.DSN, storage.Options{Own: b.Schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return build(t, b, store, first.DSN, first.Clock, options)
}

func build(t testing.TB, b business.Business, store *storage.Store, dsn string, clk *Clock, options []func(*core.Config)) *Env {
	t.Helper()
	store.Now = clk.Now
	e := &Env{T: t, Store: store, DSN: dsn, Clock: clk, Executions: map[string]*atomic.Int64{}}
	var counted []*tools.Tool
	for _, tool := range b.Tools(store) {
		counted = append(counted, e.counting(tool))
	}
	reg, err := tools.NewRegistry(counted...)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.LoadPolicy(b.Policy, "default", reg)
	if err != nil {
		t.Fatal(err)
	}
	e.Model, e.Notes = &Swappable{}, &Notes{}
	cfg := core.Config{Store: store, Tools: reg, Policy: pol, Model: e.Model}
	if b.Facts != nil {
		cfg.Business = b.Facts(store)
	}
	for _, o := range options {
		o(&cfg)
	}
	co, err := core.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	co.Bus.Listen(e.Notes)
	e.Gate, e.Run, e.Core = co.Gate, co.Runner, co
	t.Cleanup(co.Close)
	return e
}

// Swappable is the env's model: each test says which model its runs talk to.
type Swappable struct{ M llm.Model }

// Next asks the model the test chose.
func (s *Swappable) Next(ctx context.Context, req llm.Request) (llm.Reply, error) {
	return s.M.Next(ctx, req)
}

// Notes is the env's notifier: it remembers which actions changed and
// passes run events to a test that listens.
type Notes struct {
	mu      sync.Mutex
	actions []string
	onRun   func(runloop.Event)
}

// ActionChanged remembers the action.
func (n *Notes) ActionChanged(id string) {
	n.mu.Lock()
	n.actions = append(n.actions, id)
	n.mu.Unlock()
}

// ToolsChanged is ignored.
func (n *Notes) ToolsChanged() {}

// RunChanged passes the event to the listener, if any.
func (n *Notes) RunChanged(ev runloop.Event) {
	n.mu.Lock()
	f := n.onRun
	n.mu.Unlock()
	if f != nil {
		f(ev)
	}
}

// OnRun sets who hears of runs' events.
func (n *Notes) OnRun(f func(runloop.Event)) {
	n.mu.Lock()
	n.onRun = f
	n.mu.Unlock()
}

// Changed returns the actions changed so far and forgets them.
func (n *Notes) Changed() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.actions
	n.actions = nil
	return out
}

// counting wraps a shop tool so tests can count real executions.
func (e *Env) counting(inner *tools.Tool) *tools.Tool {
	n := &atomic.Int64{}
	e.Executions[inner.Name] = n
	return inner.WithMiddleware(func(next tools.RunFunc) tools.RunFunc {
		return func(ctx context.Context, call tools.Call, in any) (any, error) {
			n.Add(1)
			return next(ctx, call, in)
		}
	})
}

// NewRun records an active run of the customer, with no turns.
func (e *Env) NewRun(customerID, name string) string {
	e.T.Helper()
	id := models.NewID("run")
	err := e.Store.Write(context.Background(), func(tx *storage.Tx) error {
		return tx.CreateRun(&models.Run{ID: id, CustomerID: customerID, CustomerName: name, Channel: "test", Status: "active"})
	})
	if err != nil {
		e.T.Fatal(err)
	}
	return id
}

// Call hands a call of the run to the gate.
func (e *Env) Call(runID, customerID, tool, args string) gate.Outcome {
	e.T.Helper()
	out, err := e.Gate.Call(context.Background(), gate.CallRequest{RunID: runID, CustomerID: customerID, Channel: "test", Tool: tool, Args: []byte(args)})
	if err != nil {
		e.T.Fatalf("call %s %s: %v", tool, args, err)
	}
	return out
}

// CallRecord reads a recorded call.
func (e *Env) CallRecord(id string) *models.ToolCall {
	e.T.Helper()
	c, err := e.Store.ToolCall(context.Background(), id)
	if err != nil {
		e.T.Fatal(err)
	}
	return c
}
