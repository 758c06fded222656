package storage

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/models"
	"gorm.io/gorm"
)

// Outbox turns an audit event into the deliveries that tell the world of
// it, in the event's own transaction (so a change and its deliveries
// commit together, or neither does). It must only add deliveries.
type Outbox func(tx *Tx, ev models.Event) error

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
func (tx *Tx) Enqueue(d *models.Delivery) error {
	d.ID, d.Status, d.Attempts, d.NextAt, d.CreatedAt = 0, models.DeliveryQueued, 0, tx.now, tx.now
	// On the writer's prepared fast path: with a webhook, every finished
	// call queues one.
	_, err := tx.exec(`INSERT INTO deliveries (channel, target, event, subject, body, status, attempts, next_at, claimed_by, last_error, ref, created_at)
		VALUES (?, ?, ?, ?, ?, ?, 0, ?, '', '', '', ?)`, d.Channel, d.Target, d.Event, d.Subject, d.Body, string(d.Status), d.NextAt, d.CreatedAt)
	if err != nil {
		return fmt.Errorf("queue a delivery: %w", err)
	}
	return nil
}

// ClaimDeliveries takes up to limit deliveries that are due, for this
// instance, for the time given: another instance leaves them alone until
// then. A delivery waits while an earlier one of the same subject to the
// same target is still queued, so a receiver hears of an action in order.
func (s *Store) ClaimDeliveries(ctx context.Context, limit int, hold time.Duration) ([]models.Delivery, error) {
	var out []models.Delivery
	err := s.Write(ctx, func(tx *Tx) error {
		out = out[:0]
		var due []models.Delivery
		if err := tx.db.Raw(`SELECT * FROM deliveries d WHERE d.status = ? AND d.next_at <= ?
			AND (d.claimed_until IS NULL OR d.claimed_until < ?)
			AND NOT EXISTS (SELECT 1 FROM deliveries e WHERE e.status = ? AND e.subject = d.subject
				AND e.channel = d.channel AND e.target = d.target AND e.id < d.id)
			ORDER BY d.next_at, d.id LIMIT ?`,
			models.DeliveryQueued, tx.now, tx.now, models.DeliveryQueued, limit).Scan(&due).Error; err != nil {
			return fmt.Errorf("find due deliveries: %w", err)
		}
		until := tx.now.Add(hold)
		for _, d := range due {
			n, err := tx.exec(`UPDATE deliveries SET claimed_by = ?, claimed_until = ? WHERE id = ? AND status = ?
				AND (claimed_until IS NULL OR claimed_until < ?)`, tx.self, until, d.ID, models.DeliveryQueued, tx.now)
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

// FinishAttempt records how an attempt at a claimed delivery went, with its
// audit event.
func (s *Store) FinishAttempt(ctx context.Context, d models.Delivery, a models.Attempt) error {
	return s.Write(ctx, func(tx *Tx) error {
		set := map[string]any{"attempts": gorm.Expr("attempts + 1"), "claimed_by": "", "claimed_until": nil, "last_error": a.Error}
		kind := models.EventDeliveryDelivered
		switch {
		case a.OK:
			set["status"], set["delivered_at"] = models.DeliveryDelivered, tx.now
		case a.Retry != nil:
			set["next_at"], kind = *a.Retry, models.EventDeliveryRetrying
		default:
			set["status"], kind = models.DeliveryFailed, models.EventDeliveryFailed
		}
		if a.Ref != "" {
			set["ref"] = a.Ref
		}
		if d.Event == models.DeliveryEnrollment && a.Retry == nil {
			set["body"] = models.ErasedBody // a backup or a copy of the database holds no live link
		}
		res := tx.db.Model(&models.Delivery{}).Where("id = ? AND status = ?", d.ID, models.DeliveryQueued).Updates(set)
		if res.Error != nil {
			return fmt.Errorf("record delivery %d: %w", d.ID, res.Error)
		}
		if res.RowsAffected != 1 {
			return nil // already finished elsewhere
		}
		payload := models.DeliveryPayload{Channel: d.Channel, Target: d.Target, Event: d.Event, About: d.Subject,
			Attempt: d.Attempts + 1, Error: a.Error}
		return tx.Audit(models.Event{Actor: models.SystemActor.String(), Kind: kind, Subject: strconv.FormatInt(d.ID, 10), Payload: payload})
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
			WHERE status IN (?, ?) AND created_at < ? ORDER BY id LIMIT ?)`, models.DeliveryDelivered, models.DeliveryFailed, before.UTC(), limit)
		n = res.RowsAffected
		return res.Error
	})
	return n, err
}

// Deliveries lists the latest deliveries, newest first.
func (s *Store) Deliveries(ctx context.Context, limit int) ([]models.Delivery, error) {
	var out []models.Delivery
	err := s.db.WithContext(ctx).Order("id DESC").Limit(limit).Find(&out).Error
	return out, err
}

// DeliveriesAbout lists the deliveries of one subject, oldest first.
func (s *Store) DeliveriesAbout(ctx context.Context, subject string) ([]models.Delivery, error) {
	var out []models.Delivery
	err := s.db.WithContext(ctx).Where("subject = ?", subject).Order("id").Find(&out).Error
	return out, err
}

// DeliveryRef is the ref the first delivered delivery of an event about a
// subject on a channel left ("" when there is none).
func (s *Store) DeliveryRef(ctx context.Context, channel, event, subject string) (string, error) {
	var d models.Delivery
	err := s.db.WithContext(ctx).Where("channel = ? AND event = ? AND subject = ? AND ref <> ''", channel, event, subject).
		Order("id").Take(&d).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", nil
	}
	return d.Ref, err
}

// CallNotice reads a call as the outbox tells of it, without locking: the
// call, its customer's name (or id) and how many approvals of its current
// arguments it has. It reads only the columns the outbox tells of, on the
// writer's prepared fast path (with a webhook, every finished call is
// told); the other fields of the call are zero.
func (tx *Tx) CallNotice(id string) (*models.ToolCall, string, int, error) {
	row, err := tx.queryRow(callNoticeQuery, id)
	if err != nil {
		return nil, "", 0, notFound(err)
	}
	c, customer, err := scanCallNotice(row)
	if err != nil || c.Decision != models.DecidedNeedsApproval {
		return c, customer, 0, err // nobody approves a call the policy decided
	}
	row, err = tx.queryRow(`SELECT count(*) FROM approvals WHERE tool_call_id = ? AND verdict = 'approve' AND args_hash = ?`, id, c.ArgsHash)
	if err != nil {
		return nil, "", 0, err
	}
	n, _ := row[0].(int64)
	return c, customer, int(n), nil
}

// CallNotice is Tx.CallNotice outside a unit of work.
func (s *Store) CallNotice(ctx context.Context, id string) (*models.ToolCall, string, int, error) {
	var c *models.ToolCall
	var customer string
	var n int
	err := s.Write(ctx, func(tx *Tx) error {
		var err error
		c, customer, n, err = tx.CallNotice(id)
		return err
	})
	return c, customer, n, err
}

const callNoticeQuery = `SELECT c.id, c.run_id, c.customer_id, c.tool, c.args, c.args_hash, c.status, c.decision, c.rule, c.reason,
	c.required_approvals, c.required_role, c.error, c.expires_at, c.overdue_at, c.created_at, r.customer_id, r.customer_name
	FROM tool_calls c LEFT JOIN runs r ON r.id = c.run_id WHERE c.id = ?`

func scanCallNotice(row []driver.Value) (*models.ToolCall, string, error) {
	var c models.ToolCall
	texts := []*string{&c.ID, &c.RunID, &c.CustomerID, &c.Tool, &c.Args, &c.ArgsHash, nil, &c.Decision, &c.Rule, &c.Reason}
	for i, p := range texts {
		v, _ := textValue(row[i])
		if p != nil {
			*p = v
		} else {
			c.Status = models.CallStatus(v)
		}
	}
	c.RequiredApprovals = int(intValue(row[10]))
	role, _ := textValue(row[11])
	c.RequiredRole = models.StaffRole(role)
	c.Error, _ = textValue(row[12])
	var err error
	if c.ExpiresAt, err = timeValue(row[13]); err != nil {
		return nil, "", err
	}
	if c.OverdueAt, err = timeValue(row[14]); err != nil {
		return nil, "", err
	}
	created, err := timeValue(row[15])
	if err != nil {
		return nil, "", err
	}
	if created != nil {
		c.CreatedAt = *created
	}
	customerID, _ := textValue(row[16])
	customer, _ := textValue(row[17])
	if customer == "" {
		customer = customerID
	}
	return &c, customer, nil
}

// intValue reads an INTEGER column from the driver (NULL is 0).
func intValue(v driver.Value) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int32:
		return int64(x)
	case float64:
		return int64(x)
	}
	return 0
}

// timeValue reads a time column from the driver: a time, NULL (nil), or
// text as SQLite may keep it.
func timeValue(v driver.Value) (*time.Time, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case time.Time:
		return &x, nil
	}
	s, ok := textValue(v)
	if !ok {
		return nil, fmt.Errorf("not a time: %T", v)
	}
	for _, layout := range []string{"2006-01-02 15:04:05.999999999-07:00", time.RFC3339Nano, "2006-01-02 15:04:05.999999999", "2006-01-02 15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return &t, nil
		}
	}
	return nil, fmt.Errorf("not a time: %q", s)
}

// CallDecision is the decision recorded for a call ("needs_approval" for
// an action), read on the writer's prepared fast path: the outbox asks it
// of every finished call.
func (tx *Tx) CallDecision(id string) (string, error) {
	row, err := tx.queryRow(`SELECT decision FROM tool_calls WHERE id = ?`, id)
	if err != nil {
		return "", notFound(err)
	}
	d, _ := textValue(row[0])
	return d, nil
}

// RunNotice reads a run as the outbox tells of it, without locking.
func (tx *Tx) RunNotice(id string) (*models.Run, error) {
	var r models.Run
	if err := tx.db.Take(&r, "id = ?", id).Error; err != nil {
		return nil, notFound(err)
	}
	return &r, nil
}
