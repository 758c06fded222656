package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
	"github.com/countersign/countersign/web"
)

// offersServer is an MCP server over streamable HTTP that wants a bearer
// token, closed with the test.
func offersServer(t *testing.T, up *mcp.Server, token string) string {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv.URL
}

func textPrompt(text string) mcp.PromptHandler {
	return func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user",
			Content: &mcp.TextContent{Text: text + " " + req.Params.Arguments["name"]}}}}, nil
	}
}

// An MCP server's prompts, resources, resource templates, completions and
// resource updates reach an agent through /mcp as the server offers them
// (prompts under the server's prefix), with the tools file's secrets
// hidden; what the server lists that cannot be passed on (a template that
// does not parse, a URI that is not absolute) is left out without harm;
// a second server whose prompts and resources the file turned off offers
// none; a changed prompt list is told; /tools says what each server
// passes through and what is turned off.
func TestMCPGatewayPassesThroughPromptsResourcesAndCompletions(t *testing.T) {
	const secret = "kb-token-7c1f"
	kb := mcp.NewServer(&mcp.Implementation{Name: "kb", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			var out []string
			for _, v := range []string{"refunds", "returns", "shipping"} {
				if strings.HasPrefix(v, req.Params.Argument.Value) {
					out = append(out, v)
				}
			}
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: out, Total: len(out)}}, nil
		},
	})
	kb.AddPrompt(&mcp.Prompt{Name: "greet", Description: "Greets; the key is " + secret,
		Arguments: []*mcp.PromptArgument{{Name: "name", Required: true}}}, textPrompt("Hello"))
	faq := "kb://faq"
	kb.AddResource(&mcp.Resource{URI: faq, Name: "faq", MIMEType: "text/markdown"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: faq, MIMEType: "text/markdown", Text: "# FAQ\nour key: " + secret}}}, nil
		})
	kb.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "kb://article/{id}", Name: "article"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Blob: []byte{0, 1, 2, 255}}}}, nil
		})
	quiet := mcp.NewServer(&mcp.Implementation{Name: "quiet", Version: "1"}, nil)
	quiet.AddPrompt(&mcp.Prompt{Name: "hidden"}, textPrompt("no"))
	quiet.AddResource(&mcp.Resource{URI: "quiet://x", Name: "x"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "quiet://x", Text: "no"}}}, nil
	})
	a := upstreamsApp(t, `mcp_servers:
  - name: kb
    url: "`+offersServer(t, kb, secret)+`"
    headers: {Authorization: "Bearer ${KB_TOKEN}"}
  - name: quiet
    url: "`+offersServer(t, quiet, secret)+`"
    headers: {Authorization: "Bearer ${KB_TOKEN}"}
    prompts: false
    resources: false
    completions: false
`, httptool.Options{Env: func(string) (string, bool) { return secret, true }}, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key, _, _ := a.accounts.AddAgent(ctx, "bot", models.Actor{ID: "test"})
	updated := make(chan string, 4)
	promptsChanged := make(chan struct{}, 4)
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler:   func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) { promptsChanged <- struct{}{} },
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: a.srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	prompts, err := cs.ListPrompts(ctx, nil)
	if err != nil || len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != "kb__greet" || strings.Contains(prompts.Prompts[0].Description, secret) ||
		len(prompts.Prompts[0].Arguments) != 1 || !prompts.Prompts[0].Arguments[0].Required {
		t.Fatalf("prompts (kb's under its prefix, quiet's turned off, the key hidden): %v %+v", err, prompts)
	}
	got, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "kb__greet", Arguments: map[string]string{"name": "Ines"}})
	if err != nil || len(got.Messages) != 1 || got.Messages[0].Content.(*mcp.TextContent).Text != "Hello Ines" {
		t.Fatalf("get prompt: %v %+v", err, got)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "quiet__hidden"}); err == nil {
		t.Fatal("a prompt of a server whose prompts are turned off was served")
	}

	resources, err := cs.ListResources(ctx, nil)
	if err != nil || len(resources.Resources) != 1 || resources.Resources[0].URI != faq {
		t.Fatalf("resources: %v %+v", err, resources)
	}
	read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: faq})
	if err != nil || len(read.Contents) != 1 || !strings.HasPrefix(read.Contents[0].Text, "# FAQ") || strings.Contains(read.Contents[0].Text, secret) {
		t.Fatalf("read (the key hidden): %v %+v", err, read)
	}
	templates, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate != "kb://article/{id}" {
		t.Fatalf("templates: %v %+v", err, templates)
	}
	blob, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "kb://article/42"})
	if err != nil || len(blob.Contents) != 1 || string(blob.Contents[0].Blob) != "\x00\x01\x02\xff" || blob.Contents[0].URI != "kb://article/42" {
		t.Fatalf("a templated read: %v %+v", err, blob)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "quiet://x"}); err == nil {
		t.Fatal("a resource of a server whose resources are turned off was read")
	}

	done, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "kb__greet"},
		Argument: mcp.CompleteParamsArgument{Name: "name", Value: "re"}})
	if err != nil || !slices.Equal(done.Completion.Values, []string{"refunds", "returns"}) {
		t.Fatalf("complete: %v %+v", err, done)
	}

	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: faq}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if err := kb.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: faq}); err != nil {
		t.Fatal(err)
	}
	select {
	case uri := <-updated:
		if uri != faq {
			t.Fatalf("updated: %s", uri)
		}
	case <-ctx.Done():
		t.Fatal("the client subscribed through Countersign was not told the resource changed")
	}

	// The server adds a prompt: the client is told, and it is offered.
	kb.AddPrompt(&mcp.Prompt{Name: "farewell"}, textPrompt("Bye"))
	for {
		select {
		case <-promptsChanged:
		case <-ctx.Done():
			t.Fatal("the client was not told the prompts changed")
		}
		prompts, _ = cs.ListPrompts(ctx, nil)
		if len(prompts.Prompts) == 2 {
			break
		}
	}
	if got, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "kb__farewell", Arguments: map[string]string{"name": "Ines"}}); err != nil ||
		got.Messages[0].Content.(*mcp.TextContent).Text != "Bye Ines" {
		t.Fatalf("the new prompt: %v", err)
	}

	a.staff(models.Admin, "ada@x.test", "Ada")
	_, page := a.signIn("ada@x.test").get("/tools")
	for _, want := range []string{"not gated (reads): 2 prompts, 1 resource, 1 resource template, completions.",
		"Turned off in the tools file: prompts, resources, completions.",
		"requests to the client (sampling, elicitation, roots) go to the agent that made the call", "(known by the call"} {
		if !strings.Contains(page, want) {
			t.Fatalf("/tools does not say %q:\n%s", want, page)
		}
	}
}

// What a hostile server lists that Countersign cannot pass on (a
// template or a resource URI that does not parse, which the SDK would
// panic on) is left out: the rest is offered and the gateway keeps
// serving.
func TestMCPGatewayLeavesOutWhatAServerCannotOffer(t *testing.T) {
	bad := mcp.NewServer(&mcp.Implementation{Name: "bad", Version: "1"}, nil)
	read := func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "ok://a", Text: "a"}}}, nil
	}
	bad.AddResource(&mcp.Resource{URI: "ok://a", Name: "a"}, read)
	// Sent raw: the SDK's own checks would refuse these on this side.
	bad.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			switch r := res.(type) {
			case *mcp.ListResourcesResult:
				r.Resources = append(r.Resources, &mcp.Resource{URI: "bad://%zz", Name: "unparsable"})
			case *mcp.ListResourceTemplatesResult:
				r.ResourceTemplates = append(r.ResourceTemplates, &mcp.ResourceTemplate{URITemplate: "bad://{unclosed", Name: "broken"})
			}
			return res, err
		}
	})
	set, err := httptool.Load([]byte(`mcp_servers:
  - name: bad
    url: "`+offersServer(t, bad, "t")+`"
    headers: {Authorization: "Bearer t"}
`), "tools.yaml", httptool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	reg, _ := tools.NewRegistry(set.Tools()...)
	pol, _ := policy.LoadPolicy(policy.DefaultPolicyYAML, "test", reg)
	a := startApp(t, appConfig{Store: openStore(t), Tools: reg, Policy: pol, Log: discardLog(), ToolSet: set}, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key, _, _ := a.accounts.AddAgent(ctx, "bot", models.Actor{ID: "test"})
	cs, err := mcpClient(t, a.srv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := cs.ListResources(ctx, nil)
	if err != nil || len(list.Resources) != 1 || list.Resources[0].URI != "ok://a" {
		t.Fatalf("resources: %v %+v", err, list)
	}
	if templates, err := cs.ListResourceTemplates(ctx, nil); err != nil || len(templates.ResourceTemplates) != 0 {
		t.Fatalf("templates: %v %+v", err, templates)
	}
	if r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "ok://a"}); err != nil || r.Contents[0].Text != "a" {
		t.Fatalf("read: %v", err)
	}
}

// upstreamsApp is Countersign with a tools file of MCP servers, whose
// prompts and resources it offers besides their tools; wait is how long an
// MCP call is held (0: the default).
func upstreamsApp(t *testing.T, file string, opts httptool.Options, wait time.Duration) *app {
	t.Helper()
	set, err := httptool.Load([]byte(file), "tools.yaml", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	reg, _ := tools.NewRegistry(set.Tools()...)
	reg.WithUnlisted(set.Unlisted) // as agent/core's Sources.Registry
	pol, _ := policy.LoadPolicy(policy.DefaultPolicyYAML, "test", reg)
	return startApp(t, appConfig{Store: openStore(t), Tools: reg, Policy: pol, Log: discardLog(), ToolSet: set,
		Web: web.Config{Upstreams: set.Upstreams, MCPWait: wait}}, false)
}
