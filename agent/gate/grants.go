package gate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// MaxGrantPeriod is the longest a standing grant may last.
const MaxGrantPeriod = 30 * 24 * time.Hour

// GrantRequest asks, with an approval, that later calls of the same tool
// for the same customer run without asking again: at most Uses calls
// (0: no count bound) whose amounts come to at most Amount (0: no amount
// bound), for the period For. For is required, and so is one of Uses and
// Amount: a grant is always bounded in time and in what it allows.
type GrantRequest struct {
	Uses   int
	Amount models.Cents
	For    time.Duration
	Note   string
}

// GrantRule is how a call allowed by a standing grant names its rule:
// "grant:<id>".
const GrantRule = "grant:"

// GrantOf returns the id of the grant that allowed a call, from its rule.
func GrantOf(rule string) (string, bool) {
	id, ok := strings.CutPrefix(rule, GrantRule)
	if !ok {
		return "", false
	}
	return id, true
}

// checkGrant says why a grant cannot be given with this approval, before
// anything is recorded.
func checkGrant(req *GrantRequest, actor models.Actor, call *models.ToolCall, tool *tools.Tool) error {
	if !actor.Role.AtLeast(models.Supervisor) {
		return fault.Errorf(fault.Forbidden, "only a supervisor or an admin can give a standing grant")
	}
	if call.CustomerID == "" {
		return fault.Errorf(fault.Invalid, "the customer is not signed in: a standing grant needs a customer it can recognise next time")
	}
	switch {
	case req.For <= 0:
		return fault.Errorf(fault.Invalid, "say how long the grant lasts (for example 24h)")
	case req.For > MaxGrantPeriod:
		return fault.Errorf(fault.Invalid, "a grant lasts at most 30 days (720h)")
	case req.Uses < 0 || req.Uses > 1000:
		return fault.Errorf(fault.Invalid, "the number of calls a grant allows is between 1 and 1000")
	case req.Amount < 0:
		return fault.Errorf(fault.Invalid, "the amount a grant allows is a positive sum")
	case req.Uses == 0 && req.Amount == 0:
		return fault.Errorf(fault.Invalid, "bound the grant by a number of calls, an amount, or both")
	case req.Amount > 0 && tool.Amount == "":
		return fault.Errorf(fault.Invalid, "%s has no amount, so a grant for it is bounded by a number of calls", tool.Name)
	case len([]rune(strings.TrimSpace(req.Note))) > MaxReasonLength:
		return fault.Errorf(fault.Invalid, "the grant's note is longer than %d characters", MaxReasonLength)
	}
	return nil
}

// GrantAmountBound is the total a grant allows on a tool with an amount.
// A grant given without one is bounded all the same, by the amount of the
// call approved for each call it allows (a count-only grant given on a $10
// refund does not let a $700 one through): that amount times the count.
// defaulted says the bound was not given but so derived.
func GrantAmountBound(req *GrantRequest, tool *tools.Tool, approvedArgs string) (bound models.Cents, defaulted bool) {
	if req.Amount > 0 || tool == nil || tool.Amount == "" {
		return req.Amount, false
	}
	each, ok := tool.AmountOf(approvedArgs)
	if !ok || each <= 0 || req.Uses <= 0 {
		return req.Amount, false
	}
	return each * models.Cents(req.Uses), true
}

// giveGrant records the grant an approval asked for, in the approval's
// transaction, once the action it approves is complete. It covers calls
// that need one person's approval of a role the giver holds (Approve
// refuses it on an action that needs more than one approval: a grant must
// not let one person skip a two-person rule).
func giveGrant(tx *storage.Tx, req *GrantRequest, actor models.Actor, call *models.ToolCall, tool *tools.Tool) (*models.Grant, error) {
	run, err := tx.Run(call.RunID)
	if err != nil {
		return nil, err
	}
	maxAmount, defaulted := GrantAmountBound(req, tool, call.Args)
	g := &models.Grant{ID: models.NewID("grant"), Tool: call.Tool, CustomerID: call.CustomerID, CustomerName: run.CustomerName, AgentID: run.AgentID,
		MaxUses: int64(req.Uses), MaxCents: maxAmount, ExpiresAt: tx.Now().Add(req.For), Role: actor.Role,
		CreatedByID: actor.ID, CreatedBy: actor.String(), SourceCallID: call.ID, Note: strings.TrimSpace(req.Note)}
	if err := tx.CreateGrant(g); err != nil {
		return nil, err
	}
	return g, tx.Audit(models.Event{Actor: actor.String(), Kind: models.EventGrantCreated, Subject: g.ID, Payload: models.GrantCreatedPayload{
		Tool: g.Tool, CustomerID: g.CustomerID, AgentID: g.AgentID, MaxUses: g.MaxUses, MaxAmount: g.MaxCents.Dollars(), MaxAmountDefault: defaulted,
		ExpiresAt: g.ExpiresAt.UTC().Format(time.RFC3339Nano), SourceCallID: call.ID, Note: g.Note}})
}

// grantUse is a standing grant taking a call the policy wanted a person
// to approve: the grant as counted, the call's amount, and what the
// policy had decided.
type grantUse struct {
	grant  *models.Grant
	amount models.Cents
	ruled  policy.Decision
}

// grantFor looks, inside the transaction that records a call, for a
// standing grant that allows the call the policy wants a person to approve,
// and counts the call against it. It returns the decision the call is
// recorded with and the use, or the policy's decision and nil.
func grantFor(tx *storage.Tx, req CallRequest, tool *tools.Tool, norm tools.Normalized, d policy.Decision) (policy.Decision, *grantUse, error) {
	if req.CustomerID == "" || max(d.Approvals, 1) > 1 {
		return d, nil, nil
	}
	var amount models.Cents
	if tool.Amount != "" {
		a, ok := tool.AmountOf(string(norm.JSON))
		if !ok {
			return d, nil, nil // no sum a grant can count: a person decides
		}
		amount = max(a, 0)
	}
	g, err := tx.UseGrant(tool.Name, req.CustomerID, req.RunID, d.Role, amount)
	if err != nil || g == nil {
		return d, nil, err
	}
	reason := fmt.Sprintf("Allowed by %s's standing grant (%s); the policy asked: %s", models.ActorName(g.CreatedBy), GrantUsed(g), d.Reason)
	allowed := policy.Decision{Verdict: policy.Allow, Rule: GrantRule + g.ID, Reason: reason, PolicyVersion: d.PolicyVersion}
	return allowed, &grantUse{grant: g, amount: amount, ruled: d}, nil
}

// GrantUsed says how much of a grant was used: "2 of 3 calls used, $100.00
// of $150.00 used".
func GrantUsed(g *models.Grant) string {
	var parts []string
	if g.MaxUses > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d calls used", g.Uses, g.MaxUses))
	}
	if g.MaxCents > 0 {
		parts = append(parts, fmt.Sprintf("%s of %s used", g.UsedCents, g.MaxCents))
	}
	return strings.Join(parts, ", ")
}

// audit records the use, with the grant's id as subject, after the event
// of the call it allowed.
func (u *grantUse) audit(tx *storage.Tx, call *models.ToolCall) error {
	g := u.grant
	return tx.Audit(models.Event{Actor: models.SystemActor.String(), Kind: models.EventGrantUsed, Subject: g.ID, Payload: models.GrantUsedPayload{
		CallID: call.ID, Tool: call.Tool, CustomerID: call.CustomerID, Amount: u.amount.Dollars(),
		Uses: g.Uses, MaxUses: g.MaxUses, UsedAmount: g.UsedCents.Dollars(), MaxAmount: g.MaxCents.Dollars(),
		PolicyRule: u.ruled.Rule, PolicyReason: u.ruled.Reason}})
}

// RevokeGrant ends a standing grant before its time: calls from now on are
// decided by the policy alone. Supervisors and admins may.
func (g *Gate) RevokeGrant(ctx context.Context, id string, actor models.Actor, reason string) (*models.Grant, error) {
	if !actor.Role.AtLeast(models.Supervisor) {
		return nil, fault.Errorf(fault.Forbidden, "only a supervisor or an admin can revoke a standing grant")
	}
	reason = strings.TrimSpace(reason)
	if len([]rune(reason)) > MaxReasonLength {
		return nil, fault.Errorf(fault.Invalid, "the reason is longer than %d characters", MaxReasonLength)
	}
	gr, err := g.store.RevokeGrant(ctx, id, actor.String(), reason)
	switch {
	case errors.Is(err, models.ErrNotFound):
		return nil, fault.Errorf(fault.NotFound, "grant %s was not found", tools.Truncate(id, 64))
	case errors.Is(err, models.ErrConflict):
		_, why, _ := strings.Cut(err.Error(), ": ")
		return nil, fault.Errorf(fault.Conflict, "%s", why)
	case err != nil:
		return nil, fault.Wrap(err, "the grant could not be revoked")
	}
	return gr, nil
}
