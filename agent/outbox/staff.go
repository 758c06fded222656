package outbox

import (
	"errors"
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

// announce tells every channel that hears of staff changes (a
// staff.changed webhook, an email to every admin).
func (o *Outbox) announce(tx *storage.Tx, actor string, d StaffData) error {
	d.URL = o.Address("/staff")
	return o.queue(tx, Notice{Kind: TypeStaffChanged, At: tx.Now(), Actor: actor, Staff: &d})
}

// SendsEmail reports whether a channel reaches people at their own
// address (enrollment links go there; otherwise the host prints them).
func (o *Outbox) SendsEmail() bool { return o.personal() != nil }

func (o *Outbox) personal() Personal {
	for _, ch := range o.cfg.Channels {
		if p, ok := ch.(Personal); ok {
			return p
		}
	}
	return nil
}

// Address is the public address of a back-office path.
func (o *Outbox) Address(path string) string { return o.cfg.Base + path }

// QueueEnrollment queues the message that brings a person their enrollment
// link, to them alone.
func (o *Outbox) QueueEnrollment(tx *storage.Tx, to *models.Staff, link, purpose string, expires time.Time) error {
	p := o.personal()
	if p == nil {
		return errors.New("no channel reaches people at their own address (set up email)")
	}
	return p.QueueEnrollment(tx, to, link, purpose, expires)
}
