package upstream

import (
	"context"
	"strings"

	"github.com/countersign/countersign/tools"
)

// Calls to tools a server does not list. Some servers take calls to
// names they never list (the MCP conformance suite's everything-server
// changes its lists that way). An entry with unlisted_tools forwards such
// a call, gated as a tool of the risk it gives; without it the call is
// refused as an unknown tool, as before.

// anyObject is an unlisted tool's input schema: the server checks its
// arguments, Countersign knows nothing of them but that they are an object.
const anyObject = `{"type":"object"}`

// Unlisted is the tool a call to name reaches when the server does not
// list it and the entry forwards such calls (Spec.UnlistedTools): named
// "<server>__<its name>" (the rest sent as it is), or by its own name with
// prefix: false. A name the server lists, even as another case or
// spelling Countersign offers under one name, or one Countersign skipped
// (a bad schema, a name taken), is never an unlisted tool: it is either
// offered, with its own risk, or refused.
func (u *Server) Unlisted(name string) (*tools.Tool, bool) {
	ms := u.spec
	risk := tools.Risk(ms.UnlistedTools)
	if !risk.Valid() {
		return nil, false
	}
	own := name
	if ms.Prefixed() {
		var ok bool
		if own, ok = strings.CutPrefix(name, ms.Name+"__"); !ok {
			return nil, false
		}
	}
	if !tools.MCPToolName.MatchString(own) || u.lists(own) {
		return nil, false
	}
	run := func(ctx context.Context, call tools.Call, args map[string]any) (any, error) {
		return u.call(ctx, own, risk, args)
	}
	tool, err := tools.FromSpec(tools.Spec{Name: name, Risk: risk, Schema: []byte(anyObject), Run: run, MCPName: true})
	if err != nil {
		return nil, false
	}
	tool.Origin = "MCP server " + ms.Name + " (" + own + ", which it does not list); risk from tools file (unlisted_tools)"
	tool.Upstream, tool.UpstreamName, tool.Unlisted = ms.Name, own, true
	return tool, true
}

// lists says whether the server lists a tool of that name now, at
// either revision, taken up or skipped, under any spelling Countersign
// would offer as the same name.
func (u *Server) lists(own string) bool {
	safe := safeToolName(own)
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, t := range u.tools {
		if t.UpstreamName == own || safeToolName(t.UpstreamName) == safe {
			return true
		}
	}
	for _, skipped := range [][]string{u.legacySkipped, u.modernSkipped} {
		for _, s := range skipped {
			// "<name>: why" (list): a name that only begins so is
			// taken as listed too, the safe side.
			if name, _, ok := strings.Cut(s, ": "); ok && (strings.HasPrefix(s, own+": ") || safeToolName(name) == safe) {
				return true
			}
		}
	}
	return false
}

// Prefix is what the names Countersign offers the server's tools under
// begin with: "<name>__", or "" with prefix: false.
func (u *Server) Prefix() string {
	if u.spec.Prefixed() {
		return u.spec.Name + "__"
	}
	return ""
}
