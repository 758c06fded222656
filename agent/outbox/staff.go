package outbox

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// Changes of who may sign are told to every admin: a proposed change
// (someone must countersign it), one that took effect, one rejected, an
// account made on the host, and a role lowered or an account disabled at
// once. Webhooks hear them as staff.changed. Enrollment links go to their
// owner alone, by email.

// StaffData is a change of who may sign, in a staff.changed event. It never
// carries a password or an enrollment link.
type StaffData struct {
	Change     string `json:"change,omitempty"`  // the staff change's id; "" for one made on the host or at once
	Kind       string `json:"kind"`              // add, role, enable, reset, groups, disable
	Status     string `json:"status"`            // proposed, done, rejected
	AccountID  string `json:"account,omitempty"` // the account concerned, once there is one
	Email      string `json:"email"`
	Role       string `json:"role,omitempty"`
	Via        string `json:"via"`                   // change (countersigned), host (countersign user add), at_once (took power away)
	ProposedBy string `json:"proposed_by,omitempty"` // the proposing admin's name
	URL        string `json:"url"`
}

// staffEvent turns an audit event about staff into a staff.changed event;
// ok is false for what nobody needs to hear (a sign-in, a Slack link, the
// demo's seed).
func staffEvent(tx *storage.Tx, ev models.Event) (d StaffData, ok bool, err error) {
	switch p := ev.Payload.(type) {
	case models.StaffUpdatedPayload:
		// Roles and enabling change through staff changes, told as such;
		// disabling is at once.
		if p.Disabled == nil || !*p.Disabled {
			return d, false, nil
		}
		st, err := tx.StaffByID(ev.Subject)
		if err != nil {
			return d, false, err
		}
		return StaffData{Kind: "disable", Status: string(models.ChangeDone), AccountID: st.ID, Email: st.Email, Role: string(st.Role), Via: "at_once"}, true, nil
	}
	switch ev.Kind {
	case models.EventStaffChangeProposed, models.EventStaffChangeDone, models.EventStaffChangeRejected:
		ch, err := tx.StaffChangeLocked(ev.Subject)
		if err != nil {
			return d, false, err
		}
		status := models.ChangeDone
		switch ev.Kind {
		case models.EventStaffChangeProposed:
			status = models.ChangeProposed
			if ch.PeopleNeeded <= 1 {
				return d, false, nil // done at once: told when done
			}
		case models.EventStaffChangeRejected:
			status = models.ChangeRejected
		}
		via := "change"
		if ch.PeopleNeeded <= 1 {
			via = "at_once"
		}
		return StaffData{Change: ch.ID, Kind: string(ch.Kind), Status: string(status), AccountID: ch.StaffID, Email: ch.Email,
			Role: string(ch.Role), Via: via, ProposedBy: ch.ProposerName}, true, nil
	}
	return d, false, nil
}

func (o *Outbox) tellStaff(tx *storage.Tx, ev models.Event) error {
	d, ok, err := staffEvent(tx, ev)
	if err != nil || !ok {
		return err
	}
	return o.announce(tx, ev.Actor, d)
}

// TellHostAccount tells every admin of an account made on the host (the
// core's sweep finds them: the command line has no outbox).
func (o *Outbox) TellHostAccount(tx *storage.Tx, st *models.Staff) error {
	return o.announce(tx, "host", StaffData{Kind: string(models.ChangeAdd), Status: string(models.ChangeDone), AccountID: st.ID, Email: st.Email,
		Role: string(st.Role), Via: "host"})
}

// announce queues a staff.changed webhook and an email to every admin.
func (o *Outbox) announce(tx *storage.Tx, actor string, d StaffData) error {
	d.URL = o.Address("/staff")
	if err := o.queueWebhooks(tx, Event{ID: models.NewID("evt"), Type: TypeStaffChanged, CreatedAt: tx.Now(), Actor: actor, Staff: &d}); err != nil {
		return err
	}
	if o.smtp == nil {
		return nil
	}
	admins, err := tx.StaffWhoMayDecide(models.Admin)
	if err != nil {
		return err
	}
	subject, text := staffEmail(d, actor)
	for _, st := range admins {
		if st.ID == d.AccountID && d.Via != "host" {
			continue // the account concerned hears of its own account by its enrollment link
		}
		body, err := json.Marshal(email{To: st.Email, Subject: subject, Text: text})
		if err != nil {
			return err
		}
		if err := tx.Enqueue(&models.Delivery{Channel: channelEmail, Target: st.Email, Event: string(TypeStaffChanged), Subject: cmpOr(d.Change, d.AccountID),
			Body: string(body)}); err != nil {
			return err
		}
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func staffEmail(d StaffData, actor string) (subject, text string) {
	what := map[string]string{"add": "a new account for " + d.Email + " as " + d.Role, "role": d.Email + " as " + d.Role,
		"enable": "enabling " + d.Email + " again", "reset": "resetting the password and passkeys of " + d.Email, "disable": "disabling " + d.Email,
		"groups": "a new single sign-on group mapping"}[d.Kind]
	by := actorName(actor)
	switch {
	case d.Via == "host":
		subject = "Account made on the host: " + d.Email
		text = fmt.Sprintf("An account was made on the host with `countersign user add`: %s, as %s. It can sign at once.\nIf nobody you know did this, disable it on the staff page.\n", d.Email, d.Role)
	case d.Status == string(models.ChangeProposed):
		subject = "Staff change to countersign: " + what
		text = fmt.Sprintf("%s proposed %s. It takes effect when another admin approves it.\n", d.ProposedBy, what)
	case d.Status == string(models.ChangeRejected):
		subject = "Staff change rejected: " + what
		text = fmt.Sprintf("%s rejected %s (proposed by %s).\n", by, what, d.ProposedBy)
	case d.Via == "at_once":
		subject = "Staff change: " + what
		text = fmt.Sprintf("%s changed this at once: %s.\n", by, what)
	default:
		subject = "Staff change in effect: " + what
		text = fmt.Sprintf("%s, proposed by %s, took effect when %s approved it.\n", what, d.ProposedBy, by)
	}
	return subject, text + "\nStaff: " + d.URL + "\n"
}

// SendsEmail reports whether email reaches people.
func (o *Outbox) SendsEmail() bool { return o.smtp != nil }

// Address is the public address of a back-office path.
func (o *Outbox) Address(path string) string { return o.cfg.Base + path }

// QueueEnrollment queues the email that brings a person their enrollment
// link, to them alone.
func (o *Outbox) QueueEnrollment(tx *storage.Tx, to *models.Staff, link, purpose string, expires time.Time) error {
	subject, lead := "Your Countersign account", "An account was made for you in Countersign's back office, as "+string(to.Role)+"."
	if purpose == "reset" {
		subject, lead = "Set your Countersign password again", "Your Countersign password and passkeys were reset, as approved by two admins."
	}
	text := fmt.Sprintf("%s\n\nSet your password with this link (it works once, until %s):\n%s\n\nNobody else has this link; do not forward it. If you did not expect it, tell an admin.\n",
		lead, expires.UTC().Format("2006-01-02 15:04 UTC"), link)
	body, err := json.Marshal(email{To: to.Email, Subject: subject, Text: text})
	if err != nil {
		return err
	}
	return tx.Enqueue(&models.Delivery{Channel: channelEmail, Target: to.Email, Event: models.DeliveryEnrollment, Subject: to.ID, Body: string(body)})
}
