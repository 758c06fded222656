package agent

import (
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/runloop"
)

// Notifier is told of what both the gate and the run loop change: actions
// and the tools in force (gate.Notifier), runs (runloop.Notifier). The web
// layer's is in memory; several instances share theirs through the database.
type Notifier interface {
	gate.Notifier
	runloop.Notifier
}
