package outbox

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/countersign/countersign/models"
)

// Notice is one thing to tell people, with what every channel needs to say
// it: an event about a call or an action (Call), a failed run (Run) or a
// change of who may sign (Staff).
type Notice struct {
	Kind  EventType
	At    time.Time
	Actor string // as in the audit log: "staff:ID (Name)", "system", "agent:Name"
	// Of a call or an action:
	Call     *models.ToolCall
	Customer string // the customer's name, or id, or ""
	Summary  string // what the call asks for, in its tool's words
	Link     string // the action's page in the back office
	Approved int    // approvals so far
	Passkey  bool   // the rule asks for a passkey signature
	// Of a run that failed, or a change of staff:
	Run   *RunData
	Staff *StaffData
}

func (o *Outbox) notice(at time.Time, actor string, kind EventType, call *models.ToolCall, customer string, approvals int) Notice {
	return Notice{Kind: kind, At: at, Actor: actor, Call: call, Customer: customer, Summary: o.summarize(call),
		Link: o.cfg.Link(call.ID), Approved: approvals, Passkey: o.asksPasskey != nil && o.asksPasskey(call)}
}

// summarize says what a call asks for in its tool's words (the tool's name
// when it is no longer registered).
func (o *Outbox) summarize(call *models.ToolCall) string {
	if o.cfg.Tools != nil {
		if t, ok := o.cfg.Tools().Get(call.Tool); ok {
			return t.Summarize(call.Args)
		}
	}
	return call.Tool
}

// View is the notice of an action as it stands now; by is who acted last
// ("" for nobody): what a channel shows of it after someone acted there.
func (o *Outbox) View(ctx context.Context, callID, by string) (Notice, error) {
	call, customer, approvals, err := o.store.CallNotice(ctx, callID)
	if err != nil {
		return Notice{}, err
	}
	return o.notice(o.store.Now(), by, NoticeView, call, customer, approvals), nil
}

// By is the name of who acted.
func (n Notice) By() string { return ActorName(n.Actor) }

// CustomerOrAnonymous is the customer as people are told of them.
func (n Notice) CustomerOrAnonymous() string {
	if n.Customer == "" {
		return "an anonymous customer"
	}
	return n.Customer
}

// Required is how many approvals the action needs.
func (n Notice) Required() int { return max(n.Call.RequiredApprovals, 1) }

// Event is the notice as a webhook receives it.
func (n Notice) Event() Event {
	ev := Event{ID: models.NewID("evt"), Type: n.Kind, CreatedAt: n.At, Actor: n.Actor, Run: n.Run, Staff: n.Staff}
	c := n.Call
	switch {
	case c == nil:
	case n.Kind == TypeCallFinished:
		ev.Call = &CallData{ID: c.ID, RunID: c.RunID, CustomerID: c.CustomerID, Tool: c.Tool, Summary: n.Summary,
			Status: string(c.Status), Error: c.Error, Action: c.Decision == models.DecidedNeedsApproval}
	default:
		ev.Action = &ActionData{ID: c.ID, RunID: c.RunID, CustomerID: c.CustomerID, Tool: c.Tool, Summary: n.Summary,
			Args: json.RawMessage(c.Args), Status: string(c.Status), Rule: c.Rule, Reason: c.Reason,
			RequiredApprovals: n.Required(), RequiredRole: string(c.RequiredRole), Approvals: n.Approved,
			ExpiresAt: c.ExpiresAt, URL: n.Link}
		if c.Status != models.CallPending && c.Status != models.CallApproved {
			ev.Action.Outcome = c.Error
		}
	}
	return ev
}

// Subject is what the notice is about: the action, call, run or staff
// change (a delivery's subject).
func (n Notice) Subject() string {
	switch {
	case n.Call != nil:
		return n.Call.ID
	case n.Run != nil:
		return n.Run.ID
	case n.Staff != nil:
		if n.Staff.Change != "" {
			return n.Staff.Change
		}
		return n.Staff.AccountID
	}
	return string(n.Kind)
}

// ActorName is the name in an audit actor ("staff:ID (Name)"), or the
// actor as written.
func ActorName(actor string) string {
	if i := strings.Index(actor, " ("); i > 0 && strings.HasSuffix(actor, ")") {
		return actor[i+2 : len(actor)-1]
	}
	return actor
}
