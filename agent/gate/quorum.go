package gate

import (
	"context"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
)

// Counts says whether an approval counts toward a call's quorum: an
// approval of the arguments the call has now (argsHash), by an account not
// disabled since (disabled: DisabledApprovers). The gate, the action page
// and the staff API count with it.
func Counts(a models.Approval, argsHash string, disabled map[string]bool) bool {
	return a.Verdict == "approve" && a.ArgsHash == argsHash && !disabled[a.StaffID]
}

// DisabledApprovers are the approvers among approvals whose account has
// been disabled since: their approvals no longer count.
func (g *Gate) DisabledApprovers(ctx context.Context, approvals []models.Approval) (map[string]bool, error) {
	return g.store.DisabledStaff(ctx, approverIDs(approvals))
}

// Vote is one person's approval of the arguments in force.
type Vote struct {
	StaffID string
	Role    models.StaffRole
}

// AddVote is the quorum rule as a pure function: what one more approval
// (next) does to an action that needs `required` distinct approvers, at
// least one of them holding `role` (empty: any deciding role). It returns
// how many distinct people will have approved and whether that completes
// the action, or why the approval cannot be given: the same person twice,
// or a last approval that would leave the action without its role.
func AddVote(prior []Vote, next Vote, required int, role models.StaffRole) (count int, met bool, err error) {
	seen := map[string]bool{}
	qualified := next.Role.AtLeast(role)
	for _, v := range prior {
		if seen[v.StaffID] {
			continue
		}
		seen[v.StaffID] = true
		if v.Role.AtLeast(role) {
			qualified = true
		}
	}
	if seen[next.StaffID] {
		return len(seen), false, fault.Errorf(fault.Conflict, "you have already approved this action; it needs another person's approval")
	}
	count = len(seen) + 1
	if !next.Role.AtLeast(role) && (required <= 1 || (count >= required && !qualified)) {
		if required <= 1 {
			return len(seen), false, fault.Errorf(fault.Forbidden, "this action needs a %s to decide it", role)
		}
		return len(seen), false, fault.Errorf(fault.Forbidden, "the last approval of this action must come from a %s", role)
	}
	return count, count >= required && qualified, nil
}

// Met reports whether votes meet a requirement of `required` distinct
// people (at least one), at least one of them holding role (empty: any).
func Met(votes []Vote, required int, role models.StaffRole) bool {
	seen := map[string]bool{}
	qualified := false
	for _, v := range votes {
		seen[v.StaffID] = true
		qualified = qualified || v.Role.AtLeast(role)
	}
	return len(seen) >= max(required, 1) && qualified
}
