package gate

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
)

// Outcomes kept while the database is away. A tool that ran has an outcome
// whether or not it could be written down: when the write fails because the
// database does not answer, this instance keeps the outcome in memory and
// writes it as soon as the database answers again (the same conditional
// change, so it lands at most once), without a restart and before any other
// instance may take the call over (core.Core waits a full beat after an
// outage before recovering others' calls). Only a process that dies while
// holding one leaves the call to recovery, as a crash mid-call always did.

// keeper holds the outcomes waiting to be written.
type keeper struct {
	mu      sync.Mutex
	waiting map[string]bool // call ids
	wg      sync.WaitGroup
	ctx     context.Context
	stop    context.CancelFunc
	// maxWait is the longest pause between two tries.
	maxWait time.Duration
}

func newKeeper() *keeper {
	ctx, stop := context.WithCancel(context.Background())
	return &keeper{waiting: map[string]bool{}, ctx: ctx, stop: stop, maxWait: 2 * time.Second}
}

// KeptOutcomes is how many outcomes of calls that ran wait to be written
// (the database did not answer when they ended).
func (g *Gate) KeptOutcomes() int {
	g.keep.mu.Lock()
	defer g.keep.mu.Unlock()
	return len(g.keep.waiting)
}

// keepOutcome writes an outcome again and again until it lands, in the
// background, then tells the watchers as execute would have.
func (g *Gate) keepOutcome(callID string, write func(ctx context.Context) error) {
	k := g.keep
	k.mu.Lock()
	k.waiting[callID] = true
	k.mu.Unlock()
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		defer func() {
			k.mu.Lock()
			delete(k.waiting, callID)
			k.mu.Unlock()
		}()
		b := backoff.NewExponentialBackOff()
		b.InitialInterval, b.MaxInterval = 100*time.Millisecond, k.maxWait
		_, err := backoff.Retry(k.ctx, func() (struct{}, error) {
			err := write(k.ctx)
			if errors.Is(err, models.ErrConflict) {
				return struct{}{}, backoff.Permanent(err) // someone else settled it
			}
			return struct{}{}, err
		}, backoff.WithBackOff(b), backoff.WithMaxElapsedTime(0))
		if err != nil {
			g.log.Error("the outcome of a call that ran was never recorded; recovery will take the call (re-run if idempotent, else unknown for a person)",
				"call_id", callID, "err", err)
			return
		}
		g.log.Warn("recorded the outcome of a call once the database answered again", "call_id", callID)
		ctx := context.Background()
		g.notify.ActionChanged(callID)
		g.settled(ctx, callID)
	}()
}

// closeKeeper gives the outcomes still kept a last moment to land, then
// stops trying.
func (g *Gate) closeKeeper(grace time.Duration) {
	done := make(chan struct{})
	go func() { g.keep.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		g.keep.stop()
		<-done
	}
}

// notRecorded is what the caller of a call that ran hears while its outcome
// waits for the database.
func notRecorded(callID string, err error) error {
	return &fault.Error{Code: fault.Unavailable, Err: err,
		Message: "the call " + callID + " ran, but Countersign cannot reach its database to record the outcome; it keeps the outcome and records it as soon as the database answers: ask for the call again in a moment"}
}

// storageDown says a write failed for want of the database (not for a
// reason of the call's own, which trying again would not change).
func storageDown(err error) bool {
	var fe *fault.Error
	return err != nil && !errors.Is(err, models.ErrConflict) && !errors.Is(err, models.ErrNotFound) && !errors.As(err, &fe)
}
