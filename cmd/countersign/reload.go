package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/agent/versions"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
)

// reloadOnHangup reloads the policy file on SIGHUP.
func (a *App) reloadOnHangup(ctx context.Context, hup <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if err := a.ReloadPolicy(ctx); err != nil {
				a.log.Error("policy not reloaded; the previous one stays in force", "err", err)
				a.metrics.ReloadFailed()
				// Not only in this instance's log: the audit log and /policy
				// say it too.
				if aerr := a.gate.ReloadFailed(ctx, a.store.Instance(), err); aerr != nil {
					a.log.Error("could not record the failed reload", "err", aerr)
				}
			}
		}
	}
}

// ReloadPolicy reads the tools file and the policy file again. The tools
// are put in force with the policy version in force, if it still loads and
// passes its tests against them. The policy file, when it differs from the
// version in force, is proposed, as an upload would be (put in force with
// --policy-from-file). Otherwise what is in force stays, and the error
// says why.
func (a *App) ReloadPolicy(ctx context.Context) error {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	if a.cfg.ShadowPolicy != "" {
		if shadow, err := loadShadow(ctx, a.cfg, a.gate.Tools()); err != nil {
			a.log.Error("shadow policy not reloaded; the previous one stays", "err", err)
		} else if prev, _ := a.gate.Shadow(); prev == nil || prev.Version() != shadow.Version() {
			a.gate.SetShadow(shadow)
			a.log.Info("shadow policy reloaded", "version", shadow.Version()[:12])
		}
		if a.cfg.Policy == "" && a.cfg.Tools == "" {
			return nil
		}
	}
	if a.cfg.Policy == "" && a.cfg.Tools == "" {
		return errors.New("serve runs the built-in policy and no tools file: there is nothing to reload")
	}
	registry, toolsVersion, set, err := loadTools(a.cfg, a.store)
	if err != nil {
		return err
	}
	// The file is read before anything changes: one that does not load is
	// refused whole.
	var file *policy.FilePolicy
	if a.cfg.Policy != "" {
		if file, err = loadPolicy(a.cfg, registry); err != nil {
			set.Close()
			return err
		}
		if failed := policy.Failing(file.RunTests(ctx)); len(failed) > 0 {
			set.Close()
			return fmt.Errorf("the policy %s fails %d of its tests (run `countersign policy test` to see them)", file.Source, len(failed))
		}
	}
	if err := a.putInForce(ctx, registry, toolsVersion, set, "reload"); err != nil {
		set.Close()
		return err
	}
	if file == nil {
		return nil
	}
	v, err := a.core.Versions.ProposeFile(ctx, file, versions.Origin{File: a.cfg.Policy, FileRules: a.cfg.PolicyFromFile})
	switch {
	case err != nil:
		return fmt.Errorf("the policy file could not be proposed: %w", err)
	case v != nil:
		a.log.Warn("the policy file differs from the version in force: proposed it; it is in force once admins countersign it on /policy",
			"file", a.cfg.Policy, "policy_version_id", v.ID)
	}
	return nil
}

// toolsChanged follows an MCP server that changed its tools: the tools in
// force are built again from the same file and put in force with the policy,
// if it still passes its tests against them.
func (a *App) toolsChanged(set *httptool.Set) {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	if set != a.toolSet {
		return // replaced since
	}
	registry, toolsVersion, err := registryOf(a.cfg, a.store, set)
	if err == nil {
		err = a.putInForce(context.Background(), registry, toolsVersion, set, "an MCP server changed its tools")
	}
	if err != nil {
		a.log.Error("an MCP server changed its tools; the tools in force stay as they were", "err", err)
	}
}

// putInForce loads the policy version in force against the tools and hands
// both to the gate, which puts them in force, audited
// (gate.Gate.PutInForce); the set becomes the one in force and the
// previous one is closed (a.reloadMu held).
func (a *App) putInForce(ctx context.Context, registry *tools.Registry, toolsVersion string, set *httptool.Set, why string) error {
	next, cur, err := a.core.Versions.InForce(ctx, registry)
	if err != nil {
		return fmt.Errorf("the policy version in force does not load against these tools: %w", err)
	}
	if cur == nil { // no version yet: cannot happen after start
		if next, err = loadPolicy(a.cfg, registry); err != nil {
			return err
		}
	}
	changed, err := a.gate.PutInForce(ctx, gate.Loaded{Tools: registry, ToolsVersion: toolsVersion, Policy: next,
		PolicyFile: a.cfg.Policy, ToolsFile: a.cfg.Tools, Why: why, Host: core.Hostname()})
	if err != nil {
		return err
	}
	if !changed && set != a.toolSet {
		set.Close()
		return nil
	}
	if set != a.toolSet {
		old := a.toolSet
		a.toolSet = set
		a.watchTools(set)
		old.Close() // the old connections end
	}
	return nil
}

// watchTools follows the set's MCP servers' tool lists.
func (a *App) watchTools(set *httptool.Set) {
	if set != nil {
		set.Watch(func() { a.toolsChanged(set) })
	}
}

// upstreams says how the MCP servers of the tools file in force are doing.
func (a *App) upstreams() []tools.UpstreamStatus {
	a.reloadMu.Lock()
	set := a.toolSet
	a.reloadMu.Unlock()
	return set.Upstreams()
}
