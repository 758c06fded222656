package chat

import (
	"sync"

	"github.com/countersign/countersign/agent/runloop"
)

// Broker fans run events out to the SSE streams that follow each run. A
// subscriber too slow to keep up is dropped; its client reconnects with
// Last-Event-ID and reads what it missed from the database.
type Broker struct {
	mu   sync.Mutex
	subs map[string]map[*Subscription]struct{}
}

// Subscription is one stream's view of one run.
type Subscription struct {
	C      chan runloop.Event
	runID  string
	closed bool
}

// NewBroker builds an empty broker.
func NewBroker() *Broker {
	return &Broker{subs: map[string]map[*Subscription]struct{}{}}
}

// Subscribe follows a run. limit caps the streams one run may have open
// (0: no cap); ok is false when the cap is reached.
func (b *Broker) Subscribe(runID string, limit int) (*Subscription, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	set := b.subs[runID]
	if limit > 0 && len(set) >= limit {
		return nil, false
	}
	if set == nil {
		set = map[*Subscription]struct{}{}
		b.subs[runID] = set
	}
	s := &Subscription{C: make(chan runloop.Event, 64), runID: runID}
	set[s] = struct{}{}
	return s, true
}

// Unsubscribe stops a subscription; calling it twice is harmless.
func (b *Broker) Unsubscribe(s *Subscription) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dropLocked(s)
}

func (b *Broker) dropLocked(s *Subscription) {
	if s.closed {
		return
	}
	s.closed = true
	close(s.C)
	set := b.subs[s.runID]
	delete(set, s)
	if len(set) == 0 {
		delete(b.subs, s.runID)
	}
}

// Publish hands an event to every stream following its run, never blocking.
func (b *Broker) Publish(ev runloop.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs[ev.RunID] {
		select {
		case s.C <- ev:
		default:
			b.dropLocked(s)
		}
	}
}
