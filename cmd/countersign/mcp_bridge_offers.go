//lint:file-ignore SA1019 logging is deprecated in MCP 2026-07-28 but in use: the bridge passes the server's log messages on
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/tools/upstream"
)

// What the server offers besides tools reaches the bridge's client too:
// its prompts, resources and resource templates (listed again when the
// server says they changed), completions, resource subscriptions and
// their update notices, and its log messages. A prompt or a resource read
// reaches the client in the bytes the server sent (mcp_bridge_bytes.go).

// newLocal is the bridge's own server, declaring what the server declared
// (caps) but tasks, which the bridge does not speak.
func (b *bridge) newLocal(caps *mcp.ServerCapabilities) *mcp.Server {
	opts := &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{}}
	if caps != nil {
		opts.Capabilities = &mcp.ServerCapabilities{Logging: caps.Logging, Completions: caps.Completions,
			Prompts: caps.Prompts, Resources: caps.Resources, Tools: caps.Tools}
		if caps.Completions != nil {
			opts.CompletionHandler = b.complete
		}
		if caps.Resources != nil && caps.Resources.Subscribe {
			opts.SubscribeHandler, opts.UnsubscribeHandler = b.subscribe, b.unsubscribe
		}
	}
	return mcp.NewServer(&mcp.Implementation{Name: "countersign", Version: "1"}, opts)
}

// complete asks the server to complete an argument; its answer reaches the
// client in the bytes the server sent.
func (b *bridge) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	remote, err := b.session(ctx)
	if err != nil {
		return nil, err
	}
	cctx, got, _ := upstream.WithResultBytes(ctx)
	res, err := remote.Complete(cctx, req.Params)
	if raw := got(); err == nil && raw != nil {
		return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}, Meta: b.answers.keep(raw)}, nil
	}
	return res, err
}

// subscribe subscribes on the server, and again on each new session.
func (b *bridge) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	remote, err := b.session(ctx)
	if err != nil {
		return err
	}
	if err := remote.Subscribe(ctx, &mcp.SubscribeParams{URI: req.Params.URI}); err != nil {
		return err
	}
	b.mu.Lock()
	b.subscribed[req.Params.URI] = true
	b.mu.Unlock()
	return nil
}

func (b *bridge) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	b.mu.Lock()
	delete(b.subscribed, req.Params.URI)
	b.mu.Unlock()
	remote, err := b.session(ctx)
	if err != nil {
		return err
	}
	return remote.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: req.Params.URI})
}

// resubscribe subscribes a new session to what the client subscribed to.
func (b *bridge) resubscribe(ctx context.Context, remote *mcp.ClientSession) {
	b.mu.Lock()
	var uris []string
	for uri := range b.subscribed {
		uris = append(uris, uri)
	}
	b.mu.Unlock()
	for _, uri := range uris {
		if err := remote.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			fmt.Fprintf(b.stderr, "countersign mcp: subscribing again to %s: %v\n", uri, err)
		}
	}
}

// bridgeOffers are the server's prompts, resources and templates as listed
// now: each as the SDK read it and in the bytes the server listed it in
// (wire, by upstream.WireKey), and (now) both, to see a change.
type bridgeOffers struct {
	prompts   []*mcp.Prompt
	resources []*mcp.Resource
	templates []*mcp.ResourceTemplate
	wire      map[string]json.RawMessage
	now       map[string]string // "prompt:"+name, "resource:"+uri, "template:"+uriTemplate -> as listed
}

func (o *bridgeOffers) keep(kind, id string, v any, wire json.RawMessage) {
	if wire != nil {
		o.wire[upstream.WireKey(kind, id)] = wire
	}
	o.now[kind+":"+id] = listedAs(v) + "\x00" + string(wire)
}

// listOffers lists the server's prompts, resources and templates, of the
// kinds given ("prompt", "resource", "template").
func listOffers(ctx context.Context, remote *mcp.ClientSession, kinds map[string]bool) (*bridgeOffers, error) {
	caps := &mcp.ServerCapabilities{}
	if r := remote.InitializeResult(); r != nil && r.Capabilities != nil {
		caps = r.Capabilities
	}
	o := &bridgeOffers{wire: map[string]json.RawMessage{}, now: map[string]string{}}
	var errs []error
	if caps.Prompts != nil && kinds["prompt"] {
		errs = append(errs, upstream.ListPages(ctx, "prompts", func(ctx context.Context, cursor string) ([]*mcp.Prompt, string, error) {
			res, err := remote.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return res.Prompts, res.NextCursor, nil
		}, func(p *mcp.Prompt, wire json.RawMessage) {
			o.prompts = append(o.prompts, p)
			o.keep("prompt", p.Name, p, wire)
		}))
	}
	if caps.Resources != nil && kinds["resource"] {
		errs = append(errs, upstream.ListPages(ctx, "resources", func(ctx context.Context, cursor string) ([]*mcp.Resource, string, error) {
			res, err := remote.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return res.Resources, res.NextCursor, nil
		}, func(r *mcp.Resource, wire json.RawMessage) {
			o.resources = append(o.resources, r)
			o.keep("resource", r.URI, r, wire)
		}))
		errs = append(errs, upstream.ListPages(ctx, "resourceTemplates", func(ctx context.Context, cursor string) ([]*mcp.ResourceTemplate, string, error) {
			res, err := remote.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return res.ResourceTemplates, res.NextCursor, nil
		}, func(t *mcp.ResourceTemplate, wire json.RawMessage) {
			o.templates = append(o.templates, t)
			o.keep("template", t.URITemplate, t, wire)
		}))
	}
	return o, errors.Join(errs...)
}

// relistOffers offers the server's prompts, resources and templates now:
// new ones added, gone ones removed, changed ones replaced. said is the
// list the server said changed (upstream.ListPrompts or ListResources;
// "": all, as on connecting): only that one is asked for again (at
// 2026-07-28 the SDK answers the others from its cache, without the bytes
// they came in), and when it is the same, the client is told it changed
// all the same, as the server said.
func (b *bridge) relistOffers(ctx context.Context, remote *mcp.ClientSession, said string) error {
	kinds := map[string]bool{"prompt": said != upstream.ListResources, "resource": said != upstream.ListPrompts, "template": said != upstream.ListPrompts}
	o, err := listOffers(ctx, remote, kinds)
	if err != nil {
		return err
	}
	now, prompts, resources, templates := o.now, o.prompts, o.resources, o.templates
	b.mu.Lock()
	defer b.mu.Unlock()
	var goneP, goneR, goneT []string
	for key, was := range b.offered {
		kind, name, _ := strings.Cut(key, ":")
		if !kinds[kind] {
			now[key] = was // not asked for again: as it was
			continue
		}
		if _, ok := now[key]; !ok {
			switch kind {
			case "prompt":
				goneP = append(goneP, name)
			case "resource":
				goneR = append(goneR, name)
			case "template":
				goneT = append(goneT, name)
			}
		}
	}
	for key, w := range b.offeredWire {
		if kind, _, _ := strings.Cut(key, "\x00"); !kinds[kind] {
			o.wire[key] = w
		}
	}
	b.local.RemovePrompts(goneP...)
	b.local.RemoveResources(goneR...)
	b.local.RemoveResourceTemplates(goneT...)
	changed := len(goneP)+len(goneR)+len(goneT) > 0
	for i, p := range prompts {
		if b.offered["prompt:"+p.Name] != now["prompt:"+p.Name] || (i == 0 && said == upstream.ListPrompts && !changed) {
			b.local.AddPrompt(p, b.getPrompt)
		}
	}
	for i, r := range resources {
		if b.offered["resource:"+r.URI] != now["resource:"+r.URI] || (i == 0 && said == upstream.ListResources && !changed) {
			b.local.AddResource(r, b.readResource)
		}
	}
	for i, t := range templates {
		if b.offered["template:"+t.URITemplate] != now["template:"+t.URITemplate] || (i == 0 && len(resources) == 0 && said == upstream.ListResources && !changed) {
			b.local.AddResourceTemplate(t, b.readResource)
		}
	}
	b.offered, b.offeredWire = now, o.wire
	return nil
}

func listedAs(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// getPrompt asks the server for a prompt; its answer reaches the client in
// the bytes the server sent.
func (b *bridge) getPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	remote, err := b.session(ctx)
	if err != nil {
		return nil, err
	}
	cctx, got, _ := upstream.WithResultBytes(ctx)
	res, err := remote.GetPrompt(cctx, req.Params)
	if raw := got(); err == nil && raw != nil {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{}, Meta: b.answers.keep(raw)}, nil
	}
	return res, err
}

// readResource reads a resource on the server; its answer reaches the
// client in the bytes the server sent.
func (b *bridge) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	remote, err := b.session(ctx)
	if err != nil {
		return nil, err
	}
	cctx, got, _ := upstream.WithResultBytes(ctx)
	res, err := remote.ReadResource(cctx, req.Params)
	if raw := got(); err == nil && raw != nil {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{}, Meta: b.answers.keep(raw)}, nil
	}
	return res, err
}

// setLevel sets the level of the server's log messages to the client, on
// this session and each new one.
func (b *bridge) setLevel(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if p, ok := req.GetParams().(*mcp.SetLoggingLevelParams); ok && method == "logging/setLevel" && err == nil {
			b.mu.Lock()
			b.level = p.Level
			b.mu.Unlock()
			remote, err := b.session(ctx)
			if err != nil {
				return nil, err
			}
			if err := remote.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: p.Level}); err != nil {
				return nil, err
			}
		}
		return res, err
	}
}

// logged passes the server's log message on to the client (whose own
// level the bridge's server keeps too).
func (b *bridge) logged(ctx context.Context, req *mcp.LoggingMessageRequest) {
	for ss := range b.local.Sessions() {
		_ = ss.Log(ctx, req.Params)
	}
}

// updated passes on the server's notice that a resource changed to the
// client subscribed to it.
func (b *bridge) updated(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
	_ = b.local.ResourceUpdated(ctx, req.Params)
}

// offersChanged lists again the server's prompts or resources (said:
// upstream.ListPrompts or ListResources), which it said changed.
func (b *bridge) offersChanged(ctx context.Context, remote *mcp.ClientSession, said string) {
	if err := b.relistOffers(ctx, remote, said); err != nil {
		fmt.Fprintf(b.stderr, "countersign mcp: the server's new prompts or resources could not be read: %v\n", err)
	}
}
