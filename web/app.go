package web

import (
	"log/slog"
)

// Changes is what the web side hears on the core's bus: a changed action
// reaches the open queue pages and that action's pages (QueueHub), a run's
// new turn or status reaches the streams that follow it (Broker), a
// revoked agent's held requests end. Changes made on other instances arrive the
// same way (core.Bus).
type Changes struct {
	queue *QueueHub

	// revoked ends what an agent holds open (set by New, before it
	// listens).
	revoked func(agentID string)
}

func newChanges(log *slog.Logger) *Changes {
	return &Changes{queue: NewQueueHub(log)}
}

// ActionChanged tells the pages that show the action, and the queue.
func (c *Changes) ActionChanged(callID string) { c.queue.Changed(callID) }

// Missed implements core.Missed: the queue and every open action page
// look again.
func (c *Changes) Missed() { c.queue.ChangedAll() }

// AgentRevoked implements core.Revoked: the requests the agent holds open
// end.
func (c *Changes) AgentRevoked(agentID string) {
	if c.revoked != nil {
		c.revoked(agentID)
	}
}
