package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// MaxReasonLength caps rejection reasons and approval notes.
const MaxReasonLength = 1000

// ApproveRequest is one staff member's approval, optionally with edited
// arguments.
type ApproveRequest struct {
	Note string
	// Args, when set, replaces the arguments (raw JSON). They are validated
	// and decided again; an edit the policy would deny is refused.
	Args []byte
	// Grant, when set, also allows later calls of the same tool for the
	// same customer without asking, within its bounds (supervisors and
	// admins, on an action that needs one approval).
	Grant *GrantRequest
	// ReviewID names what the approver was shown (models.Review): the
	// approval keeps those facts. "" when they were shown none.
	ReviewID string
	// Passkey is the approver's passkey signature over this approval,
	// already checked against their passkey (web, agent/accounts); the
	// transaction checks it is over these arguments. Required when the
	// action's rule asks for one (passkey: true).
	Passkey *models.PasskeySignature
}

// ApproveResult says what an approval did.
type ApproveResult struct {
	// Final is true when this approval completed the action and it ran.
	Final bool
	// Approvals counts distinct approvals of the current arguments, of Required.
	Approvals, Required int
	// Outcome is the execution's outcome when Final and it ended within
	// Gate.ExecutionWait; nil while it still runs.
	Outcome *Outcome
	// Grant is the standing grant this approval gave, if it asked for one.
	Grant *models.Grant
}

// Approve records an approval. When it is the last one the action needs,
// the call runs, exactly once, apart from the caller's context; Approve
// returns its outcome when it ends within ExecutionWait.
func (g *Gate) Approve(ctx context.Context, actionID string, actor models.Actor, req ApproveRequest) (ApproveResult, error) {
	a, err := g.approvable(ctx, actionID, actor, req)
	if err != nil {
		return ApproveResult{}, err
	}
	// An edit is validated and decided outside the transaction; the
	// transaction then checks that the action is still what we decided on.
	if req.Args != nil {
		if err := g.decideEdit(ctx, a); err != nil {
			return ApproveResult{}, err
		}
	}
	// What cannot work is not approved: the tool's own read-only check runs
	// on the arguments that would run (edited or not), before anything is
	// recorded.
	if req.Grant != nil {
		if err := checkGrant(req.Grant, actor, a.current, a.tool); err != nil {
			return ApproveResult{}, err
		}
	}
	if err := g.checkBeforeApproval(ctx, a.tool, a.current, a.edit); err != nil {
		return ApproveResult{}, err
	}
	var res ApproveResult
	var expired bool
	err = g.store.Write(ctx, func(tx *storage.Tx) (err error) {
		res, expired, err = g.approveInTx(tx, a)
		return err
	})
	if err != nil {
		return ApproveResult{}, g.writeError(err, actionID)
	}
	g.notify.ActionChanged(actionID)
	if expired {
		g.settled(ctx, actionID)
		return ApproveResult{}, fault.Errorf(fault.Conflict, "this action expired before it was approved")
	}
	if !res.Final {
		return res, nil
	}
	if !a.tool.Executes() {
		// A decision-only tool: the agent that asked learns of the approval
		// and carries the call out (Gate.Report).
		res.Outcome = &Outcome{CallID: actionID, Status: models.CallApproved}
		return res, nil
	}
	return g.runApproved(ctx, actionID, res)
}

// approval is one approval on its way: who gives it, of what, with what
// edit.
type approval struct {
	actionID string
	actor    models.Actor
	req      ApproveRequest
	note     string
	current  *models.ToolCall
	tool     *tools.Tool
	// edit is the edited arguments when they differ from the action's,
	// decided by the policy as editDecision.
	edit         *tools.Normalized
	editDecision policy.Decision
	// policyVersion is the policy in force as the person approves.
	policyVersion string
}

// approvable reads the action and says why the actor cannot approve it, if
// they cannot: their role, the note, an action that is not one, a tool
// gone, or arguments the tool no longer takes.
func (g *Gate) approvable(ctx context.Context, actionID string, actor models.Actor, req ApproveRequest) (*approval, error) {
	if !actor.Role.CanDecide() {
		return nil, fault.Errorf(fault.Forbidden, "the %s role cannot decide actions", actor.Role.Name())
	}
	note := strings.TrimSpace(req.Note)
	if len([]rune(note)) > MaxReasonLength {
		return nil, fault.Errorf(fault.Invalid, "the note is longer than %d characters", MaxReasonLength)
	}
	current, err := g.store.ToolCall(ctx, actionID)
	if err != nil {
		return nil, g.lookupError(err, actionID)
	}
	if current.Decision != string(policy.NeedsApproval) {
		return nil, fault.Errorf(fault.NotFound, "action %s was not found", actionID)
	}
	tool, ok := g.Tools().Get(current.Tool)
	if !ok {
		return nil, fault.Errorf(fault.Conflict, "the tool %s is no longer offered, so this call cannot run; reject it with that reason", current.Tool)
	}
	if req.Args == nil && current.Status == models.CallPending {
		if _, err := tool.Normalize([]byte(current.Args)); err != nil {
			return nil, fault.Errorf(fault.Conflict, "the tool %s changed since this call was made and its arguments no longer fit it (%s); reject it, or edit the arguments to fit the tool as it is now",
				current.Tool, tools.Truncate(err.Error(), 300))
		}
	}
	if req.Passkey == nil && g.AsksPasskeyOf(current) {
		return nil, models.ErrPasskeyNeeded
	}
	return &approval{actionID: actionID, actor: actor, req: req, note: note, current: current, tool: tool, policyVersion: g.Policy().Version()}, nil
}

// AsksPasskey reports whether the policy in force asks for passkey
// signatures on the decisions of this rule.
func (g *Gate) AsksPasskey(rule string) bool {
	fp, ok := g.Policy().(*policy.FilePolicy)
	return ok && fp.AsksPasskey(rule)
}

// AsksPasskeyOf reports whether the verdicts on this action are signed with
// a passkey: its rule asks for it under the policy in force, or an edit
// made it an action whose rule does.
func (g *Gate) AsksPasskeyOf(call *models.ToolCall) bool {
	return call.PasskeyRequired || g.AsksPasskey(call.Rule)
}

// passkeyOver checks that a passkey signature is over this decision of
// this call as it stands in the transaction, and returns it to keep.
func passkeyOver(sig *models.PasskeySignature, call *models.ToolCall, tool *tools.Tool, verdict string) (string, error) {
	if sig == nil {
		return "", nil
	}
	if sig.CallID != call.ID || sig.Verdict != verdict || sig.ArgsHash != call.ArgsHash ||
		sig.SummaryDigest != models.SummaryDigest(tool.Summarize(call.Args)) {
		return "", fault.Errorf(fault.Conflict, "your passkey signed other arguments than the action has now (someone edited it meanwhile): open it again and sign what it says now")
	}
	body, err := json.Marshal(sig)
	return string(body), err
}

// approveInTx records the approval in the unit of work: the action must
// still wait (expired: it is expired now instead), an edit is applied, the
// vote counted, and the action approved, with its grant, when it is met.
func (g *Gate) approveInTx(tx *storage.Tx, a *approval) (res ApproveResult, expired bool, err error) {
	call, err := tx.ToolCall(a.actionID)
	if err != nil {
		return res, false, err
	}
	if call.Status != models.CallPending {
		return res, false, alreadyDecided(call)
	}
	if call.ExpiresAt != nil && !tx.Now().Before(*call.ExpiresAt) {
		return res, true, g.expireInTx(tx, call)
	}
	required, role, err := applyEdit(tx, call, a)
	if err != nil {
		return res, false, err
	}
	if a.req.Grant != nil && required > 1 {
		return res, false, fault.Errorf(fault.Invalid, "this action needs %d approvals; a standing grant would let one person skip that, so it cannot be given here", required)
	}
	seen, err := seenIn(tx, a.req.ReviewID, call.ID, a.actor)
	if err != nil {
		return res, false, err
	}
	count, met, err := castVote(tx, call, a, required, role, seen)
	if err != nil {
		return res, false, err
	}
	res.Approvals, res.Required = count, required
	actor := a.actor.String()
	payload := models.ActionApprovalPayload{ArgsHash: call.ArgsHash, Approvals: count, Required: required, Note: a.note,
		Seen: models.DecodeFacts(seen)}
	if !met {
		return res, false, tx.Audit(models.Event{Actor: actor, Kind: models.EventActionApprovalAdded, Subject: call.ID, Payload: payload})
	}
	if err := tx.ChangeCallStatus(models.CallChange{ID: call.ID, From: []models.CallStatus{models.CallPending}, To: models.CallApproved}); err != nil {
		return res, false, err
	}
	res.Final = true
	g.heldFor(tx, call, "approved", a.actor.String())
	if a.req.Grant != nil {
		if res.Grant, err = giveGrant(tx, a.req.Grant, a.actor, call, a.tool); err != nil {
			return res, false, err
		}
		payload.GrantID = res.Grant.ID
	}
	return res, false, tx.Audit(models.Event{Actor: actor, Kind: models.EventActionApproved, Subject: call.ID, Payload: payload})
}

// castVote records the actor's approval and counts it with the approvals
// that still count (of these arguments, by accounts not disabled since):
// how many there are and whether the action's requirement is met.
func castVote(tx *storage.Tx, call *models.ToolCall, a *approval, required int, role models.StaffRole, seen string) (int, bool, error) {
	prior, err := tx.Approvals(call.ID)
	if err != nil {
		return 0, false, err
	}
	disabled, err := tx.DisabledStaff(approverIDs(prior))
	if err != nil {
		return 0, false, err
	}
	var votes []Vote
	for _, p := range prior {
		if Counts(p, call.ArgsHash, disabled) {
			votes = append(votes, Vote{StaffID: p.StaffID, Role: p.StaffRole})
		}
	}
	count, met, err := AddVote(votes, Vote{StaffID: a.actor.ID, Role: a.actor.Role}, required, role)
	if err != nil {
		return 0, false, err
	}
	signed, err := passkeyOver(a.req.Passkey, call, a.tool, "approve")
	if err != nil {
		return 0, false, err
	}
	err = tx.CreateApproval(&models.Approval{ToolCallID: call.ID, StaffID: a.actor.ID, StaffName: a.actor.Name,
		StaffRole: a.actor.Role, Verdict: "approve", Note: a.note, Args: call.Args, ArgsHash: call.ArgsHash,
		Edited: a.edit != nil, Seen: seen, Settles: met, Passkey: signed, ToolHash: a.tool.DefinitionHash(), PolicyVersion: a.policyVersion})
	return count, met, err
}

// seenIn is what the decider was shown (their review of this action, as
// EncodeFacts wrote it); "" when they name none. A review of another
// action, or another person's, is refused: it is not what they saw.
func seenIn(tx *storage.Tx, reviewID, callID string, actor models.Actor) (string, error) {
	if reviewID == "" {
		return "", nil
	}
	r, err := tx.Review(reviewID, callID, actor.ID)
	if errors.Is(err, models.ErrNotFound) {
		return "", fault.Errorf(fault.Invalid, "the review named is not yours of this action; open the action again")
	}
	if err != nil {
		return "", err
	}
	return r.Facts, nil
}

func (g *Gate) checkBeforeApproval(ctx context.Context, tool *tools.Tool, call *models.ToolCall, edit *tools.Normalized) error {
	if !tool.HasCheck() || call.Status != models.CallPending {
		return nil
	}
	args := edit
	if args == nil {
		norm, err := tool.Normalize([]byte(call.Args))
		if err != nil {
			return nil // the approval path reports it
		}
		args = &norm
	}
	err := tool.Check(ctx, tools.Call{ID: call.ID, RunID: call.RunID, CustomerID: call.CustomerID, CustomerName: g.customerName(ctx, call.RunID)}, *args)
	var refusal *tools.RefusalError
	if errors.As(err, &refusal) {
		// Another approver's approval may have run the call since it was
		// read (a refund taking what was left): that is what this approver
		// is told, not that the call cannot work.
		if now, rerr := g.store.ToolCall(ctx, call.ID); rerr == nil && now.Status != models.CallPending {
			return alreadyDecided(now)
		}
	}
	switch {
	case errors.As(err, &refusal) && edit != nil:
		return &fault.Error{Code: fault.Invalid, Message: "the edited call cannot work: " + refusal.Message, Err: err}
	case errors.As(err, &refusal):
		return fault.Errorf(fault.Conflict, "this call can no longer work: %s. Reject it with that reason, or edit it", refusal.Message)
	case err != nil:
		g.log.Warn("tool check failed; approving without it", "tool", tool.Name, "err", err)
	}
	return nil
}

// ExecuteApproved runs an approved call. The conditional change from
// approved to executing lets exactly one caller through.
func (g *Gate) ExecuteApproved(ctx context.Context, callID string) (Outcome, error) {
	call, err := g.store.ToolCall(ctx, callID)
	if err != nil {
		return Outcome{}, g.lookupError(err, callID)
	}
	tool, ok := g.Tools().Get(call.Tool)
	if !ok {
		return g.cannotRun(ctx, call, fmt.Sprintf("the tool %s is no longer offered", call.Tool))
	}
	norm, err := tool.Normalize([]byte(call.Args))
	if err != nil {
		return g.cannotRun(ctx, call, fmt.Sprintf("the tool %s changed after this call was approved and its arguments no longer fit it (%s)",
			call.Tool, tools.Truncate(err.Error(), 300)))
	}
	approvals, err := g.store.Approvals(ctx, call.ID)
	if err != nil {
		return Outcome{}, g.lookupError(err, callID)
	}
	need := g.approvedUnder(ctx, call, tool, approvals)
	why := ""
	err = g.store.Write(ctx, func(tx *storage.Tx) (err error) {
		// What its approvers signed under still holds, checked in the
		// transaction that claims it: nothing runs otherwise.
		if why, err = stillMet(tx, call, need); err != nil {
			return err
		}
		if why != "" {
			return invalidateInTx(tx, call, why)
		}
		if err := tx.ChangeCallStatus(models.CallChange{ID: call.ID, From: []models.CallStatus{models.CallApproved}, To: models.CallExecuting}); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: models.SystemActor.String(), Kind: models.EventCallExecuting, Subject: call.ID,
			Payload: models.CallExecutingPayload{ArgsHash: call.ArgsHash}})
	})
	if err != nil {
		return Outcome{}, g.writeError(err, callID)
	}
	if why != "" {
		g.log.Warn("approved call invalidated", "call_id", call.ID, "tool", call.Tool, "why", why)
		g.settled(ctx, call.ID)
		d := policy.Decision{Verdict: policy.Verdict(call.Decision), Rule: call.Rule, Reason: call.Reason, PolicyVersion: call.PolicyVersion}
		return Outcome{CallID: call.ID, Status: models.CallInvalidated, Decision: d, Error: invalidatedText(why)}, nil
	}
	out, err := g.execute(ctx, call, g.customerName(ctx, call.RunID), tool, norm)
	g.notify.ActionChanged(callID)
	g.settled(ctx, callID)
	return out, err
}

// cannotRun invalidates an approved call that can no longer run as
// approved (its tool is gone, or changed so that the approved arguments no
// longer fit), with the reason, instead of leaving it approved for ever:
// nothing ran, and the model and the approvers are told why.
func (g *Gate) cannotRun(ctx context.Context, call *models.ToolCall, why string) (Outcome, error) {
	err := g.store.Write(ctx, func(tx *storage.Tx) error { return invalidateInTx(tx, call, why) })
	if err != nil {
		return Outcome{}, g.writeError(err, call.ID)
	}
	g.log.Warn("approved call cannot run", "call_id", call.ID, "tool", call.Tool, "why", why)
	g.settled(ctx, call.ID)
	d := policy.Decision{Verdict: policy.Verdict(call.Decision), Rule: call.Rule, Reason: call.Reason, PolicyVersion: call.PolicyVersion}
	return Outcome{CallID: call.ID, Status: models.CallInvalidated, Decision: d, Error: invalidatedText(why)}, nil
}

// settled tells the watchers that a call which waited for a person reached
// its end (executed, rejected, expired or cancelled), and wakes its run.
func (g *Gate) settled(ctx context.Context, callID string) {
	g.notify.ActionChanged(callID)
	call, err := g.store.ToolCall(ctx, callID)
	if err != nil {
		g.log.Error("settled call vanished", "call_id", callID, "err", err)
		return
	}
	if call.TurnID != 0 { // a call of Countersign's own run loop
		g.runs.Settled(call.RunID)
	}
}

func approverIDs(as []models.Approval) []string {
	ids := make([]string, 0, len(as))
	for _, a := range as {
		ids = append(ids, a.StaffID)
	}
	return ids
}

func alreadyDecided(call *models.ToolCall) error {
	return fault.Errorf(fault.Conflict, "this action was already decided: it is %s", call.Status)
}

func (g *Gate) lookupError(err error, id string) error {
	if errors.Is(err, models.ErrNotFound) {
		return fault.Errorf(fault.NotFound, "action %s was not found", tools.Truncate(id, 64))
	}
	return fault.Wrap(err, "could not read the action")
}

func (g *Gate) writeError(err error, id string) error {
	var e *fault.Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, models.ErrNotFound):
		return fault.Errorf(fault.NotFound, "action %s was not found", tools.Truncate(id, 64))
	case errors.Is(err, models.ErrConflict):
		return fault.Errorf(fault.Conflict, "this action was already decided")
	}
	return fault.Wrap(err, "the decision could not be recorded")
}
