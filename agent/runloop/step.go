package runloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// One step of a run: the model's reply, the gate's decisions on its calls,
// the results handed back, each committed before the next.

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
	var requested []llm.Call
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
	for i, mc := range requested {
		if byModelID[mc.ID] != nil {
			continue
		}
		req := gate.CallRequest{RunID: run.ID, CustomerID: run.CustomerID, CustomerName: run.CustomerName,
			Channel: run.Channel, TurnID: turn.ID, ModelCallID: mc.ID, Tool: mc.Tool, Args: mc.Args}
		var err error
		tool, known := r.gate.Tools().Get(mc.Tool)
		switch {
		case i >= r.MaxCallsPerTurn:
			_, err = r.gate.Refuse(ctx, req, fmt.Sprintf("not done: one reply may make at most %d tool calls; "+
				"finish these, then ask for the rest in a later reply if the customer still needs them", r.MaxCallsPerTurn))
		case known && !tool.Executes():
			// A decision-only tool is carried out by an outside agent;
			// nobody would carry it out in Countersign's own conversations.
			_, err = r.gate.Refuse(ctx, req, fmt.Sprintf("not done: %s is not available in this conversation", mc.Tool))
		default:
			_, err = r.gate.Call(ctx, req)
		}
		if err != nil {
			return false, false, err
		}
		progressed = true
	}
	if progressed {
		return true, false, nil
	}
	var pending []models.ToolCall
	for _, mc := range requested {
		if c := byModelID[mc.ID]; !callFinished(c.Status) {
			pending = append(pending, *c)
		}
	}
	if len(pending) > 0 {
		notice := &models.Turn{RunID: run.ID, Role: models.RoleSystem, Text: pendingNotice(r.gate.Tools(), pending), Marker: fmt.Sprintf("pending:%d", turn.ID)}
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

func (r *Runner) appendAssistant(ctx context.Context, run *models.Run, reply llm.Reply) error {
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
	err := r.store.Write(ctx, func(tx *storage.Tx) error {
		if err := tx.AppendTurn(t); err != nil {
			return err
		}
		payload := models.RunTurnPayload{Seq: t.Seq, Role: t.Role, TextSHA256: textHash(t.Text), ToolCallID: t.ToolCallID}
		return tx.Audit(models.Event{Actor: roleActor(t.Role), Kind: models.EventRunTurn, Subject: t.RunID, Payload: payload})
	})
	if err != nil {
		return err
	}
	r.emit(Event{RunID: t.RunID, Turn: t})
	return nil
}

func (r *Runner) setStatus(ctx context.Context, run *models.Run, status models.RunStatus, lastError string) error {
	if run.Status == status && run.LastError == lastError {
		return nil
	}
	var changed bool
	err := r.store.Write(ctx, func(tx *storage.Tx) error {
		var err error
		changed, err = tx.SetRunStatus(run.ID, status, lastError)
		if err != nil || !changed {
			return err
		}
		return tx.Audit(models.Event{Actor: "system", Kind: models.EventRunStatus, Subject: run.ID,
			Payload: models.RunStatusChanged{From: run.Status, To: status, Error: lastError}})
	})
	if err != nil {
		return err
	}
	run.Status, run.LastError = status, lastError
	if changed {
		r.emit(Event{RunID: run.ID, Status: status})
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
	return r.setStatus(ctx, run, models.RunFailed, tools.Truncate(reason, 2000))
}

func (r *Runner) emit(ev Event) { r.notify.RunChanged(ev) }

func (r *Runner) runError(err error) error {
	var e *fault.Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, models.ErrNotFound):
		return fault.Errorf(fault.NotFound, "conversation not found")
	}
	return fault.Wrap(err, "could not update the conversation")
}
