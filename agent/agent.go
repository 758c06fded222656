package agent

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
)

// Notifier carries the news that something others watch has changed: an
// action (queued, approved by one person, decided, expired, executed), seen
// by the queue and the action's page, a run (a new turn, a new status),
// seen by the streams that follow it, and the tools in force (a reload),
// seen by the MCP clients connected. The web layer's is in memory; several
// instances need a shared one.
type Notifier interface {
	ActionChanged(callID string)
	RunChanged(ev RunEvent)
	ToolsChanged()
}

// BusinessFacts adds what the business keeps about a customer, in its own
// systems, to the facts a policy reads: customer.<name>. The demo shop's
// says what it refunded the customer in the last 24 hours.
type BusinessFacts interface {
	CustomerFacts(ctx context.Context, customerID string) (map[string]any, error)
}

// Config is what the core is built from. Store, Tools and Policy are needed;
// a nil Model is for a gate used without runs.
type Config struct {
	Store  *models.Store
	Tools  *tools.Registry
	Policy policy.Policy
	// ToolsVersion covers the tools file Tools came from ("" without one).
	ToolsVersion string
	Model        llm.Model
	Log          *slog.Logger  // nil: quiet
	Notifier     Notifier      // nil: nobody watches
	Business     BusinessFacts // nil: no business facts
	// ExecutionWait is how long an approval waits for the call it runs
	// (Gate.ExecutionWait); 0: 10 s.
	ExecutionWait time.Duration
	// SystemPrompt is what the model of every run is told first ("":
	// DefaultSystemPrompt).
	SystemPrompt string
}

// New builds the gate and the run loop over one store, wired to each other:
// an action that settles wakes its paused run, and every change is told to
// the notifier. It is the only constructor of either.
func New(cfg Config) (*Gate, *Runner) {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	notify := cfg.Notifier
	if notify == nil {
		notify = quiet{}
	}
	g := &Gate{store: cfg.Store, log: log, notify: notify, business: cfg.Business, ExecutionWait: cfg.ExecutionWait, keep: newKeeper()}
	if g.ExecutionWait == 0 {
		g.ExecutionWait = 10 * time.Second
	}
	g.reload(cfg.Tools, cfg.ToolsVersion, cfg.Policy)
	bg, cancel := context.WithCancel(context.Background())
	r := &Runner{store: cfg.Store, gate: g, model: cfg.Model, log: log, notify: notify, System: cmp.Or(cfg.SystemPrompt, DefaultSystemPrompt),
		MaxStepsPerMessage: 8, MaxTurnsPerRun: 400, MaxCallsPerTurn: 8, ModelTimeout: 60 * time.Second,
		bg: bg, cancel: cancel, locks: map[string]*runLock{}, stepping: make(chan struct{}, MaxStepping)}
	g.wake = func(runID string) { r.Kick(runID) }
	return g, r
}

// quiet is the notifier when nobody watches.
type quiet struct{}

func (quiet) ActionChanged(string) {}
func (quiet) RunChanged(RunEvent)  {}
func (quiet) ToolsChanged()        {}
