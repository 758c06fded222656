package agent

import (
	"log/slog"
	"time"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/agent/telemetry"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// Notifier is told of what both the gate and the run loop change: actions
// and the tools in force (gate.Notifier), runs (runloop.Notifier). The web
// layer's is in memory; several instances share theirs through the database.
type Notifier interface {
	gate.Notifier
	runloop.Notifier
}

// Config is what the core is built from. Store, Tools and Policy are needed;
// a nil Model is for a gate used without runs.
type Config struct {
	Store  *storage.Store
	Tools  *tools.Registry
	Policy policy.Policy
	// ToolsVersion covers the tools file Tools came from ("" without one).
	ToolsVersion string
	Model        llm.Model
	Log          *slog.Logger       // nil: quiet
	Notifier     Notifier           // nil: nobody watches
	Business     gate.BusinessFacts // nil: no business facts
	// ExecutionWait is how long an approval waits for the call it runs
	// (Gate.ExecutionWait); 0: 10 s.
	ExecutionWait time.Duration
	// SystemPrompt is what the model of every run is told first ("":
	// runloop.DefaultSystemPrompt).
	SystemPrompt string
	// Metrics counts what the gate decides and runs (nil: nothing).
	Metrics *telemetry.Metrics
	// Limits bound the actions waiting for a person (gate.Limits).
	Limits gate.Limits
}

// New builds the gate and the run loop over one store, wired to each other:
// the run loop asks the gate (runloop.Gate), and an action that settles
// wakes its paused run (gate.Runs); every change is told to the notifier.
func New(cfg Config) (*gate.Gate, *runloop.Runner) {
	runs := &settledRuns{}
	gc := gate.Config{Store: cfg.Store, Tools: cfg.Tools, Policy: cfg.Policy, ToolsVersion: cfg.ToolsVersion,
		Log: cfg.Log, Business: cfg.Business, Runs: runs, ExecutionWait: cfg.ExecutionWait, Metrics: cfg.Metrics}
	rc := runloop.Config{Store: cfg.Store, Model: cfg.Model, Log: cfg.Log, SystemPrompt: cfg.SystemPrompt}
	if cfg.Notifier != nil { // a nil interface stays nil in each half
		gc.Notifier, rc.Notifier = cfg.Notifier, cfg.Notifier
	}
	g := gate.New(gc)
	g.Limits = cfg.Limits
	rc.Gate = g
	runs.r = runloop.New(rc)
	return g, runs.r
}

// settledRuns hands the gate's news of a settled action to the run loop,
// which is built after the gate it asks.
type settledRuns struct{ r *runloop.Runner }

func (s *settledRuns) Settled(runID string) { s.r.Settled(runID) }
