package models

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
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

// Outbox turns an audit event into the deliveries that tell the world of
// it, in the event's own transaction (so a change and its deliveries
// commit together, or neither does). It must only add deliveries.
type Outbox func(tx *Tx, ev Event) error

type outboxHolder struct{ fn Outbox }

// SetOutbox makes every audit event from now on pass through fn (nil: none).
func (s *Store) SetOutbox(fn Outbox) {
	if fn == nil {
		s.outbox.Store(nil)
		return
	}
	s.outbox.Store(&outboxHolder{fn: fn})
}

// outboxOf is the store's outbox, if any.
func outboxOf(p *atomic.Pointer[outboxHolder]) Outbox {
	if h := p.Load(); h != nil {
		return h.fn
	}
	return nil
}

// Enqueue stores a delivery, due now, in this unit of work.
func (tx *Tx) Enqueue(d *Delivery) error {
	d.ID, d.Status, d.Attempts, d.NextAt, d.CreatedAt = 0, DeliveryQueued, 0, tx.now, tx.now
	if err := tx.db.Create(d).Error; err != nil {
		return fmt.Errorf("queue a delivery: %w", err)
	}
	return nil
}

// ClaimDeliveries takes up to limit deliveries that are due, for this
// instance, for the time given: another instance leaves them alone until
// then. A delivery waits while an earlier one of the same subject to the
// same target is still queued, so a receiver hears of an action in order.
func (s *Store) ClaimDeliveries(ctx context.Context, limit int, hold time.Duration) ([]Delivery, error) {
	var out []Delivery
	err := s.Write(ctx, func(tx *Tx) error {
		out = out[:0]
		var due []Delivery
		if err := tx.db.Raw(`SELECT * FROM deliveries d WHERE d.status = ? AND d.next_at <= ?
			AND (d.claimed_until IS NULL OR d.claimed_until < ?)
			AND NOT EXISTS (SELECT 1 FROM deliveries e WHERE e.status = ? AND e.subject = d.subject
				AND e.channel = d.channel AND e.target = d.target AND e.id < d.id)
			ORDER BY d.next_at, d.id LIMIT ?`,
			DeliveryQueued, tx.now, tx.now, DeliveryQueued, limit).Scan(&due).Error; err != nil {
			return fmt.Errorf("find due deliveries: %w", err)
		}
		until := tx.now.Add(hold)
		for _, d := range due {
			n, err := tx.exec(`UPDATE deliveries SET claimed_by = ?, claimed_until = ? WHERE id = ? AND status = ?
				AND (claimed_until IS NULL OR claimed_until < ?)`, tx.self, until, d.ID, DeliveryQueued, tx.now)
			if err != nil {
				return fmt.Errorf("claim delivery %d: %w", d.ID, err)
			}
			if n == 1 {
				d.ClaimedBy, d.ClaimedUntil = tx.self, &until
				out = append(out, d)
			}
		}
		return nil
	})
	return out, err
}

// Attempt is how one try at a delivery went.
type Attempt struct {
	OK    bool
	Error string     // why it failed, safe to show staff
	Ref   string     // what later deliveries need (kept when empty)
	Retry *time.Time // when to try again; nil after a failure: give up
}

// FinishAttempt records how an attempt at a claimed delivery went, with its
// audit event.
func (s *Store) FinishAttempt(ctx context.Context, d Delivery, a Attempt) error {
	return s.Write(ctx, func(tx *Tx) error {
		set := map[string]any{"attempts": gorm.Expr("attempts + 1"), "claimed_by": "", "claimed_until": nil, "last_error": a.Error}
		kind := "delivery.delivered"
		switch {
		case a.OK:
			set["status"], set["delivered_at"] = DeliveryDelivered, tx.now
		case a.Retry != nil:
			set["next_at"], kind = *a.Retry, "delivery.retrying"
		default:
			set["status"], kind = DeliveryFailed, "delivery.failed"
		}
		if a.Ref != "" {
			set["ref"] = a.Ref
		}
		res := tx.db.Model(&Delivery{}).Where("id = ? AND status = ?", d.ID, DeliveryQueued).Updates(set)
		if res.Error != nil {
			return fmt.Errorf("record delivery %d: %w", d.ID, res.Error)
		}
		if res.RowsAffected != 1 {
			return nil // already finished elsewhere
		}
		payload := map[string]any{"channel": d.Channel, "target": d.Target, "event": d.Event, "about": d.Subject,
			"attempt": d.Attempts + 1}
		if a.Error != "" {
			payload["error"] = a.Error
		}
		return tx.Audit(Event{Actor: SystemActor.String(), Kind: kind, Subject: strconv.FormatInt(d.ID, 10), Payload: payload})
	})
}

// PruneDeliveries deletes up to limit deliveries that ended (delivered,
// or given up) and were made before the time, oldest first, and says how
// many it deleted. Their attempts stay in the audit log; deliveries still
// queued are never deleted.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time, limit int) (int64, error) {
	var n int64
	err := s.Write(ctx, func(tx *Tx) error {
		res := tx.db.Exec(`DELETE FROM deliveries WHERE id IN (SELECT id FROM deliveries
			WHERE status IN (?, ?) AND created_at < ? ORDER BY id LIMIT ?)`, DeliveryDelivered, DeliveryFailed, before.UTC(), limit)
		n = res.RowsAffected
		return res.Error
	})
	return n, err
}

// Deliveries lists the latest deliveries, newest first.
func (s *Store) Deliveries(ctx context.Context, limit int) ([]Delivery, error) {
	var out []Delivery
	err := s.db.WithContext(ctx).Order("id DESC").Limit(limit).Find(&out).Error
	return out, err
}

// DeliveriesAbout lists the deliveries of one subject, oldest first.
func (s *Store) DeliveriesAbout(ctx context.Context, subject string) ([]Delivery, error) {
	var out []Delivery
	err := s.db.WithContext(ctx).Where("subject = ?", subject).Order("id").Find(&out).Error
	return out, err
}

// DeliveryRef is the ref the first delivered delivery of an event about a
// subject on a channel left ("" when there is none).
func (s *Store) DeliveryRef(ctx context.Context, channel, event, subject string) (string, error) {
	var d Delivery
	err := s.db.WithContext(ctx).Where("channel = ? AND event = ? AND subject = ? AND ref <> ''", channel, event, subject).
		Order("id").Take(&d).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", nil
	}
	return d.Ref, err
}

// CallNotice reads a call as the outbox tells of it, without locking: the
// call, its customer's name (or id) and how many approvals it has.
func (tx *Tx) CallNotice(id string) (*ToolCall, string, int, error) { return callNotice(tx.db, id) }

// CallNotice is Tx.CallNotice outside a unit of work.
func (s *Store) CallNotice(ctx context.Context, id string) (*ToolCall, string, int, error) {
	return callNotice(s.db.WithContext(ctx), id)
}

func callNotice(db *gorm.DB, id string) (*ToolCall, string, int, error) {
	var c ToolCall
	if err := db.Take(&c, "id = ?", id).Error; err != nil {
		return nil, "", 0, notFound(err)
	}
	var run Run
	if err := db.Select("customer_id", "customer_name").Take(&run, "id = ?", c.RunID).Error; err != nil {
		return nil, "", 0, notFound(err)
	}
	customer := run.CustomerName
	if customer == "" {
		customer = run.CustomerID
	}
	var n int64
	if err := db.Model(&Approval{}).Where("tool_call_id = ? AND verdict = ? AND args_hash = ?", id, "approve", c.ArgsHash).Count(&n).Error; err != nil {
		return nil, "", 0, err
	}
	return &c, customer, int(n), nil
}

// RunNotice reads a run as the outbox tells of it, without locking.
func (tx *Tx) RunNotice(id string) (*Run, error) {
	var r Run
	if err := tx.db.Take(&r, "id = ?", id).Error; err != nil {
		return nil, notFound(err)
	}
	return &r, nil
}
