package mcpgate

import (
	"encoding/json"
)

// lister is how each tool is shown to clients of the revisions with
// sessions (modern false) or without (listedTool), over the tools in force
// now; the order of the servers is read once, when first asked.
func (ep *Door) lister(modern bool) Listed {
	reg := ep.gw.Outside.Gate.Tools()
	var servers map[string]int
	return func(name string) (json.RawMessage, [2]int, bool) {
		t, ok := reg.Get(name)
		if !ok || !t.Executes() || !OfferedAt(t, modern) || t.Upstream == "" {
			return nil, [2]int{}, false
		}
		if servers == nil {
			servers = map[string]int{}
			for _, o := range reg.All() {
				if _, seen := servers[o.Upstream]; !seen && o.Upstream != "" {
					servers[o.Upstream] = len(servers)
				}
			}
		}
		place := t.Place
		if modern && t.Revision == "" {
			place = t.ModernPlace
		}
		return Wire(t, modern), [2]int{servers[t.Upstream], place}, true
	}
}
