package email

import (
	"fmt"
	"time"

	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// queueStaff writes to every admin of a change of who may sign; the
// account concerned hears of its own account by its enrollment link.
func (c *Channel) queueStaff(tx *storage.Tx, n outbox.Notice) error {
	d := *n.Staff
	admins, err := tx.StaffWhoMayDecide(models.Admin)
	if err != nil {
		return err
	}
	subject, text := staffEmail(d, n.Actor)
	for _, st := range admins {
		if st.ID == d.AccountID && d.Via != "host" {
			continue
		}
		if err := c.enqueue(tx, email{To: st.Email, Subject: subject, Text: text}, string(outbox.TypeStaffChanged), n.Subject()); err != nil {
			return err
		}
	}
	return nil
}

func staffEmail(d outbox.StaffData, actor string) (subject, text string) {
	what := map[string]string{"add": "a new account for " + d.Email + " as " + d.Role, "role": d.Email + " as " + d.Role,
		"enable": "enabling " + d.Email + " again", "reset": "resetting the password and passkeys of " + d.Email, "disable": "disabling " + d.Email,
		"groups": "a new single sign-on group mapping"}[d.Kind]
	by := outbox.ActorName(actor)
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

// QueueEnrollment queues the email that brings a person their enrollment
// link, to them alone.
func (c *Channel) QueueEnrollment(tx *storage.Tx, to *models.Staff, link, purpose string, expires time.Time) error {
	subject, lead := "Your Countersign account", "An account was made for you in Countersign's back office, as "+string(to.Role)+"."
	if purpose == "reset" {
		subject, lead = "Set your Countersign password again", "Your Countersign password and passkeys were reset, as approved by two admins."
	}
	text := fmt.Sprintf("%s\n\nSet your password with this link (it works once, until %s):\n%s\n\nNobody else has this link; do not forward it. If you did not expect it, tell an admin.\n",
		lead, expires.UTC().Format("2006-01-02 15:04 UTC"), link)
	return c.enqueue(tx, email{To: to.Email, Subject: subject, Text: text}, models.DeliveryEnrollment, to.ID)
}
