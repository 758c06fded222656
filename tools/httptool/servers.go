package httptool

import (
	"slices"
	"sync"

	"github.com/countersign/countersign/tools/upstream"
)

// Servers are the file's MCP servers, in the file's order: what they offer
// besides tools passes through to agents over MCP (web/mcpgate).
func (s *Set) Servers() []*upstream.Server {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.upstreams)
}

// Keep keeps each MCP server of the set connected, reconnecting after a
// session ends (with backoff), until Close; it returns when every one has
// stopped. Load connects once and starts nothing: the set's owner runs
// Keep on a goroutine it tracks (the core, while the set is in force).
func (s *Set) Keep() {
	if s == nil {
		return
	}
	var wg sync.WaitGroup
	for _, u := range s.Servers() {
		wg.Go(u.Keep)
	}
	wg.Wait()
}
