package httptool

import (
	"fmt"
	"strings"

	"github.com/countersign/countersign/tools"
)

// Unlisted is the tool a call to name reaches that no tool of the file
// has and no MCP server lists, when an MCP server of the file forwards
// such calls (unlisted_tools; upstream.Server.Unlisted). A name that
// begins with a server's prefix ("<server>__") is that server's alone;
// any other may be the one server with prefix: false that forwards them.
func (s *Set) Unlisted(name string) (*tools.Tool, bool) {
	if s == nil {
		return nil, false
	}
	s.mu.Lock()
	ups := s.upstreams
	s.mu.Unlock()
	for _, u := range ups {
		if p := u.Prefix(); p != "" && strings.HasPrefix(name, p) {
			return u.Unlisted(name)
		}
	}
	for _, u := range ups {
		if u.Prefix() == "" {
			if t, ok := u.Unlisted(name); ok {
				return t, true
			}
		}
	}
	return nil, false
}

// oneUnlistedByOwnName refuses two entries with prefix: false that both
// forward calls to tools they do not list: a name would not say which.
func oneUnlistedByOwnName(spec fileSpec, at func(string) string) error {
	first := -1
	for i, ms := range spec.MCPServers {
		if ms.Prefixed() || ms.UnlistedTools == "" {
			continue
		}
		if first >= 0 {
			return fmt.Errorf("%s: the MCP servers %s and %s both have prefix: false and unlisted_tools: a call to a tool neither lists would not say which it is for (keep unlisted_tools on one)",
				at(fmt.Sprintf("$.mcp_servers[%d].unlisted_tools", i)), spec.MCPServers[first].Name, ms.Name)
		}
		first = i
	}
	return nil
}
