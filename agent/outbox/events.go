package outbox

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// EventType is what a webhook event tells of.
type EventType string

// The types of webhook event.
const (
	TypeActionPending  EventType = "action.pending"
	TypeActionDecided  EventType = "action.decided"
	TypeActionOverdue  EventType = "action.overdue"
	TypeActionReminder EventType = "action.reminder"
	TypeCallFinished   EventType = "call.finished"
	TypeRunFailed      EventType = "run.failed"
	TypeStaffChanged   EventType = "staff.changed"
)

// EventTypes are the types of webhook events, every one.
var EventTypes = []EventType{TypeActionPending, TypeActionDecided, TypeActionOverdue, TypeActionReminder, TypeCallFinished, TypeRunFailed, TypeStaffChanged}

// TypeNames is EventTypes as words, separated by sep.
func TypeNames(sep string) string {
	names := make([]string, len(EventTypes))
	for i, t := range EventTypes {
		names[i] = string(t)
	}
	return strings.Join(names, sep)
}

// What Slack and email also say, that no webhook hears: a step toward a
// decision, and an approver looking at the action (Slack's View button).
const (
	noticeApprovalAdded EventType = "action.approval_added"
	noticeView          EventType = "action.view"
)

// Event is what a webhook receives: one thing that happened, as JSON, with
// an id to tell a retried delivery from a new event.
type Event struct {
	ID        string      `json:"id"`
	Type      EventType   `json:"type"` // one of EventTypes
	CreatedAt time.Time   `json:"created_at"`
	Actor     string      `json:"actor"` // as in the audit log: "staff:ID (Name)", "system", "model", "agent:Name"
	Action    *ActionData `json:"action,omitempty"`
	Call      *CallData   `json:"call,omitempty"`
	Run       *RunData    `json:"run,omitempty"`
	Staff     *StaffData  `json:"staff,omitempty"`
}

// ActionData is a call that needs (or needed) a person.
type ActionData struct {
	ID                string          `json:"id"`
	RunID             string          `json:"run_id"`
	CustomerID        string          `json:"customer_id,omitempty"`
	Tool              string          `json:"tool"`
	Summary           string          `json:"summary"`
	Args              json.RawMessage `json:"args"`
	Status            string          `json:"status"`
	Rule              string          `json:"rule"`
	Reason            string          `json:"reason"`
	RequiredApprovals int             `json:"required_approvals"`
	RequiredRole      string          `json:"required_role,omitempty"`
	Approvals         int             `json:"approvals"`
	ExpiresAt         *time.Time      `json:"expires_at,omitempty"`
	Outcome           string          `json:"outcome,omitempty"` // why it was rejected, cancelled or expired
	URL               string          `json:"url"`
}

// CallData is a call that finished running.
type CallData struct {
	ID         string `json:"id"`
	RunID      string `json:"run_id"`
	CustomerID string `json:"customer_id,omitempty"`
	Tool       string `json:"tool"`
	Summary    string `json:"summary"`
	Status     string `json:"status"` // succeeded, failed, unknown
	Error      string `json:"error,omitempty"`
	// Action: the call waited for a person (it was an action) before it ran.
	Action bool `json:"action"`
}

// RunData is a run that failed.
type RunData struct {
	ID         string `json:"id"`
	CustomerID string `json:"customer_id,omitempty"`
	Error      string `json:"error"`
}

// Record turns an audit event into the deliveries that tell of it, inside
// the event's transaction (it is the store's storage.Outbox).
func (o *Outbox) Record(tx *storage.Tx, ev models.Event) error {
	switch ev.Kind {
	case models.EventCallPending:
		return o.tell(tx, ev, TypeActionPending)
	case models.EventActionApproved, models.EventActionRejected, models.EventActionExpired, models.EventActionCancelled:
		return o.tell(tx, ev, TypeActionDecided)
	case models.EventActionApprovalAdded:
		return o.tell(tx, ev, noticeApprovalAdded)
	case models.EventActionOverdue:
		return o.tell(tx, ev, TypeActionOverdue)
	case models.EventActionReminder:
		return o.tell(tx, ev, TypeActionReminder)
	case models.EventCallSucceeded, models.EventCallFailed, models.EventCallUnknown, models.EventCallInvalidated:
		if !o.webhooksHear(TypeCallFinished) {
			// Only webhooks hear of every call; people hear how an action ended.
			decision, err := tx.CallDecision(ev.Subject)
			if err != nil || decision != models.DecidedNeedsApproval {
				return err
			}
		}
		return o.tell(tx, ev, TypeCallFinished)
	case models.EventStaffUpdated, models.EventStaffChangeProposed, models.EventStaffChangeDone, models.EventStaffChangeRejected:
		return o.tellStaff(tx, ev)
	case models.EventRunStatus:
		if p, ok := ev.Payload.(models.RunStatusChanged); ok && p.To == models.RunFailed {
			return o.runFailed(tx, ev)
		}
	}
	return nil
}

// tell queues what each channel says of an event about a call.
func (o *Outbox) tell(tx *storage.Tx, ev models.Event, kind EventType) error {
	call, customer, approvals, err := tx.CallNotice(ev.Subject)
	if err != nil {
		return err
	}
	n := o.notice(tx, ev, kind, call, customer, approvals)
	if kind != noticeApprovalAdded { // a step toward a decision: Slack shows it, receivers hear the decision
		if err := o.queueWebhooks(tx, n.event()); err != nil {
			return err
		}
	}
	if o.slackEnabled() {
		if err := o.queueSlack(tx, n); err != nil {
			return err
		}
	}
	if o.smtp != nil {
		return o.queueEmail(tx, n)
	}
	return nil
}

func (o *Outbox) runFailed(tx *storage.Tx, ev models.Event) error {
	run, err := tx.RunNotice(ev.Subject)
	if err != nil {
		return err
	}
	return o.queueWebhooks(tx, Event{ID: models.NewID("evt"), Type: TypeRunFailed, CreatedAt: tx.Now(), Actor: ev.Actor,
		Run: &RunData{ID: run.ID, CustomerID: run.CustomerID, Error: run.LastError}})
}

// notice is an event about a call, with what every channel needs to say it.
type notice struct {
	kind     EventType
	at       time.Time
	actor    string
	call     *models.ToolCall
	customer string // the customer's name, or id, or ""
	summary  string
	link     string
	approved int
	passkey  bool // the rule asks for a passkey signature
}

func (o *Outbox) notice(tx *storage.Tx, ev models.Event, kind EventType, call *models.ToolCall, customer string, approvals int) notice {
	return notice{kind: kind, at: tx.Now(), actor: ev.Actor, call: call, customer: customer, summary: o.summarize(call),
		link: o.cfg.Link(call.ID), approved: approvals, passkey: o.asksPasskey != nil && o.asksPasskey(call)}
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

func (n notice) event() Event {
	ev := Event{ID: models.NewID("evt"), Type: n.kind, CreatedAt: n.at, Actor: n.actor}
	c := n.call
	if n.kind == TypeCallFinished {
		ev.Call = &CallData{ID: c.ID, RunID: c.RunID, CustomerID: c.CustomerID, Tool: c.Tool, Summary: n.summary,
			Status: string(c.Status), Error: c.Error, Action: c.Decision == models.DecidedNeedsApproval}
		return ev
	}
	ev.Action = &ActionData{ID: c.ID, RunID: c.RunID, CustomerID: c.CustomerID, Tool: c.Tool, Summary: n.summary,
		Args: json.RawMessage(c.Args), Status: string(c.Status), Rule: c.Rule, Reason: c.Reason,
		RequiredApprovals: max(c.RequiredApprovals, 1), RequiredRole: string(c.RequiredRole), Approvals: n.approved,
		ExpiresAt: c.ExpiresAt, URL: n.link}
	if c.Status != models.CallPending && c.Status != models.CallApproved {
		ev.Action.Outcome = c.Error
	}
	return ev
}

// webhooksHear says whether webhooks receive events of the type.
func (o *Outbox) webhooksHear(eventType EventType) bool {
	return len(o.cfg.Webhooks) > 0 && (len(o.cfg.WebhookEvents) == 0 || slices.Contains(o.cfg.WebhookEvents, string(eventType)))
}

// queueWebhooks queues the event for every webhook that hears its type.
func (o *Outbox) queueWebhooks(tx *storage.Tx, ev Event) error {
	if !o.webhooksHear(ev.Type) {
		return nil
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	subject := string(ev.Type)
	switch {
	case ev.Action != nil:
		subject = ev.Action.ID
	case ev.Call != nil:
		subject = ev.Call.ID
	case ev.Run != nil:
		subject = ev.Run.ID
	case ev.Staff != nil:
		subject = cmpOr(ev.Staff.Change, ev.Staff.AccountID)
	}
	for _, u := range o.cfg.Webhooks {
		if err := tx.Enqueue(&models.Delivery{Channel: channelWebhook, Target: redactURL(u), Event: string(ev.Type),
			Subject: subject, Body: string(body)}); err != nil {
			return err
		}
	}
	return nil
}
