package tools

import (
	"fmt"
	"sort"
)

// Registry holds the tools an agent may call, by name.
type Registry struct {
	byName map[string]*Tool
	order  []string
	// unlisted finds a tool no one lists (nil: none): an MCP server's
	// tool the tools file forwards calls to though the server does not
	// list it (unlisted_tools). It is never in All.
	unlisted func(name string) (*Tool, bool)
}

// WithUnlisted makes Get find, after the tools registered, what f finds:
// tools that are called but not listed (Tool.Unlisted). It returns r.
func (r *Registry) WithUnlisted(f func(name string) (*Tool, bool)) *Registry {
	r.unlisted = f
	return r
}

// Unlisted is what WithUnlisted set (nil: none), to carry it to a
// registry built from this one's tools.
func (r *Registry) Unlisted() func(name string) (*Tool, bool) { return r.unlisted }

// NewRegistry builds a registry; two tools with one name are an error.
func NewRegistry(ts ...*Tool) (*Registry, error) {
	r := &Registry{byName: map[string]*Tool{}}
	for _, t := range ts {
		if err := r.Add(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Add registers a tool.
func (r *Registry) Add(t *Tool) error {
	if t == nil {
		return fmt.Errorf("nil tool")
	}
	if _, dup := r.byName[t.Name]; dup {
		return fmt.Errorf("tool %s is registered twice", t.Name)
	}
	r.byName[t.Name] = t
	r.order = append(r.order, t.Name)
	sort.Strings(r.order)
	return nil
}

// Get finds a tool by name: a registered one, else one called but not
// listed (WithUnlisted).
func (r *Registry) Get(name string) (*Tool, bool) {
	t, ok := r.byName[name]
	if !ok && r.unlisted != nil {
		return r.unlisted(name)
	}
	return t, ok
}

// All lists the tools sorted by name.
func (r *Registry) All() []*Tool {
	out := make([]*Tool, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.byName[n])
	}
	return out
}
