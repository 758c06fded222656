package upstream

import (
	"context"

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
// own: listing waits for an answer, not on the goroutine that reads them.
func (u *Server) listHandlers(opts *mcp.ClientOptions, relistTools func(*mcp.ClientSession)) {
	opts.ToolListChangedHandler = func(_ context.Context, req *mcp.ToolListChangedRequest) { go relistTools(req.Session) }
	opts.PromptListChangedHandler = func(_ context.Context, req *mcp.PromptListChangedRequest) {
		go u.relistOffers(req.Session, ListPrompts)
	}
	opts.ResourceListChangedHandler = func(_ context.Context, req *mcp.ResourceListChangedRequest) {
		go u.relistOffers(req.Session, ListResources)
	}
}
