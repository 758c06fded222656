package outbox

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// Channel is one way of reaching people (a signed webhook, Slack, email),
// a package of its own under channels/ that holds its configuration, its
// SDK and its tests. The outbox knows none by name: inside an event's
// transaction it hands each channel the notice of the event, and the
// channel queues what it says of it (tx.Enqueue, with its Name as the
// delivery's channel); after the commit the outbox claims what is due and
// hands each delivery back to the channel that queued it, tries it again
// with backoff when it fails, and audits every attempt.
type Channel interface {
	// Name is the channel's name in its deliveries ("webhook", "slack").
	Name() string
	// Describe says what is set up, for the staff page ("2 webhooks").
	Describe() string
	// Hears says whether the channel may say something of notices of a
	// kind (the outbox skips the work of a notice no channel hears).
	Hears(kind EventType) bool
	// Queue queues what the channel says of n, if anything.
	Queue(tx *storage.Tx, n Notice) error
	// Send sends one delivery the channel queued. The ref it returns is
	// kept with the delivery (a message's id, to update it later); an
	// error wrapped by Permanent is not tried again.
	Send(ctx context.Context, d models.Delivery) (ref string, err error)
}

// Inbound is a channel people also answer through (Slack's buttons): a
// route of its own takes their decisions, and carries them out at the
// desk the outbox gives it, with the same checks as the back office.
type Inbound interface {
	Channel
	// Route is the path of the channel's inbound route (under
	// /integrations/) and the handler of its POSTs. The handler checks
	// that a request comes from the channel's service (its signature).
	Route(desk Desk) (path string, h http.Handler)
}

// Linking is an inbound channel whose people are linked to staff accounts
// by their address on it (Slack's user id): a decision from an address
// acts as the account linked to it (Store.StaffByLink), which an admin
// sets on the staff page.
type Linking interface {
	Inbound
	Link() Link
}

// Link is how a channel's address of a person is asked for and checked.
type Link struct {
	// Channel is the channel's name (Channel.Name).
	Channel string
	// Label names the address ("Slack user"), and Example shows one
	// ("U012AB3CD").
	Label, Example string
	// Check normalizes an address someone typed, or says what is wrong
	// with it (as a sentence a person can act on).
	Check func(address string) (string, error)
}

// Worker is a channel with work of its own that runs in the background
// (Slack's clicks, taken by a few workers): the root starts each job.
type Worker interface {
	Channel
	Jobs() []Job
}

// Job is a named piece of background work, run until its context ends.
type Job struct {
	Name string
	Run  func(ctx context.Context)
}

// Personal is a channel that reaches one person at their own address
// (email): enrollment links go through it, to that person alone.
type Personal interface {
	Channel
	QueueEnrollment(tx *storage.Tx, to *models.Staff, link, purpose string, expires time.Time) error
}

// Desk is where a channel's inbound decisions are carried out: the gate,
// as the back office decides (core.New attaches it), and the store.
type Desk interface {
	// Approve and Reject decide an action as actor, with the checks of
	// the back office (role, approvals, passkey, expiry).
	Approve(ctx context.Context, actionID string, actor models.Actor, note string) error
	Reject(ctx context.Context, actionID string, actor models.Actor, reason string) error
	// View is the notice of an action as it stands now; by is who acted
	// last ("" nobody).
	View(ctx context.Context, callID, by string) (Notice, error)
	// Store is the database, to find the account a person is linked as.
	Store() *storage.Store
}

// Permanent marks a failure that trying again cannot mend.
type Permanent struct{ Err error }

func (p Permanent) Error() string { return p.Err.Error() }
func (p Permanent) Unwrap() error { return p.Err }

// CheckURL refuses a flag's value that is not an http(s) URL.
func CheckURL(flag, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s %q: not an http(s) URL", flag, RedactURL(raw))
	}
	return nil
}

// RedactURL is a URL as staff may see it: scheme, host and path, without
// credentials or query.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(a URL that does not parse)"
	}
	return u.Scheme + "://" + u.Host + u.Path
}
