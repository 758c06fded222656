package models

import (
	"time"
)

// Delivery is one message to the world outside (a webhook, a Slack message,
// an email), stored in the transaction of the change it tells of and sent
// after it commits by a dispatcher (agent/outbox). A delivery that fails is
// tried again later, also after a restart; each attempt is audited.
type Delivery struct {
	ID      int64  `gorm:"primaryKey;autoIncrement"`
	Channel string `gorm:"size:16"`  // webhook | slack | email
	Target  string `gorm:"size:300"` // where, without secrets: a URL's scheme, host and path, "slack", an address
	Event   string `gorm:"size:40"`  // action.pending, action.decided, …
	// Subject is the action, call or run the delivery tells of; deliveries
	// of one subject to one target go out in the order they were made.
	Subject      string         `gorm:"size:40;index"`
	Body         string         `gorm:"type:text"`
	Status       DeliveryStatus `gorm:"size:16;index:idx_deliveries_due,priority:1"`
	Attempts     int
	NextAt       time.Time `gorm:"index:idx_deliveries_due,priority:2"`
	ClaimedBy    string    `gorm:"size:40;default:''"`
	ClaimedUntil *time.Time
	LastError    string `gorm:"type:text"`
	// Ref is what the receiver answered that later deliveries need: a
	// Slack message's channel and timestamp, to update it.
	Ref         string    `gorm:"size:200;default:''"`
	CreatedAt   time.Time `gorm:"index"`
	DeliveredAt *time.Time
}

// DeliveryStatus is where a delivery is.
type DeliveryStatus string

// Delivery statuses.
const (
	DeliveryQueued    DeliveryStatus = "queued"    // waiting for its next attempt
	DeliveryDelivered DeliveryStatus = "delivered" // the receiver took it
	DeliveryFailed    DeliveryStatus = "failed"    // given up after the last attempt
)

// DeliveryEnrollment is the event of the email that brings a person their
// enrollment link: a credential until it is spent, so its body is erased
// (ErasedBody) as soon as the delivery ends, sent or given up.
const DeliveryEnrollment = "staff.enroll"

// ErasedBody is what an ended delivery that held a credential keeps.
const ErasedBody = `{"erased":"it held a one-time link, erased when the delivery ended"}`

// Attempt is how one try at a delivery went.
type Attempt struct {
	OK    bool
	Error string     // why it failed, safe to show staff
	Ref   string     // what later deliveries need (kept when empty)
	Retry *time.Time // when to try again; nil after a failure: give up
}
