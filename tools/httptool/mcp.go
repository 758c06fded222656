package httptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/tools"
)

// mcpServerSpec is an upstream MCP server in a tools file: a command that
// speaks MCP over stdio, or a streamable HTTP url.
type mcpServerSpec struct {
	Name    string                     `yaml:"name"`
	Command string                     `yaml:"command"`
	Args    []string                   `yaml:"args"`
	Env     map[string]string          `yaml:"env"`
	URL     string                     `yaml:"url"`
	Headers map[string]string          `yaml:"headers"`
	Tools   map[string]mcpToolOverride `yaml:"tools"`
}

type mcpToolOverride struct {
	Risk string `yaml:"risk"`
}

var serverName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,30}$`)

// ConnectTimeout bounds connecting to an upstream MCP server and listing
// its tools when the file is loaded.
var ConnectTimeout = 30 * time.Second

// upstream connects to one MCP server and offers its tools as
// <server>__<tool>, each call forwarded once.
func (set *Set) upstream(ms mcpServerSpec, o Options, at func(string) string) ([]*tools.Tool, error) {
	if !serverName.MatchString(ms.Name) {
		return nil, fmt.Errorf("%s: an MCP server's name is lower case letters, digits and _ (it prefixes its tools)", at("name"))
	}
	var transport mcp.Transport
	switch {
	case ms.Command != "" && ms.URL == "":
		cmd := exec.Command(ms.Command, ms.Args...)
		cmd.Env = cmd.Environ()
		for k, v := range ms.Env {
			val, err := set.env(v, o)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", at("env"), err)
			}
			cmd.Env = append(cmd.Env, k+"="+val)
		}
		transport = &mcp.CommandTransport{Command: cmd}
	case ms.URL != "" && ms.Command == "":
		url, err := set.env(ms.URL, o)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", at("url"), err)
		}
		headers := map[string]string{}
		for k, v := range ms.Headers {
			if headers[k], err = set.env(v, o); err != nil {
				return nil, fmt.Errorf("%s: %v", at("headers"), err)
			}
		}
		transport = &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: withHeaders{headers}}}
	default:
		return nil, fmt.Errorf("%s: an MCP server has either command (stdio) or url (streamable HTTP)", at("name"))
	}
	for name, ov := range ms.Tools {
		if ov.Risk != "" && !tools.Risk(ov.Risk).Valid() {
			return nil, fmt.Errorf("%s: tool %s: risk %q is not read, low_write or high_write", at("tools"), name, ov.Risk)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), ConnectTimeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "countersign", Version: "1"}, nil)
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: MCP server %s: %s", at("name"), ms.Name, set.Redact(err.Error()))
	}
	set.closers = append(set.closers, session.Close)
	var out []*tools.Tool
	for t, err := range session.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("%s: MCP server %s: list tools: %s", at("name"), ms.Name, set.Redact(err.Error()))
		}
		tool, err := set.proxy(ms, session, t)
		if err != nil {
			return nil, fmt.Errorf("%s: MCP server %s: %v", at("name"), ms.Name, err)
		}
		out = append(out, tool)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

var unsafeName = regexp.MustCompile(`[^a-z0-9_]+`)

// proxy is one upstream tool as a Countersign tool. Its risk is the tools
// file's override, else read from the annotations, which are only hints:
// anything not marked read-only or non-destructive is a high-risk write.
func (set *Set) proxy(ms mcpServerSpec, session *mcp.ClientSession, t *mcp.Tool) (*tools.Tool, error) {
	name := ms.Name + "__" + strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(t.Name), "_"), "_")
	risk, source := tools.RiskHighWrite, "not marked read-only or non-destructive"
	if a := t.Annotations; a != nil {
		switch {
		case a.ReadOnlyHint:
			risk, source = tools.RiskRead, "annotation readOnlyHint"
		case a.DestructiveHint != nil && !*a.DestructiveHint:
			risk, source = tools.RiskLowWrite, "annotation destructiveHint: false"
		}
	}
	if ov, ok := ms.Tools["*"]; ok && ov.Risk != "" {
		risk, source = tools.Risk(ov.Risk), `tools file ("*")`
	}
	if ov, ok := ms.Tools[t.Name]; ok && ov.Risk != "" {
		risk, source = tools.Risk(ov.Risk), "tools file"
	}
	schema, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("tool %s: input schema: %v", t.Name, err)
	}
	idempotent := t.Annotations != nil && t.Annotations.IdempotentHint
	upstreamName := t.Name
	run := func(ctx context.Context, call tools.Call, args map[string]any) (any, error) {
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: upstreamName, Arguments: args})
		if err != nil {
			if errors.Is(err, mcp.ErrConnectionClosed) || risk == tools.RiskRead {
				// Not sent, or only a read: nothing changed.
				return nil, tools.Refuse("the %s MCP server is not answering (%s); nothing was changed", ms.Name, tools.Truncate(set.Redact(err.Error()), 200))
			}
			return nil, &tools.UnknownError{Message: "the " + ms.Name + " MCP server did not answer (" + set.Redact(err.Error()) + "); a team member will check what happened"}
		}
		text := contentText(res.Content)
		if res.IsError {
			return nil, tools.Refuse("%s", tools.Truncate(set.Redact(text), 1000))
		}
		if res.StructuredContent != nil {
			return res.StructuredContent, nil
		}
		return map[string]any{"text": set.Redact(text)}, nil
	}
	tool, err := tools.FromSpec(tools.Spec{Name: name, Description: t.Description, Risk: risk, Idempotent: idempotent,
		Schema: schema, Run: run, Summary: name})
	if err != nil {
		return nil, err
	}
	tool.Origin = "MCP server " + ms.Name + " (" + upstreamName + "); risk from " + source
	return tool, nil
}

func contentText(cs []mcp.Content) string {
	var parts []string
	for _, c := range cs {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// withHeaders adds fixed headers to every request of an MCP client.
type withHeaders struct{ h map[string]string }

func (w withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range w.h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}
