package receipts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/countersign/countersign/models"
)

// Payload is what a final call's receipt signs, read from its records: the
// call, its run, the people's verdicts and its audit events.
func (s *Signer) Payload(ctx context.Context, callID string) (models.ReceiptPayload, error) {
	return s.payload(ctx, callID, nil)
}

// payload is Payload; known, when set, is the call as just read, whose
// result (which may be big) is not read again when the record has the
// same final status (a final call's result is written with its status).
func (s *Signer) payload(ctx context.Context, callID string, known *models.ToolCall) (models.ReceiptPayload, error) {
	var p models.ReceiptPayload
	var call *models.ToolCall
	var err error
	if known != nil && known.ID == callID && known.Status.Final() {
		if call, err = s.store.ToolCallWithoutResult(ctx, callID); err == nil && call.Status == known.Status {
			call.Result = known.Result
		} else {
			call = nil
		}
	}
	if call == nil {
		if call, err = s.store.ToolCall(ctx, callID); err != nil {
			return p, err
		}
	}
	if !call.Status.Final() {
		return p, ErrNotFinal
	}
	run, err := s.run(ctx, call.RunID)
	if err != nil {
		return p, fmt.Errorf("the run of %s: %w", callID, err)
	}
	var approvals []models.Approval
	if call.Decision == models.DecidedNeedsApproval {
		if approvals, err = s.store.Approvals(ctx, callID); err != nil {
			return p, err
		}
	}
	events, err := s.store.AuditEventsFor(ctx, callID)
	if err != nil {
		return p, err
	}
	if len(events) == 0 {
		return p, fmt.Errorf("call %s has no audit events", callID)
	}
	return Build(call, run, approvals, events, time.Now())
}

// run reads a run once: calls of one conversation share it, and what the
// envelope reads of it (agent, session, customer) never changes.
func (s *Signer) run(ctx context.Context, id string) (*models.Run, error) {
	s.runsMu.Lock()
	r, ok := s.runs[id]
	s.runsMu.Unlock()
	if ok {
		return r, nil
	}
	r, err := s.store.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	s.runsMu.Lock()
	if s.runs == nil || len(s.runs) >= maxRuns {
		s.runs = make(map[string]*models.Run)
	}
	s.runs[id] = r
	s.runsMu.Unlock()
	return r, nil
}

// Build is the receipt payload of a final call from its records.
func Build(call *models.ToolCall, run *models.Run, approvals []models.Approval, events []models.AuditEvent, now time.Time) (models.ReceiptPayload, error) {
	first, last := events[0], events[len(events)-1]
	env := models.Envelope{Tool: call.Tool, ToolDigest: call.ToolHash, ArgsDigest: call.ArgsHash, AskedBy: first.Actor,
		Agent: run.AgentID, Session: run.Session, Run: run.ID, Customer: call.CustomerID, PolicyVersion: call.PolicyVersion,
		Decision: call.Decision, Rule: call.Rule, Approvals: []models.EnvelopeApproval{}}
	if call.Decision == models.DecidedNeedsApproval {
		env.Required, env.RequiredRole = max(int(call.RequiredApprovals), 1), string(call.RequiredRole)
	}
	for _, a := range approvals {
		ea := models.EnvelopeApproval{Staff: a.StaffID, Name: a.StaffName, Role: a.StaffRole, Verdict: a.Verdict, At: utc(a.CreatedAt),
			ArgsDigest: a.ArgsHash, ToolDigest: a.ToolHash, PolicyVersion: a.PolicyVersion, SeenDigest: models.Digest(a.Seen)}
		if a.Passkey != "" {
			var sig models.PasskeySignature
			if err := json.Unmarshal([]byte(a.Passkey), &sig); err != nil {
				return models.ReceiptPayload{}, fmt.Errorf("the passkey signature of approval %d: %w", a.ID, err)
			}
			ea.Passkey = &sig
		}
		env.Approvals = append(env.Approvals, ea)
	}
	p := models.ReceiptPayload{Version: models.ReceiptVersion, Call: call.ID, Envelope: env, Status: call.Status,
		Times:    models.ReceiptTimes{Asked: utc(call.CreatedAt), Decided: utcp(call.DecidedAt), Finished: utcp(call.FinishedAt)},
		Audit:    models.ReceiptAudit{Chain: last.Chain, Seq: last.Seq, Hash: last.Hash},
		SignedAt: utc(now)}
	if last.Chain != 0 {
		p.Version = models.ReceiptVersionChained
	}
	if call.Status == models.CallSucceeded {
		p.ResultDigest = sha(call.Result)
	}
	if call.Error != "" {
		p.ErrorDigest = sha(call.Error)
	}
	for _, e := range events {
		if e.Kind == models.EventCallExecuting {
			p.Times.Started = utcp(&e.At)
		}
	}
	ran := call.Status == models.CallSucceeded || call.Status == models.CallFailed || call.Status == models.CallUnknown
	if p.Times.Started == nil && ran && call.Decision == models.DecidedAllow {
		p.Times.Started = p.Times.Decided // an allowed call runs as it is decided
	}
	return p, nil
}

// sha is the SHA-256 (hex) of s, of the empty string too.
func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func utc(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func utcp(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := utc(*t)
	return &u
}
