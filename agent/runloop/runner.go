package runloop

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// MaxMessageRunes caps what a customer may send in one message.
const MaxMessageRunes = 4000

// DefaultSystemPrompt tells a model how to behave as a support agent, for
// any business: `serve --system-prompt FILE` gives it the business's own
// words (the demo shop has its own, demo/shop.SystemPrompt).
const DefaultSystemPrompt = `You are a support agent. Use the tools you are given to look things up and to act; never invent facts that a tool did not give you.
Some tool calls need a team member's approval: if a tool result says a call was rejected, denied or expired, do not call it again; tell the person you help plainly, with the reason.
Be brief and friendly.`

// MaxSystemPrompt is the longest system prompt a file may give, in bytes.
const MaxSystemPrompt = 32 << 10

// Event is what the run loop tells listeners (the SSE broker): a turn was
// appended, or the run's status changed.
type Event struct {
	RunID  string
	Turn   *models.Turn     // set for a new turn
	Status models.RunStatus // set for a status change
}

// Runner drives agent runs: it calls the model, hands every tool call to the
// gate, pauses when an action needs a person and resumes when it is decided.
// Everything it needs to resume is in the database.
type Runner struct {
	store *storage.Store
	gate  Gate
	model llm.Model
	log   *slog.Logger
	// stepping holds a place for each run stepping now (MaxStepping).
	stepping chan struct{}

	System string
	// MaxStepsPerMessage caps model turns after one customer message (loop guard).
	MaxStepsPerMessage int
	// MaxTurnsPerRun caps a run's transcript.
	MaxTurnsPerRun int
	// MaxCallsPerTurn caps the tool calls of one model turn; the rest are
	// refused, and the model told so.
	MaxCallsPerTurn int
	// ModelTimeout bounds one model call.
	ModelTimeout time.Duration
	// Lease is how long an instance holds a run it steps on PostgreSQL
	// (0: runLease); it renews it every third of that.
	Lease  time.Duration
	notify Notifier

	bg     context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	locks  map[string]*runLock
}

type runLock struct {
	sync.Mutex
	refs int
}

// Gate is what the run loop asks of the gate: the tools in force, a call
// decided (and run, if allowed), a call refused before it is asked, and a
// waiting action withdrawn when its conversation closes.
type Gate interface {
	Tools() *tools.Registry
	Call(ctx context.Context, req gate.CallRequest) (gate.Outcome, error)
	Refuse(ctx context.Context, req gate.CallRequest, reason string) (gate.Outcome, error)
	Cancel(ctx context.Context, actionID string, actor models.Actor, reason string) error
}

// Notifier is told of every new turn and every change of a run's status.
type Notifier interface {
	RunChanged(ev Event)
}

// Config is what a run loop is built from. Store and Gate are needed; a nil
// Model is for a gate used without runs.
type Config struct {
	Store    *storage.Store
	Gate     Gate
	Model    llm.Model
	Log      *slog.Logger // nil: quiet
	Notifier Notifier     // nil: nobody watches
	// SystemPrompt is what the model of every run is told first ("":
	// DefaultSystemPrompt).
	SystemPrompt string
}

// New builds a run loop over the gate.
func New(cfg Config) *Runner {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	notify := cfg.Notifier
	if notify == nil {
		notify = quiet{}
	}
	bg, cancel := context.WithCancel(context.Background())
	return &Runner{store: cfg.Store, gate: cfg.Gate, model: cfg.Model, log: log, notify: notify, System: cmp.Or(cfg.SystemPrompt, DefaultSystemPrompt),
		MaxStepsPerMessage: 8, MaxTurnsPerRun: 400, MaxCallsPerTurn: 8, ModelTimeout: 60 * time.Second,
		bg: bg, cancel: cancel, locks: map[string]*runLock{}, stepping: make(chan struct{}, MaxStepping)}
}

// quiet is the notifier when nobody watches.
type quiet struct{}

func (quiet) RunChanged(Event) {}

// Settled is the gate telling that an action of the run settled: the run
// is stepped again (gate.Runs).
func (r *Runner) Settled(runID string) { r.Kick(runID) }

// Close stops the runner after the steps in progress finish.
func (r *Runner) Close() {
	r.cancel()
	r.wg.Wait()
}

// StartRequest opens a run.
type StartRequest struct {
	CustomerID   string
	CustomerName string
	Channel      string
	Message      string
}

// Started is a new run and the token that opens it (shown once, stored hashed).
type Started struct {
	Run   *models.Run
	Token string
	Done  <-chan struct{} // closed when the first step has finished
}

func checkMessage(text string) (string, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return "", fault.Errorf(fault.Invalid, "the message is empty")
	}
	if n := len([]rune(text)); n > MaxMessageRunes {
		return "", fault.Errorf(fault.Invalid, "the message is %d characters long; the limit is %d", n, MaxMessageRunes)
	}
	return text, nil
}

// StartRun opens a run with the customer's first message and starts working on it.
func (r *Runner) StartRun(ctx context.Context, req StartRequest) (Started, error) {
	text, err := checkMessage(req.Message)
	if err != nil {
		return Started{}, err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return Started{}, fault.Wrap(err, "could not make a run token")
	}
	token := "rt_" + base64.RawURLEncoding.EncodeToString(raw[:])
	run := &models.Run{ID: models.NewID("run"), CustomerID: req.CustomerID, CustomerName: req.CustomerName,
		Channel: req.Channel, Status: models.RunActive, TokenHash: models.HashToken(token)}
	turn := &models.Turn{RunID: run.ID, Role: models.RoleCustomer, Text: text}
	err = r.store.Write(ctx, func(tx *storage.Tx) error {
		if err := tx.CreateRun(run); err != nil {
			return err
		}
		if err := tx.AppendTurn(turn); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: customerActor(run), Kind: models.EventRunCreated, Subject: run.ID,
			Payload: models.RunCreatedPayload{CustomerID: run.CustomerID, Channel: run.Channel, TurnSeq: turn.Seq, TextSHA256: textHash(text)}})
	})
	if err != nil {
		return Started{}, fault.Wrap(err, "could not start the conversation")
	}
	r.emit(Event{RunID: run.ID, Turn: turn})
	return Started{Run: run, Token: token, Done: r.Kick(run.ID)}, nil
}

// PostMessage adds a customer message. A paused run keeps it and answers it
// once the pending actions are decided.
func (r *Runner) PostMessage(ctx context.Context, runID, message string) (<-chan struct{}, error) {
	text, err := checkMessage(message)
	if err != nil {
		return nil, err
	}
	turn := &models.Turn{RunID: runID, Role: models.RoleCustomer, Text: text}
	var newStatus models.RunStatus
	err = r.store.Write(ctx, func(tx *storage.Tx) error {
		newStatus = ""
		run, err := tx.Run(runID)
		if err != nil {
			return err
		}
		if run.Status == models.RunClosed {
			return fault.Errorf(fault.Conflict, "this conversation is closed")
		}
		if len(run.LastError) > 0 && run.Status == models.RunFailed {
			// A new message is a fresh attempt.
			if _, err := tx.SetRunStatus(runID, models.RunActive, "", models.RunFailed); err != nil {
				return err
			}
			newStatus = models.RunActive
		} else if run.Status == models.RunWaiting {
			if _, err := tx.SetRunStatus(runID, models.RunActive, "", models.RunWaiting); err != nil {
				return err
			}
			newStatus = models.RunActive
		}
		if err := tx.AppendTurn(turn); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: customerActor(run), Kind: models.EventRunMessage, Subject: runID,
			Payload: models.RunMessagePayload{TurnSeq: turn.Seq, TextSHA256: textHash(text)}})
	})
	if err != nil {
		return nil, r.runError(err)
	}
	if newStatus != "" {
		r.emit(Event{RunID: runID, Status: newStatus})
	}
	r.emit(Event{RunID: runID, Turn: turn})
	return r.Kick(runID), nil
}

// Retry puts a failed run back to work (staff).
func (r *Runner) Retry(ctx context.Context, runID string, actor models.Actor) (<-chan struct{}, error) {
	if !actor.Role.CanDecide() {
		return nil, fault.Errorf(fault.Forbidden, "the %s role cannot retry runs", actor.Role.Name())
	}
	err := r.store.Write(ctx, func(tx *storage.Tx) error {
		changed, err := tx.SetRunStatus(runID, models.RunActive, "", models.RunFailed)
		if err != nil {
			return err
		}
		if !changed {
			if _, err := tx.Run(runID); err != nil {
				return err
			}
			return fault.Errorf(fault.Conflict, "only a failed run can be retried")
		}
		return tx.Audit(models.Event{Actor: actor.String(), Kind: models.EventRunRetried, Subject: runID, Payload: models.RunRetriedPayload{}})
	})
	if err != nil {
		return nil, r.runError(err)
	}
	r.emit(Event{RunID: runID, Status: models.RunActive})
	return r.Kick(runID), nil
}

// CloseRun ends a conversation (staff): its pending actions are cancelled,
// the customer is told, and nothing more happens in it.
func (r *Runner) CloseRun(ctx context.Context, runID string, actor models.Actor, reason string) error {
	if !actor.Role.CanDecide() {
		return fault.Errorf(fault.Forbidden, "the %s role cannot close conversations", actor.Role.Name())
	}
	reason = strings.TrimSpace(reason)
	if reason == "" {
		reason = "closed by " + actor.Name
	}
	calls, err := r.store.RunCalls(ctx, runID)
	if err != nil {
		return fault.Wrap(err, "could not read the conversation")
	}
	l := r.lock(runID)
	defer r.unlock(runID, l)
	run, err := r.store.Run(ctx, runID)
	if err != nil {
		return fault.Errorf(fault.NotFound, "conversation not found")
	}
	if run.Status == models.RunClosed {
		return fault.Errorf(fault.Conflict, "this conversation is already closed")
	}
	// Closing cancels its waiting actions: only someone who could reject
	// each of them may do that.
	for _, c := range calls {
		if c.Status == models.CallPending && !actor.Role.AtLeast(c.RequiredRole) {
			return fault.Errorf(fault.Forbidden, "this conversation has an action only a %s can decide (%s); ask one to close it", c.RequiredRole, c.Tool)
		}
	}
	// Close first, so that cancelling the actions does not wake the run.
	err = r.store.Write(ctx, func(tx *storage.Tx) error {
		if _, err := tx.SetRunStatus(runID, models.RunClosed, ""); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: actor.String(), Kind: models.EventRunClosed, Subject: runID, Payload: models.RunClosedPayload{Reason: reason}})
	})
	if err != nil {
		return fault.Wrap(err, "could not close the conversation")
	}
	r.emit(Event{RunID: runID, Status: models.RunClosed})
	for _, c := range calls {
		if c.Status == models.CallPending {
			if err := r.gate.Cancel(ctx, c.ID, actor, "the conversation was closed"); err != nil && fault.CodeOf(err) != fault.Conflict {
				return err
			}
		}
	}
	notice := &models.Turn{RunID: runID, Role: models.RoleSystem, Text: "This conversation was closed by our team. Start a new one any time.", Marker: "closed"}
	if err := r.appendTurn(ctx, notice); err != nil && !errors.Is(err, models.ErrDuplicate) {
		return err
	}
	return nil
}

// ResumeRuns is run at start-up: every run that was working or waiting for
// a decision is looked at again, so a restart changes nothing.
func (r *Runner) ResumeRuns(ctx context.Context) (int, error) {
	ids, err := r.store.RunsInStatus(ctx, models.RunActive, models.RunPaused)
	if err != nil {
		return 0, fault.Wrap(err, "could not list runs to resume")
	}
	for _, id := range ids {
		r.Kick(id)
	}
	return len(ids), nil
}

// MaxStepping is how many runs step (call the model, run tools) at once on
// one instance; the others wait their turn.
const MaxStepping = 32

// Kick makes the runner look at a run again. Steps of one run never overlap;
// the returned channel closes when this look is over.
func (r *Runner) Kick(runID string) <-chan struct{} {
	done := make(chan struct{})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(done)
		l := r.lock(runID)
		defer r.unlock(runID, l)
		if r.bg.Err() != nil {
			return
		}
		ctx := r.bg
		if r.store.Shared() { // and across the instances sharing the database
			var release func()
			var ok bool
			if ctx, release, ok = r.lease(runID); !ok {
				return
			}
			defer release()
		}
		// A bounded number of runs step at once: a restart with many runs
		// to resume does not call the model for all of them together.
		select {
		case r.stepping <- struct{}{}:
			defer func() { <-r.stepping }()
		case <-ctx.Done():
			return
		}
		if err := r.advance(ctx, runID); err != nil && ctx.Err() == nil {
			r.log.Error("run step failed", "run_id", runID, "err", err)
		}
	}()
	return done
}

// runLease is how long an instance holds a run it steps; it renews the
// lease while it works, and an instance that dies loses it after this long.
const runLease = 30 * time.Second

// lease waits until this instance holds the run's lease (another instance
// stepping it lets go when done), and keeps it renewed until release. The
// context it returns ends if the lease is lost (another instance took the
// run after this one could not renew in time): the step stops rather than
// going on beside the new holder.
func (r *Runner) lease(runID string) (ctx context.Context, release func(), ok bool) {
	d := cmp.Or(r.Lease, runLease)
	for {
		held, err := r.store.LeaseRun(r.bg, runID, d)
		if err != nil {
			r.log.Error("could not lease a run", "run_id", runID, "err", err)
		}
		if held {
			break
		}
		select {
		case <-r.bg.Done():
			return nil, nil, false
		case <-time.After(200 * time.Millisecond):
		}
	}
	ctx, lost := context.WithCancel(r.bg)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(d / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				held, err := r.store.LeaseRun(context.WithoutCancel(r.bg), runID, d)
				if err != nil {
					r.log.Error("could not renew a run's lease", "run_id", runID, "err", err)
				} else if !held {
					r.log.Warn("lost a run's lease to another instance; this step stops", "run_id", runID)
					lost()
					return
				}
			}
		}
	}()
	return ctx, func() {
		close(stop)
		<-done
		lost()
		if err := r.store.ReleaseRun(context.WithoutCancel(r.bg), runID); err != nil {
			r.log.Error("could not release a run", "run_id", runID, "err", err)
		}
	}, true
}

func (r *Runner) lock(id string) *runLock {
	r.mu.Lock()
	l := r.locks[id]
	if l == nil {
		l = &runLock{}
		r.locks[id] = l
	}
	l.refs++
	r.mu.Unlock()
	l.Lock()
	return l
}

func (r *Runner) unlock(id string, l *runLock) {
	l.Unlock()
	r.mu.Lock()
	l.refs--
	if l.refs == 0 {
		delete(r.locks, id)
	}
	r.mu.Unlock()
}
