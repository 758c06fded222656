package outbox

import (
	"encoding/json"
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

// What people also hear, that no webhook does: a step toward a decision,
// an action as it stands when someone acts on it in a channel, and how an
// action (not every call) ended.
const (
	NoticeApprovalAdded EventType = "action.approval_added"
	NoticeView          EventType = "action.view"
	NoticeActionEnded   EventType = "action.ended"
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
		return o.tell(tx, ev, NoticeApprovalAdded)
	case models.EventActionOverdue:
		return o.tell(tx, ev, TypeActionOverdue)
	case models.EventActionReminder:
		return o.tell(tx, ev, TypeActionReminder)
	case models.EventCallSucceeded, models.EventCallFailed, models.EventCallUnknown, models.EventCallInvalidated:
		if !o.hears(TypeCallFinished) {
			// No channel hears of every call: those that hear how an
			// action ended are told of actions alone.
			if !o.hears(NoticeActionEnded) {
				return nil
			}
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

// hears says whether some channel may say something of notices of a kind.
func (o *Outbox) hears(kind EventType) bool {
	for _, ch := range o.cfg.Channels {
		if ch.Hears(kind) {
			return true
		}
	}
	return false
}

// queue hands n to every channel that hears its kind.
func (o *Outbox) queue(tx *storage.Tx, n Notice) error {
	for _, ch := range o.cfg.Channels {
		if !ch.Hears(n.Kind) {
			continue
		}
		if err := ch.Queue(tx, n); err != nil {
			return err
		}
	}
	return nil
}

// tell queues what each channel says of an event about a call.
func (o *Outbox) tell(tx *storage.Tx, ev models.Event, kind EventType) error {
	if !o.hears(kind) && !(kind == TypeCallFinished && o.hears(NoticeActionEnded)) {
		return nil
	}
	call, customer, approvals, err := tx.CallNotice(ev.Subject)
	if err != nil {
		return err
	}
	n := o.notice(tx.Now(), ev.Actor, kind, call, customer, approvals)
	if kind != TypeCallFinished {
		return o.queue(tx, n)
	}
	for _, ch := range o.cfg.Channels {
		if ch.Hears(TypeCallFinished) || (ch.Hears(NoticeActionEnded) && call.Decision == models.DecidedNeedsApproval) {
			if err := ch.Queue(tx, n); err != nil {
				return err
			}
		}
	}
	return nil
}

func (o *Outbox) runFailed(tx *storage.Tx, ev models.Event) error {
	if !o.hears(TypeRunFailed) {
		return nil
	}
	run, err := tx.RunNotice(ev.Subject)
	if err != nil {
		return err
	}
	return o.queue(tx, Notice{Kind: TypeRunFailed, At: tx.Now(), Actor: ev.Actor,
		Run: &RunData{ID: run.ID, CustomerID: run.CustomerID, Error: run.LastError}})
}
