package gate

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
)

// RecoverInterrupted takes over the calls that a process which is gone left
// in the middle: approved calls that never started are run; calls caught
// executing are run again when their tool is idempotent (with the same
// idempotency key) and otherwise marked unknown for a person to reconcile.
// A call is only taken when its owner has not beaten within alive (0: every
// call, at the start of SQLite's one server), and
// only after this instance has claimed it: of two instances recovering at
// once, one takes each call. Servers run it at start and, sharing
// PostgreSQL, every few seconds.
func (g *Gate) RecoverInterrupted(ctx context.Context, alive time.Duration) (rerun, unknown int, err error) {
	claim := func(c *models.ToolCall) (bool, error) {
		err := g.store.Write(ctx, func(tx *storage.Tx) error { return tx.ClaimCall(c.ID, c.Status, c.Owner) })
		if errors.Is(err, models.ErrConflict) {
			return false, nil
		}
		return err == nil, err
	}
	for {
		calls, err := g.store.OrphanedCalls(ctx, models.CallExecuting, alive, 200)
		if err != nil {
			return rerun, unknown, fault.Wrap(err, "could not list interrupted calls")
		}
		if len(calls) == 0 {
			break
		}
		for i := range calls {
			call := &calls[i]
			if ok, err := claim(call); err != nil {
				return rerun, unknown, fault.Wrap(err, "could not claim an interrupted call")
			} else if !ok {
				continue // another instance took it
			}
			tool, ok := g.Tools().Get(call.Tool)
			if ok && tool.Idempotent {
				norm, nerr := tool.Normalize([]byte(call.Args))
				if nerr == nil {
					g.log.Warn("re-running interrupted idempotent call", "call_id", call.ID, "tool", call.Tool)
					if _, err := g.execute(ctx, call, g.customerName(ctx, call.RunID), tool, norm); err != nil {
						// One call that cannot be recorded never stops the rest.
						g.log.Error("could not record a re-run interrupted call", "call_id", call.ID, "err", err)
						continue
					}
					rerun++
					g.settled(ctx, call.ID)
					continue
				}
			}
			werr := g.store.Write(ctx, func(tx *storage.Tx) error {
				if err := tx.ChangeCallStatus(models.CallChange{ID: call.ID, From: []models.CallStatus{models.CallExecuting}, To: models.CallUnknown,
					Error: "interrupted while running; a team member will check what happened"}); err != nil {
					return err
				}
				return tx.Audit(models.Event{Actor: models.SystemActor.String(), Kind: models.EventCallUnknown, Subject: call.ID,
					Payload: models.CallEndedPayload{RunID: call.RunID, Tool: call.Tool, Status: models.CallUnknown, Reason: "process stopped while the call was executing"}})
			})
			if werr != nil && !errors.Is(werr, models.ErrConflict) {
				g.log.Error("could not mark an interrupted call", "call_id", call.ID, "err", werr)
				continue
			}
			g.log.Warn("interrupted call needs a person", "call_id", call.ID, "tool", call.Tool)
			unknown++
			g.settled(ctx, call.ID)
		}
	}
	approved, err := g.store.OrphanedCalls(ctx, models.CallApproved, alive, 10000)
	if err != nil {
		return rerun, unknown, fault.Wrap(err, "could not list approved calls")
	}
	for i := range approved {
		c := &approved[i]
		if t, ok := g.Tools().Get(c.Tool); ok && !t.Executes() {
			continue // the agent that asked carries it out
		}
		if ok, err := claim(c); err != nil {
			return rerun, unknown, fault.Wrap(err, "could not claim an approved call")
		} else if !ok {
			continue
		}
		if _, err := g.ExecuteApproved(ctx, c.ID); err != nil && fault.CodeOf(err) != fault.Conflict {
			g.log.Error("could not run an approved call", "call_id", c.ID, "err", err)
			continue
		}
		rerun++
	}
	return rerun, unknown, nil
}

// Reconcile records what a person found out about a call whose outcome is
// unknown (the process stopped while it ran): it did happen, or it did not.
func (g *Gate) Reconcile(ctx context.Context, callID string, actor models.Actor, happened bool, note string) error {
	if !actor.Role.AtLeast(models.Supervisor) {
		return fault.Errorf(fault.Forbidden, "only a supervisor or an admin can reconcile a call")
	}
	note = strings.TrimSpace(note)
	if note == "" {
		return fault.Errorf(fault.Invalid, "say what you checked: the note is kept in the audit log")
	}
	if len([]rune(note)) > MaxReasonLength {
		return fault.Errorf(fault.Invalid, "the note is longer than %d characters", MaxReasonLength)
	}
	to, errText := models.CallFailed, "reconciled by staff: it did not happen ("+note+")"
	if happened {
		to, errText = models.CallSucceeded, ""
	}
	err := g.store.Write(ctx, func(tx *storage.Tx) error {
		ch := models.CallChange{ID: callID, From: []models.CallStatus{models.CallUnknown}, To: to, Error: errText}
		if happened {
			ch.Result = mustJSONString(map[string]any{"reconciled": true, "note": note})
		}
		if err := tx.ChangeCallStatus(ch); err != nil {
			if errors.Is(err, models.ErrConflict) {
				return fault.Errorf(fault.Conflict, "only a call whose outcome is unknown can be reconciled")
			}
			return err
		}
		return tx.Audit(models.Event{Actor: actor.String(), Kind: models.EventCallReconciled, Subject: callID,
			Payload: models.CallReconciledPayload{Happened: happened, Note: note, Status: to}})
	})
	if err != nil {
		return g.writeError(err, callID)
	}
	g.notify.ActionChanged(callID)
	return nil
}

func mustJSONString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
