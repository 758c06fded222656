package httptool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	sjson "github.com/segmentio/encoding/json"
)

// secretForms are the ways a secret can appear in text: as itself, and as
// JSON encoders write it inside a string (Go escapes <, > and &; Python
// escapes everything past ASCII; PHP escapes /). A text answer that holds
// JSON, or a string inside a JSON answer that holds JSON again, shows the
// secret in one of these.
func secretForms(v string) []string {
	forms := []string{v}
	add := func(f string) {
		for _, have := range forms {
			if have == f {
				return
			}
		}
		forms = append(forms, f)
	}
	var plain bytes.Buffer
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	inner := strings.TrimSuffix(strings.TrimSpace(plain.String()), "\"")[1:]
	add(inner)
	html, _ := json.Marshal(v)
	add(string(html[1 : len(html)-1]))
	for _, f := range forms {
		add(asciiEscaped(f))
	}
	for _, f := range forms {
		if strings.Contains(f, "/") {
			add(strings.ReplaceAll(f, "/", `\/`))
		}
	}
	return forms
}

// asciiEscaped is s with everything past ASCII written \uXXXX.
func asciiEscaped(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case r > 0xFFFF:
			r1, r2 := surrogates(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

func surrogates(r rune) (rune, rune) {
	r -= 0x10000
	return 0xD800 + (r>>10)&0x3FF, 0xDC00 + r&0x3FF
}

// redactor hides the values of a tools file's ${NAME}s. Values shorter than
// four characters are left: they would blank out ordinary words.
type redactor struct {
	values []string // the secrets as given
	forms  []string // every form of each, longest first
}

func (r *redactor) add(v string) {
	if len(v) < 4 {
		return
	}
	for _, have := range r.values {
		if have == v {
			return
		}
	}
	r.values = append(r.values, v)
	r.forms = append(r.forms, secretForms(v)...)
	// Longest first, so a secret inside a longer one leaves no tail behind.
	for i := 1; i < len(r.forms); i++ {
		for j := i; j > 0 && len(r.forms[j]) > len(r.forms[j-1]); j-- {
			r.forms[j], r.forms[j-1] = r.forms[j-1], r.forms[j]
		}
	}
}

// text replaces every form of every secret in s.
func (r *redactor) text(s string) string {
	for _, f := range r.forms {
		if strings.Contains(s, f) {
			s = strings.ReplaceAll(s, f, "[secret]")
		}
	}
	return s
}

// value hides the secrets in a decoded JSON value (maps, slices, strings,
// numbers) without changing its shape: a string keeps its text around the
// secret, a number that is a secret becomes the string "[secret]", a
// number that merely holds its digits is left whole. changed says whether
// anything was hidden.
func (r *redactor) value(v any) (out any, changed bool) {
	switch x := v.(type) {
	case string:
		s := r.text(x)
		return s, s != x
	case json.Number:
		for _, s := range r.values {
			if string(x) == s {
				return "[secret]", true
			}
		}
		return x, false
	case float64:
		n := json.Number(fmt.Sprint(x))
		if o, ok := r.value(n); ok {
			return o, true
		}
		return x, false
	case map[string]any:
		var m map[string]any
		for k, e := range x {
			nk := r.text(k)
			ne, c := r.value(e)
			if c || nk != k {
				if m == nil {
					m = make(map[string]any, len(x))
					for k2, e2 := range x {
						m[k2] = e2
					}
				}
				delete(m, k)
				m[nk] = ne
			}
		}
		if m == nil {
			return x, false
		}
		return m, true
	case []any:
		var s []any
		for i, e := range x {
			if ne, c := r.value(e); c {
				if s == nil {
					s = append([]any(nil), x...)
				}
				s[i] = ne
			}
		}
		if s == nil {
			return x, false
		}
		return s, true
	}
	return v, false
}

// json hides the secrets in a JSON document by its decoded values, in its
// own bytes: each string (key or value) that holds a secret, however it
// was escaped, is written anew with "[secret]" in its place, a number that
// is one becomes the string "[secret]", and every other byte is kept as it
// came (a big result is read once, not decoded). A document that is not
// JSON is hidden as text.
func (r *redactor) json(raw []byte) []byte {
	if len(r.forms) == 0 {
		return raw
	}
	// A string without escapes holds a secret only where its bytes do:
	// one look over all of them. Those with escapes are read each.
	plain := r.inBytes(raw)
	t := sjson.NewTokenizer(raw)
	var out []byte // nil: nothing hidden yet
	last := 0
	for t.Next() {
		v := t.Value
		var with []byte
		switch {
		case v.String() && (plain || t.Kind() != sjson.Unescaped):
			if s := string(t.String()); r.text(s) != s {
				with = quoted(r.text(s))
			}
		case v.Number() && plain:
			for _, s := range r.values {
				if string(v) == s {
					with = []byte(`"[secret]"`)
				}
			}
		}
		if with != nil {
			end := len(raw) - t.Remaining()
			out = append(append(out, raw[last:end-len(v)]...), with...)
			last = end
		}
	}
	if t.Err != nil {
		return r.decoded(raw)
	}
	if out == nil {
		out = raw
	} else {
		out = append(out, raw[last:]...)
	}
	if plain && r.inBytes(out) {
		return r.decoded(raw) // a secret outside what was read as a value: not JSON as it seemed
	}
	return out
}

// inBytes says whether any form of a secret is in b.
func (r *redactor) inBytes(b []byte) bool {
	for _, f := range r.forms {
		if bytes.Contains(b, []byte(f)) {
			return true
		}
	}
	return false
}

// quoted is s as a JSON string, <, > and & as they are.
func quoted(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSpace(b.Bytes())
}

// decoded hides the secrets in a JSON document by decoding it and
// encoding it again (valid JSON, the same shape); one that is not JSON is
// hidden as text.
func (r *redactor) decoded(raw []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if !json.Valid(raw) || dec.Decode(&v) != nil {
		return []byte(r.text(string(raw))) // text after a value too
	}
	out, changed := r.value(v)
	if !changed {
		return raw
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return []byte(`"[secret]"`)
	}
	return bytes.TrimSpace(b.Bytes())
}
