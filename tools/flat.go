package tools

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
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
func (fs *flatStruct) encode(v any) ([]byte, map[string]any, error) {
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, nil, err
	}
	rv := reflect.ValueOf(v)
	m := make(map[string]any, len(fs.fields))
	for _, f := range fs.fields {
		fv := rv.Field(f.index)
		if f.omitEmpty && fv.IsZero() {
			continue
		}
		switch fv.Kind() {
		case reflect.String:
			m[f.name] = fv.String()
		case reflect.Bool:
			m[f.name] = fv.Bool()
		case reflect.Float32, reflect.Float64:
			m[f.name] = fv.Float()
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			m[f.name] = float64(fv.Int())
		default:
			m[f.name] = float64(fv.Uint())
		}
	}
	return bytes.TrimRight(out.Bytes(), "\n"), m, nil
}
