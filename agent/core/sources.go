package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
)

// Sources are where the tools and policies in force are read from, as the
// process names them. The core reads them at start and again on Reload or
// when an MCP server of the tools file changes its tools.
type Sources struct {
	// ToolsFile declares HTTP tools and MCP servers ("": none).
	ToolsFile string
	// PolicyFile is the policy ("": BuiltIn, named BuiltInName).
	PolicyFile  string
	BuiltIn     []byte
	BuiltInName string
	// PolicyFromFile: the policy file rules (put in force as it is)
	// instead of being proposed when it differs from the version in force.
	PolicyFromFile bool
	// ShadowFile is a policy tried beside the one in force ("": none).
	ShadowFile string
	// Extra makes the tools besides the file's (the demo shop's), afresh
	// for each registry (nil: none).
	Extra func() []*tools.Tool
}

// InForce is what a start puts in force: the tools file's set (nil
// without one), the registry of every tool, its version and the policy.
type InForce struct {
	Set          *httptool.Set
	Registry     *tools.Registry
	ToolsVersion string
	Policy       *policy.FilePolicy
}

// Load reads the tools file, connecting to its MCP servers, and the
// policy, which must pass its own tests. The set it returns, even with an
// error, is the caller's to close (or to hand to New).
func (s Sources) Load(ctx context.Context) (InForce, error) {
	var in InForce
	var err error
	if in.Set, err = s.ToolsSet(); err != nil {
		return in, err
	}
	if in.Registry, in.ToolsVersion, err = s.Registry(in.Set); err != nil {
		return in, err
	}
	if in.Policy, err = s.Policy(in.Registry); err != nil {
		return in, err
	}
	if failed := policy.Failing(in.Policy.RunTests(ctx)); len(failed) > 0 {
		return in, fmt.Errorf("the policy %s fails %d of its tests (run `countersign policy test` to see them); refusing to start", in.Policy.Source, len(failed))
	}
	return in, nil
}

// Policy reads the policy against the tools.
func (s Sources) Policy(registry *tools.Registry) (*policy.FilePolicy, error) {
	if s.PolicyFile == "" {
		if s.BuiltIn == nil {
			return policy.LoadPolicy(policy.DefaultPolicyYAML, "(built-in default)", registry)
		}
		return policy.LoadPolicy(s.BuiltIn, s.BuiltInName, registry)
	}
	data, err := os.ReadFile(s.PolicyFile)
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	return policy.LoadPolicy(data, s.PolicyFile, registry)
}

// Shadow reads the shadow policy file against the tools and insists that
// it passes its own tests, as the policy in force must.
func (s Sources) Shadow(ctx context.Context, registry *tools.Registry) (*policy.FilePolicy, error) {
	data, err := os.ReadFile(s.ShadowFile)
	if err != nil {
		return nil, fmt.Errorf("read shadow policy: %w", err)
	}
	p, err := policy.LoadPolicy(data, s.ShadowFile, registry)
	if err != nil {
		return nil, err
	}
	if failed := policy.Failing(p.RunTests(ctx)); len(failed) > 0 {
		return nil, fmt.Errorf("the shadow policy %s fails %d of its tests (run `countersign policy test %s`)", p.Source, len(failed), p.Source)
	}
	return p, nil
}

// ToolsSet reads the tools file and connects to its MCP servers (nil
// without a file). Close the set to end those connections.
func (s Sources) ToolsSet() (*httptool.Set, error) {
	if s.ToolsFile == "" {
		return nil, nil
	}
	data, err := os.ReadFile(s.ToolsFile)
	if err != nil {
		return nil, fmt.Errorf("read tools: %w", err)
	}
	return httptool.Load(data, s.ToolsFile, httptool.Options{})
}

// Registry is the tools in force: Extra, and those of the tools file as
// its MCP servers offer them now. version covers every tool's definition
// and the file's bytes, so a reload or an MCP server's changed list is
// seen, and instances that offer different tools differ.
func (s Sources) Registry(set *httptool.Set) (reg *tools.Registry, version string, err error) {
	var all []*tools.Tool
	if s.Extra != nil {
		all = append(all, s.Extra()...)
	}
	h := sha256.New()
	h.Write([]byte(s.ToolsFile))
	if set != nil {
		all = append(all, set.Tools()...)
		d := set.Digest()
		h.Write(d[:])
	}
	for _, t := range all {
		fmt.Fprintf(h, "\n%s %s %s %s", t.Name, t.Risk, t.Description, t.Schema)
	}
	version = hex.EncodeToString(h.Sum(nil))
	reg, err = tools.NewRegistry(all...)
	if err != nil {
		return nil, "", fmt.Errorf("tools: %w", err)
	}
	if set != nil {
		reg.WithUnlisted(set.Unlisted) // calls the file forwards to tools no one lists
	}
	return reg, version, nil
}

// Tools reads the tools file and builds the tools in force from it.
func (s Sources) Tools() (*tools.Registry, string, *httptool.Set, error) {
	set, err := s.ToolsSet()
	if err != nil {
		return nil, "", nil, err
	}
	reg, version, err := s.Registry(set)
	if err != nil {
		set.Close()
		return nil, "", nil, err
	}
	return reg, version, set, nil
}
