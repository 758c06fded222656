package rawjson

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
)

// maxEnvelopeValue bounds what is kept of one wanted member's value.
const maxEnvelopeValue = 1 << 10

// Envelope reads one JSON object from r as it streams and returns the
// values of the wanted top-level members (a key given twice: the last),
// holding no more than a wanted value's bytes (at most 1 KiB; a longer one
// is not returned) however big the object is: the id and method of a
// JSON-RPC message too big to read, wherever in it the client wrote them.
// It reads to the object's end, or r's (what it found by then is returned;
// a value cut short is not). Not a validator: the object may be malformed
// past what it returns.
func Envelope(r io.Reader, wanted ...string) map[string]json.RawMessage {
	s := envelope{want: wanted, out: map[string]json.RawMessage{}}
	br := bufio.NewReaderSize(r, 64<<10)
	for !s.done {
		c, err := br.ReadByte()
		if err != nil {
			break
		}
		s.take(c)
	}
	return s.out
}

type envelope struct {
	want []string
	out  map[string]json.RawMessage

	depth       int
	inString    bool
	escaped     bool
	keyNext     bool   // at depth 1: the next string is a key
	readingKey  bool   // reading a key at depth 1
	key         []byte // that key, up to 256 bytes
	member      string // the key whose ':' comes next
	capturing   string // the wanted key whose value is being read
	value       []byte
	valueTooBig bool
	done        bool
}

func (s *envelope) keep(c byte) {
	if s.capturing == "" {
		return
	}
	if len(s.value) >= maxEnvelopeValue {
		s.valueTooBig = true
		return
	}
	s.value = append(s.value, c)
}

// finish ends the value being captured at its member's end.
func (s *envelope) finish() {
	if s.capturing != "" && !s.valueTooBig {
		if v := bytes.TrimSpace(s.value); json.Valid(v) {
			s.out[s.capturing] = json.RawMessage(append([]byte(nil), v...))
		}
	}
	s.capturing, s.value, s.valueTooBig = "", s.value[:0], false
}

func (s *envelope) take(c byte) {
	if s.inString {
		switch {
		case s.readingKey:
			if !s.escaped && c == '"' {
				s.readingKey, s.member = false, string(s.key)
			} else if len(s.key) < 256 {
				s.key = append(s.key, c)
			}
		default:
			s.keep(c)
		}
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.inString = false
		}
		return
	}
	switch c {
	case '"':
		s.inString = true
		if s.depth == 1 && s.keyNext {
			s.keyNext, s.readingKey, s.key = false, true, s.key[:0]
			return
		}
		s.keep(c)
	case '{', '[':
		s.keep(c)
		s.depth++
		if s.depth == 1 {
			s.keyNext = c == '{'
			if c == '[' {
				s.done = true // a batch: no envelope to read
			}
		}
	case '}', ']':
		if s.depth == 1 {
			s.finish()
			s.depth, s.done = 0, true
			return
		}
		s.keep(c)
		s.depth--
	case ',':
		if s.depth == 1 {
			s.finish()
			s.keyNext = true
			return
		}
		s.keep(c)
	case ':':
		if s.depth == 1 && s.member != "" {
			for _, w := range s.want {
				if w == s.member {
					s.capturing = w
				}
			}
			s.member = ""
			return
		}
		s.keep(c)
	default:
		if s.depth == 0 && c > ' ' {
			s.done = true // not an object
			return
		}
		s.keep(c)
	}
}
