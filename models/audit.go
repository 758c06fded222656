package models

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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

// eventHash is SHA-256 over the previous link's hash and the canonical form
// of the event, so that changing, removing or reordering any row breaks
// every link after it.
func EventHash(e AuditEvent) string {
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

// Broken notes a problem at seq: the first is the report's Problem, the
// next ones are counted (MaxReportedProblems of them kept).
func (r *ChainReport) Broken(seq int64, problem string) {
	if r.Problem == "" {
		r.BadSeq, r.Problem = seq, problem
	}
	if len(r.Breaks) < MaxReportedProblems {
		r.Breaks = append(r.Breaks, problem)
	} else {
		r.MoreBreaks++
	}
}
