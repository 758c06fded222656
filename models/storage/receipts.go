package storage

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/countersign/countersign/models"
)

// SetFinished makes fn hear, once each unit of work commits, the calls
// that reached a final status in it (nil: nobody). It runs while the
// writer's turn is held, as AfterCommit's hooks do: it must be quick and
// must not write.
func (s *Store) SetFinished(fn func(callIDs []string)) {
	if fn == nil {
		s.finished.Store(nil)
		return
	}
	s.finished.Store(&fn)
}

// Receipt reads a call's signed receipt (models.ErrNotFound: none yet).
func (s *Store) Receipt(ctx context.Context, callID string) (*models.Receipt, error) {
	var r models.Receipt
	err := s.db.WithContext(ctx).Take(&r, "call_id = ?", callID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, models.ErrNotFound
	}
	return &r, err
}

// SaveReceipts stores receipts; a call that has one already keeps it (the
// first written is the receipt).
func (s *Store) SaveReceipts(ctx context.Context, rs []models.Receipt) error {
	if len(rs) == 0 {
		return nil
	}
	return s.Write(ctx, func(tx *Tx) error {
		for i := range rs {
			rs[i].CreatedAt = tx.now
		}
		return tx.db.Clauses(clause.OnConflict{DoNothing: true}).Create(&rs).Error
	})
}

// KeepReceipt stores a call's receipt unless it has one already, and
// returns the one kept (the first written is the receipt), in one unit of
// work: no second read when this one is kept.
func (s *Store) KeepReceipt(ctx context.Context, r models.Receipt) (*models.Receipt, error) {
	var kept *models.Receipt
	err := s.Write(ctx, func(tx *Tx) (err error) {
		kept, err = tx.KeepReceipt(r)
		return err
	})
	if err != nil {
		return nil, err
	}
	return kept, nil
}

// KeepReceipt is Store.KeepReceipt inside the unit of work.
func (tx *Tx) KeepReceipt(r models.Receipt) (*models.Receipt, error) {
	kept := r
	kept.CreatedAt = tx.now
	n, err := tx.exec(`INSERT INTO receipts (call_id, key_id, jws, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (call_id) DO NOTHING`,
		kept.CallID, kept.KeyID, kept.JWS, kept.CreatedAt)
	if err != nil || n == 1 {
		return &kept, err
	}
	kept = models.Receipt{}
	return &kept, tx.db.Take(&kept, "call_id = ?", r.CallID).Error
}

// CallsWithoutReceipt lists up to limit calls in a final status that have
// no receipt, made since a time (zero: any), oldest first.
func (s *Store) CallsWithoutReceipt(ctx context.Context, since time.Time, limit int) ([]string, error) {
	var ids []string
	q := s.db.WithContext(ctx).Table("tool_calls AS c").Select("c.id").
		Joins("LEFT JOIN receipts r ON r.call_id = c.id").
		Where("r.call_id IS NULL AND c.status IN ?", models.CallStatusesWhere(models.CallStatus.Final))
	if !since.IsZero() {
		q = q.Where("c.created_at >= ?", since.UTC())
	}
	err := q.Order("c.created_at, c.id").Limit(limit).Pluck("c.id", &ids).Error
	if err != nil {
		return nil, fmt.Errorf("calls without a receipt: %w", err)
	}
	return ids, nil
}

// NewestReceiptAt is when the newest receipt was kept (zero: none is).
func (s *Store) NewestReceiptAt(ctx context.Context) (time.Time, error) {
	var rs []models.Receipt
	err := s.db.WithContext(ctx).Select("created_at").Order("created_at DESC").Limit(1).Find(&rs).Error
	if err != nil || len(rs) == 0 {
		return time.Time{}, err
	}
	return rs[0].CreatedAt, nil
}

// CallsWithoutReceiptEndedBefore lists up to limit final calls with no
// receipt that ended (or last changed, for a call that records no end)
// before a time, oldest first: their id, FinishedAt and UpdatedAt.
func (s *Store) CallsWithoutReceiptEndedBefore(ctx context.Context, before time.Time, limit int) ([]models.ToolCall, error) {
	var calls []models.ToolCall
	err := s.db.WithContext(ctx).Table("tool_calls AS c").Select("c.id, c.finished_at, c.updated_at").
		Joins("LEFT JOIN receipts r ON r.call_id = c.id").
		Where("r.call_id IS NULL AND c.status IN ?", models.CallStatusesWhere(models.CallStatus.Final)).
		Where("COALESCE(c.finished_at, c.updated_at) < ?", before.UTC()).
		Order("c.created_at, c.id").Limit(limit).Find(&calls).Error
	if err != nil {
		return nil, fmt.Errorf("calls without a receipt: %w", err)
	}
	return calls, nil
}

// ReceiptKeys lists every key that has signed receipts, oldest first.
func (s *Store) ReceiptKeys(ctx context.Context) ([]models.ReceiptKey, error) {
	var keys []models.ReceiptKey
	err := s.db.WithContext(ctx).Order("created_at, id").Find(&keys).Error
	return keys, err
}

// AddReceiptKey stores a key (kept as it is when its id is there).
func (s *Store) AddReceiptKey(ctx context.Context, k models.ReceiptKey) error {
	return s.Write(ctx, func(tx *Tx) error {
		k.CreatedAt = tx.now
		return tx.db.Clauses(clause.OnConflict{DoNothing: true}).Create(&k).Error
	})
}

// AuditEventsBetween reads the events of a chain from seq from to seq to,
// both included, in order.
func (s *Store) AuditEventsBetween(ctx context.Context, chain, from, to int64) ([]models.AuditEvent, error) {
	var out []models.AuditEvent
	err := s.db.WithContext(ctx).Where("chain = ? AND seq >= ? AND seq <= ?", chain, from, to).Order("seq").Find(&out).Error
	return out, err
}

// HaveReceipts says which of these calls have a receipt.
func (s *Store) HaveReceipts(ctx context.Context, callIDs []string) (map[string]bool, error) {
	var ids []string
	err := s.db.WithContext(ctx).Model(&models.Receipt{}).Where("call_id IN ?", callIDs).Pluck("call_id", &ids).Error
	have := make(map[string]bool, len(ids))
	for _, id := range ids {
		have[id] = true
	}
	return have, err
}

// ReceiptRecords reads what the receipts of these calls are made of, a
// batch at a time, and only that (the signer runs beside the gate: few
// columns, no ORM): the calls, their audit events in order (without their
// payloads), and, for the calls a person decided, the verdicts in order.
func (s *Store) ReceiptRecords(ctx context.Context, callIDs []string) (calls []models.ToolCall, events map[string][]models.AuditEvent, approvals map[string][]models.Approval, err error) {
	return receiptRecords(s.db.WithContext(ctx), callIDs)
}

// ReceiptRecord is what Store.ReceiptRecords reads, of one call, inside
// the unit of work: with what it wrote, before it commits (a receipt
// signed with the outcome), on the writer's own prepared statements (it
// takes the writer's turn).
func (tx *Tx) ReceiptRecord(callID string) (*models.ToolCall, []models.AuditEvent, []models.Approval, error) {
	row, err := tx.queryRow(`SELECT `+receiptCallColumns+` FROM tool_calls WHERE id = ?`, callID)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read the call: %w", notFound(err))
	}
	c := &models.ToolCall{}
	texts := []*string{&c.ID, &c.RunID, &c.CustomerID, &c.Tool, &c.ArgsHash, (*string)(&c.Status), &c.Decision, &c.Rule, &c.PolicyVersion}
	for i, dst := range texts {
		*dst, _ = textValue(row[i])
	}
	n := len(texts)
	c.RequiredApprovals = int(intValue(row[n]))
	role, _ := textValue(row[n+1])
	c.RequiredRole = models.StaffRole(role)
	c.Error, _ = textValue(row[n+2])
	c.Result, _ = textValue(row[n+3])
	created, err := timeValue(row[n+4])
	if err != nil || created == nil {
		return nil, nil, nil, fmt.Errorf("read the call: created %v (%v)", row[n+4], err)
	}
	c.CreatedAt = *created
	if c.DecidedAt, err = timeValue(row[n+5]); err != nil {
		return nil, nil, nil, fmt.Errorf("read the call: %w", err)
	}
	if c.FinishedAt, err = timeValue(row[n+6]); err != nil {
		return nil, nil, nil, fmt.Errorf("read the call: %w", err)
	}
	c.ToolHash, _ = textValue(row[n+7])
	var events []models.AuditEvent
	err = tx.w.queryRows(`SELECT seq, at, actor, kind, subject, hash, chain FROM audit_events WHERE subject = ? ORDER BY chain, seq`, []any{callID},
		func(v []driver.Value) error {
			at, err := timeValue(v[1])
			if err != nil || at == nil {
				return fmt.Errorf("event %v: at %v (%v)", v[0], v[1], err)
			}
			e := models.AuditEvent{Chain: intValue(v[6]), Seq: intValue(v[0]), At: *at}
			e.Actor, _ = textValue(v[2])
			kind, _ := textValue(v[3])
			e.Kind = models.EventKind(kind)
			e.Subject, _ = textValue(v[4])
			e.Hash, _ = textValue(v[5])
			events = append(events, e)
			return nil
		})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read its audit events: %w", err)
	}
	var approvals []models.Approval
	if c.Decision == models.DecidedNeedsApproval {
		if approvals, err = tx.Approvals(callID); err != nil {
			return nil, nil, nil, fmt.Errorf("read its verdicts: %w", err)
		}
	}
	return c, events, approvals, nil
}

// receiptCallColumns are the columns of a call a receipt is made of.
const receiptCallColumns = `id, run_id, customer_id, tool, args_hash, status, decision, rule, policy_version, required_approvals,
		required_role, error, result, created_at, decided_at, finished_at, tool_hash`

func receiptRecords(db *gorm.DB, callIDs []string) (calls []models.ToolCall, events map[string][]models.AuditEvent, approvals map[string][]models.Approval, err error) {
	rows, err := db.Raw(`SELECT `+receiptCallColumns+` FROM tool_calls WHERE id IN ?`, callIDs).Rows()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read the calls: %w", err)
	}
	for rows.Next() {
		var c models.ToolCall
		var decided, finished sql.NullTime
		if err = rows.Scan(&c.ID, &c.RunID, &c.CustomerID, &c.Tool, &c.ArgsHash, &c.Status, &c.Decision, &c.Rule, &c.PolicyVersion,
			&c.RequiredApprovals, &c.RequiredRole, &c.Error, &c.Result, &c.CreatedAt, &decided, &finished, &c.ToolHash); err != nil {
			rows.Close()
			return nil, nil, nil, fmt.Errorf("read the calls: %w", err)
		}
		if decided.Valid {
			c.DecidedAt = &decided.Time
		}
		if finished.Valid {
			c.FinishedAt = &finished.Time
		}
		calls = append(calls, c)
	}
	rows.Close()
	if err = rows.Err(); err != nil {
		return nil, nil, nil, fmt.Errorf("read the calls: %w", err)
	}
	rows, err = db.Raw(`SELECT chain, seq, at, actor, kind, subject, hash FROM audit_events WHERE subject IN ? ORDER BY chain, seq`, callIDs).Rows()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read their audit events: %w", err)
	}
	events = make(map[string][]models.AuditEvent, len(callIDs))
	for rows.Next() {
		var e models.AuditEvent
		if err = rows.Scan(&e.Chain, &e.Seq, &e.At, &e.Actor, &e.Kind, &e.Subject, &e.Hash); err != nil {
			rows.Close()
			return nil, nil, nil, fmt.Errorf("read their audit events: %w", err)
		}
		events[e.Subject] = append(events[e.Subject], e)
	}
	rows.Close()
	if err = rows.Err(); err != nil {
		return nil, nil, nil, fmt.Errorf("read their audit events: %w", err)
	}
	var decidedIDs []string
	for _, c := range calls {
		if c.Decision == models.DecidedNeedsApproval {
			decidedIDs = append(decidedIDs, c.ID)
		}
	}
	approvals = map[string][]models.Approval{}
	if len(decidedIDs) > 0 {
		var as []models.Approval
		if err = db.Where("tool_call_id IN ?", decidedIDs).Order("id").Find(&as).Error; err != nil {
			return nil, nil, nil, fmt.Errorf("read their verdicts: %w", err)
		}
		for _, a := range as {
			approvals[a.ToolCallID] = append(approvals[a.ToolCallID], a)
		}
	}
	return calls, events, approvals, nil
}

// ReceiptsOf is the receipts (JWS) of those of these calls that have one.
func (s *Store) ReceiptsOf(ctx context.Context, callIDs []string) (map[string]string, error) {
	out := map[string]string{}
	if len(callIDs) == 0 {
		return out, nil
	}
	var rs []models.Receipt
	if err := s.db.WithContext(ctx).Where("call_id IN ?", callIDs).Find(&rs).Error; err != nil {
		return nil, err
	}
	for _, r := range rs {
		out[r.CallID] = r.JWS
	}
	return out, nil
}

// EachReceipt hands the kept receipts to fn a page at a time, by call id.
func (s *Store) EachReceipt(ctx context.Context, page int, fn func([]models.Receipt) error) error {
	after := ""
	for {
		var rs []models.Receipt
		if err := s.db.WithContext(ctx).Where("call_id > ?", after).Order("call_id").Limit(page).Find(&rs).Error; err != nil {
			return fmt.Errorf("read the receipts: %w", err)
		}
		if len(rs) == 0 {
			return nil
		}
		if err := fn(rs); err != nil {
			return err
		}
		if len(rs) < page {
			return nil
		}
		after = rs[len(rs)-1].CallID
	}
}
