package gate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// Report records how an outside agent carried out a call of a decision-only
// tool that was allowed or approved: ok with its result (JSON), or failed
// with what went wrong. Only the agent whose session made the call may, and
// only once.
func (g *Gate) Report(ctx context.Context, callID string, by *models.Agent, ok bool, result json.RawMessage, errText string) (Outcome, error) {
	call, err := g.store.ToolCall(ctx, callID)
	if err != nil {
		return Outcome{}, g.lookupError(err, callID)
	}
	run, err := g.store.Run(ctx, call.RunID)
	if err != nil || run.AgentID != by.ID {
		return Outcome{}, fault.Errorf(fault.NotFound, "call %s was not found", tools.Truncate(callID, 64))
	}
	if t, known := g.Tools().Get(call.Tool); known && t.Executes() {
		return Outcome{}, fault.Errorf(fault.Conflict, "Countersign runs %s itself; there is no result to report", call.Tool)
	}
	status, encoded := models.CallSucceeded, ""
	ev := models.CallEndedPayload{RunID: call.RunID, Tool: call.Tool}
	if ok {
		if len(result) == 0 {
			result = json.RawMessage("null")
		}
		if !json.Valid(result) {
			return Outcome{}, fault.Errorf(fault.Invalid, "the result is not JSON")
		}
		if len(result) > 1<<20 {
			return Outcome{}, fault.Errorf(fault.Invalid, "the result is over 1 MiB")
		}
		encoded = string(result)
		sum := sha256.Sum256(result)
		ev.ResultHash = hex.EncodeToString(sum[:])
	} else {
		status = models.CallFailed
		errText = tools.Truncate(strings.TrimSpace(errText), MaxReasonLength)
		if errText == "" {
			return Outcome{}, fault.Errorf(fault.Invalid, "say what went wrong: error is empty")
		}
		ev.Error = errText
	}
	ev.Status = status
	payload, err := models.EncodePayload(ev)
	if err != nil {
		return Outcome{}, fault.Wrap(err, "the result could not be recorded")
	}
	err = g.store.Write(ctx, func(tx *storage.Tx) error {
		if err := tx.ChangeCallStatus(models.CallChange{ID: call.ID, From: []models.CallStatus{models.CallAllowed, models.CallApproved},
			To: status, Error: errText, Result: encoded}); err != nil {
			if errors.Is(err, models.ErrConflict) {
				return fault.Errorf(fault.Conflict, "this call is %s: only an allowed or approved call takes a result, once", call.Status)
			}
			return err
		}
		return tx.Audit(models.Event{Actor: "agent:" + by.Name, Kind: models.CallEnded(status), Subject: call.ID, Payload: payload})
	})
	if err != nil {
		var e *fault.Error
		if errors.As(err, &e) {
			return Outcome{}, e
		}
		return Outcome{}, fault.Wrap(err, "the result could not be recorded")
	}
	g.notify.ActionChanged(callID)
	d := policy.Decision{Verdict: policy.Verdict(call.Decision), Rule: call.Rule, Reason: call.Reason, PolicyVersion: call.PolicyVersion}
	return Outcome{CallID: call.ID, Status: status, Decision: d, Result: json.RawMessage(encoded), Error: errText}, nil
}
