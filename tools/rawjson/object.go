// Package rawjson finds where the members of a JSON object are in its
// bytes, without decoding them: what Countersign hands on of an upstream's
// answer stays in the bytes it came in, and Countersign's words are put
// between them (web/mcpgate), or a result the SDK would only decode to
// hand on is not decoded at all (tools/upstream).
package rawjson

import (
	"errors"

	sjson "github.com/segmentio/encoding/json"
)

// ErrNotObject is the error for bytes that are not one JSON object.
var ErrNotObject = errors.New("not one JSON object")

// Span is where a value is in the bytes of the object holding it.
type Span struct{ Start, End int }

// Object is where a JSON object's members are, in its bytes.
type Object struct {
	Members map[string]Span // by key (of a key given twice, the last)
	Keys    int             // members, counting each given
	Closing int             // where its closing brace is
}

// Value is the bytes of the member named (nil: there is none).
func (o *Object) Value(b []byte, key string) []byte {
	s, ok := o.Members[key]
	if !ok {
		return nil
	}
	return b[s.Start:s.End]
}

// ReadObject reads where the members of one JSON object (all of b, white
// space around it aside) are. It runs over a big value once, skipping the
// insides of strings a block at a time (segmentio's tokenizer, which the
// MCP SDK decodes with): the standard library's decoder steps through each
// byte of a 2 MB image's base64. The members' own values are checked for
// balance, not fully: b is an answer the SDK has read as JSON already.
func ReadObject(b []byte) (*Object, error) {
	t := sjson.NewTokenizer(b)
	at := func() int { return len(b) - t.Remaining() }
	if !t.Next() || t.Delim != '{' {
		return nil, ErrNotObject
	}
	o := &Object{Members: map[string]Span{}}
	for {
		if !t.Next() {
			return nil, ErrNotObject
		}
		if t.Delim == '}' && o.Keys == 0 {
			break
		}
		if !t.IsKey || !t.Value.String() {
			return nil, ErrNotObject
		}
		key := string(t.String())
		if !t.Next() || t.Delim != ':' || !t.Next() {
			return nil, ErrNotObject
		}
		start := at() - len(t.Value)
		if !skipValue(t) {
			return nil, ErrNotObject
		}
		o.Members[key] = Span{start, at()}
		o.Keys++
		if !t.Next() || (t.Delim != ',' && t.Delim != '}') {
			return nil, ErrNotObject
		}
		if t.Delim == '}' {
			break
		}
	}
	o.Closing = at() - 1
	if t.Next() || t.Err != nil {
		return nil, ErrNotObject
	}
	return o, nil
}

// skipValue moves t, at the first token of a value, to its last.
func skipValue(t *sjson.Tokenizer) bool {
	if t.Delim != 0 && t.Delim != '{' && t.Delim != '[' {
		return false
	}
	for depth := 0; ; {
		switch t.Delim {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case ':', ',':
		default:
			if t.Kind() == sjson.Undefined {
				return false
			}
		}
		if depth == 0 {
			return true
		}
		if !t.Next() {
			return false
		}
	}
}

// Texts are the JSON texts b holds one after another (white space between
// them, as in NDJSON), each in its bytes; one for b that is one JSON text.
// It fails when b holds anything else.
func Texts(b []byte) ([][]byte, error) {
	t := sjson.NewTokenizer(b)
	at := func() int { return len(b) - t.Remaining() }
	var out [][]byte
	for t.Next() {
		start := at() - len(t.Value)
		if !skipValue(t) {
			return nil, ErrNotText
		}
		out = append(out, b[start:at()])
	}
	if t.Err != nil || len(out) == 0 {
		return nil, ErrNotText
	}
	return out, nil
}

// ErrNotText is the error for bytes that are not JSON texts.
var ErrNotText = errors.New("not JSON texts")
