package tools

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// flatStruct describes an input struct whose plain JSON encoding is already
// canonical: only scalar fields, declared in the order of their JSON names.
// Most tool inputs are like that, and they skip the generic round trip.
type flatStruct struct {
	fields []flatField
}

type flatField struct {
	index     int
	name      string
	omitEmpty bool
}

func flatStructOf(t reflect.Type) *flatStruct {
	if t.Kind() != reflect.Struct {
		return nil
	}
	fs := &flatStruct{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() || f.Anonymous {
			return nil
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		if strings.Contains(opts, "string") {
			return nil
		}
		switch f.Type.Kind() {
		case reflect.String, reflect.Bool, reflect.Float32, reflect.Float64,
			reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		default:
			return nil
		}
		if f.Type.PkgPath() != "" && reflect.PointerTo(f.Type).Implements(reflect.TypeFor[json.Marshaler]()) {
			return nil
		}
		names = append(names, name)
		fs.fields = append(fs.fields, flatField{index: i, name: name, omitEmpty: strings.Contains(opts, "omitempty")})
	}
	if !sort.StringsAreSorted(names) {
		return nil
	}
	return fs
}

// encode returns the canonical encoding and the plain map of a flat value.
// It writes JSON exactly as encoding/json does with HTML escaping off
// (tests compare the two), without its reflection.
func (fs *flatStruct) encode(v any) ([]byte, map[string]any, error) {
	rv := reflect.ValueOf(v)
	m := make(map[string]any, len(fs.fields))
	out := make([]byte, 0, 96)
	out = append(out, '{')
	first := true
	for _, f := range fs.fields {
		fv := rv.Field(f.index)
		if f.omitEmpty && fv.IsZero() {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = appendJSONString(out, f.name)
		out = append(out, ':')
		switch fv.Kind() {
		case reflect.String:
			s := fv.String()
			out = appendJSONString(out, s)
			m[f.name] = s
		case reflect.Bool:
			out = strconv.AppendBool(out, fv.Bool())
			m[f.name] = fv.Bool()
		case reflect.Float32, reflect.Float64:
			bits := 64
			if fv.Kind() == reflect.Float32 {
				bits = 32
			}
			x := fv.Float()
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, nil, fmt.Errorf("%s: not a finite number", f.name)
			}
			out = appendJSONFloat(out, x, bits)
			m[f.name] = x
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			out = strconv.AppendInt(out, fv.Int(), 10)
			m[f.name] = float64(fv.Int())
		default:
			out = strconv.AppendUint(out, fv.Uint(), 10)
			m[f.name] = float64(fv.Uint())
		}
	}
	out = append(out, '}')
	return out, m, nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString quotes s as encoding/json does with SetEscapeHTML(false).
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendJSONFloat formats a number as encoding/json does.
func appendJSONFloat(dst []byte, f float64, bits int) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	dst = strconv.AppendFloat(dst, f, format, -1, bits)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// fill sets the fields of a flat struct from a validated document, as
// encoding/json would; it reports false for anything it would decode
// differently (a number that does not fit, say), which then takes the
// ordinary path and its error.
func (fs *flatStruct) fill(dst reflect.Value, obj map[string]any) bool {
	for _, f := range fs.fields {
		raw, ok := obj[f.name]
		if !ok || raw == nil {
			continue
		}
		fv := dst.Field(f.index)
		switch fv.Kind() {
		case reflect.String:
			s, ok := raw.(string)
			if !ok {
				return false
			}
			fv.SetString(s)
		case reflect.Bool:
			b, ok := raw.(bool)
			if !ok {
				return false
			}
			fv.SetBool(b)
		case reflect.Float32, reflect.Float64:
			n, ok := raw.(json.Number)
			if !ok {
				return false
			}
			x, err := strconv.ParseFloat(string(n), fv.Type().Bits())
			if err != nil {
				return false
			}
			fv.SetFloat(x)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			n, ok := raw.(json.Number)
			if !ok {
				return false
			}
			x, err := strconv.ParseInt(string(n), 10, fv.Type().Bits())
			if err != nil {
				return false
			}
			fv.SetInt(x)
		default:
			n, ok := raw.(json.Number)
			if !ok {
				return false
			}
			x, err := strconv.ParseUint(string(n), 10, fv.Type().Bits())
			if err != nil {
				return false
			}
			fv.SetUint(x)
		}
	}
	return true
}
