package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Spec describes a tool whose input schema is written as JSON Schema (as in
// a tools file) instead of reflected from a Go struct. Its arguments reach
// Run and Review as a map of the normalized JSON.
type Spec struct {
	Name, Description string
	// Summary, Request and Amount are as in Definition.
	Summary, Request, Amount string
	Risk                     Risk
	Idempotent               bool
	// MCPName allows any name an MCP tool may have (1 to 128 of A-Z a-z
	// 0-9 _ - .): an upstream's tool offered under its own name (an
	// mcp_servers entry with prefix: false).
	MCPName bool
	// Schema is the input's JSON Schema; it must describe an object.
	Schema json.RawMessage
	// Target is as in Tool: where and how Run sends a call.
	Target string
	// Run executes a call. Nil makes a decision-only tool: Countersign
	// decides and records, and the agent that asked carries it out.
	Run func(ctx context.Context, call Call, args map[string]any) (any, error)
	// Review, when set, tells an approver what to know about a call.
	Review func(ctx context.Context, call Call, args map[string]any) ([]Fact, error)
	// Check, when set, says before the call is decided whether it could be
	// run at all (a RefusalError says why not); it must not change anything.
	Check func(ctx context.Context, call Call, args map[string]any) error
}

// FromSpec compiles a tool from its spec. It fails on a spec a model could
// not use: a bad name or risk, a schema that does not compile or is not an
// object, an Amount that is not one of its properties.
func FromSpec(s Spec) (*Tool, error) {
	if s.MCPName {
		if !MCPToolName.MatchString(s.Name) {
			return nil, fmt.Errorf("tool name %q: an MCP tool's name is 1 to 128 of A-Z, a-z, 0-9, _, - and . (dot)", s.Name)
		}
		if err := checkNameAndRisk("x", s.Risk); err != nil {
			return nil, fmt.Errorf("tool %s: risk %q is not read, low_write or high_write", s.Name, s.Risk)
		}
	} else if err := checkNameAndRisk(s.Name, s.Risk); err != nil {
		return nil, err
	}
	var top map[string]any
	if err := json.Unmarshal(s.Schema, &top); err != nil {
		return nil, fmt.Errorf("tool %s: the input schema is not a JSON object: %v", s.Name, err)
	}
	if t, _ := top["type"].(string); t != "object" {
		return nil, fmt.Errorf("tool %s: the input schema must have type: object", s.Name)
	}
	if s.Amount != "" {
		props, _ := top["properties"].(map[string]any)
		if _, ok := props[s.Amount]; !ok {
			return nil, fmt.Errorf("tool %s: amount %q is not one of the input's properties", s.Name, s.Amount)
		}
	}
	compiled, defaults, err := compileSchema(s.Name, s.Schema)
	if err != nil {
		return nil, err
	}
	t := &Tool{Name: s.Name, Description: s.Description, Summary: s.Summary, Request: s.Request, Amount: s.Amount,
		Risk: s.Risk, Idempotent: s.Idempotent, Schema: s.Schema, Target: s.Target, schema: compiled, defaults: defaults,
		decode: func(b []byte) (any, error) {
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.UseNumber() // whole numbers stay exact
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				return nil, err
			}
			return m, nil
		}}
	asMap := func(in any) (map[string]any, error) {
		m, ok := in.(map[string]any)
		if !ok {
			return nil, errors.New("internal error: input of the wrong type")
		}
		return m, nil
	}
	if s.Run != nil {
		t.run = func(ctx context.Context, call Call, in any) (any, error) {
			m, err := asMap(in)
			if err != nil {
				return nil, err
			}
			return s.Run(ctx, call, m)
		}
	}
	if s.Check != nil {
		t.check = func(ctx context.Context, call Call, in any) error {
			m, err := asMap(in)
			if err != nil {
				return err
			}
			return s.Check(ctx, call, m)
		}
	}
	if s.Review != nil {
		t.review = func(ctx context.Context, call Call, in any) ([]Fact, error) {
			m, err := asMap(in)
			if err != nil {
				return nil, err
			}
			return s.Review(ctx, call, m)
		}
	}
	t.definitionHash = t.hashDefinition()
	return t, nil
}

// Executes reports whether Countersign runs the tool's calls itself; a
// decision-only tool's allowed calls are carried out by the agent that asked.
func (t *Tool) Executes() bool { return t.run != nil }
