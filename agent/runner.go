package agent

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/models"
)

// MaxMessageRunes caps what a customer may send in one message.
const MaxMessageRunes = 4000

// DefaultSystemPrompt tells a model how to behave as a support agent.
const DefaultSystemPrompt = `You are a customer support agent for an online shop. Use the tools to look up and change orders; never invent order details.
Some tool calls need a team member's approval: if a tool result says a call was rejected, denied or expired, do not call it again; tell the customer plainly, with the reason.
Be brief and friendly.`

// RunEvent is what the run loop tells listeners (the SSE broker): a turn was
// appended, or the run's status changed.
type RunEvent struct {
	RunID  string
	Turn   *models.Turn // set for a new turn
	Status string       // set for a status change
}

// Runner drives agent runs: it calls the model, hands every tool call to the
// gate, pauses when an action needs a person and resumes when it is decided.
// Everything it needs to resume is in the database.
type Runner struct {
	store *models.Store
	gate  *Gate
	model Model
	log   *slog.Logger

	System string
	// MaxStepsPerMessage caps model turns after one customer message (loop guard).
	MaxStepsPerMessage int
	// MaxTurnsPerRun caps a run's transcript.
	MaxTurnsPerRun int
	// ModelTimeout bounds one model call.
	ModelTimeout time.Duration
	// OnEvent, when set, hears every new turn and status change.
	OnEvent func(RunEvent)

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

// NewRunner builds a runner and makes the gate tell it when actions settle.
func NewRunner(store *models.Store, gate *Gate, model Model, log *slog.Logger) *Runner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	bg, cancel := context.WithCancel(context.Background())
	r := &Runner{store: store, gate: gate, model: model, log: log, System: DefaultSystemPrompt,
		MaxStepsPerMessage: 8, MaxTurnsPerRun: 400, ModelTimeout: 60 * time.Second,
		bg: bg, cancel: cancel, locks: map[string]*runLock{}}
	gate.OnSettled = func(_ context.Context, call *models.ToolCall) {
		if call.RunID != "" {
			r.Kick(call.RunID)
		}
	}
	return r
}

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

// HashToken is how run tokens are stored and looked up.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func checkMessage(text string) (string, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return "", Errorf(CodeInvalid, "the message is empty")
	}
	if n := len([]rune(text)); n > MaxMessageRunes {
		return "", Errorf(CodeInvalid, "the message is %d characters long; the limit is %d", n, MaxMessageRunes)
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
		return Started{}, internal(err, "could not make a run token")
	}
	token := "rt_" + base64.RawURLEncoding.EncodeToString(raw[:])
	run := &models.Run{ID: models.NewID("run"), CustomerID: req.CustomerID, CustomerName: req.CustomerName,
		Channel: req.Channel, Status: models.RunActive, TokenHash: HashToken(token)}
	turn := &models.Turn{RunID: run.ID, Role: models.RoleCustomer, Text: text}
	err = r.store.Write(ctx, func(tx *models.Tx) error {
		if err := tx.CreateRun(run); err != nil {
			return err
		}
		if err := tx.AppendTurn(turn); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: customerActor(run), Kind: "run.created", Subject: run.ID,
			Payload: map[string]any{"customer_id": run.CustomerID, "channel": run.Channel, "turn_seq": turn.Seq, "text_sha256": textHash(text)}})
	})
	if err != nil {
		return Started{}, internal(err, "could not start the conversation")
	}
	r.emit(RunEvent{RunID: run.ID, Turn: turn})
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
	var newStatus string
	err = r.store.Write(ctx, func(tx *models.Tx) error {
		newStatus = ""
		run, err := tx.Run(runID)
		if err != nil {
			return err
		}
		if run.Status == models.RunClosed {
			return Errorf(CodeConflict, "this conversation is closed")
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
		return tx.Audit(models.Event{Actor: customerActor(run), Kind: "run.message", Subject: runID,
			Payload: map[string]any{"turn_seq": turn.Seq, "text_sha256": textHash(text)}})
	})
	if err != nil {
		return nil, r.runError(err)
	}
	if newStatus != "" {
		r.emit(RunEvent{RunID: runID, Status: newStatus})
	}
	r.emit(RunEvent{RunID: runID, Turn: turn})
	return r.Kick(runID), nil
}

// Retry puts a failed run back to work (staff).
func (r *Runner) Retry(ctx context.Context, runID string, actor Actor) (<-chan struct{}, error) {
	if !actor.Role.CanDecide() {
		return nil, Errorf(CodeForbidden, "the %s role cannot retry runs", roleName(actor.Role))
	}
	err := r.store.Write(ctx, func(tx *models.Tx) error {
		changed, err := tx.SetRunStatus(runID, models.RunActive, "", models.RunFailed)
		if err != nil {
			return err
		}
		if !changed {
			if _, err := tx.Run(runID); err != nil {
				return err
			}
			return Errorf(CodeConflict, "only a failed run can be retried")
		}
		return tx.Audit(models.Event{Actor: actor.String(), Kind: "run.retried", Subject: runID, Payload: map[string]any{}})
	})
	if err != nil {
		return nil, r.runError(err)
	}
	r.emit(RunEvent{RunID: runID, Status: models.RunActive})
	return r.Kick(runID), nil
}

// CloseRun ends a conversation (staff): its pending actions are cancelled,
// the customer is told, and nothing more happens in it.
func (r *Runner) CloseRun(ctx context.Context, runID string, actor Actor, reason string) error {
	if !actor.Role.CanDecide() {
		return Errorf(CodeForbidden, "the %s role cannot close conversations", roleName(actor.Role))
	}
	reason = strings.TrimSpace(reason)
	if reason == "" {
		reason = "closed by " + actor.Name
	}
	calls, err := r.store.RunCalls(ctx, runID)
	if err != nil {
		return internal(err, "could not read the conversation")
	}
	l := r.lock(runID)
	defer r.unlock(runID, l)
	run, err := r.store.Run(ctx, runID)
	if err != nil {
		return Errorf(CodeNotFound, "conversation not found")
	}
	if run.Status == models.RunClosed {
		return Errorf(CodeConflict, "this conversation is already closed")
	}
	// Close first, so that cancelling the actions does not wake the run.
	err = r.store.Write(ctx, func(tx *models.Tx) error {
		if _, err := tx.SetRunStatus(runID, models.RunClosed, ""); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: actor.String(), Kind: "run.closed", Subject: runID, Payload: map[string]any{"reason": reason}})
	})
	if err != nil {
		return internal(err, "could not close the conversation")
	}
	r.emit(RunEvent{RunID: runID, Status: models.RunClosed})
	for _, c := range calls {
		if c.Status == models.CallPending {
			if err := r.gate.Cancel(ctx, c.ID, actor, "the conversation was closed"); err != nil && ErrorCode(err) != CodeConflict {
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
		return 0, internal(err, "could not list runs to resume")
	}
	for _, id := range ids {
		r.Kick(id)
	}
	return len(ids), nil
}

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
		if err := r.advance(r.bg, runID); err != nil && r.bg.Err() == nil {
			r.log.Error("run step failed", "run_id", runID, "err", err)
		}
	}()
	return done
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

// advance moves a run forward as far as it can go on its own: propose the
// calls the model asked for, pause while any waits for a person, hand the
// results back, ask the model again. Each step reads the state from the
// database, so a step repeated after a crash adds nothing twice.
func (r *Runner) advance(ctx context.Context, runID string) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		run, err := r.store.Run(ctx, runID)
		if err != nil {
			return err
		}
		if run.Status == models.RunClosed || run.Status == models.RunFailed {
			return nil
		}
		turns, err := r.store.Turns(ctx, runID, 0)
		if err != nil {
			return err
		}
		calls, err := r.store.RunCalls(ctx, runID)
		if err != nil {
			return err
		}
		lastA := lastAssistant(turns)
		if lastA != nil && lastA.Calls != "" {
			progressed, waiting, err := r.settleTurn(ctx, run, lastA, calls)
			if err != nil {
				return err
			}
			if waiting {
				return nil
			}
			if progressed {
				continue
			}
		}
		last := lastSpoken(turns)
		if last == nil || last.Role == models.RoleAssistant {
			return r.setStatus(ctx, run, models.RunWaiting, "")
		}
		if n := assistantTurnsSinceCustomer(turns); n >= r.MaxStepsPerMessage {
			return r.fail(ctx, run, fmt.Sprintf("loop guard: the model took %d steps without answering the customer", n))
		}
		if len(turns) >= r.MaxTurnsPerRun {
			return r.fail(ctx, run, fmt.Sprintf("the conversation reached its limit of %d turns", r.MaxTurnsPerRun))
		}
		if err := r.setStatus(ctx, run, models.RunActive, ""); err != nil {
			return err
		}
		req := r.request(turns, calls)
		mctx, cancel := context.WithTimeout(ctx, r.ModelTimeout)
		reply, err := r.model.Next(mctx, req)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err() // shutting down: the run resumes at the next start
			}
			return r.fail(ctx, run, err.Error())
		}
		if strings.TrimSpace(reply.Text) == "" && len(reply.Calls) == 0 {
			return r.fail(ctx, run, "the model returned an empty reply")
		}
		if err := r.appendAssistant(ctx, run, reply); err != nil {
			return err
		}
		if len(reply.Calls) == 0 {
			return r.setStatus(ctx, run, models.RunWaiting, "")
		}
	}
}

// settleTurn handles the calls of the last assistant turn. progressed means
// it changed something and the state should be read again; waiting means a
// person has to decide first.
func (r *Runner) settleTurn(ctx context.Context, run *models.Run, turn *models.Turn, calls []models.ToolCall) (progressed, waiting bool, err error) {
	var requested []ModelCall
	if err := json.Unmarshal([]byte(turn.Calls), &requested); err != nil {
		return false, false, fmt.Errorf("turn %d: calls: %w", turn.Seq, err)
	}
	byModelID := map[string]*models.ToolCall{}
	for i := range calls {
		if calls[i].TurnID == turn.ID {
			byModelID[calls[i].ModelCallID] = &calls[i]
		}
	}
	// Calls asked for but not yet through the gate (the first time, or
	// after a crash between the model's reply and the gate).
	for _, mc := range requested {
		if byModelID[mc.ID] != nil {
			continue
		}
		if _, err := r.gate.Call(ctx, CallRequest{RunID: run.ID, CustomerID: run.CustomerID, CustomerName: run.CustomerName,
			Channel: run.Channel, TurnID: turn.ID, ModelCallID: mc.ID, Tool: mc.Tool, Args: mc.Args}); err != nil {
			return false, false, err
		}
		progressed = true
	}
	if progressed {
		return true, false, nil
	}
	var pending []models.ToolCall
	for _, mc := range requested {
		if c := byModelID[mc.ID]; !settled(c.Status) {
			pending = append(pending, *c)
		}
	}
	if len(pending) > 0 {
		notice := &models.Turn{RunID: run.ID, Role: models.RoleSystem, Text: pendingNotice(pending), Marker: fmt.Sprintf("pending:%d", turn.ID)}
		if err := r.appendTurn(ctx, notice); err != nil && !errors.Is(err, models.ErrDuplicate) {
			return false, false, err
		}
		return false, true, r.setStatus(ctx, run, models.RunPaused, "")
	}
	for _, mc := range requested {
		c := byModelID[mc.ID]
		result := &models.Turn{RunID: run.ID, Role: models.RoleTool, Text: ToolResultText(c), ToolCallID: c.ID, Marker: "result:" + c.ID}
		switch err := r.appendTurn(ctx, result); {
		case err == nil:
			progressed = true
		case !errors.Is(err, models.ErrDuplicate):
			return false, false, err
		}
	}
	return progressed, false, nil
}

func (r *Runner) appendAssistant(ctx context.Context, run *models.Run, reply ModelReply) error {
	t := &models.Turn{RunID: run.ID, Role: models.RoleAssistant, Text: strings.TrimSpace(reply.Text)}
	if len(reply.Calls) > 0 {
		seen := map[string]bool{}
		for i := range reply.Calls {
			c := &reply.Calls[i]
			if c.ID == "" || seen[c.ID] {
				c.ID = fmt.Sprintf("call_%d", i+1)
			}
			seen[c.ID] = true
			if len(c.Args) == 0 {
				c.Args = json.RawMessage("{}")
			}
			if !json.Valid(c.Args) {
				// Keep what the model sent, as a string, so the gate can
				// record it as an invalid call with a readable error.
				quoted, _ := json.Marshal(string(c.Args))
				c.Args = quoted
			}
		}
		b, err := json.Marshal(reply.Calls)
		if err != nil {
			return err
		}
		t.Calls = string(b)
	}
	return r.appendTurn(ctx, t)
}

func (r *Runner) appendTurn(ctx context.Context, t *models.Turn) error {
	err := r.store.Write(ctx, func(tx *models.Tx) error {
		if err := tx.AppendTurn(t); err != nil {
			return err
		}
		payload := map[string]any{"seq": t.Seq, "role": t.Role, "text_sha256": textHash(t.Text)}
		if t.ToolCallID != "" {
			payload["tool_call_id"] = t.ToolCallID
		}
		return tx.Audit(models.Event{Actor: roleActor(t.Role), Kind: "run.turn", Subject: t.RunID, Payload: payload})
	})
	if err != nil {
		return err
	}
	r.emit(RunEvent{RunID: t.RunID, Turn: t})
	return nil
}

func (r *Runner) setStatus(ctx context.Context, run *models.Run, status, lastError string) error {
	if run.Status == status && run.LastError == lastError {
		return nil
	}
	var changed bool
	err := r.store.Write(ctx, func(tx *models.Tx) error {
		var err error
		changed, err = tx.SetRunStatus(run.ID, status, lastError)
		if err != nil || !changed {
			return err
		}
		return tx.Audit(models.Event{Actor: "system", Kind: "run.status", Subject: run.ID,
			Payload: map[string]any{"from": run.Status, "to": status, "error": lastError}})
	})
	if err != nil {
		return err
	}
	run.Status, run.LastError = status, lastError
	if changed {
		r.emit(RunEvent{RunID: run.ID, Status: status})
	}
	return nil
}

// fail stops a run for staff to look at; the customer is told plainly.
func (r *Runner) fail(ctx context.Context, run *models.Run, reason string) error {
	r.log.Warn("run failed", "run_id", run.ID, "reason", reason)
	notice := &models.Turn{RunID: run.ID, Role: models.RoleSystem,
		Text:   "Sorry, something went wrong on our side. A team member has been told and will pick this up.",
		Marker: fmt.Sprintf("failed:%d", time.Now().UnixNano())}
	if err := r.appendTurn(ctx, notice); err != nil {
		return err
	}
	return r.setStatus(ctx, run, models.RunFailed, truncateRunes(reason, 2000))
}

func (r *Runner) emit(ev RunEvent) {
	if r.OnEvent != nil {
		r.OnEvent(ev)
	}
}

func (r *Runner) runError(err error) error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, models.ErrNotFound):
		return Errorf(CodeNotFound, "conversation not found")
	}
	return internal(err, "could not update the conversation")
}

// request builds what the model sees: no system notices, and each assistant
// turn's tool results right after it, even when the customer wrote in
// between (messages sent while paused are answered after the results).
func (r *Runner) request(turns []models.Turn, calls []models.ToolCall) ModelRequest {
	req := ModelRequest{System: r.System}
	for _, t := range r.gate.Tools().All() {
		req.Tools = append(req.Tools, ToolSpec{Name: t.Name, Description: t.Description, Schema: t.Schema})
	}
	resultTurn := map[string]*models.Turn{}
	for i := range turns {
		if turns[i].Role == models.RoleTool {
			resultTurn[turns[i].ToolCallID] = &turns[i]
		}
	}
	callOf := map[string]*models.ToolCall{}
	for i := range calls {
		callOf[fmt.Sprintf("%d/%s", calls[i].TurnID, calls[i].ModelCallID)] = &calls[i]
	}
	for _, t := range turns {
		switch t.Role {
		case models.RoleCustomer:
			req.Turns = append(req.Turns, ModelTurn{Role: models.RoleCustomer, Text: t.Text})
		case models.RoleAssistant:
			mt := ModelTurn{Role: models.RoleAssistant, Text: t.Text}
			if t.Calls != "" {
				_ = json.Unmarshal([]byte(t.Calls), &mt.Calls)
			}
			req.Turns = append(req.Turns, mt)
			for _, mc := range mt.Calls {
				c := callOf[fmt.Sprintf("%d/%s", t.ID, mc.ID)]
				if c == nil {
					continue
				}
				rt := resultTurn[c.ID]
				if rt == nil {
					continue
				}
				args := c.Args
				if args == "" {
					args = "{}"
				}
				req.Turns = append(req.Turns, ModelTurn{Role: models.RoleTool, CallID: mc.ID, Text: rt.Text,
					Result: &ToolResult{Tool: c.Tool, Status: c.Status, Output: json.RawMessage(nonEmptyJSON(c.Result)), Error: c.Error, Args: json.RawMessage(args)}})
			}
		}
	}
	return req
}

func nonEmptyJSON(s string) string {
	if s == "" {
		return "null"
	}
	return s
}

func lastAssistant(turns []models.Turn) *models.Turn {
	for i := len(turns) - 1; i >= 0; i-- {
		if turns[i].Role == models.RoleAssistant {
			return &turns[i]
		}
	}
	return nil
}

// lastSpoken is the last turn that is not a system notice.
func lastSpoken(turns []models.Turn) *models.Turn {
	for i := len(turns) - 1; i >= 0; i-- {
		if turns[i].Role != models.RoleSystem {
			return &turns[i]
		}
	}
	return nil
}

func assistantTurnsSinceCustomer(turns []models.Turn) int {
	n := 0
	for i := len(turns) - 1; i >= 0 && turns[i].Role != models.RoleCustomer; i-- {
		if turns[i].Role == models.RoleAssistant {
			n++
		}
	}
	return n
}

func textHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func customerActor(run *models.Run) string {
	if run.CustomerID == "" {
		return "customer:anonymous"
	}
	return "customer:" + run.CustomerID
}

func roleActor(role string) string {
	switch role {
	case models.RoleAssistant:
		return "model"
	case models.RoleCustomer:
		return "customer"
	}
	return "system"
}
