package gate

import (
	"context"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/tools"
)

// Tool definitions pinned. An upstream MCP server says what its tools are
// and how risky (its annotations); it may change that at any time. So the
// definition of each of its tools (as the server listed it) is pinned: a
// tool whose definition is new or differs from the one accepted is held at
// high_write, every call waiting for a person, until an admin accepts it on
// /tools (seeing the difference; audited with the definition's hash). The
// first listing of a server is accepted as it comes, since an operator just
// put that server in the tools file; a server the file trusts
// (trust_annotations) has every new definition accepted at once.

// HeldUnaccepted is what the origin of a tool held at high_write says.
const HeldUnaccepted = "held at high_write: its definition is new or changed and no admin has accepted it on /tools"

// Unaccepted is an upstream tool whose definition in force is not the one
// accepted: new (Pinned nil) or changed.
type Unaccepted struct {
	Tool   *tools.Tool // as the server lists it now (its own risk)
	Pinned *models.ToolPin
}

// pin is the registry as the gate decides with it: every upstream tool
// whose definition is not the accepted one held at high_write. Accepted
// definitions that cannot be read leave every upstream tool held: the safe
// side.
func (g *Gate) pin(given *tools.Registry) (*tools.Registry, map[string]models.ToolPin) {
	var upstream []*tools.Tool
	for _, t := range given.All() {
		if t.Upstream != "" && len(t.Listing) > 0 {
			upstream = append(upstream, t)
		}
	}
	if len(upstream) == 0 || g.store == nil {
		return given, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pins, err := g.store.ToolPins(ctx)
	if err != nil {
		g.log.Error("could not read the accepted tool definitions; every MCP server's tool waits for a person", "err", err)
		pins = nil
	} else {
		g.acceptAsConfigured(ctx, upstream, pins)
	}
	var out []*tools.Tool
	for _, t := range given.All() {
		if p, ok := pins[t.Name]; t.Upstream != "" && len(t.Listing) > 0 && (!ok || p.Hash != t.ListingHash()) &&
			tools.RiskHighWrite.Above(t.Risk) {
			t = t.WithRisk(tools.RiskHighWrite, HeldUnaccepted)
		}
		out = append(out, t)
	}
	reg, err := tools.NewRegistry(out...)
	if err != nil { // the names are the given registry's: cannot happen
		g.log.Error("could not hold the unaccepted tools", "err", err)
		return given, pins
	}
	return reg.WithUnlisted(given.Unlisted()), pins
}

// acceptAsConfigured pins what needs no admin: the tools of a server's
// first listing, and a trusted server's new definitions. pins gains them.
func (g *Gate) acceptAsConfigured(ctx context.Context, upstream []*tools.Tool, pins map[string]models.ToolPin) {
	known := map[string]bool{} // servers with a pin
	for _, p := range pins {
		known[p.Upstream] = true
	}
	var first, trusted []models.ToolPin
	for _, t := range upstream {
		p, ok := pins[t.Name]
		if ok && p.Hash == t.ListingHash() {
			continue
		}
		pin := models.ToolPin{Name: t.Name, Upstream: t.Upstream, Hash: t.ListingHash(), Definition: string(t.Listing)}
		switch {
		case t.TrustListing:
			trusted = append(trusted, pin)
		case !known[t.Upstream]:
			first = append(first, pin)
		}
	}
	accept := func(list []models.ToolPin, why string, onlyNew bool) {
		if len(list) == 0 {
			return
		}
		if err := g.store.PinTools(ctx, list, "tools file", why, onlyNew); err != nil {
			g.log.Error("could not accept tool definitions", "why", why, "err", err)
			return
		}
		now, err := g.store.ToolPins(ctx) // what was stored (another instance may have been first)
		if err != nil {
			return
		}
		for _, p := range list {
			if got, ok := now[p.Name]; ok {
				pins[p.Name] = got
			}
		}
	}
	accept(first, "the server's first listing", true)
	accept(trusted, "the tools file trusts the server's annotations", false)
}

// Unaccepted lists the upstream tools in force whose definition is not
// the one accepted, by name.
func (g *Gate) Unaccepted() []Unaccepted {
	now := g.inForce.Load()
	var out []Unaccepted
	for _, t := range now.given.All() {
		if t.Upstream == "" || len(t.Listing) == 0 {
			continue
		}
		p, ok := now.pins[t.Name]
		if ok && p.Hash == t.ListingHash() {
			continue
		}
		u := Unaccepted{Tool: t}
		if ok {
			u.Pinned = &p
		}
		out = append(out, u)
	}
	return out
}

// AcceptTool accepts the definition of an upstream tool in force, if its
// hash is still the one the admin saw, and puts it in force: its risk is
// its own again (the file's or its annotations').
func (g *Gate) AcceptTool(ctx context.Context, name, hash string, by models.Actor) error {
	now := g.inForce.Load()
	t, ok := now.given.Get(name)
	if !ok || t.Upstream == "" || len(t.Listing) == 0 {
		return errNoSuchUpstreamTool(name)
	}
	if t.ListingHash() != hash {
		return errChangedAgain(name)
	}
	if err := g.store.PinTools(ctx, []models.ToolPin{{Name: t.Name, Upstream: t.Upstream, Hash: hash, Definition: string(t.Listing)}},
		by.String(), "accepted on /tools", false); err != nil {
		return err
	}
	g.Repin()
	return nil
}

// Repin applies the accepted definitions again (one accepted here, or, on
// PostgreSQL, by another instance): a tool whose pin changed is put in
// force as it now stands. It does nothing when no pin changed.
func (g *Gate) Repin() {
	g.putting.Lock()
	defer g.putting.Unlock()
	now := g.inForce.Load()
	reg, pins := g.pin(now.given)
	if samePins(pins, now.pins) {
		return
	}
	g.swap(&inForce{given: now.given, tools: reg, pins: pins, policy: now.policy, toolsVersion: now.toolsVersion})
}

func samePins(a, b map[string]models.ToolPin) bool {
	if len(a) != len(b) {
		return false
	}
	for k, p := range a {
		if q, ok := b[k]; !ok || q.Hash != p.Hash {
			return false
		}
	}
	return true
}

func errNoSuchUpstreamTool(name string) error {
	return fault.Errorf(fault.NotFound, "%s is not a tool of an MCP server in force", tools.Truncate(name, 100))
}

func errChangedAgain(name string) error {
	return fault.Errorf(fault.Conflict, "the definition of %s changed again since you looked; look at the difference again before accepting",
		tools.Truncate(name, 100))
}
