package models

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
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
	if e.Chain != 0 {
		// The chain is hashed too, so an event moved to another chain
		// breaks; events of chain 0 hash as they did before chains.
		b = append(b, `{"chain":`...)
		b = strconv.AppendInt(b, e.Chain, 10)
		b = append(b, `,"seq":`...)
	} else {
		b = append(b, `{"seq":`...)
	}
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
	Events  int64 // in all chains
	HeadSeq int64 // chain 0's head
	// Heads are where each chain that has events ended, in chain order.
	Heads []ChainHead
	OK    bool
	// BadChain and BadSeq are the first event at which a chain breaks.
	BadChain int64
	BadSeq   int64
	Problem  string
	// Breaks are all the breaks found (the first MaxReportedProblems), each
	// "event N …"; Problem is the first of them.
	Breaks []string
	// MoreBreaks counts those found past the ones listed.
	MoreBreaks int
}

// MaxReportedProblems is how many problems a verification lists; it counts
// the rest.
const MaxReportedProblems = 100

// Broken notes a problem at an event: the first is the report's Problem,
// the next ones are counted (MaxReportedProblems of them kept).
func (r *ChainReport) Broken(chain, seq int64, problem string) {
	if r.Problem == "" {
		r.BadChain, r.BadSeq, r.Problem = chain, seq, problem
	}
	if len(r.Breaks) < MaxReportedProblems {
		r.Breaks = append(r.Breaks, problem)
	} else {
		r.MoreBreaks++
	}
}

// ChainHead is a chain's last event: its chain, number and hash.
type ChainHead struct {
	Chain int64  `json:"chain"`
	Seq   int64  `json:"seq"`
	Hash  string `json:"hash"`
}

// EventName is how people are told which event: "event 12", or "event 12
// of chain 3" past the first chain.
func EventName(chain, seq int64) string {
	if chain == 0 {
		return "event " + strconv.FormatInt(seq, 10)
	}
	return "event " + strconv.FormatInt(seq, 10) + " of chain " + strconv.FormatInt(chain, 10)
}

// OnChain names the chain in a problem about a chain other than 0
// ("chain 3: …"); a problem of chain 0 reads as it did before chains.
func OnChain(chain int64, problem string) string {
	if chain == 0 {
		return problem
	}
	return "chain " + strconv.FormatInt(chain, 10) + ": " + problem
}

// AboutCall says whether events of this kind are about a call (their
// subject is the call's id): those go to the call's chain.
func (k EventKind) AboutCall() bool {
	return strings.HasPrefix(string(k), "call.") || strings.HasPrefix(string(k), "action.")
}
