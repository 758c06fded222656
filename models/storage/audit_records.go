package storage

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/models"
)

// EachCallRecord hands every call, and every call id the audit names, to fn
// in id order.
func (s *Store) EachCallRecord(ctx context.Context, fn func(*models.CallRecord) error) error {
	const page = 1000
	calls := pager[models.ToolCall]{size: page, fetch: func(after string) ([]models.ToolCall, error) {
		var rows []models.ToolCall
		err := s.db.WithContext(ctx).Where("id > ?", after).Order("id").Limit(page).Find(&rows).Error
		return rows, err
	}, key: func(c *models.ToolCall) string { return c.ID }}
	events := pager[models.AuditEvent]{size: page, fetch: func(after string) ([]models.AuditEvent, error) {
		var rows []models.AuditEvent
		err := s.db.WithContext(ctx).Where("subject > ? AND subject LIKE 'call\\_%' ESCAPE '\\'", after).
			Order("subject, chain, seq").Limit(page).Find(&rows).Error
		return rows, err
	}, key: func(e *models.AuditEvent) string { return e.Subject }, grouped: true}
	approvals := pager[models.Approval]{size: page, fetch: func(after string) ([]models.Approval, error) {
		var rows []models.Approval
		err := s.db.WithContext(ctx).Where("tool_call_id > ?", after).Order("tool_call_id, id").Limit(page).Find(&rows).Error
		return rows, err
	}, key: func(a *models.Approval) string { return a.ToolCallID }, grouped: true}
	for {
		c, err := calls.peek()
		if err != nil {
			return err
		}
		e, err := events.peek()
		if err != nil {
			return err
		}
		a, err := approvals.peek()
		if err != nil {
			return err
		}
		next := ""
		for _, k := range []*string{c, e, a} {
			if k != nil && (next == "" || *k < next) {
				next = *k
			}
		}
		if next == "" {
			return nil
		}
		rec := &models.CallRecord{ID: next}
		if c != nil && *c == next {
			rec.Call = &calls.take()[0]
		}
		if e != nil && *e == next {
			rec.Events = events.take()
		}
		if a != nil && *a == next {
			rec.Approvals = approvals.take()
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
}

// pager reads a table in key order a page at a time and hands out the rows
// of one key at a time (one row, or every row of the key when grouped).
type pager[T any] struct {
	fetch   func(after string) ([]T, error)
	key     func(*T) string
	size    int
	grouped bool
	buf     []T
	after   string
	done    bool
}

func (p *pager[T]) fill() error {
	if len(p.buf) > 0 || p.done {
		return nil
	}
	rows, err := p.fetch(p.after)
	if err != nil {
		return err
	}
	if len(rows) < p.size {
		p.done = true // the rest of the table: every group in it is whole
	} else if p.grouped {
		// A full page may end inside a group: keep the whole groups, and
		// read the last one again with the next page.
		last := p.key(&rows[len(rows)-1])
		i := len(rows)
		for i > 0 && p.key(&rows[i-1]) == last {
			i--
		}
		if i == 0 {
			return fmt.Errorf("more than %d audit rows about %s", p.size, last)
		}
		rows = rows[:i]
	}
	if len(rows) > 0 {
		p.after = p.key(&rows[len(rows)-1])
	}
	p.buf = rows
	return nil
}

func (p *pager[T]) peek() (*string, error) {
	if err := p.fill(); err != nil {
		return nil, err
	}
	if len(p.buf) == 0 {
		return nil, nil
	}
	k := p.key(&p.buf[0])
	return &k, nil
}

func (p *pager[T]) take() []T {
	k := p.key(&p.buf[0])
	n := 1
	if p.grouped {
		for n < len(p.buf) && p.key(&p.buf[n]) == k {
			n++
		}
	}
	out := p.buf[:n:n]
	p.buf = p.buf[n:]
	return out
}

// AuditEventAt reads the event of a chain with that sequence number.
func (s *Store) AuditEventAt(ctx context.Context, chain, seq int64) (*models.AuditEvent, error) {
	var e models.AuditEvent
	if err := s.db.WithContext(ctx).Take(&e, "chain = ? AND seq = ?", chain, seq).Error; err != nil {
		return nil, notFound(err)
	}
	return &e, nil
}

// AuditHeadsNow reads every chain's head that has events, in chain order:
// its last event's number and hash.
func (s *Store) AuditHeadsNow(ctx context.Context) ([]models.ChainHead, error) {
	var heads []models.AuditHead
	if err := s.db.WithContext(ctx).Where("seq > 0").Order("chain").Find(&heads).Error; err != nil {
		return nil, fmt.Errorf("read audit heads: %w", err)
	}
	out := make([]models.ChainHead, len(heads))
	for i, h := range heads {
		out[i] = models.ChainHead(h)
	}
	return out, nil
}
