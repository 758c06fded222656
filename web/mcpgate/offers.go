package mcpgate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/countersign/countersign/tools/upstream"
)

// What the tools file's MCP servers offer besides tools passes through as
// they listed it: their prompts (under the names Countersign gives them),
// resources and resource templates (read and subscribed to on the server
// that lists them), and completions. None of it is gated: these are reads,
// and the tools file turns each off per server (tools/upstream). Where two
// servers offer one resource URI or template, the first in the file keeps
// it; two prompts of one name refuse the file at load.

// Offered is what one agent's server offers besides tools: each prompt,
// resource and template by key, with what it looked like (and whose it
// was) when it was added.
type Offered map[string]string

// subscriptions counts the clients subscribed to each resource, to
// unsubscribe from the server when the last one goes.
type subscriptions struct {
	mu sync.Mutex
	n  map[string]int
}

// OfferMore changes what a server built by Server offers besides tools
// from before (nil: nothing) to what the MCP servers offer now to clients
// of its revisions (modern: those without sessions), and returns that.
// The SDK tells connected clients that a list changed.
func (gw *Gateway) OfferMore(s *mcp.Server, modern bool, before Offered) Offered {
	after := Offered{}
	var add []func()
	seen := func(key, shape string) bool {
		if _, taken := after[key]; taken {
			return true // an earlier server has it
		}
		after[key] = shape
		return before[key] == shape
	}
	for _, u := range gw.servers() {
		o := u.OffersAt(modern)
		whose := fmt.Sprintf("%p", u) // a server of a reloaded file is another
		for _, p := range o.Prompts {
			if !seen("prompt:"+p.Name, whose+shapeOf(p)) {
				add = append(add, func() { s.AddPrompt(p, gw.prompt(u, modern)) })
			}
		}
		for _, r := range o.Resources {
			if _, err := url.Parse(r.URI); err != nil {
				continue // the SDK would panic
			}
			if !seen("resource:"+r.URI, whose+shapeOf(r)) {
				add = append(add, func() { s.AddResource(r, gw.resource(u, modern)) })
			}
		}
		for _, t := range o.Templates {
			if _, err := uritemplate.New(t.URITemplate); err != nil {
				continue // the SDK would panic; the server's list is not ours to trust
			}
			if !seen("template:"+t.URITemplate, whose+shapeOf(t)) {
				add = append(add, func() { s.AddResourceTemplate(t, gw.resource(u, modern)) })
			}
		}
	}
	var prompts, resources, templates []string
	for key := range before {
		if _, ok := after[key]; ok {
			continue
		}
		switch kind, name := splitKey(key); kind {
		case "prompt":
			prompts = append(prompts, name)
		case "resource":
			resources = append(resources, name)
		case "template":
			templates = append(templates, name)
		}
	}
	if len(prompts) > 0 {
		s.RemovePrompts(prompts...)
	}
	if len(resources) > 0 {
		s.RemoveResources(resources...)
	}
	if len(templates) > 0 {
		s.RemoveResourceTemplates(templates...)
	}
	for _, f := range add {
		f()
	}
	return after
}

// Without is what was offered less one list's entries (upstream.ListPrompts,
// or ListResources with the templates): given to OfferMore as what was
// offered before, that list is offered again as it is, and the SDK tells
// the clients it changed.
func (o Offered) Without(list string) Offered {
	out := Offered{}
	for key, shape := range o {
		kind, _ := splitKey(key)
		if kind == "prompt" && list == upstream.ListPrompts || (kind == "resource" || kind == "template") && list == upstream.ListResources {
			continue
		}
		out[key] = shape
	}
	return out
}

func shapeOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func splitKey(key string) (kind, name string) {
	for i := range len(key) {
		if key[i] == ':' {
			return key[:i], key[i+1:]
		}
	}
	return key, ""
}

func (gw *Gateway) servers() []*upstream.Server {
	if gw.Servers == nil {
		return nil
	}
	return gw.Servers()
}

// What a request carries for this hop alone (the revision the client
// speaks, its capabilities and identity, its progress token) is not sent
// on: Countersign speaks to the server on a session of its own. But a
// client without a session (modern) declares in each request what it can
// answer and how much it wants logged, which the server answers by: those
// go on with it.
func hopMeta(m mcp.Meta, modern bool) mcp.Meta {
	var out mcp.Meta
	for k, v := range m {
		//lint:ignore SA1019 deprecated in 2026-07-28 but in use: a drop-in gateway passes it on
		kept := modern && (k == mcp.MetaKeyClientCapabilities || k == mcp.MetaKeyLogLevel)
		if !kept && (strings.HasPrefix(k, "io.modelcontextprotocol/") || k == "progressToken") {
			continue
		}
		if out == nil {
			out = mcp.Meta{}
		}
		out[k] = v
	}
	return out
}

// prompt gets a prompt for a client of the revisions with sessions or
// (modern) without: an input-required result the server answers such a
// client with reaches it as it is, and its answers (inputResponses,
// requestState) reach the server as it sent them.
func (gw *Gateway) prompt(u *upstream.Server, modern bool) mcp.PromptHandler {
	return func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		p := *req.Params
		p.Meta = hopMeta(p.Meta, modern)
		ctx, got, _ := upstream.WithResultBytes(ctx)
		res, err := u.GetPrompt(ctx, &p, modern)
		if err == nil && gw.Answers.put(placeOf(req.Extra), u.AsSent(got())) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{}, Meta: mcp.Meta{MetaAnswer: placeOf(req.Extra)}}, nil
		}
		return res, err
	}
}

func (gw *Gateway) resource(u *upstream.Server, modern bool) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		p := *req.Params
		p.Meta = hopMeta(p.Meta, modern)
		ctx, got, _ := upstream.WithResultBytes(ctx)
		res, err := u.ReadResource(ctx, &p, modern)
		if err == nil && gw.Answers.put(placeOf(req.Extra), u.AsSent(got())) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{}, Meta: mcp.Meta{MetaAnswer: placeOf(req.Extra)}}, nil
		}
		return res, err
	}
}

// owner is the MCP server that lists a resource URI (or a template it
// matches), first in the file first.
func (gw *Gateway) owner(uri string) (*upstream.Server, upstream.Offers) {
	servers := gw.servers()
	for _, u := range servers {
		o := u.Offers()
		for _, r := range o.Resources {
			if r.URI == uri {
				return u, o
			}
		}
	}
	for _, u := range servers {
		o := u.Offers()
		for _, t := range o.Templates {
			if tpl, err := uritemplate.New(t.URITemplate); err == nil && tpl.Match(uri) != nil {
				return u, o
			}
		}
	}
	return nil, upstream.Offers{}
}

// completer asks the server that offers the prompt or the resource
// template completed, as offered to clients of the server's revisions.
// Where none does, there is nothing to suggest.
func (gw *Gateway) completer(modern bool) func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	return func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
		return gw.complete(ctx, req, modern)
	}
}

func (gw *Gateway) complete(ctx context.Context, req *mcp.CompleteRequest, modern bool) (*mcp.CompleteResult, error) {
	none := &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}
	ref := req.Params.Ref
	for _, u := range gw.servers() {
		o := u.OffersAt(modern)
		if !o.Completions {
			continue
		}
		mine := false
		switch ref.Type {
		case "ref/prompt":
			for _, p := range o.Prompts {
				mine = mine || p.Name == ref.Name
			}
		case "ref/resource":
			for _, t := range o.Templates {
				mine = mine || t.URITemplate == ref.URI
			}
			for _, r := range o.Resources {
				mine = mine || r.URI == ref.URI
			}
		}
		if mine {
			p := *req.Params
			p.Meta = hopMeta(p.Meta, modern)
			ctx, got, _ := upstream.WithResultBytes(ctx)
			res, err := u.Complete(ctx, &p, modern)
			if err == nil && gw.Answers.put(placeOf(req.Extra), u.AsSent(got())) {
				return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}, Meta: mcp.Meta{MetaAnswer: placeOf(req.Extra)}}, nil
			}
			return res, err
		}
	}
	return none, nil
}

func (gw *Gateway) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	// The server that lists it answers (a 2026 one through
	// subscriptions/listen, which the SDK speaks for Subscribe).
	u, _ := gw.owner(uri)
	if u == nil {
		return mcp.ResourceNotFoundError(uri)
	}
	gw.subs.mu.Lock()
	defer gw.subs.mu.Unlock()
	if gw.subs.n[uri] == 0 {
		if err := u.Subscribe(ctx, uri); err != nil {
			return err
		}
	}
	if gw.subs.n == nil {
		gw.subs.n = map[string]int{}
	}
	gw.subs.n[uri]++
	return nil
}

func (gw *Gateway) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	uri := req.Params.URI
	gw.subs.mu.Lock()
	defer gw.subs.mu.Unlock()
	if gw.subs.n[uri] == 0 {
		return nil
	}
	gw.subs.n[uri]--
	if gw.subs.n[uri] > 0 {
		return nil
	}
	delete(gw.subs.n, uri)
	if u, _ := gw.owner(uri); u != nil {
		return u.Unsubscribe(ctx, uri)
	}
	return nil
}
