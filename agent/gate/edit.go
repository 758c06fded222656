package gate

import (
	"context"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
)

// An approver's edit of a waiting action's arguments: decided by the policy
// before the approval's transaction, applied in it.

// decideEdit validates the edited arguments and, when they differ from
// the action's, has the policy decide them; an edit it would deny is
// refused.
func (g *Gate) decideEdit(ctx context.Context, a *approval) error {
	norm, err := a.tool.Normalize(a.req.Args)
	if err != nil {
		return &fault.Error{Code: fault.Invalid, Message: "the edited arguments are not valid: " + err.Error(), Err: err}
	}
	if norm.Hash == a.current.ArgsHash {
		return nil
	}
	run, err := g.store.Run(ctx, a.current.RunID)
	if err != nil {
		return fault.Wrap(err, "could not read the action's run")
	}
	a.editDecision, err = g.Policy().Decide(ctx, policy.Input{Tool: a.tool.Name, Risk: a.tool.Risk, Args: norm.Map,
		Facts: &gateFacts{store: g.store, business: g.business, exclude: a.current.ID,
			req: CallRequest{RunID: run.ID, CustomerID: run.CustomerID, CustomerName: run.CustomerName, Channel: run.Channel}}})
	if err != nil {
		return fault.Wrap(err, "the policy could not decide on the edit")
	}
	if a.editDecision.Verdict == policy.Deny {
		return fault.Errorf(fault.Invalid, "the policy would deny the edited call: %s", a.editDecision.Reason)
	}
	if a.editDecision.Verdict == policy.NeedsApproval && a.editDecision.Passkey && a.req.Passkey == nil {
		// The person who edits approves what they wrote: under a rule that
		// asks for a passkey, with one.
		return models.ErrPasskeyNeeded
	}
	a.edit = &norm
	return nil
}

// applyEdit puts edited arguments on the waiting call, audited as a
// re-decision: the action keeps every requirement of the stricter of the
// rule it was decided by and the rule the edited arguments match (the most
// approvals, the higher role, a passkey if either asks, the earlier
// expiry); it returns what the action requires now.
func applyEdit(tx *storage.Tx, call *models.ToolCall, a *approval) (int, models.StaffRole, error) {
	required, role := call.RequiredApprovals, call.RequiredRole
	edit, d := a.edit, a.editDecision
	if edit == nil || call.ArgsHash == edit.Hash {
		return required, role, nil
	}
	passkey, expires := call.PasskeyRequired, call.ExpiresAt
	if d.Verdict == policy.NeedsApproval {
		required = max(required, d.Approvals)
		role = role.Higher(d.Role)
		passkey = passkey || d.Passkey
		if d.Expires > 0 {
			// The edited action is a new proposal: the edit's rule gives it
			// its time from now, and never more than it had.
			if by := tx.Now().Add(d.Expires); expires == nil || by.Before(*expires) {
				expires = &by
			}
		}
	}
	original := call.OriginalArgs
	if original == "" {
		original = call.Args
	}
	if err := tx.EditPendingCall(call.ID, models.CallEdit{Args: string(edit.JSON), ArgsHash: edit.Hash,
		OriginalArgs: original, RequiredApprovals: required, RequiredRole: role, PasskeyRequired: passkey, ExpiresAt: expires}); err != nil {
		return 0, "", err
	}
	if err := tx.Audit(models.Event{Actor: a.actor.String(), Kind: models.EventActionEdited, Subject: call.ID,
		Payload: models.ActionEditedPayload{FromArgsHash: call.ArgsHash, ToArgsHash: edit.Hash, Args: string(edit.JSON),
			EditVerdict: string(d.Verdict), EditRule: d.Rule, EditReason: d.Reason,
			RequiredApprovals: required, RequiredRole: role, Passkey: passkey, ExpiresAt: expires}}); err != nil {
		return 0, "", err
	}
	call.Args, call.ArgsHash, call.PasskeyRequired, call.ExpiresAt = string(edit.JSON), edit.Hash, passkey, expires
	return required, role, nil
}
