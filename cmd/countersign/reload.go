package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/countersign/countersign/models"
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
				// Not only in this instance's log: the audit log and /policy
				// say it too.
				if aerr := a.store.Write(ctx, func(tx *models.Tx) error {
					return tx.Audit(models.Event{Actor: "system", Kind: "policy.reload_failed", Subject: a.store.Instance(),
						Payload: map[string]any{"error": err.Error(), "policy_version": a.gate.Policy().Version()}})
				}); aerr != nil {
					a.log.Error("could not record the failed reload", "err", aerr)
				}
			}
		}
	}
}

// ReloadPolicy reads the tools file and the policy file again and, if both
// load and the policy passes its own tests against those tools, puts them
// in force together, with an audit event for each that changed. Otherwise
// what is in force stays, and the error says why.
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
	if err := a.putInForce(ctx, registry, toolsVersion, set, "reload"); err != nil {
		set.Close()
		return err
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

// putInForce puts tools and the policy file, loaded against them, in force
// together, with an audit event for each that changed (a.reloadMu held).
// The set becomes the one in force; the previous one is closed.
func (a *App) putInForce(ctx context.Context, registry *tools.Registry, toolsVersion string, set *httptool.Set, why string) error {
	next, err := loadPolicy(a.cfg, registry)
	if err != nil {
		return err
	}
	if failed := failingTests(next.RunTests(ctx)); len(failed) > 0 {
		return fmt.Errorf("the policy %s fails %d of its tests (run `countersign policy test` to see them)", next.Source, len(failed))
	}
	prev := a.gate.Policy().Version()
	policyChanged, toolsChanged := next.Version() != prev, toolsVersion != a.toolsVersion
	if !policyChanged && !toolsChanged {
		a.log.Info("policy and tools unchanged", "policy_version", prev[:12])
		if set != a.toolSet {
			set.Close()
		}
		return nil
	}
	err = a.store.Write(ctx, func(tx *models.Tx) error {
		if policyChanged {
			if err := tx.Audit(models.Event{Actor: "system", Kind: "policy.reloaded", Subject: next.Version(),
				Payload: map[string]any{"file": a.cfg.Policy, "from_version": prev, "to_version": next.Version()}}); err != nil {
				return err
			}
		}
		if toolsChanged {
			var names []string
			for _, t := range registry.All() {
				names = append(names, t.Name)
			}
			return tx.Audit(models.Event{Actor: "system", Kind: "tools.reloaded", Subject: toolsVersion,
				Payload: map[string]any{"file": a.cfg.Tools, "from_version": a.toolsVersion, "to_version": toolsVersion,
					"tools": names, "why": why}})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record the change: %w", err)
	}
	a.gate.Reload(registry, next)
	a.toolsVersion = toolsVersion
	if err := a.store.RecordVersions(ctx, hostname(), next.Version(), toolsVersion, why); err != nil {
		a.log.Error("could not record the versions now in force", "err", err)
	}
	if policyChanged {
		// The actions waiting for a person are decided again: one the new
		// policy denies is cancelled, one it asks more of waits for it.
		if re, err := a.gate.RedecidePending(ctx); err != nil {
			a.log.Error("could not decide the waiting actions again", "err", err)
		} else if re.Cancelled+re.Stricter > 0 {
			a.log.Info("waiting actions decided again", "cancelled", re.Cancelled, "stricter", re.Stricter)
		}
	}
	if set != a.toolSet {
		old := a.toolSet
		a.toolSet = set
		a.watchTools(set)
		old.Close() // the old connections end
	}
	a.log.Info("policy and tools put in force", "why", why, "from_version", prev[:12], "to_version", next.Version()[:12], "tools_changed", toolsChanged)
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
