package core

import (
	"context"
	"errors"
	"fmt"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/agent/versions"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
	"github.com/countersign/countersign/tools/upstream"
)

// Reload reads the tools file and the policy file again. The tools are put
// in force with the policy version in force, if it still loads and passes
// its tests against them. The policy file, when it differs from the
// version in force, is proposed, as an upload would be (put in force with
// PolicyFromFile). Otherwise what is in force stays, and the error says
// why (RecordReloadFailure tells the audit log and /policy).
func (c *Core) Reload(ctx context.Context) error {
	c.reloading.Lock()
	defer c.reloading.Unlock()
	src := c.cfg.Sources
	if src.ShadowFile != "" {
		if shadow, err := src.Shadow(ctx, c.Gate.Tools()); err != nil {
			c.log.Error("shadow policy not reloaded; the previous one stays", "err", err)
		} else if prev, _ := c.Gate.Shadow(); prev == nil || prev.Version() != shadow.Version() {
			c.Gate.SetShadow(shadow)
			c.log.Info("shadow policy reloaded", "version", shadow.Version()[:12])
		}
		if src.PolicyFile == "" && src.ToolsFile == "" {
			return nil
		}
	}
	if src.PolicyFile == "" && src.ToolsFile == "" {
		return errors.New("serve runs the built-in policy and no tools file: there is nothing to reload")
	}
	registry, toolsVersion, set, err := src.Tools()
	if err != nil {
		return err
	}
	// The file is read before anything changes: one that does not load is
	// refused whole.
	file, err := c.readPolicyFile(ctx, registry)
	if err != nil {
		set.Close()
		return err
	}
	if err := c.putInForce(ctx, registry, toolsVersion, set, "reload"); err != nil {
		set.Close()
		return err
	}
	if file == nil {
		return nil
	}
	v, err := c.Versions.ProposeFile(ctx, file, versions.Origin{File: src.PolicyFile, FileRules: src.PolicyFromFile})
	switch {
	case err != nil:
		return fmt.Errorf("the policy file could not be proposed: %w", err)
	case v != nil:
		c.log.Warn("the policy file differs from the version in force: proposed it; it is in force once admins countersign it on /policy",
			"file", src.PolicyFile, "policy_version_id", v.ID)
	}
	return nil
}

// readPolicyFile reads the policy file, when there is one, and runs its
// tests against the tools.
func (c *Core) readPolicyFile(ctx context.Context, registry *tools.Registry) (*policy.FilePolicy, error) {
	src := c.cfg.Sources
	if src.PolicyFile == "" {
		return nil, nil
	}
	file, err := src.Policy(registry)
	if err != nil {
		return nil, err
	}
	if failed := policy.Failing(file.RunTests(ctx)); len(failed) > 0 {
		return nil, fmt.Errorf("the policy %s fails %d of its tests (run `countersign policy test` to see them)", file.Source, len(failed))
	}
	return file, nil
}

// RecordReloadFailure says that a reload was refused, not only in this
// instance's log: the metrics, the audit log and /policy say it too.
func (c *Core) RecordReloadFailure(ctx context.Context, err error) {
	c.log.Error("policy not reloaded; the previous one stays in force", "err", err)
	c.cfg.Metrics.ReloadFailed()
	if aerr := c.Gate.ReloadFailed(ctx, c.Store.Instance(), err); aerr != nil {
		c.log.Error("could not record the failed reload", "err", aerr)
	}
}

// followTools is the job that follows the MCP servers' tool lists: each
// time one changed (watchTools took note), toolsChanged.
func (c *Core) followTools(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.toolsWanted:
			c.toolsChanged()
		}
	}
}

// toolsChanged follows an MCP server that changed its tools: the tools in
// force are built again from the same file and put in force with the policy,
// if it still passes its tests against them.
func (c *Core) toolsChanged() {
	c.reloading.Lock()
	defer c.reloading.Unlock()
	set := c.toolSet
	if set == nil {
		return // closed since
	}
	registry, toolsVersion, err := c.cfg.Sources.Registry(set)
	if err == nil {
		err = c.putInForce(context.Background(), registry, toolsVersion, set, "an MCP server changed its tools")
	}
	if err != nil {
		c.log.Error("an MCP server changed its tools; the tools in force stay as they were", "err", err)
	}
	// Its prompts or resources may have changed instead: those who
	// offer them look again.
	c.Bus.OffersChanged()
}

// putInForce loads the policy version in force against the tools and hands
// both to the gate, which puts them in force, audited
// (gate.Gate.PutInForce); the set becomes the one in force and the
// previous one is closed (c.reloading held).
func (c *Core) putInForce(ctx context.Context, registry *tools.Registry, toolsVersion string, set *httptool.Set, why string) error {
	next, cur, err := c.Versions.InForce(ctx, registry)
	if err != nil {
		return fmt.Errorf("the policy version in force does not load against these tools: %w", err)
	}
	if cur == nil { // no version yet: cannot happen after start
		if next, err = c.cfg.Sources.Policy(registry); err != nil {
			return err
		}
	}
	changed, err := c.Gate.PutInForce(ctx, gate.Loaded{Tools: registry, ToolsVersion: toolsVersion, Policy: next,
		PolicyFile: c.cfg.Sources.PolicyFile, ToolsFile: c.cfg.Sources.ToolsFile, Why: why, Host: Hostname()})
	if err != nil {
		return err
	}
	if !changed && set != c.toolSet {
		set.Close()
		return nil
	}
	if set != c.toolSet {
		old := c.toolSet
		c.toolSet = set
		c.serving.Store(set)
		c.watchTools(set)
		c.keepTools(set)
		old.Close() // the old connections end, and their keepers
		c.Bus.OffersChanged()
	}
	return nil
}

// watchTools follows the set's MCP servers' tool lists: a change is
// noted, for the followTools job (none runs before Start).
func (c *Core) watchTools(set *httptool.Set) {
	if set != nil {
		set.Watch(func() {
			select {
			case c.toolsWanted <- struct{}{}: // followTools builds them again
			default: // already noted
			}
		})
		set.WatchTold(c.told)
	}
}

// Servers are the MCP servers of the tools file in force: what they offer
// besides tools (prompts, resources, completions) passes through to agents
// over MCP.
func (c *Core) Servers() []*upstream.Server {
	return c.serving.Load().Servers()
}

// told passes on what an MCP server of the tools file said that MCP
// clients are to hear (upstream.Told), on the bus.
func (c *Core) told(t upstream.Told) { c.Bus.Told(t) }

// Upstreams says how the MCP servers of the tools file in force are doing.
func (c *Core) Upstreams() []tools.UpstreamStatus {
	c.reloading.Lock()
	set := c.toolSet
	c.reloading.Unlock()
	return set.Upstreams()
}

// keepTools keeps the set's MCP servers connected until it is closed, on
// a goroutine of the core's (c.reloading held; none before Start).
func (c *Core) keepTools(set *httptool.Set) {
	if set == nil || !c.keeping {
		return
	}
	c.keepers.Go(func() {
		c.log.Debug("keeping the MCP servers connected", "tools", c.cfg.Sources.ToolsFile)
		set.Keep()
	})
}

// closeTools ends the connections of the tools file in force, and their
// keepers.
func (c *Core) closeTools() {
	c.reloading.Lock()
	c.keeping = false
	c.toolSet.Close()
	c.toolSet = nil
	c.serving.Store(nil)
	c.reloading.Unlock()
}
