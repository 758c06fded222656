package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What a server offers besides tools, passed through to the agents that
// reach Countersign over MCP as the server listed it: its prompts, its
// resources and resource templates (read, subscribed), and completions.
// Countersign gates tool calls only; these are reads the tools file may
// turn off per server (prompts: false, resources: false,
// completions: false).

// Offers is what a server offers besides tools, as it last listed them and
// as the tools file lets through.
type Offers struct {
	Server string
	// Prompts are named as Countersign offers them ("<server>__<name>"
	// unless prefix: false); resources keep their URIs.
	Prompts     []*mcp.Prompt
	Resources   []*mcp.Resource
	Templates   []*mcp.ResourceTemplate
	Completions bool
	// Off names what the tools file turned off.
	Off []string
	// Wire is each prompt, resource and template in the bytes the server
	// listed it in (a prompt under the name it is offered under), by
	// WireKey; secrets hidden. Missing: not known (the SDK's words).
	Wire map[string]json.RawMessage `json:",omitempty"`
}

// WireKey is where Offers.Wire keeps a prompt ("prompt", its name as
// offered), a resource ("resource", its URI) or a template ("template",
// its URI template).
func WireKey(kind, id string) string { return kind + "\x00" + id }

// Shape is what the offers look like, to see a change.
func (o Offers) Shape() string {
	b, _ := json.Marshal(o)
	return string(b)
}

func allowed(b *bool) bool { return b == nil || *b }

// offered is the name a prompt is offered under.
func (u *Server) offered(name string) string {
	if u.spec.Prefixed() {
		return u.spec.Name + "__" + name
	}
	return name
}

// listOffers asks the server for what it offers besides tools, as far as
// it says it has any and the file lets it through. A list that fails is
// left empty and said (Skipped): the tools still count.
func (u *Server) listOffers(ctx context.Context, s *mcp.ClientSession) (o Offers, skipped []string) {
	o.Server = u.spec.Name
	var caps *mcp.ServerCapabilities
	if init := s.InitializeResult(); init != nil {
		caps = init.Capabilities
	}
	if caps == nil {
		caps = &mcp.ServerCapabilities{}
	}
	spec := u.spec
	for _, off := range []struct {
		what string
		on   *bool
	}{{"prompts", spec.Prompts}, {"resources", spec.Resources}, {"completions", spec.Completions}} {
		if !allowed(off.on) {
			o.Off = append(o.Off, off.what)
		}
	}
	failed := func(what string, err error) {
		skipped = append(skipped, fmt.Sprintf("%s: could not be listed: %s", what, u.cfg.Redact(err.Error())))
	}
	o.Wire = map[string]json.RawMessage{}
	keep := func(kind, id string, wire json.RawMessage) {
		if wire != nil {
			o.Wire[WireKey(kind, id)] = u.cfg.RedactJSON(wire)
		}
	}
	if caps.Prompts != nil && allowed(spec.Prompts) {
		err := ListPages(ctx, "prompts", func(ctx context.Context, cursor string) ([]*mcp.Prompt, string, error) {
			res, err := s.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return res.Prompts, res.NextCursor, nil
		}, func(p *mcp.Prompt, wire json.RawMessage) {
			p = redacted(u, p)
			p.Name = u.offered(p.Name)
			o.Prompts = append(o.Prompts, p)
			keep("prompt", p.Name, renamed(wire, p.Name))
		})
		if err != nil {
			failed("prompts", err)
			o.Prompts = nil
		}
	}
	if caps.Resources != nil && allowed(spec.Resources) {
		err := ListPages(ctx, "resources", func(ctx context.Context, cursor string) ([]*mcp.Resource, string, error) {
			res, err := s.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return res.Resources, res.NextCursor, nil
		}, func(r *mcp.Resource, wire json.RawMessage) {
			o.Resources = append(o.Resources, redacted(u, r))
			keep("resource", r.URI, wire)
		})
		if err != nil {
			failed("resources", err)
			o.Resources = nil
		}
		err = ListPages(ctx, "resourceTemplates", func(ctx context.Context, cursor string) ([]*mcp.ResourceTemplate, string, error) {
			res, err := s.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return res.ResourceTemplates, res.NextCursor, nil
		}, func(t *mcp.ResourceTemplate, wire json.RawMessage) {
			o.Templates = append(o.Templates, redacted(u, t))
			keep("template", t.URITemplate, wire)
		})
		if err != nil {
			failed("resource templates", err)
			o.Templates = nil
		}
	}
	o.Completions = caps.Completions != nil && allowed(spec.Completions)
	sort.Slice(o.Prompts, func(i, j int) bool { return o.Prompts[i].Name < o.Prompts[j].Name })
	return o, skipped
}

// redacted is v with the tools file's secrets hidden.
func redacted[T any](u *Server, v *T) *T {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	out := new(T)
	if json.Unmarshal(u.cfg.RedactJSON(b), out) != nil {
		return v
	}
	return out
}

// Offers is what the server offers besides tools, as it last listed them
// (empty while it cannot be reached).
func (u *Server) Offers() Offers {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.session == nil {
		return Offers{Server: u.spec.Name, Off: u.offers.Off}
	}
	return u.offers
}

// OffersAt is what the server offers besides tools to clients of the
// revisions with sessions (modern false: Offers) or of ModernProtocol,
// which get what the server lists at that revision where it speaks it.
func (u *Server) OffersAt(modern bool) Offers {
	u.mu.Lock()
	m, o := u.modern, u.modernOffers
	u.mu.Unlock()
	if modern && m != nil {
		return o
	}
	return u.Offers()
}

// relistOffers takes up a prompt or resource list (which: ListPrompts or
// ListResources) the server says has changed on either of its sessions
// (s: the 2025 one or the one at ModernProtocol).
func (u *Server) relistOffers(s *mcp.ClientSession, which string) {
	ctx, cancel := context.WithTimeout(u.ctx, ConnectTimeout)
	defer cancel()
	o, skipped := u.listOffers(ctx, s)
	u.mu.Lock()
	var changed bool
	switch s {
	case u.session:
		changed = o.Shape() != u.offers.Shape()
		u.offers, u.offersSkipped = o, skipped
	case u.modern:
		o = o.withOthers(u.modernOffers, which)
		changed = o.Shape() != u.modernOffers.Shape()
		u.modernOffers, u.modernOffersSkipped = o, skipped
	default: // a session closed since
		u.mu.Unlock()
		return
	}
	u.mu.Unlock()
	u.listed(which, changed, nil)
}

// forward is the session a client's request goes on (modern: the client
// speaks ModernProtocol, and so is answered by the server at it where the
// server speaks it), or an error that says the server is not answering.
func (u *Server) forward(modern bool) (*mcp.ClientSession, error) {
	u.mu.Lock()
	s, st := u.session, u.st
	if modern && u.modern != nil && s != nil {
		s = u.modern
	}
	u.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("the %s MCP server is not answering (down since %s); Countersign keeps trying to reconnect",
			u.spec.Name, st.Since.UTC().Format("15:04:05 MST"))
	}
	return s, nil
}

// answer is what the server answered, its secrets hidden: a JSON-RPC
// error keeps its code and data, as the server sent them.
func answer[T any](u *Server, res *T, err error) (*T, error) {
	if err != nil {
		var wire *jsonrpc.Error
		if errors.As(err, &wire) {
			return nil, &jsonrpc.Error{Code: wire.Code, Message: u.cfg.Redact(wire.Message), Data: u.cfg.RedactJSON(wire.Data)}
		}
		return nil, fmt.Errorf("the %s MCP server did not answer: %s", u.spec.Name, u.cfg.Redact(err.Error()))
	}
	return redacted(u, res), nil
}

// upstreamPrompt is the server's own name for a prompt Countersign offers.
func (u *Server) upstreamPrompt(name string) string {
	if u.spec.Prefixed() {
		return strings.TrimPrefix(name, u.spec.Name+"__")
	}
	return name
}

// GetPrompt gets a prompt from the server (p.Name as Countersign offers
// it) for a client of the revisions with sessions or (modern) without:
// at ModernProtocol the server may answer with an input-required result,
// which the client answers by asking again with p.InputResponses and
// p.RequestState.
func (u *Server) GetPrompt(ctx context.Context, p *mcp.GetPromptParams, modern bool) (*mcp.GetPromptResult, error) {
	s, err := u.forward(modern)
	if err != nil {
		return nil, err
	}
	q := *p
	q.Name = u.upstreamPrompt(p.Name)
	res, err := s.GetPrompt(ctx, &q)
	return answer(u, res, err)
}

// AsSent is a prompt's or a resource's answer from the server in the bytes
// it sent, asked for with WithResultBytes, with the file's secrets hidden
// in it as in the decoded answer (nil: not heard).
func (u *Server) AsSent(raw []byte) []byte {
	if raw == nil {
		return nil
	}
	return u.cfg.RedactJSON(raw)
}

// ReadResource reads a resource of the server (modern: as GetPrompt).
func (u *Server) ReadResource(ctx context.Context, p *mcp.ReadResourceParams, modern bool) (*mcp.ReadResourceResult, error) {
	s, err := u.forward(modern)
	if err != nil {
		return nil, err
	}
	res, err := s.ReadResource(ctx, p)
	return answer(u, res, err)
}

// Complete asks the server to complete a prompt's or a resource
// template's argument (a prompt named as Countersign offers it).
func (u *Server) Complete(ctx context.Context, p *mcp.CompleteParams, modern bool) (*mcp.CompleteResult, error) {
	s, err := u.forward(modern)
	if err != nil {
		return nil, err
	}
	q := *p
	if p.Ref != nil && p.Ref.Type == "ref/prompt" {
		ref := *p.Ref
		ref.Name = u.upstreamPrompt(ref.Name)
		q.Ref = &ref
	}
	res, err := s.Complete(ctx, &q)
	return answer(u, res, err)
}

// Subscribe asks the server for updates of a resource (told through
// Config.Updated).
func (u *Server) Subscribe(ctx context.Context, uri string) error {
	s, err := u.forward(false)
	if err != nil {
		return err
	}
	_, err = answer(u, &struct{}{}, s.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}))
	if err == nil {
		u.mu.Lock()
		if u.subs == nil {
			u.subs = map[string]bool{}
		}
		u.subs[uri] = true
		u.mu.Unlock()
	}
	return err
}

// Unsubscribe stops the updates of a resource.
func (u *Server) Unsubscribe(ctx context.Context, uri string) error {
	s, err := u.forward(false)
	if err != nil {
		return err
	}
	u.mu.Lock()
	delete(u.subs, uri)
	u.mu.Unlock()
	_, err = answer(u, &struct{}{}, s.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}))
	return err
}
