package gate

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// An approved call runs only as approved: the transaction that claims it
// for execution checks that what its approvers signed under still holds
// (the tool's definition, the policy, their accounts). When it does not,
// the call ends `invalidated` with the reason in words, and nothing is
// sent to the tool.

// requirement is what the policy in force asks of an approved call before
// it may run.
type requirement struct {
	approvals int
	role      models.StaffRole
	// passkey: only approvals signed with a passkey count.
	passkey bool
	// why is set when the call may not run whatever its approvals.
	why string
}

// approvedUnder checks what can be checked outside the transaction: the
// tool's definition each approval was given under against the one in
// force, and, when the policy in force is another than the approvals were
// given under, what it asks of the call now.
func (g *Gate) approvedUnder(ctx context.Context, call *models.ToolCall, tool *tools.Tool, approvals []models.Approval) requirement {
	need := requirement{approvals: max(int(call.RequiredApprovals), 1), role: call.RequiredRole, passkey: g.AsksPasskeyOf(call)}
	now := tool.DefinitionHash()
	pol := g.Policy()
	samePolicy := true
	for _, a := range approvals {
		if a.Verdict != "approve" || a.ArgsHash != call.ArgsHash {
			continue
		}
		under := a.ToolHash
		if under == "" { // an approval recorded before approvals kept it
			under = call.ToolHash
		}
		if under != "" && under != now {
			need.why = "the tool's definition changed after it was approved"
			return need
		}
		policyThen := a.PolicyVersion
		if policyThen == "" {
			policyThen = call.PolicyVersion
		}
		samePolicy = samePolicy && policyThen == pol.Version()
	}
	if samePolicy {
		return need
	}
	run, err := g.store.Run(ctx, call.RunID)
	if err != nil {
		need.why = "its run could not be read to decide it again under the policy in force"
		return need
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(call.Args), &args); err != nil {
		need.why = "its arguments could not be read to decide it again under the policy in force"
		return need
	}
	req := CallRequest{RunID: call.RunID, CustomerID: run.CustomerID, CustomerName: run.CustomerName, Channel: run.Channel, Tool: call.Tool}
	d, err := pol.Decide(ctx, policy.Input{Tool: call.Tool, Risk: tool.Risk, Args: args,
		Facts: &gateFacts{store: g.store, business: g.business, req: req, exclude: call.ID}})
	switch {
	case err != nil:
		need.why = "the policy in force could not decide it again (" + tools.Truncate(err.Error(), 200) + ")"
	case d.Verdict == policy.Deny:
		need.why = fmt.Sprintf("the policy in force now denies it (rule %s: %s)", d.Rule, d.Reason)
	case d.Verdict == policy.NeedsApproval:
		need.approvals = max(need.approvals, d.Approvals)
		if roleRaised(need.role, d.Role) {
			need.role = d.Role
		}
		need.passkey = need.passkey || d.Passkey
	}
	return need
}

// definitionOf is the digest of the call's tool as in force now (the one
// it was made against when the tool is gone).
func (g *Gate) definitionOf(call *models.ToolCall) string {
	if t, ok := g.Tools().Get(call.Tool); ok {
		return t.DefinitionHash()
	}
	return call.ToolHash
}

// stillMet is what the transaction checks: the approvals that still count
// (of these arguments, by accounts not disabled since) meet what the
// policy asks. It returns why the call may not run ("" when it may).
func stillMet(tx *storage.Tx, call *models.ToolCall, need requirement) (string, error) {
	if need.why != "" {
		return need.why, nil
	}
	approvals, err := tx.Approvals(call.ID)
	if err != nil {
		return "", err
	}
	disabled, err := tx.DisabledStaff(approverIDs(approvals))
	if err != nil {
		return "", err
	}
	var all, counting []Vote
	for _, a := range approvals {
		if need.passkey && a.Passkey == "" {
			continue
		}
		if Counts(a, call.ArgsHash, nil) {
			all = append(all, Vote{StaffID: a.StaffID, Role: a.StaffRole})
		}
		if Counts(a, call.ArgsHash, disabled) {
			counting = append(counting, Vote{StaffID: a.StaffID, Role: a.StaffRole})
		}
	}
	switch {
	case Met(counting, need.approvals, need.role):
		return "", nil
	case Met(all, need.approvals, need.role):
		return "an approver's account was disabled after they approved it", nil
	}
	return fmt.Sprintf("the policy in force now asks for %s", needText(need)), nil
}

func needText(need requirement) string {
	s := "one approval"
	if need.approvals > 1 {
		s = fmt.Sprintf("%d approvals by different people", need.approvals)
	}
	if need.role != "" {
		s += fmt.Sprintf(" (one of them a %s)", need.role)
	}
	if need.passkey {
		s += ", each signed with a passkey"
	}
	return s + ", more than it has"
}

// invalidatedText is what the approvers, the agent and the audit log read.
func invalidatedText(why string) string {
	return why + ": nothing was done; ask again"
}

// invalidateInTx ends an approved call as invalidated, with its reason.
func invalidateInTx(tx *storage.Tx, call *models.ToolCall, why string) error {
	msg := invalidatedText(why)
	if err := tx.ChangeCallStatus(models.CallChange{ID: call.ID, From: []models.CallStatus{models.CallApproved}, To: models.CallInvalidated,
		Error: msg}); err != nil {
		return err
	}
	return tx.Audit(models.Event{Actor: models.SystemActor.String(), Kind: models.EventCallInvalidated, Subject: call.ID,
		Payload: models.CallEndedPayload{RunID: call.RunID, Tool: call.Tool, Status: models.CallInvalidated, Reason: why, Error: msg}})
}
