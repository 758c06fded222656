package upstream

import (
	"context"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What a server says that its clients are to hear, through Countersign.

// The lists a server may say changed (Told.List).
const (
	ListTools     = "tools"
	ListPrompts   = "prompts"
	ListResources = "resources"
)

// Told is one thing a server said that Countersign's MCP clients are to
// hear (Config.Told): Updated, a resource a client subscribed to changed
// (its URI); or List, the server said that list changed and Countersign,
// asking for it again, found what it offers the same. A client that asks
// the server directly would have been told; through Countersign it is
// told too, and asks again to find nothing new. (A changed list is told
// as a change: Config.Changed.)
type Told struct {
	Updated string
	List    string
}

// listed follows a list asked for again because the server said it
// changed: a change is taken up (Config.Changed), the same list is told
// as the server said it (Config.Told); err: the list could not be read,
// and nothing is told.
func (u *Server) listed(list string, changed bool, err error) {
	switch {
	case err != nil:
	case changed:
		u.cfg.Changed()
	default:
		u.tell(Told{List: list})
	}
}

func (u *Server) tell(t Told) {
	if u.cfg.Told != nil {
		u.cfg.Told(t)
	}
}

// listHandlers has a session's lists asked for again when the server
// says one changed (its tools with relistTools), on a goroutine of their
// own (listing waits for an answer, not on the goroutine that reads them),
// one list at a time (relistSoon).
func (u *Server) listHandlers(opts *mcp.ClientOptions, relistTools func(*mcp.ClientSession)) {
	opts.ToolListChangedHandler = func(_ context.Context, req *mcp.ToolListChangedRequest) {
		u.relistSoon(relistKey{req.Session, ListTools}, func() { relistTools(req.Session) })
	}
	opts.PromptListChangedHandler = func(_ context.Context, req *mcp.PromptListChangedRequest) {
		u.relistSoon(relistKey{req.Session, ListPrompts}, func() { u.relistOffers(req.Session, ListPrompts) })
	}
	opts.ResourceListChangedHandler = func(_ context.Context, req *mcp.ResourceListChangedRequest) {
		u.relistSoon(relistKey{req.Session, ListResources}, func() { u.relistOffers(req.Session, ListResources) })
	}
}

// relistKey is one list of one session.
type relistKey struct {
	session *mcp.ClientSession
	list    string
}

// relisting is the lists being asked for again, each true when the server
// said it changed once more meanwhile.
type relisting struct {
	mu  sync.Mutex
	now map[relistKey]bool
}

// relistSoon asks for a list again (relist) unless it is being asked for
// now; then it is asked for once more when that ends, however often the
// server said it changed meanwhile. A server that says so a thousand times
// at once is asked twice, and its clients told twice, not a thousand
// times, and never waits on as many goroutines.
func (u *Server) relistSoon(key relistKey, relist func()) {
	r := &u.relisting
	r.mu.Lock()
	if again, busy := r.now[key]; busy {
		if !again {
			r.now[key] = true
		}
		r.mu.Unlock()
		return
	}
	if r.now == nil {
		r.now = map[relistKey]bool{}
	}
	r.now[key] = false
	r.mu.Unlock()
	go func() {
		for {
			relist()
			r.mu.Lock()
			if !r.now[key] {
				delete(r.now, key)
				r.mu.Unlock()
				return
			}
			r.now[key] = false
			r.mu.Unlock()
		}
	}()
}
