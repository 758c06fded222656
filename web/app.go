package web

import (
	"log/slog"
	"slices"
	"sync"

	"github.com/countersign/countersign/agent/runloop"
)

// Changes is what the web side hears on the core's bus: a changed action
// reaches the open queue pages and that action's pages (QueueHub), a run's
// new turn or status reaches the streams that follow it (Broker), changed
// tools reach the MCP endpoint. Changes made on other instances arrive the
// same way (core.Bus).
type Changes struct {
	queue *QueueHub
	runs  *Broker

	mu    sync.Mutex
	tools []func() // told when the tools in force change
}

func newChanges(log *slog.Logger) *Changes {
	return &Changes{queue: NewQueueHub(log), runs: NewBroker()}
}

// ActionChanged tells the pages that show the action, and the queue.
func (c *Changes) ActionChanged(callID string) { c.queue.Changed(callID) }

// RunChanged tells the streams that follow the run.
func (c *Changes) RunChanged(ev runloop.Event) { c.runs.Publish(ev) }

// Missed implements core.Missed: the queue and every open action page
// look again.
func (c *Changes) Missed() { c.queue.ChangedAll() }

// ToolsChanged tells those that offer the tools (the MCP endpoint).
func (c *Changes) ToolsChanged() {
	c.mu.Lock()
	fs := slices.Clone(c.tools)
	c.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// OnToolsChanged adds f to those told when the tools in force change.
func (c *Changes) OnToolsChanged(f func()) {
	c.mu.Lock()
	c.tools = append(c.tools, f)
	c.mu.Unlock()
}
