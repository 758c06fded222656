package backoffice

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/views"
)

var doneMessages = map[string]string{
	"reconciled": "Recorded. The audit log keeps your note.",
	"rejected":   "Rejected. The assistant will tell the customer, with your reason.",
}

// approvalOutcome says what an approval led to, from the call as it is now:
// a page never announces a success that did not happen.
func approvalOutcome(call *models.ToolCall, approvals int, outside bool) (ok, bad string) {
	told := "The customer's assistant has been told."
	if outside {
		told = "The agent has been told."
	}
	switch call.Status {
	case models.CallPending:
		msg := fmt.Sprintf("Your approval is recorded: %d of %d. The action runs once ", approvals, call.RequiredApprovals)
		if call.RequiredRole != "" {
			return msg + "enough people, one of them a " + string(call.RequiredRole) + ", have approved it.", ""
		}
		return msg + "another person approves it.", ""
	case models.CallApproved, models.CallExecuting:
		return "Approved. The call is running; this page shows its outcome as soon as it is known.", ""
	case models.CallSucceeded:
		if outside {
			return "Approved. The call ran and the agent has its result.", ""
		}
		return "Approved. The call ran and the customer's conversation has resumed.", ""
	case models.CallFailed:
		return "", "Approved, but the call failed: " + strings.TrimSuffix(call.Error, ".") + ". " + told
	case models.CallUnknown:
		why := strings.TrimSuffix(call.Error, ".")
		if why == "" {
			why = "the system stopped while it ran"
		}
		return "", "Approved, but whether the call took effect is unknown: " + why + ". A supervisor must check the real system and record what happened below."
	case models.CallInvalidated:
		return "", "Approved, but not run: " + strings.TrimSuffix(call.Error, ".") + ". " + told
	}
	return "", "This action was " + string(call.Status) + " before your approval took effect."
}

// actionNews says who last acted on an action and when, for the banner an
// open page keeps live: an approval of several, a decision, an expiry or a
// cancellation made elsewhere ("" while nobody has acted).
func actionNews(call *models.ToolCall, approvals []models.Approval) string {
	var approvers []string
	var last *models.Approval
	for i := range approvals {
		a := &approvals[i]
		last = a
		if a.Verdict == "approve" && a.ArgsHash == call.ArgsHash {
			approvers = append(approvers, a.StaffName)
		}
	}
	when := ""
	if call.DecidedAt != nil && call.Status != models.CallPending { // a waiting call's is the policy's decision
		when = " at " + clock(*call.DecidedAt)
	} else if last != nil {
		when = " at " + clock(last.CreatedAt)
	}
	switch call.Status {
	case models.CallPending:
		if len(approvers) == 0 {
			return ""
		}
		return fmt.Sprintf("Approved by %s%s: %d of %d so far.", strings.Join(approvers, " and "), when, len(approvers), call.RequiredApprovals)
	case models.CallRejected:
		if last != nil && last.Verdict == "reject" {
			return "Rejected by " + last.StaffName + when + ": " + last.Note
		}
		return "Rejected" + when + "."
	case models.CallExpired:
		return "Expired" + when + ": nobody decided in time."
	case models.CallCancelled:
		return "Cancelled" + when + ": " + strings.TrimPrefix(call.Error, "cancelled: ")
	case models.CallInvalidated:
		return "Approved, but not run" + when + ": " + call.Error
	case models.CallApproved, models.CallExecuting, models.CallSucceeded, models.CallFailed, models.CallUnknown:
		if len(approvers) > 0 {
			return "Approved by " + strings.Join(approvers, " and ") + when + "."
		}
	}
	return ""
}

// toolChanged is what an approver must know before approving when the
// call's tool is not the one it was made against: gone, changed, or changed
// so that its arguments no longer fit ("" when it is the same tool).
func toolChanged(reg *tools.Registry, call *models.ToolCall) string {
	t, ok := reg.Get(call.Tool)
	if !ok {
		return "The tool " + call.Tool + " is no longer offered, so this call cannot run. Reject it with that reason."
	}
	if _, err := t.Normalize([]byte(call.Args)); err != nil {
		return "The tool " + call.Tool + " changed since this call was made, and its arguments no longer fit it (" +
			tools.Truncate(err.Error(), 300) + "). Reject it, or edit the arguments to fit the tool as it is now."
	}
	if call.ToolHash != "" && call.ToolHash != t.DefinitionHash() {
		return "The tool " + call.Tool + " changed since this call was made (its description, risk or input are not what they were). " +
			"Check that the call still does what you expect before approving it."
	}
	return ""
}

// actionView is the action page's view model: the call and its
// conversation, its approvals, what the tool says of it, and what is
// around it (the customer's recent calls, the next action waiting).
func (s *Office) actionView(c echo.Context, id string) (views.ActionView, *models.ToolCall, error) {
	ctx := c.Request().Context()
	call, err := s.core.Store.ToolCall(ctx, id)
	if err != nil {
		return views.ActionView{}, nil, fault.Errorf(fault.NotFound, "action %s was not found", tools.Truncate(id, 64))
	}
	run, err := s.core.Store.Run(ctx, call.RunID)
	if err != nil {
		return views.ActionView{}, nil, err
	}
	v, err := s.actionBase(c, call, run)
	if err != nil {
		return views.ActionView{}, nil, err
	}
	if err := s.actionApprovals(c, call, &v); err != nil {
		return views.ActionView{}, nil, err
	}
	s.actionTool(c, call, run, &v)
	if err := s.actionAround(ctx, call, &v); err != nil {
		return views.ActionView{}, nil, err
	}
	return v, call, nil
}

// actionBase is the call as recorded, in its conversation.
func (s *Office) actionBase(c echo.Context, call *models.ToolCall, run *models.Run) (views.ActionView, error) {
	ctx := c.Request().Context()
	turns, err := s.core.Store.Turns(ctx, call.RunID, 0)
	if err != nil {
		return views.ActionView{}, err
	}
	calls, err := s.core.Store.RunCalls(ctx, call.RunID)
	if err != nil {
		return views.ActionView{}, err
	}
	v := views.ActionView{ID: call.ID, RunID: call.RunID, Tool: call.Tool, Risk: call.Risk, Status: string(call.Status),
		Pending: call.Status == models.CallPending, Reason: call.Reason, Rule: call.Rule, PolicyVersion: call.PolicyVersion,
		Customer: customerLabel(run.CustomerID, run.CustomerName), Args: prettyJSON(call.Args), OriginalArgs: prettyJSON(call.OriginalArgs),
		Required: call.RequiredApprovals, RequiredRole: string(call.RequiredRole), Result: prettyJSON(call.Result), Error: call.Error,
		Turns: turnsView(turns, calls), Flash: doneMessages[c.QueryParam("done")], AgentContext: call.Context}
	v.Passkey = s.core.Gate.AsksPasskeyOf(call)
	if run.AgentID != "" {
		s.outsideContext(call, run, calls, &v)
		if c.QueryParam("done") == "rejected" {
			v.Flash = "Rejected. The agent is told, with your reason."
		}
	}
	if t, ok := s.core.Gate.Tools().Get(call.Tool); ok && t.Upstream != "" {
		v.Upstream, v.Unlisted = t.Upstream, t.Unlisted
	}
	if v.Pending {
		v.ToolChanged = toolChanged(s.core.Gate.Tools(), call)
	}
	if call.Args == "" {
		v.Args = call.RawArgs
	}
	v.Changes = argChanges(call.OriginalArgs, call.Args)
	events, err := s.core.Store.AuditEventsFor(ctx, call.ID)
	if err != nil {
		return views.ActionView{}, err
	}
	for _, e := range events {
		v.Events = append(v.Events, views.EventView{Kind: string(e.Kind), Actor: e.Actor, At: clock(e.At)})
	}
	if call.OriginalArgs != "" {
		v.EditDecision = editDecision(events)
	}
	if call.ExpiresAt != nil {
		v.ExpiresAt, v.ExpiresClock = rfc3339(*call.ExpiresAt), clock(*call.ExpiresAt)
	}
	v.RuleDescription, v.HeldUnder = s.heldUnder(ctx, call)
	v.GrantOffer = s.grantOffer(call, run)
	v.GrantID, _ = gate.GrantOf(call.Rule)
	return v, nil
}

// actionApprovals lists the approvals and counts those that still count
// (gate.Counts, the gate's own rule), with the page's flash after one.
func (s *Office) actionApprovals(c echo.Context, call *models.ToolCall, v *views.ActionView) error {
	approvals, disabled, err := s.approvals(c, call.ID)
	if err != nil {
		return err
	}
	v.News = actionNews(call, approvals)
	me := ""
	if sc := currentStaff(c); sc != nil {
		me = sc.staff.ID
	}
	for _, a := range approvals {
		if gate.Counts(a, call.ArgsHash, disabled) {
			v.ApprovalsSoFar++
			v.ApprovedByMe = v.ApprovedByMe || a.StaffID == me
		}
		av := views.ApprovalView{Staff: a.StaffName, Role: string(a.StaffRole), Verdict: a.Verdict, Note: a.Note,
			Args: a.Args, Edited: a.Edited, At: clock(a.CreatedAt), Current: a.ArgsHash == call.ArgsHash, Disabled: disabled[a.StaffID],
			PersonURL: personURL(a.StaffID), Passkey: a.Passkey != ""}
		for _, f := range models.DecodeFacts(a.Seen) {
			av.Seen = append(av.Seen, views.ContextFact{Label: f.Label, Value: f.Value})
		}
		v.Approvals = append(v.Approvals, av)
	}
	if done := c.QueryParam("done"); done == "approved" || done == "approval_added" {
		v.Flash, v.FlashError = approvalOutcome(call, v.ApprovalsSoFar, v.Agent != "")
		if v.FlashError == "" {
			v.Flash += s.grantGivenMessage(c, call)
		}
	}
	return nil
}

// actionTool is what the tool in force says of the call: its fields to
// edit, its summary and, while it waits, the facts an approver reviews,
// looked up for this view and kept (models.Review) when the viewer may
// decide, so that their decision keeps what they saw.
func (s *Office) actionTool(c echo.Context, call *models.ToolCall, run *models.Run, v *views.ActionView) {
	ctx := c.Request().Context()
	tool, ok := s.core.Gate.Tools().Get(call.Tool)
	if !ok {
		v.Summary = call.Tool
		return
	}
	v.Fields = editFields(tool.Schema, call.Args, nil)
	v.Summary = tool.Summarize(call.Args)
	v.Reviewed = tool.HasReview()
	if !v.Pending || !v.Reviewed {
		return // a decided action shows what its deciders saw (ApprovalView.Seen), not today's answers
	}
	facts, err := tool.ReviewContext(ctx, tools.Call{ID: call.ID, RunID: call.RunID, CustomerID: call.CustomerID, CustomerName: run.CustomerName}, call.Args)
	if err != nil {
		s.cfg.Log.Warn("review context", "tool", call.Tool, "err", err)
		return
	}
	seen := make([]models.ReviewFact, 0, len(facts))
	for _, f := range facts {
		v.Context = append(v.Context, views.ContextFact{Label: f.Label, Value: f.Value, Key: f.Key})
		seen = append(seen, models.ReviewFact{Label: f.Label, Value: f.Value})
	}
	sc := currentStaff(c)
	if len(seen) == 0 || sc == nil || !sc.staff.Role.CanDecide() || !sc.staff.Role.AtLeast(call.RequiredRole) {
		return
	}
	review := &models.Review{ID: models.NewID("rev"), ToolCallID: call.ID, StaffID: sc.staff.ID, Facts: models.EncodeFacts(seen)}
	if err := s.core.Store.SaveReview(ctx, review); err != nil {
		s.cfg.Log.Warn("could not keep what the approver was shown", "call_id", call.ID, "err", err)
		return
	}
	v.ReviewID = review.ID
}

// actionAround is the customer's recent calls and, once this one needs
// nothing more of the viewer, the next action waiting.
func (s *Office) actionAround(ctx context.Context, call *models.ToolCall, v *views.ActionView) error {
	recent, err := s.core.Store.RecentCustomerCalls(ctx, call.CustomerID, call.ID, 5)
	if err != nil {
		return err
	}
	for i := range recent {
		r := &recent[i]
		v.Recent = append(v.Recent, views.RecentCall{ID: r.ID, Summary: s.callSummary(r), Status: string(r.Status), At: clock(r.CreatedAt)})
	}
	if v.Pending && !v.ApprovedByMe {
		return nil
	}
	next, err := s.core.Store.PendingActions(ctx, models.ActionFilter{Limit: 2})
	if err != nil {
		return err
	}
	for _, n := range next {
		if n.ID != call.ID {
			v.NextID = n.ID
			break
		}
	}
	return nil
}

// editDecision tells what the policy said of the latest edit of a call's
// arguments, from the audit event the edit recorded.
func editDecision(events []models.AuditEvent) string {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Kind != models.EventActionEdited {
			continue
		}
		var p struct {
			Verdict string `json:"edit_verdict"`
			Rule    string `json:"edit_rule"`
			Reason  string `json:"edit_reason"`
		}
		if json.Unmarshal([]byte(events[i].Payload), &p) != nil || p.Verdict == "" {
			return ""
		}
		out := p.Verdict + " · " + p.Rule
		if p.Reason != "" {
			out += ": " + p.Reason
		}
		return out
	}
	return ""
}

// outsideContext is what stands in for the conversation when an outside
// agent asked: who, how, and what else it asked in the session.
func (s *Office) outsideContext(call *models.ToolCall, run *models.Run, calls []models.ToolCall, v *views.ActionView) {
	v.Agent, v.Session, v.AgentVia = strings.TrimPrefix(run.Channel, "agent:"), run.Session, agentVia(run.Session)
	for i := len(calls) - 1; i >= 0 && len(v.SessionCalls) < 10; i-- {
		if o := &calls[i]; o.ID != call.ID {
			v.SessionCalls = append(v.SessionCalls, views.RecentCall{ID: o.ID, Summary: s.callSummary(o), Status: string(o.Status), At: clock(o.CreatedAt)})
		}
	}
}

// agentVia says how an outside agent reached the gate, from its session.
func agentVia(session string) string {
	if session == "mcp" || strings.HasPrefix(session, "mcp:") {
		return "over MCP"
	}
	return "over the gate API"
}

func (s *Office) actionPage(c echo.Context) error {
	v, _, err := s.actionView(c, c.Param("id"))
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.Action(v))
}

// ssePart is one part of a page its event stream replaces, by event name.
type ssePart struct {
	name string
	part templ.Component
}
