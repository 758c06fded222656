package gate

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// Redecided says what deciding the waiting actions again did.
type Redecided struct {
	Cancelled, Stricter int
}

// RedecidePending decides every action waiting for a person again with the
// policy in force (after a reload): one the policy now denies is cancelled
// with its reason; one that now needs more approvals or a higher role waits
// for them (the approvals it has keep counting). None is approved or made
// easier by a reload: a person still decides.
func (g *Gate) RedecidePending(ctx context.Context) (Redecided, error) {
	var done Redecided
	pending, err := g.store.PendingActions(ctx, models.ActionFilter{Limit: 100000})
	if err != nil {
		return done, fault.Wrap(err, "could not list the waiting actions")
	}
	now := g.inForce.Load()
	for _, p := range pending {
		call, err := g.store.ToolCall(ctx, p.ID)
		if err != nil || call.Status != models.CallPending {
			continue
		}
		run, err := g.store.Run(ctx, call.RunID)
		if err != nil {
			continue
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(call.Args), &args); err != nil {
			continue
		}
		risk := tools.Risk(call.Risk)
		if t, ok := now.tools.Get(call.Tool); ok {
			risk = t.Risk
		}
		req := CallRequest{RunID: call.RunID, CustomerID: run.CustomerID, CustomerName: run.CustomerName, Channel: run.Channel, Tool: call.Tool}
		d, err := now.policy.Decide(ctx, policy.Input{Tool: call.Tool, Risk: risk, Args: args,
			Facts: &gateFacts{store: g.store, business: g.business, req: req, exclude: call.ID}})
		if err != nil {
			g.log.Warn("could not decide a waiting action again", "call_id", call.ID, "err", err)
			continue
		}
		switch {
		case d.Verdict == policy.Deny:
			if err := g.Cancel(ctx, call.ID, models.SystemActor, "the policy now in force denies it: "+d.Reason); err == nil {
				done.Cancelled++
			}
		case d.Verdict == policy.NeedsApproval && (max(d.Approvals, 1) > int(call.RequiredApprovals) || roleRaised(call.RequiredRole, d.Role)):
			err := g.store.Write(ctx, func(tx *storage.Tx) error {
				c, err := tx.ToolCall(call.ID)
				if err != nil {
					return err
				}
				if c.Status != models.CallPending {
					return models.ErrConflict
				}
				approvals, role := max(d.Approvals, 1, int(c.RequiredApprovals)), c.RequiredRole
				if roleRaised(role, d.Role) {
					role = d.Role
				}
				if approvals == int(c.RequiredApprovals) && role == c.RequiredRole {
					return errUnchanged // nothing to record: the event says what happened
				}
				if err := tx.EditPendingCall(c.ID, models.CallEdit{Args: c.Args, ArgsHash: c.ArgsHash, OriginalArgs: c.OriginalArgs,
					RequiredApprovals: approvals, RequiredRole: role, PasskeyRequired: c.PasskeyRequired, ExpiresAt: c.ExpiresAt}); err != nil {
					return err
				}
				return tx.Audit(models.Event{Actor: models.SystemActor.String(), Kind: models.EventActionRequirementsRaised, Subject: c.ID,
					Payload: models.ActionRequirementsRaisedPayload{Rule: d.Rule, PolicyVersion: d.PolicyVersion, RequiredApprovals: approvals, RequiredRole: role,
						Reason: d.Reason}})
			})
			if err == nil {
				done.Stricter++
				g.notify.ActionChanged(call.ID)
			}
		}
	}
	return done, nil
}

// errUnchanged ends a unit of work that found nothing to change.
var errUnchanged = errors.New("unchanged")

// roleRaised says whether a rule asking for role want asks more than an
// action that needs role have: an empty want asks nothing (any role that
// decides), an empty have is met by any role that decides.
func roleRaised(have, want models.StaffRole) bool {
	return want != "" && !have.AtLeast(want)
}
