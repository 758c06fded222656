package gate

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// gateFacts loads what the policy asks about, once per call, and notes
// that it was asked: such a decision depends on earlier calls.
type gateFacts struct {
	store    *storage.Store
	business BusinessFacts
	req      CallRequest
	used     bool
	// exclude leaves a call out of totals: an edited action is not counted
	// against itself.
	exclude string
}

func (f *gateFacts) Customer(ctx context.Context) (policy.CustomerFacts, error) {
	f.used = true
	c := policy.CustomerFacts{ID: f.req.CustomerID, Name: f.req.CustomerName, SignedIn: f.req.CustomerID != "", Attributes: f.req.CustomerAttributes}
	if c.ID == "" || f.business == nil {
		return c, nil
	}
	var err error
	if c.Business, err = f.business.CustomerFacts(ctx, c.ID); err != nil {
		return c, fmt.Errorf("business facts: %w", err)
	}
	return c, nil
}

func (f *gateFacts) Run(ctx context.Context) (policy.RunFacts, error) {
	f.used = true
	counts, err := f.store.RunCallCounts(ctx, f.req.RunID)
	return f.runFacts(counts), err
}

func (f *gateFacts) runFacts(counts map[string]int64) policy.RunFacts {
	r := policy.RunFacts{ID: f.req.RunID, Channel: f.req.Channel, CallsByTool: counts}
	for _, n := range counts {
		r.Calls += n
	}
	return r
}

func (f *gateFacts) Total(ctx context.Context, q policy.TotalQuery) (float64, error) {
	f.used = true
	return f.store.SumCallArgs(ctx, f.totalQuery(q, f.store.Now()))
}

func (f *gateFacts) totalQuery(q policy.TotalQuery, now time.Time) models.CallTotal {
	t := models.CallTotal{Tool: q.Tool, Field: q.Field, Same: q.Same, CustomerID: f.req.CustomerID, RunID: f.req.RunID, ExcludeID: f.exclude}
	if q.Within > 0 {
		t.Since = now.Add(-q.Within)
	}
	return t
}

// txFacts reads earlier calls inside the transaction that records the call.
type txFacts struct {
	gateFacts
	tx *storage.Tx
}

func (f *txFacts) Run(context.Context) (policy.RunFacts, error) {
	counts, err := f.tx.RunCallCounts(f.req.RunID)
	return f.runFacts(counts), err
}

func (f *txFacts) Total(_ context.Context, q policy.TotalQuery) (float64, error) {
	return f.tx.SumCallArgs(f.totalQuery(q, f.tx.Now()))
}
