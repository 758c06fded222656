package policy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"cel.dev/cel-go/common/types"

	"github.com/countersign/countersign/tools"
)

// Totals are what a policy knows of earlier calls: the sum of one argument
// over a customer's calls of a tool, done, running or waiting for a person,
// read from the gate's own record. A threshold that adds the total to this
// call's amount cannot be dodged by splitting one request into several, and
// because the gate decides such calls inside the transaction that records
// them (see Gate.Call), concurrent calls cannot all slip under it either.

type totalSpec struct {
	Description string   `yaml:"description"`
	Tool        string   `yaml:"tool"`
	Sum         string   `yaml:"sum"`
	Same        []string `yaml:"same"`
	Within      string   `yaml:"within"`
}

type total struct {
	name   string
	tool   string
	field  string
	same   []string
	within time.Duration
	spec   totalSpec
}

var (
	totalName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,63}$`)
	argName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
)

// compileTotals checks the totals: section against the tools it names.
func compileTotals(specs map[string]totalSpec, registry *tools.Registry) ([]*total, error) {
	names := make([]string, 0, len(specs))
	for n := range specs {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []*total
	for _, n := range names {
		sp := specs[n]
		where := fmt.Sprintf("total %q", n)
		if !totalName.MatchString(n) {
			return nil, fmt.Errorf("%s: a total's name is lower case letters, digits and underscores", where)
		}
		if sp.Tool == "" || sp.Sum == "" {
			return nil, fmt.Errorf("%s: give the tool and the argument to sum (tool:, sum:)", where)
		}
		t := &total{name: n, tool: sp.Tool, field: sp.Sum, same: sp.Same, spec: sp}
		for _, f := range append([]string{sp.Sum}, sp.Same...) {
			if !argName.MatchString(f) {
				return nil, fmt.Errorf("%s: %q is not an argument name", where, f)
			}
		}
		if sp.Within != "" {
			d, err := parseDuration(sp.Within)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("%s: within %q is not a duration such as 24h or 30d", where, sp.Within)
			}
			t.within = d
		}
		if registry != nil {
			tool, ok := registry.Get(sp.Tool)
			if !ok {
				return nil, fmt.Errorf("%s: no tool is named %q", where, sp.Tool)
			}
			props := schemaProperties(tool.Schema)
			if typ, ok := props[sp.Sum]; !ok || (typ != "number" && typ != "integer") {
				return nil, fmt.Errorf("%s: %s has no number argument %q to sum", where, sp.Tool, sp.Sum)
			}
			for _, f := range sp.Same {
				if _, ok := props[f]; !ok {
					return nil, fmt.Errorf("%s: %s has no argument %q", where, sp.Tool, f)
				}
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// schemaProperties maps a tool's top-level arguments to their JSON types.
func schemaProperties(schema json.RawMessage) map[string]string {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(schema, &s)
	out := make(map[string]string, len(s.Properties))
	for name, p := range s.Properties {
		switch t := p.Type.(type) {
		case string:
			out[name] = t
		case []any: // ["number", "null"]
			for _, x := range t {
				if str, ok := x.(string); ok && str != "null" {
					out[name] = str
				}
			}
		}
	}
	return out
}

// loadTotals computes every total the policy declares, for this call.
func (a *activation) loadTotals() any {
	out := make(map[string]any, len(a.totals))
	for _, t := range a.totals {
		q := TotalQuery{Name: t.name, Tool: t.tool, Field: t.field, Within: t.within}
		missing := false
		if len(t.same) > 0 {
			q.Same = make(map[string]any, len(t.same))
			for _, f := range t.same {
				v, ok := a.in.Args[f]
				if !ok || v == nil {
					missing = true // this call has no such argument: nothing earlier can share it
					break
				}
				q.Same[f] = v
			}
		}
		if missing || a.in.Facts == nil {
			out[t.name] = 0.0
			continue
		}
		v, err := a.in.Facts.Total(a.ctx, q)
		if err != nil {
			return types.NewErr("totals: %v", err)
		}
		out[t.name] = v
	}
	return out
}

// TotalInfo is a total as written, for people to read.
type TotalInfo struct {
	Name, Description, Tool, Sum, Same, Within string
}

// Totals lists the totals the policy declares.
func (p *FilePolicy) Totals() []TotalInfo {
	var out []TotalInfo
	for _, t := range p.totals {
		out = append(out, TotalInfo{Name: t.name, Description: t.spec.Description, Tool: t.tool, Sum: t.field,
			Same: strings.Join(t.same, ", "), Within: t.spec.Within})
	}
	return out
}
