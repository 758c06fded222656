package gate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/agent/telemetry"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// execute runs a call that is already recorded as executing and records the
// result. The tool's own errors become a failed call, not an error here.
func (g *Gate) execute(ctx context.Context, call *models.ToolCall, customerName string, tool *tools.Tool, norm tools.Normalized) (Outcome, error) {
	// The tool runs to its end whoever stops waiting: an approver closing
	// the tab must not cut a refund in half. Tools bound their own time.
	ctx = context.WithoutCancel(ctx)
	ctx, span := telemetry.Tracer().Start(telemetry.Resume(ctx, call.Trace), "execute")
	defer span.End()
	tc := tools.Call{ID: call.ID, IdempotencyKey: call.IdempotencyKey, RunID: call.RunID, CustomerID: call.CustomerID, CustomerName: customerName}
	began := time.Now()
	result, runErr := runTool(ctx, tool, tc, norm)
	took := time.Since(began)
	status := models.CallSucceeded
	var encoded []byte
	if e, ok := result.(tools.Encoded); ok && runErr == nil && len(e) > 0 {
		encoded = e // compact JSON already (an MCP server's result)
	} else if runErr == nil {
		var err error
		encoded, err = json.Marshal(result)
		if err != nil {
			runErr = fmt.Errorf("encode result: %w", err)
		}
	}
	ev := models.CallEndedPayload{RunID: call.RunID, Tool: call.Tool}
	errForModel, errDetail := "", ""
	var unknown *tools.UnknownError
	if runErr != nil {
		status = models.CallFailed
		var refusal *tools.RefusalError
		switch {
		case errors.As(runErr, &unknown):
			status = models.CallUnknown
			errForModel = unknown.Message
			g.log.Warn("tool outcome unknown", "tool", call.Tool, "call_id", call.ID, "err", runErr)
		case errors.As(runErr, &refusal):
			errForModel = refusal.Message
		default:
			errForModel = "the tool failed unexpectedly; a team member has been told"
			g.log.Error("tool failed", "tool", call.Tool, "call_id", call.ID, "err", runErr)
		}
		errDetail = runErr.Error()
		ev.Error = errForModel
	} else {
		sum := sha256.Sum256(encoded)
		ev.ResultHash = hex.EncodeToString(sum[:])
	}
	ev.Status = status
	span.SetAttributes(telemetry.CallID(call.ID), telemetry.AttrStatus.String(string(status)))
	if runErr != nil {
		span.SetStatus(codes.Error, errForModel)
	}
	payload, err := models.EncodePayload(ev)
	if err != nil {
		return Outcome{}, fault.Wrap(err, "the tool's result could not be recorded")
	}
	var ended models.ToolCall // the call as its outcome left it, once committed
	write := g.outcomeUnit(call, outcome{status: status, result: encoded, errForModel: errForModel, errDetail: errDetail,
		unknown: unknown != nil, payload: payload, took: took}, &ended)
	d := policy.Decision{Verdict: policy.Verdict(call.Decision), Rule: call.Rule, Reason: call.Reason, PolicyVersion: call.PolicyVersion}
	if err := write(ctx); err != nil {
		if storageDown(err) {
			// It ran: the outcome is kept and written once the database
			// answers (keep.go); the caller hears that, not a failure.
			g.keepOutcome(call.ID, write)
			return Outcome{CallID: call.ID, Status: models.CallExecuting, Decision: d}, notRecorded(call.ID, err)
		}
		return Outcome{}, fault.Wrap(err, "the tool ran but its result could not be recorded")
	}
	out := Outcome{CallID: call.ID, Status: status, Decision: d, Result: encoded, Error: errForModel}
	if ended.ID != "" {
		out.Call = &ended
	}
	return out, nil
}

// outcome is how a call that ran ended, to record.
type outcome struct {
	status                 models.CallStatus
	result                 []byte
	errForModel, errDetail string
	unknown                bool // whether it ran or not is not known
	payload                models.Payload
	took                   time.Duration
}

// outcomeUnit is the unit of work that records how call ended, and signs
// its receipt there when the asker waits for it (SignReceiptsWith).
func (g *Gate) outcomeUnit(call *models.ToolCall, o outcome, ended *models.ToolCall) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		return g.store.Write(ctx, func(tx *storage.Tx) error {
			*ended = models.ToolCall{}
			if o.unknown {
				if err := tx.ChangeCallStatus(models.CallChange{ID: call.ID, From: []models.CallStatus{models.CallExecuting}, To: models.CallUnknown,
					Error: o.errForModel}); err != nil {
					return err
				}
			} else if err := tx.FinishCall(call.ID, o.status, string(o.result), o.errForModel, o.errDetail); err != nil {
				return err
			} else {
				*ended = o.ended(tx, call)
			}
			g.executed(tx, call, o.took, o.status)
			if err := tx.Audit(models.Event{Actor: "tool:" + call.Tool, Kind: models.CallEnded(o.status), Subject: call.ID, Payload: o.payload}); err != nil {
				return err
			}
			if g.receipt != nil && o.status.Final() && wantsReceipt(ctx) {
				if err := g.receipt(ctx, tx, call.ID, o.records(ctx, tx, call)); err != nil {
					g.log.Debug("the receipt is signed after the outcome", "call_id", call.ID, "err", err)
				}
			}
			return nil
		})
	}
}

// records are the call's records as the gate wrote them, when it wrote
// every one: an allowed call it recorded (its one event, withAsked) and
// whose outcome this unit records (nil: the receipt reads them).
func (o outcome) records(ctx context.Context, tx *storage.Tx, call *models.ToolCall) *models.ReceiptRecords {
	asked, ok := askedOf(ctx, call.ID)
	if !ok || o.unknown || call.Decision != models.DecidedAllow {
		return nil
	}
	ended := o.ended(tx, call)
	return &models.ReceiptRecords{Call: &ended, Events: []models.AuditEvent{asked, tx.LastEvent()}}
}

// ended is call as FinishCall stores its outcome in tx.
func (o outcome) ended(tx *storage.Tx, call *models.ToolCall) models.ToolCall {
	ended := *call
	now := tx.Now()
	ended.Status, ended.Result, ended.Error, ended.ErrorDetail = o.status, string(o.result), o.errForModel, o.errDetail
	ended.FinishedAt, ended.UpdatedAt = &now, now
	return ended
}

// executed notes, once the outcome is committed, how long the tool ran and
// how long after the call's decision its outcome was recorded.
func (g *Gate) executed(tx *storage.Tx, call *models.ToolCall, took time.Duration, status models.CallStatus) {
	if g.metrics == nil {
		return // nothing to note: no closure on the hot path
	}
	since := took
	if call.DecidedAt != nil {
		since = tx.Now().Sub(*call.DecidedAt)
	}
	failure := ""
	if status == models.CallFailed || status == models.CallUnknown {
		failure = string(status)
	}
	tx.AfterCommit(func() { g.metrics.Executed(call.Tool, took, since, failure) })
}

func runTool(ctx context.Context, tool *tools.Tool, call tools.Call, norm tools.Normalized) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("tool %s panicked: %v", tool.Name, p)
		}
	}()
	return tool.Run(ctx, call, norm)
}

// customerName is the name of a call's customer, for calls run later than
// the request that made them.
func (g *Gate) customerName(ctx context.Context, runID string) string {
	if run, err := g.store.Run(ctx, runID); err == nil {
		return run.CustomerName
	}
	return ""
}

// runApproved runs the approved call apart from the approver's request: it
// finishes and is recorded even when they stop waiting. They wait up to
// ExecutionWait for the outcome; after that the action's page shows it
// when it comes.
func (g *Gate) runApproved(ctx context.Context, actionID string, res ApproveResult) (ApproveResult, error) {
	type ran struct {
		out Outcome
		err error
	}
	done := make(chan ran, 1)
	g.inflight.Add(1)
	go func() {
		defer g.inflight.Done()
		out, err := g.ExecuteApproved(context.WithoutCancel(ctx), actionID)
		done <- ran{out, err}
	}()
	wait := time.NewTimer(g.ExecutionWait)
	defer wait.Stop()
	select {
	case r := <-done:
		if r.err != nil {
			return res, r.err
		}
		res.Outcome = &r.out
	case <-wait.C:
	case <-ctx.Done():
	}
	return res, nil
}
