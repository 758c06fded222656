package backoffice

import (
	"log/slog"
)

// Changes is what the back office hears on the core's bus: a changed
// action reaches the open queue pages and that action's pages (QueueHub).
// Changes made on other instances arrive the same way (core.Bus).
type Changes struct {
	queue *QueueHub
}

func newChanges(log *slog.Logger) *Changes {
	return &Changes{queue: NewQueueHub(log)}
}

// ActionChanged tells the pages that show the action, and the queue.
func (c *Changes) ActionChanged(callID string) { c.queue.Changed(callID) }

// Missed implements core.Missed: the queue and every open action page
// look again.
func (c *Changes) Missed() { c.queue.ChangedAll() }
