package tools

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"sort"
	"strings"

	validator "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// DefaultMaxArgsBytes is the largest argument document a tool call may
// carry unless the operator says otherwise (--max-args): a file written, a
// document sent; 1 MiB, what MCP servers commonly take.
const DefaultMaxArgsBytes = 1 << 20

// MaxArgsBytes is the largest argument document a tool call may carry: set
// once, at start, before anything is served (--max-args).
var MaxArgsBytes = DefaultMaxArgsBytes

// Normalized is a validated argument set: decoded into the tool's input type
// and re-encoded canonically (sorted keys, defaults applied, nothing unknown).
type Normalized struct {
	// JSON is the canonical encoding; Hash is its SHA-256 in hex.
	JSON []byte
	Hash string
	// Value is the decoded input struct, handed to the tool's run function.
	Value any
	// Map is the canonical arguments as plain values (numbers as float64),
	// for policy conditions.
	Map map[string]any
}

// Problem is one thing wrong with the arguments, at a path such as "amount".
type Problem struct {
	Path    string
	Message string
}

// ArgsError lists every problem found with a call's arguments. Its message is
// written for the model, so it can fix the call and try again.
type ArgsError struct {
	Tool     string
	Problems []Problem
}

func (e *ArgsError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Path + ": " + p.Message
	}
	return strings.Join(parts, "; ")
}

func argsError(tool, path, msg string) *ArgsError {
	return &ArgsError{Tool: tool, Problems: []Problem{{Path: path, Message: msg}}}
}

// rootPath names the argument document as a whole in problems.
const rootPath = "arguments"

// Normalize validates raw arguments against the tool's schema and returns
// them normalized, or an *ArgsError naming every problem.
func (t *Tool) Normalize(raw []byte) (Normalized, error) {
	if len(raw) > MaxArgsBytes {
		return Normalized{}, argsError(t.Name, rootPath, fmt.Sprintf("%d bytes is over the limit of %d bytes", len(raw), MaxArgsBytes))
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}") // some models send nothing for a tool without inputs
	}
	doc, err := validator.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return Normalized{}, argsError(t.Name, rootPath, "not valid JSON ("+jsonProblem(err)+")")
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return Normalized{}, argsError(t.Name, rootPath, "must be a JSON object, got "+jsonType(doc))
	}
	defaulted := false
	for k, v := range t.defaults {
		if _, present := obj[k]; !present {
			obj[k] = v
			defaulted = true
		}
	}
	if err := t.schema.Validate(obj); err != nil {
		var ve *validator.ValidationError
		if !errors.As(err, &ve) {
			return Normalized{}, argsError(t.Name, rootPath, err.Error())
		}
		var problems []Problem
		collectProblems(ve, &problems)
		sort.SliceStable(problems, func(i, j int) bool { return problems[i].Path < problems[j].Path })
		return Normalized{}, &ArgsError{Tool: t.Name, Problems: dedupe(problems)}
	}
	valid := raw
	if defaulted {
		if valid, err = json.Marshal(obj); err != nil {
			return Normalized{}, argsError(t.Name, rootPath, err.Error())
		}
	}
	value, err := t.decode(valid)
	if err != nil {
		return Normalized{}, argsError(t.Name, rootPath, jsonProblem(err))
	}
	canonical, generic, err := canonicalize(value)
	m, _ := plainValues(generic).(map[string]any)
	if err != nil {
		return Normalized{}, argsError(t.Name, rootPath, err.Error())
	}
	sum := sha256.Sum256(canonical)
	return Normalized{JSON: canonical, Hash: hex.EncodeToString(sum[:]), Value: value, Map: m}, nil
}

// canonicalize encodes v with sorted keys and no HTML escaping, so the same
// arguments always give the same bytes and the same hash.
func canonicalize(v any) ([]byte, any, error) {
	first, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(first))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, nil, err
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(generic); err != nil {
		return nil, nil, err
	}
	return bytes.TrimRight(out.Bytes(), "\n"), generic, nil
}

// plainValues turns json.Number into float64 throughout, which is what
// policy conditions compare against.
func plainValues(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = plainValues(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = plainValues(e)
		}
		return x
	default:
		return v
	}
}

func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("%s at byte %d", se.Error(), se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("%s must be %s, got %s", te.Field, te.Type.String(), te.Value)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the document ends too early"
	}
	return err.Error()
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

var printer = message.NewPrinter(language.English)

func collectProblems(ve *validator.ValidationError, out *[]Problem) {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			collectProblems(c, out)
		}
		return
	}
	parent := strings.Join(ve.InstanceLocation, ".")
	at := func(field string) string {
		if parent == "" {
			return field
		}
		return parent + "." + field
	}
	path := parent
	if path == "" {
		path = rootPath
	}
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		for _, m := range k.Missing {
			*out = append(*out, Problem{at(m), "required"})
		}
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			*out = append(*out, Problem{at(p), "unknown field; leave it out"})
		}
	case *kind.Type:
		*out = append(*out, Problem{path, fmt.Sprintf("must be %s, got %s", article(strings.Join(k.Want, " or ")), k.Got)})
	case *kind.Minimum:
		*out = append(*out, Problem{path, "must be ≥ " + ratString(k.Want)})
	case *kind.ExclusiveMinimum:
		*out = append(*out, Problem{path, "must be > " + ratString(k.Want)})
	case *kind.Maximum:
		*out = append(*out, Problem{path, "must be ≤ " + ratString(k.Want)})
	case *kind.ExclusiveMaximum:
		*out = append(*out, Problem{path, "must be < " + ratString(k.Want)})
	case *kind.MultipleOf:
		*out = append(*out, Problem{path, "must be a multiple of " + ratString(k.Want)})
	case *kind.MinLength:
		if k.Want == 1 {
			*out = append(*out, Problem{path, "must not be empty"})
		} else {
			*out = append(*out, Problem{path, fmt.Sprintf("must be at least %d characters", k.Want)})
		}
	case *kind.MaxLength:
		*out = append(*out, Problem{path, fmt.Sprintf("must be at most %d characters, got %d", k.Want, k.Got)})
	case *kind.Pattern:
		*out = append(*out, Problem{path, fmt.Sprintf("%q does not match the pattern %s", Truncate(k.Got, 40), k.Want)})
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			b, _ := json.Marshal(w)
			want[i] = string(b)
		}
		*out = append(*out, Problem{path, "must be one of " + strings.Join(want, ", ")})
	default:
		*out = append(*out, Problem{path, ve.ErrorKind.LocalizedString(printer)})
	}
}

func article(t string) string {
	switch t {
	case "integer", "object", "array":
		return "an " + t
	}
	return "a " + t
}

func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return fmt.Sprintf("%g", f)
}

// Truncate keeps the first n characters of s (never splitting one), with
// "…" when it cut something: the one truncation every layer uses.
func Truncate(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

func dedupe(ps []Problem) []Problem {
	out := ps[:0]
	seen := map[Problem]bool{}
	for _, p := range ps {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
