package models

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Event is what a state change tells the audit log.
type Event struct {
	Actor   string       // "staff:ID (Name)", "model", "system", "customer:ID"
	Kind    EventKind    // one of EventKinds
	Subject string       // the id of the record the event is about
	Payload EventPayload // one of the payload types (event_payloads.go), encoded as is
}

type chainState struct {
	loaded bool
	dirty  bool
	seq    int64
	hash   string
}

// Audit appends an event to the chain inside this unit of work.
func (tx *Tx) Audit(ev Event) error {
	if !tx.chain.loaded {
		if err := tx.loadChain(); err != nil {
			return err
		}
	}
	payload, err := encodePayload(ev.Payload)
	if err != nil {
		return fmt.Errorf("audit payload: %w", err)
	}
	rec := AuditEvent{
		Seq:      tx.chain.seq + 1,
		At:       tx.now,
		Actor:    ev.Actor,
		Kind:     ev.Kind,
		Subject:  ev.Subject,
		Payload:  string(payload),
		PrevHash: tx.chain.hash,
	}
	rec.Hash = eventHash(rec)
	if _, err := tx.exec(`INSERT INTO audit_events (seq, at, actor, kind, subject, payload, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		rec.Seq, rec.At, rec.Actor, rec.Kind, rec.Subject, rec.Payload, rec.PrevHash, rec.Hash); err != nil {
		return fmt.Errorf("append audit event: %w", err)
	}
	tx.chain.seq, tx.chain.hash, tx.chain.dirty = rec.Seq, rec.Hash, true
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
	row, err := tx.queryRow(query)
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
	if _, err := tx.exec(`INSERT INTO audit_heads (id, seq, hash) VALUES (1, ?, ?)
		ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash`, tx.chain.seq, tx.chain.hash); err != nil {
		return fmt.Errorf("save audit head: %w", err)
	}
	tx.chain.dirty = false
	return nil
}

// eventHash is SHA-256 over the previous link's hash and the canonical form
// of the event, so that changing, removing or reordering any row breaks
// every link after it.
func eventHash(e AuditEvent) string {
	// Built in a buffer on the stack for the usual event; the writer
	// computes one of these for every state change.
	var stack [1024]byte
	b := append(stack[:0], e.PrevHash...)
	b = append(b, '\n')
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, `,"at":"`...)
	b = e.At.UTC().AppendFormat(b, time.RFC3339Nano) // only digits, letters and punctuation: no escaping
	b = append(b, `","actor":`...)
	b = appendJSONString(b, e.Actor)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, string(e.Kind))
	b = append(b, `,"subject":`...)
	b = appendJSONString(b, e.Subject)
	b = append(b, `,"payload":`...)
	b = append(b, e.Payload...)
	b = append(b, '}')
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// appendJSONString appends s as encoding/json writes it (HTML characters
// escaped). Plain printable ASCII, the usual case, is copied as is; anything
// else goes through encoding/json so the bytes are exactly the same.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			enc, _ := json.Marshal(s)
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// encodePayload encodes an event payload: maps come out with sorted keys,
// and nothing is HTML-escaped, so the stored text reads as written. The hash
// covers the stored text, so this only needs to be deterministic.
func encodePayload(v EventPayload) (string, error) {
	switch p := v.(type) {
	case nil:
		return "{}", nil
	case Payload:
		return string(p), nil
	}
	return encodeJSON(v)
}

// encodeJSON is encodePayload's encoding of any value.
func encodeJSON(v any) (string, error) {
	p := payloadEncoders.Get().(*payloadEncoder)
	defer payloadEncoders.Put(p)
	p.buf.Reset()
	if err := p.enc.Encode(v); err != nil {
		return "", err
	}
	return string(bytes.TrimRight(p.buf.Bytes(), "\n")), nil
}

type payloadEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var payloadEncoders = sync.Pool{New: func() any {
	p := &payloadEncoder{}
	p.enc = json.NewEncoder(&p.buf)
	p.enc.SetEscapeHTML(false)
	return p
}}

// Payload is an event payload encoded ahead of time, so that the encoding
// happens on the caller's goroutine and not on the single writer's.
type Payload string

// EncodePayload encodes a payload ahead of time (see Payload).
func EncodePayload(v EventPayload) (Payload, error) {
	s, err := encodePayload(v)
	return Payload(s), err
}

// ChainReport is what VerifyAuditChain found.
type ChainReport struct {
	Events  int64
	HeadSeq int64
	OK      bool
	// BadSeq is the first sequence number at which the chain breaks.
	BadSeq  int64
	Problem string
	// Breaks are all the breaks found (the first MaxReportedProblems), each
	// "event N …"; Problem is the first of them.
	Breaks []string
	// MoreBreaks counts those found past the ones listed.
	MoreBreaks int
}

// MaxReportedProblems is how many problems a verification lists; it counts
// the rest.
const MaxReportedProblems = 100

func (r *ChainReport) broken(seq int64, problem string) {
	if r.Problem == "" {
		r.BadSeq, r.Problem = seq, problem
	}
	if len(r.Breaks) < MaxReportedProblems {
		r.Breaks = append(r.Breaks, problem)
	} else {
		r.MoreBreaks++
	}
}

// EachAuditEvent hands every audit event to fn in sequence order, reading a
// page at a time; fn's error stops the walk and is returned.
func (s *Store) EachAuditEvent(ctx context.Context, fn func(*AuditEvent) error) error {
	return s.eachAuditEventAfter(ctx, 0, fn)
}

// eachAuditEventAfter is EachAuditEvent from the event after seq from.
func (s *Store) eachAuditEventAfter(ctx context.Context, from int64, fn func(*AuditEvent) error) error {
	const page = 2000
	for {
		var rows []AuditEvent
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
func (s *Store) VerifyAuditChain(ctx context.Context) (ChainReport, error) {
	var rep ChainReport
	prevHash := ""
	expected := int64(1)
	last := int64(0)
	check := func(e *AuditEvent) error {
		if e.Seq != expected {
			rep.broken(expected, fmt.Sprintf("event %d is missing (next present is %d)", expected, e.Seq))
		} else if e.PrevHash != prevHash {
			rep.broken(e.Seq, fmt.Sprintf("event %d does not link to the event before it", e.Seq))
		}
		if eventHash(*e) != e.Hash {
			rep.broken(e.Seq, fmt.Sprintf("event %d was altered (its hash does not match its content)", e.Seq))
		}
		rep.Events++
		prevHash, expected, last = e.Hash, e.Seq+1, e.Seq
		return nil
	}
	for round := 0; ; round++ {
		if err := s.eachAuditEventAfter(ctx, last, check); err != nil {
			return rep, err
		}
		var head AuditHead
		err := s.db.WithContext(ctx).Take(&head, 1).Error
		switch {
		case errors.Is(notFound(err), ErrNotFound):
			if rep.Events > 0 {
				rep.broken(1, "the chain head record is missing")
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
			rep.broken(bad, fmt.Sprintf("the chain ends at event %d but its head says %d", last, head.Seq))
		}
		rep.OK = rep.Problem == ""
		return rep, nil
	}
}
