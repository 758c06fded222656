package backoffice

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// QueueHub keeps every open queue page and action page live. When an action
// changes it renders the queue rows once and hands the same bytes to every
// queue stream, and tells the pages of that action.
type QueueHub struct {
	log *slog.Logger

	mu      sync.Mutex
	queues  map[chan []byte]struct{}
	actions map[string]map[chan struct{}]struct{}
	kick    chan struct{}
	latest  []byte
}

// NewQueueHub builds a hub; Run must be started.
func NewQueueHub(log *slog.Logger) *QueueHub {
	return &QueueHub{log: log, queues: map[chan []byte]struct{}{},
		actions: map[string]map[chan struct{}]struct{}{}, kick: make(chan struct{}, 1)}
}

// Changed is called after anything happens to an action.
func (h *QueueHub) Changed(callID string) {
	h.mu.Lock()
	wake(h.actions[callID])
	h.mu.Unlock()
	h.render()
}

// wake tells each page (h.mu held); one already told need not hear it twice.
func wake(pages map[chan struct{}]struct{}) {
	for ch := range pages {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// render asks Run for the queue's rows again.
func (h *QueueHub) render() {
	select {
	case h.kick <- struct{}{}:
	default: // a render is already due; it will include this change
	}
}

// ChangedAll is Changed for every action: the queue and every open action
// page look again (after changes that may have been missed).
func (h *QueueHub) ChangedAll() {
	h.mu.Lock()
	for _, pages := range h.actions {
		wake(pages)
	}
	h.mu.Unlock()
	h.render()
}

// Run renders the queue's rows after each change and fans them out, until
// ctx ends.
func (h *QueueHub) Run(ctx context.Context, render func(ctx context.Context) ([]byte, error)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.kick:
		}
		html, err := render(ctx)
		if err != nil {
			if ctx.Err() == nil {
				h.log.Error("render queue", "err", err)
			}
			continue
		}
		h.mu.Lock()
		h.latest = html
		for ch := range h.queues {
			select {
			case ch <- html:
			default: // slow reader: replace what it has not read yet
				select {
				case <-ch:
				default:
				}
				select {
				case ch <- html:
				default:
				}
			}
		}
		h.mu.Unlock()
		// Coalesce bursts (an approval is several changes) into one render.
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// SubscribeQueue follows the queue rows.
func (h *QueueHub) SubscribeQueue() (chan []byte, func()) {
	ch := make(chan []byte, 1)
	h.mu.Lock()
	h.queues[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.queues, ch)
		h.mu.Unlock()
	}
}

// SubscribeAction follows one action.
func (h *QueueHub) SubscribeAction(id string) (chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.actions[id] == nil {
		h.actions[id] = map[chan struct{}]struct{}{}
	}
	h.actions[id][ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.actions[id], ch)
		if len(h.actions[id]) == 0 {
			delete(h.actions, id)
		}
		h.mu.Unlock()
	}
}
