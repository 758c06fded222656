package storage

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/countersign/countersign/models"
)

type chainState struct {
	loaded bool
	dirty  bool
	seq    int64
	hash   string
	// last is the event this unit of work appended last (its payload
	// left out), undone with the chain by a unit's savepoint.
	last models.AuditEvent
}

// LastEvent is the event this unit of work appended last, as stored but
// for its payload (zero: none).
func (tx *Tx) LastEvent() models.AuditEvent { return tx.chain.last }

// Audit appends an event to the chain inside this unit of work.
func (tx *Tx) Audit(ev models.Event) error {
	if !tx.chain.loaded {
		if err := tx.loadChain(); err != nil {
			return err
		}
	}
	payload, err := models.EncodePayload(ev.Payload)
	if err != nil {
		return fmt.Errorf("audit payload: %w", err)
	}
	rec := models.AuditEvent{
		Seq:      tx.chain.seq + 1,
		At:       tx.now,
		Actor:    ev.Actor,
		Kind:     ev.Kind,
		Subject:  ev.Subject,
		Payload:  string(payload),
		PrevHash: tx.chain.hash,
	}
	rec.Hash = models.EventHash(rec)
	if err := tx.send("append audit event", `INSERT INTO audit_events (seq, at, actor, kind, subject, payload, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		rec.Seq, rec.At, rec.Actor, rec.Kind, rec.Subject, rec.Payload, rec.PrevHash, rec.Hash); err != nil {
		return err
	}
	tx.chain.seq, tx.chain.hash, tx.chain.dirty = rec.Seq, rec.Hash, true
	tx.chain.last = rec
	tx.chain.last.Payload = ""
	if out := outboxOf(&tx.w.store.outbox); out != nil {
		return out(tx, ev)
	}
	return nil
}

func (tx *Tx) loadChain() error {
	query := `SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1`
	if tx.d.pg {
		// Every instance appends to one chain: the head row is locked until
		// this unit commits, so the next unit, here or elsewhere, links to
		// what this one appended.
		query = `SELECT seq, hash FROM audit_heads WHERE id = 1 FOR UPDATE`
	}
	var row []driver.Value
	var err error
	if tx.d.pg {
		// With BEGIN, in one round trip (writer_pipeline.go).
		var seq int64
		var hash string
		if _, err = tx.w.pgBatch(&queued{query: query, wrap: "read audit chain"}, &seq, &hash); err == nil {
			row = []driver.Value{seq, hash}
		}
	} else {
		row, err = tx.queryRow(query)
	}
	switch {
	case err == nil:
		seq, ok1 := row[0].(int64)
		hash, ok2 := textValue(row[1])
		if !ok1 || !ok2 {
			return fmt.Errorf("read audit chain: unexpected head %v", row)
		}
		tx.chain = chainState{loaded: true, seq: seq, hash: hash}
	case errors.Is(err, sql.ErrNoRows):
		tx.chain = chainState{loaded: true}
	default:
		return fmt.Errorf("read audit chain: %w", err)
	}
	return nil
}

// textValue reads a TEXT column from the driver.
func textValue(v driver.Value) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case []byte:
		return string(x), true
	}
	return "", false
}

func (tx *Tx) saveChainHead() error {
	if !tx.chain.dirty {
		return nil
	}
	if err := tx.send("save audit head", `INSERT INTO audit_heads (id, seq, hash) VALUES (1, ?, ?)
		ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash`, tx.chain.seq, tx.chain.hash); err != nil {
		return err
	}
	tx.chain.dirty = false
	return nil
}

// EachAuditEvent hands every audit event to fn in sequence order, reading a
// page at a time; fn's error stops the walk and is returned.
func (s *Store) EachAuditEvent(ctx context.Context, fn func(*models.AuditEvent) error) error {
	return s.eachAuditEventAfter(ctx, 0, fn)
}

// eachAuditEventAfter is EachAuditEvent from the event after seq from.
func (s *Store) eachAuditEventAfter(ctx context.Context, from int64, fn func(*models.AuditEvent) error) error {
	const page = 2000
	for {
		var rows []models.AuditEvent
		if err := s.db.WithContext(ctx).Where("seq > ?", from).Order("seq").Limit(page).Find(&rows).Error; err != nil {
			return fmt.Errorf("read audit events: %w", err)
		}
		for i := range rows {
			if err := fn(&rows[i]); err != nil {
				return err
			}
			from = rows[i].Seq
		}
		if len(rows) < page {
			return nil
		}
	}
}

// VerifyAuditChain walks the whole chain in order and reports every link
// that was changed, removed or reordered (the walk goes on past a break, so
// a second one does not hide behind the first). The server may be appending
// while it walks: the head is written in the same transaction as its events,
// so once the walk has reached the head it read, everything up to there was
// committed; events appended after the head was read are walked too, and the
// head read again.
func (s *Store) VerifyAuditChain(ctx context.Context) (models.ChainReport, error) {
	var rep models.ChainReport
	prevHash := ""
	expected := int64(1)
	last := int64(0)
	check := func(e *models.AuditEvent) error {
		if e.Seq != expected {
			rep.Broken(expected, fmt.Sprintf("event %d is missing (next present is %d)", expected, e.Seq))
		} else if e.PrevHash != prevHash {
			rep.Broken(e.Seq, fmt.Sprintf("event %d does not link to the event before it", e.Seq))
		}
		if models.EventHash(*e) != e.Hash {
			rep.Broken(e.Seq, fmt.Sprintf("event %d was altered (its hash does not match its content)", e.Seq))
		}
		rep.Events++
		prevHash, expected, last = e.Hash, e.Seq+1, e.Seq
		return nil
	}
	for round := 0; ; round++ {
		if err := s.eachAuditEventAfter(ctx, last, check); err != nil {
			return rep, err
		}
		var head models.AuditHead
		err := s.db.WithContext(ctx).Take(&head, 1).Error
		switch {
		case errors.Is(notFound(err), models.ErrNotFound):
			if rep.Events > 0 {
				rep.Broken(1, "the chain head record is missing")
			}
			rep.OK = rep.Problem == ""
			return rep, nil
		case err != nil:
			return rep, fmt.Errorf("read audit head: %w", err)
		}
		rep.HeadSeq = head.Seq
		if head.Seq > last && round < 10 {
			continue // appended since the walk passed: walk on
		}
		if head.Seq != last || head.Hash != prevHash {
			bad := last + 1
			if head.Seq < last {
				bad = head.Seq + 1
			}
			rep.Broken(bad, fmt.Sprintf("the chain ends at event %d but its head says %d", last, head.Seq))
		}
		rep.OK = rep.Problem == ""
		return rep, nil
	}
}
