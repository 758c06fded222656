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
	// no is the chain this transaction appends to: the store's own, or
	// the one of the calls its units act on (chains.go).
	no     int64
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

// Audit appends an event to the chain inside this unit of work. An event
// about a call goes to the call's chain: when that is not the chain this
// transaction holds, the unit is run again in one that holds it.
func (tx *Tx) Audit(ev models.Event) error {
	if ev.Kind.AboutCall() {
		if err := tx.onCallsChain(ev.Subject); err != nil {
			return err
		}
	}
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
		Chain:    tx.chain.no,
		Seq:      tx.chain.seq + 1,
		At:       tx.now,
		Actor:    ev.Actor,
		Kind:     ev.Kind,
		Subject:  ev.Subject,
		Payload:  string(payload),
		PrevHash: tx.chain.hash,
	}
	rec.Hash = models.EventHash(rec)
	if err := tx.send("append audit event", `INSERT INTO audit_events (chain, seq, at, actor, kind, subject, payload, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		rec.Chain, rec.Seq, rec.At, rec.Actor, rec.Kind, rec.Subject, rec.Payload, rec.PrevHash, rec.Hash); err != nil {
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
	// The head is written with the events (saveChainHead), so it is where
	// the chain ends.
	query := `SELECT seq, hash FROM audit_heads WHERE chain = ?`
	if tx.d.pg {
		// The chain's head row is locked until this transaction ends, so
		// the next one to append to the chain, here or on an instance that
		// acts on one of its calls, links to what this one appended.
		query += ` FOR UPDATE`
	}
	var row []driver.Value
	var err error
	if tx.d.pg {
		// With BEGIN, in one round trip (writer_pipeline.go).
		var seq int64
		var hash string
		if _, err = tx.w.pgBatch(&queued{query: query, wrap: "read audit chain", args: []any{tx.chain.no}}, &seq, &hash); err == nil {
			row = []driver.Value{seq, hash}
		}
	} else {
		row, err = tx.queryRow(query, tx.chain.no)
	}
	no := tx.chain.no
	switch {
	case err == nil:
		seq, ok1 := row[0].(int64)
		hash, ok2 := textValue(row[1])
		if !ok1 || !ok2 {
			return fmt.Errorf("read audit chain: unexpected head %v", row)
		}
		tx.chain = chainState{no: no, loaded: true, seq: seq, hash: hash}
	case errors.Is(err, sql.ErrNoRows):
		tx.chain = chainState{no: no, loaded: true}
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
	if err := tx.send("save audit head", `INSERT INTO audit_heads (chain, seq, hash) VALUES (?, ?, ?)
		ON CONFLICT (chain) DO UPDATE SET seq = excluded.seq, hash = excluded.hash`, tx.chain.no, tx.chain.seq, tx.chain.hash); err != nil {
		return err
	}
	tx.chain.dirty = false
	return nil
}

// EachAuditEvent hands every audit event to fn, chain by chain, each in
// sequence order, reading a page at a time; fn's error stops the walk and
// is returned.
func (s *Store) EachAuditEvent(ctx context.Context, fn func(*models.AuditEvent) error) error {
	chains, err := s.auditChains(ctx)
	if err != nil {
		return err
	}
	for _, c := range chains {
		if err := s.eachAuditEventAfter(ctx, c, 0, fn); err != nil {
			return err
		}
	}
	return nil
}

// eachAuditEventAfter is EachAuditEvent for one chain, from the event
// after seq from.
func (s *Store) eachAuditEventAfter(ctx context.Context, chain, from int64, fn func(*models.AuditEvent) error) error {
	const page = 2000
	for {
		var rows []models.AuditEvent
		if err := s.db.WithContext(ctx).Where("chain = ? AND seq > ?", chain, from).Order("seq").Limit(page).Find(&rows).Error; err != nil {
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

// auditChains are the chains that have a head or an event, in order.
func (s *Store) auditChains(ctx context.Context) ([]int64, error) {
	var chains []int64
	err := s.db.WithContext(ctx).Raw(`SELECT chain FROM audit_heads UNION SELECT DISTINCT chain FROM audit_events ORDER BY 1`).Scan(&chains).Error
	if err != nil {
		return nil, fmt.Errorf("read audit chains: %w", err)
	}
	return chains, nil
}

// VerifyAuditChain walks every chain in order and reports every link that
// was changed, removed or reordered (the walk goes on past a break, so a
// second one does not hide behind the first), and the head each chain
// ended at (Heads). The server may be appending while it walks: a chain's
// head is written in the same transaction as its events, so once the walk
// has reached the head it read, everything up to there was committed;
// events appended after the head was read are walked too, and the head
// read again.
func (s *Store) VerifyAuditChain(ctx context.Context) (models.ChainReport, error) {
	var rep models.ChainReport
	chains, err := s.auditChains(ctx)
	if err != nil {
		return rep, err
	}
	for _, c := range chains {
		if err := s.verifyChain(ctx, c, &rep); err != nil {
			return rep, err
		}
	}
	rep.OK = rep.Problem == ""
	return rep, nil
}

// verifyChain is VerifyAuditChain for one chain.
func (s *Store) verifyChain(ctx context.Context, chain int64, rep *models.ChainReport) error {
	prevHash := ""
	expected := int64(1)
	last := int64(0)
	name := func(seq int64) string { return models.EventName(chain, seq) }
	check := func(e *models.AuditEvent) error {
		if e.Seq != expected {
			rep.Broken(chain, expected, fmt.Sprintf("%s is missing (next present is %d)", name(expected), e.Seq))
		} else if e.PrevHash != prevHash {
			rep.Broken(chain, e.Seq, fmt.Sprintf("%s does not link to the event before it", name(e.Seq)))
		}
		if models.EventHash(*e) != e.Hash {
			rep.Broken(chain, e.Seq, fmt.Sprintf("%s was altered (its hash does not match its content)", name(e.Seq)))
		}
		rep.Events++
		prevHash, expected, last = e.Hash, e.Seq+1, e.Seq
		return nil
	}
	for round := 0; ; round++ {
		if err := s.eachAuditEventAfter(ctx, chain, last, check); err != nil {
			return err
		}
		var head models.AuditHead
		err := s.db.WithContext(ctx).Take(&head, "chain = ?", chain).Error
		switch {
		case errors.Is(notFound(err), models.ErrNotFound):
			if last > 0 {
				rep.Broken(chain, 1, models.OnChain(chain, "the chain head record is missing"))
			}
			return nil
		case err != nil:
			return fmt.Errorf("read audit head: %w", err)
		}
		if head.Seq > last && round < 10 {
			continue // appended since the walk passed: walk on
		}
		if head.Seq != last || head.Hash != prevHash {
			bad := last + 1
			if head.Seq < last {
				bad = head.Seq + 1
			}
			rep.Broken(chain, bad, models.OnChain(chain, fmt.Sprintf("the chain ends at event %d but its head says %d", last, head.Seq)))
		}
		if chain == 0 {
			rep.HeadSeq = head.Seq
		}
		if last > 0 {
			rep.Heads = append(rep.Heads, models.ChainHead{Chain: chain, Seq: last, Hash: prevHash})
		}
		return nil
	}
}
