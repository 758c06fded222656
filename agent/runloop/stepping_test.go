package runloop_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// gatedModel answers once let through, counting how many calls wait at once.
type gatedModel struct {
	mu          sync.Mutex
	now, most   int
	calls       int
	let         chan struct{}
	reachedMost chan struct{}
	once        sync.Once
}

func (m *gatedModel) Next(ctx context.Context, _ llm.Request) (llm.Reply, error) {
	m.mu.Lock()
	m.now++
	m.calls++
	if m.now > m.most {
		m.most = m.now
	}
	if m.now == runloop.MaxStepping {
		m.once.Do(func() { close(m.reachedMost) })
	}
	m.mu.Unlock()
	select {
	case <-m.let:
	case <-ctx.Done():
	}
	m.mu.Lock()
	m.now--
	m.mu.Unlock()
	return llm.Reply{Text: "Done."}, nil
}

// A restart with more runs to resume than may step at once calls the model
// for at most MaxStepping of them together; the rest follow.
func TestResumingManyRunsStepsABoundedNumberAtOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	m := &gatedModel{let: make(chan struct{}), reachedMost: make(chan struct{})}
	e.Model.M = m
	runs := runloop.MaxStepping + 8
	for range runs {
		id := models.NewID("run")
		if err := e.Store.Write(ctx, func(tx *storage.Tx) error {
			if err := tx.CreateRun(&models.Run{ID: id, CustomerID: "cus_alice", CustomerName: "Alice", Channel: "test", Status: models.RunActive}); err != nil {
				return err
			}
			return tx.AppendTurn(&models.Turn{RunID: id, Role: models.RoleCustomer, Text: "where is my order?"})
		}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := e.Run.ResumeRuns(ctx); err != nil || n != runs {
		t.Fatalf("resumed %d: %v", n, err)
	}
	select {
	case <-m.reachedMost:
	case <-time.After(30 * time.Second):
		t.Fatalf("the model was never asked by %d runs at once", runloop.MaxStepping)
	}
	close(m.let)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m.mu.Lock()
		calls, most := m.calls, m.most
		m.mu.Unlock()
		if calls >= runs {
			if most > runloop.MaxStepping {
				t.Fatalf("%d runs called the model at once, more than %d", most, runloop.MaxStepping)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d runs were stepped", calls, runs)
		}
	}
}
