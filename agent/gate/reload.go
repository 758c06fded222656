package gate

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// Loaded is tools and a policy file loaded against them, with where they
// came from: what a start, a reload or an MCP server's changed list offers
// to put in force.
type Loaded struct {
	Tools *tools.Registry
	// ToolsVersion covers what the tools file offers ("" without one).
	ToolsVersion string
	Policy       *policy.FilePolicy
	// The files they were read from ("" for a built-in one), for the audit.
	PolicyFile, ToolsFile string
	// Why they are put in force ("start", "reload", "an MCP server changed
	// its tools"), and on which host.
	Why, Host string
}

// PutInForce is the one way tools and a policy are put in force after the
// start: the policy must pass its own tests against the tools; an audit
// event is recorded for each that changed before the change takes effect;
// the versions this instance decides with are recorded; and the actions
// waiting for a person are decided again when the policy changed. What was
// in force stays when it fails. changed is false when neither differs from
// what is in force (nothing is recorded then).
func (g *Gate) PutInForce(ctx context.Context, l Loaded) (changed bool, err error) {
	if failed := policy.Failing(l.Policy.RunTests(ctx)); len(failed) > 0 {
		return false, fmt.Errorf("the policy %s fails %d of its tests (run `countersign policy test` to see them)", l.Policy.Source, len(failed))
	}
	g.reloading.Lock()
	defer g.reloading.Unlock()
	prev, prevTools := g.Policy().Version(), g.ToolsVersion()
	policyChanged, toolsChanged := l.Policy.Version() != prev, l.ToolsVersion != prevTools
	if !policyChanged && !toolsChanged {
		g.log.Info("policy and tools unchanged", "policy_version", short(prev))
		return false, nil
	}
	err = g.store.Write(ctx, func(tx *storage.Tx) error {
		if policyChanged {
			if err := tx.Audit(models.Event{Actor: "system", Kind: models.EventPolicyReloaded, Subject: l.Policy.Version(),
				Payload: models.PolicyReloadedPayload{File: l.PolicyFile, FromVersion: prev, ToVersion: l.Policy.Version()}}); err != nil {
				return err
			}
		}
		if toolsChanged {
			var names []string
			for _, t := range l.Tools.All() {
				names = append(names, t.Name)
			}
			return tx.Audit(models.Event{Actor: "system", Kind: models.EventToolsReloaded, Subject: l.ToolsVersion,
				Payload: models.ToolsReloadedPayload{File: l.ToolsFile, FromVersion: prevTools, ToVersion: l.ToolsVersion,
					Tools: names, Why: l.Why}})
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("record the change: %w", err)
	}
	g.reload(l.Tools, l.ToolsVersion, l.Policy)
	if err := g.store.RecordInForce(ctx, l.Host, l.Policy.Version(), l.ToolsVersion, l.Why); err != nil {
		g.log.Error("could not record the versions now in force", "err", err)
	}
	if policyChanged {
		// The actions waiting for a person are decided again: one the new
		// policy denies is cancelled, one it asks more of waits for it.
		if re, err := g.RedecidePending(ctx); err != nil {
			g.log.Error("could not decide the waiting actions again", "err", err)
		} else if re.Cancelled+re.Stricter > 0 {
			g.log.Info("waiting actions decided again", "cancelled", re.Cancelled, "stricter", re.Stricter)
		}
	}
	g.log.Info("policy and tools put in force", "why", l.Why, "from_version", short(prev),
		"to_version", short(l.Policy.Version()), "tools_changed", toolsChanged)
	return true, nil
}

// ReloadFailed records that a reload was refused, so that the audit log and
// /policy say it, not only this instance's log.
func (g *Gate) ReloadFailed(ctx context.Context, host string, cause error) error {
	return g.store.Write(ctx, func(tx *storage.Tx) error {
		return tx.Audit(models.Event{Actor: "system", Kind: models.EventPolicyReloadFailed, Subject: host,
			Payload: models.PolicyReloadFailedPayload{Error: cause.Error(), PolicyVersion: g.Policy().Version()}})
	})
}

// ToolsVersion is the version of the tools file in force ("" without one).
func (g *Gate) ToolsVersion() string { return g.inForce.Load().toolsVersion }

func short(version string) string {
	if len(version) > 12 {
		return version[:12]
	}
	return version
}

// PutPolicyInForce puts a policy version in force with the tools already in
// force (a version countersigned on any instance, or the one in force at
// start): as PutInForce, audited, with the waiting actions decided again.
func (g *Gate) PutPolicyInForce(ctx context.Context, p *policy.FilePolicy, why, host string) (bool, error) {
	now := g.inForce.Load()
	return g.PutInForce(ctx, Loaded{Tools: now.given, ToolsVersion: now.toolsVersion, Policy: p, Why: why, Host: host})
}

// FailClosed is what an instance does when it cannot load the policy
// version in force: it decides no call with the version before it. Every
// call is denied, recorded against the version in force
// (policy.NotLoaded), until a version loads; the waiting actions stay as
// they are. Its instances row and the audit log say why.
func (g *Gate) FailClosed(ctx context.Context, host string, v *models.PolicyVersion, cause error) error {
	g.reloading.Lock()
	defer g.reloading.Unlock()
	if cur, ok := g.Policy().(*policy.NotLoaded); ok && cur.Hash == v.Hash && cur.Cause.Error() == cause.Error() {
		return nil // said already
	}
	nl := &policy.NotLoaded{Hash: v.Hash, ID: v.ID, Cause: cause}
	now := g.inForce.Load()
	g.reload(now.given, now.toolsVersion, nl)
	g.log.Error("the policy version in force could not be loaded here: this instance denies every call until it can",
		"policy_version_id", v.ID, "policy_version", short(v.Hash), "err", cause)
	return g.store.RecordPolicyNotLoaded(ctx, host, v, cause.Error())
}
