package gate

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
)

// The ways a waiting action ends without running: a person rejects it, its
// run withdraws it, or its time runs out.

// Reject refuses an action with a reason, which is what the model is told.
func (g *Gate) Reject(ctx context.Context, actionID string, actor models.Actor, reason string) error {
	return g.RejectSeen(ctx, actionID, actor, reason, "")
}

// RejectSeen is Reject by someone who was shown the review reviewID
// (models.Review): the rejection keeps those facts.
func (g *Gate) RejectSeen(ctx context.Context, actionID string, actor models.Actor, reason, reviewID string) error {
	return g.RejectSigned(ctx, actionID, actor, reason, reviewID, nil)
}

// RejectSigned is RejectSeen with the person's passkey signature over the
// rejection (web checked it against their passkey; the transaction checks
// it is over this call and these arguments). A rejection stops an action,
// so one without a signature is still taken where the rule asks for one
// (the API, Slack); the back office signs it when the rule asks.
func (g *Gate) RejectSigned(ctx context.Context, actionID string, actor models.Actor, reason, reviewID string, sig *models.PasskeySignature) error {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return fault.Errorf(fault.Invalid, "a reason is required to reject: it is what the customer's assistant is told")
	}
	if len([]rune(reason)) > MaxReasonLength {
		return fault.Errorf(fault.Invalid, "the reason is longer than %d characters", MaxReasonLength)
	}
	if !actor.Role.CanDecide() {
		return fault.Errorf(fault.Forbidden, "the %s role cannot decide actions", actor.Role.Name())
	}
	var expired bool
	err := g.store.Write(ctx, func(tx *storage.Tx) error {
		expired = false
		call, err := tx.ToolCall(actionID)
		if err != nil {
			return err
		}
		if call.Decision != string(policy.NeedsApproval) {
			return models.ErrNotFound
		}
		if call.Status != models.CallPending {
			return alreadyDecided(call)
		}
		if call.ExpiresAt != nil && !tx.Now().Before(*call.ExpiresAt) {
			expired = true
			return g.expireInTx(tx, call)
		}
		if role := call.RequiredRole; !actor.Role.AtLeast(role) {
			return fault.Errorf(fault.Forbidden, "this action needs a %s to decide it", role)
		}
		seen, err := seenIn(tx, reviewID, call.ID, actor)
		if err != nil {
			return err
		}
		signed := ""
		if sig != nil {
			tool, ok := g.Tools().Get(call.Tool)
			if !ok {
				return fault.Errorf(fault.Conflict, "the tool %s is no longer offered", call.Tool)
			}
			if signed, err = passkeyOver(sig, call, tool, "reject"); err != nil {
				return err
			}
		}
		if err := tx.CreateApproval(&models.Approval{ToolCallID: call.ID, StaffID: actor.ID, StaffName: actor.Name,
			StaffRole: actor.Role, Verdict: "reject", Note: reason, Args: call.Args, ArgsHash: call.ArgsHash, Seen: seen, Settles: true,
			Passkey: signed, ToolHash: g.definitionOf(call), PolicyVersion: g.Policy().Version()}); err != nil {
			return err
		}
		if err := tx.ChangeCallStatus(models.CallChange{ID: call.ID, From: []models.CallStatus{models.CallPending}, To: models.CallRejected,
			Error: "rejected by staff: " + reason}); err != nil {
			return err
		}
		g.heldFor(tx, call, "rejected", actor.String())
		return tx.Audit(models.Event{Actor: actor.String(), Kind: models.EventActionRejected, Subject: call.ID,
			Payload: models.ActionRejectedPayload{ArgsHash: call.ArgsHash, Reason: reason, Seen: models.DecodeFacts(seen)}})
	})
	if err != nil {
		return g.writeError(err, actionID)
	}
	g.settled(ctx, actionID)
	if expired {
		return fault.Errorf(fault.Conflict, "this action expired before it was decided")
	}
	return nil
}

// Cancel withdraws a pending action, for instance when its run is closed.
func (g *Gate) Cancel(ctx context.Context, actionID string, actor models.Actor, reason string) error {
	return g.cancel(ctx, actionID, actor.String(), reason, func(call *models.ToolCall) error {
		if actor != models.SystemActor && !actor.Role.AtLeast(call.RequiredRole) {
			return fault.Errorf(fault.Forbidden, "this action needs a %s to decide it", call.RequiredRole)
		}
		return nil
	})
}

// Withdrawn is the reason of an action the agent that asked for it
// withdrew before a person decided it (an MCP task it cancelled).
const Withdrawn = "the agent withdrew it before a person decided"

// Withdraw is the agent that asked for a pending action taking it back
// (the caller checked that the action is that agent's): it is cancelled
// with the reason Withdrawn, under the agent's name.
func (g *Gate) Withdraw(ctx context.Context, actionID string, agent *models.Agent) error {
	return g.cancel(ctx, actionID, "agent:"+agent.Name, Withdrawn, func(*models.ToolCall) error { return nil })
}

func (g *Gate) cancel(ctx context.Context, actionID, actor, reason string, may func(*models.ToolCall) error) error {
	err := g.store.Write(ctx, func(tx *storage.Tx) error {
		call, err := tx.ToolCall(actionID)
		if err != nil {
			return err
		}
		if call.Status != models.CallPending {
			return alreadyDecided(call)
		}
		if err := may(call); err != nil {
			return err
		}
		if err := tx.ChangeCallStatus(models.CallChange{ID: call.ID, From: []models.CallStatus{models.CallPending}, To: models.CallCancelled,
			Error: "cancelled: " + reason}); err != nil {
			return err
		}
		g.heldFor(tx, call, "cancelled", actor)
		return tx.Audit(models.Event{Actor: actor, Kind: models.EventActionCancelled, Subject: call.ID,
			Payload: models.ActionCancelledPayload{Reason: reason}})
	})
	if err != nil {
		return g.writeError(err, actionID)
	}
	g.settled(ctx, actionID)
	return nil
}

// ExpireOverdueActions expires every pending action whose time is up and
// returns how many it expired.
func (g *Gate) ExpireOverdueActions(ctx context.Context) (int, error) {
	ids, err := g.store.OverdueActionIDs(ctx, g.store.Now(), 500)
	if err != nil {
		return 0, fault.Wrap(err, "could not list overdue actions")
	}
	n := 0
	for _, id := range ids {
		err := g.store.Write(ctx, func(tx *storage.Tx) error {
			call, err := tx.ToolCall(id)
			if err != nil {
				return err
			}
			if call.Status != models.CallPending || call.ExpiresAt == nil || tx.Now().Before(*call.ExpiresAt) {
				return models.ErrConflict // decided meanwhile
			}
			return g.expireInTx(tx, call)
		})
		if errors.Is(err, models.ErrConflict) {
			continue
		}
		if err != nil {
			return n, fault.Wrap(err, "could not expire an action")
		}
		n++
		g.settled(ctx, id)
	}
	return n, nil
}

func (g *Gate) expireInTx(tx *storage.Tx, call *models.ToolCall) error {
	if err := tx.ChangeCallStatus(models.CallChange{ID: call.ID, From: []models.CallStatus{models.CallPending}, To: models.CallExpired,
		Error: "expired: nobody decided in time"}); err != nil {
		return err
	}
	g.heldFor(tx, call, "expired", models.SystemActor.String())
	return tx.Audit(models.Event{Actor: models.SystemActor.String(), Kind: models.EventActionExpired, Subject: call.ID,
		Payload: models.ActionExpiredPayload{ExpiresAt: call.ExpiresAt.UTC().Format(time.RFC3339Nano)}})
}
