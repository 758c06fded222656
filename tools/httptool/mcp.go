package httptool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
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
	// TrustAnnotations: this server's new and changed tool definitions
	// count at once (accepted as the tools file's), instead of being held
	// at high_write until an admin accepts them on /tools.
	TrustAnnotations bool `yaml:"trust_annotations"`
}

type mcpToolOverride struct {
	Risk string `yaml:"risk"`
}

var serverName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,30}$`)

// ConnectTimeout bounds connecting to an upstream MCP server and listing
// its tools.
var ConnectTimeout = 30 * time.Second

// maxReconnect is the longest wait between two tries to reach an MCP server
// that went away.
const maxReconnect = time.Minute

// HealthEvery is how often a connected MCP server is pinged: one over HTTP
// that went away is otherwise only found by the next call.
var HealthEvery = 15 * time.Second

// upstream is one MCP server of a tools file, kept connected: a server that
// goes away is tried again with backoff while its tools answer that it is
// down, and a changed tool list (announced by the server, or found on
// reconnecting) is taken up and told to the set's watcher.
type upstream struct {
	spec      mcpServerSpec
	set       *Set
	via       string
	transport func() mcp.Transport // a new one for each connection
	reconnect time.Duration        // first wait before trying again
	taken     map[string]bool      // names of the file's own tools

	ctx    context.Context // ended by close
	cancel context.CancelFunc
	check  chan struct{} // a call failed: is the server still there?

	mu      sync.Mutex
	session *mcp.ClientSession
	tools   []*tools.Tool
	shape   string // what the tools look like, to see a change
	st      tools.UpstreamStatus
}

// upstream reads an MCP server's entry and connects to it once. A server
// that cannot be reached now is not an error: it is tried again in the
// background (see keep) and its tools appear when it answers.
func (set *Set) upstream(ms mcpServerSpec, o Options, at func(string) string) (*upstream, error) {
	if !serverName.MatchString(ms.Name) {
		return nil, fmt.Errorf("%s: an MCP server's name is lower case letters, digits and _ (it prefixes its tools)", at("name"))
	}
	u := &upstream{spec: ms, set: set, reconnect: o.Reconnect, taken: map[string]bool{}}
	for _, t := range set.fixed {
		u.taken[t.Name] = true
	}
	switch {
	case ms.Command != "" && ms.URL == "":
		env := os.Environ()
		for k, v := range ms.Env {
			val, err := set.env(v, o)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", at("env"), err)
			}
			env = append(env, k+"="+val)
		}
		u.via = "stdio: " + set.Redact(strings.Join(append([]string{ms.Command}, ms.Args...), " "))
		u.transport = func() mcp.Transport {
			cmd := exec.Command(ms.Command, ms.Args...)
			cmd.Env = env
			return &mcp.CommandTransport{Command: cmd}
		}
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
		u.via = set.Redact(url)
		u.transport = func() mcp.Transport {
			return &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: withHeaders{headers}, CheckRedirect: sameOriginOnly}}
		}
	default:
		return nil, fmt.Errorf("%s: an MCP server has either command (stdio) or url (streamable HTTP)", at("name"))
	}
	for name, ov := range ms.Tools {
		if ov.Risk != "" && !tools.Risk(ov.Risk).Valid() {
			return nil, fmt.Errorf("%s: tool %s: risk %q is not read, low_write or high_write", at("tools"), name, ov.Risk)
		}
	}
	u.ctx, u.cancel = context.WithCancel(context.Background())
	u.check = make(chan struct{}, 1)
	u.st = tools.UpstreamStatus{Name: ms.Name, Via: u.via, Since: time.Now()}
	if err := u.connect(); err != nil {
		u.down(err)
	}
	return u, nil
}

// connect opens a session, lists the tools and puts both in use.
func (u *upstream) connect() error {
	ctx, cancel := context.WithTimeout(u.ctx, ConnectTimeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "countersign", Version: "1"}, &mcp.ClientOptions{
		// Listing again waits for an answer: not on the goroutine
		// that reads the answers.
		ToolListChangedHandler: func(_ context.Context, req *mcp.ToolListChangedRequest) { go u.relist(req.Session) },
	})
	session, err := client.Connect(ctx, u.transport(), nil)
	if err != nil {
		return fmt.Errorf("connect: %s", u.set.Redact(err.Error()))
	}
	list, skipped, err := u.list(ctx, session)
	if err != nil {
		_ = session.Close()
		return err
	}
	u.mu.Lock()
	if u.ctx.Err() != nil {
		u.mu.Unlock()
		_ = session.Close()
		return u.ctx.Err()
	}
	u.session = session
	changed := u.use(list, skipped)
	u.st.Connected, u.st.Since, u.st.Error = true, time.Now(), ""
	u.mu.Unlock()
	if changed {
		u.set.changed()
	}
	return nil
}

// keep reconnects whenever the session ends, waiting longer after each
// failed try, until close.
func (u *upstream) keep() {
	wait := &backoff.ExponentialBackOff{InitialInterval: u.reconnect, Multiplier: 2,
		RandomizationFactor: 0, MaxInterval: maxReconnect}
	wait.Reset()
	for {
		u.mu.Lock()
		s := u.session
		u.mu.Unlock()
		if s != nil {
			err := u.watch(s)
			if u.ctx.Err() != nil {
				return
			}
			u.down(err)
			wait.Reset()
		}
		select {
		case <-u.ctx.Done():
			return
		case <-time.After(wait.NextBackOff()):
		}
		if err := u.connect(); err != nil {
			if u.ctx.Err() != nil {
				return
			}
			u.down(err)
		} else {
			wait.Reset()
		}
	}
}

// watch returns when the session has ended: closed by the server, or not
// answering a ping (every HealthEvery, and after a call that failed).
func (u *upstream) watch(s *mcp.ClientSession) error {
	ended := make(chan error, 1)
	go func() { ended <- s.Wait() }()
	tick := time.NewTicker(HealthEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-ended:
			if err == nil {
				err = errors.New("the connection closed")
			}
			return err
		case <-u.ctx.Done():
			return u.ctx.Err()
		case <-tick.C:
		case <-u.check:
		}
		ctx, cancel := context.WithTimeout(u.ctx, 5*time.Second)
		err := s.Ping(ctx, nil)
		cancel()
		if err != nil && u.ctx.Err() == nil {
			_ = s.Close()
			return fmt.Errorf("no answer to a ping: %s", u.set.Redact(err.Error()))
		}
	}
}

// down notes that the server cannot be reached, and why.
func (u *upstream) down(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.st.Connected {
		u.st.Since = time.Now()
	}
	u.session, u.st.Connected, u.st.Error = nil, false, u.set.Redact(err.Error())
}

// relist takes up a tool list the server says has changed.
func (u *upstream) relist(s *mcp.ClientSession) {
	ctx, cancel := context.WithTimeout(u.ctx, ConnectTimeout)
	defer cancel()
	list, skipped, err := u.list(ctx, s)
	u.mu.Lock()
	if u.session != s {
		u.mu.Unlock()
		return
	}
	changed := false
	if err != nil {
		u.st.Error = err.Error()
	} else {
		changed = u.use(list, skipped)
	}
	u.mu.Unlock()
	if changed {
		u.set.changed()
	}
}

// use puts a list in force (u.mu held) and says whether it changed. A tool
// the server now marks as less risky than it was while Countersign ran
// keeps its higher risk: a server cannot lower its own tool's risk by
// announcing a new list (the tools file, reloaded, decides afresh).
func (u *upstream) use(list []*tools.Tool, skipped []string) bool {
	before := map[string]tools.Risk{}
	for _, t := range u.tools {
		before[t.Name] = t.Risk
	}
	for i, t := range list {
		if prev, ok := before[t.Name]; ok && prev.Above(t.Risk) {
			list[i] = t.WithRisk(prev, fmt.Sprintf("kept at %s: the server lowered it to %s while Countersign ran", prev, t.Risk))
		}
	}
	h := sha256.New()
	for _, t := range list {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%t\n", t.Name, t.Risk, t.Description, t.Schema, t.Idempotent)
	}
	shape := hex.EncodeToString(h.Sum(nil))
	u.st.Tools, u.st.Skipped = len(list), skipped
	if shape == u.shape {
		return false
	}
	u.tools, u.shape = list, shape
	return true
}

// riskNow is a tool's risk as in force now (it may have been kept higher
// than the server's list said), never below what it was built with.
func (u *upstream) riskNow(name string, built tools.Risk) tools.Risk {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, t := range u.tools {
		if t.Name == name && t.Risk.Above(built) {
			return t.Risk
		}
	}
	return built
}

// current is the server's tools as it last listed them.
func (u *upstream) current() []*tools.Tool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.tools
}

func (u *upstream) status() tools.UpstreamStatus {
	u.mu.Lock()
	defer u.mu.Unlock()
	st := u.st
	st.Skipped = slices.Clone(u.st.Skipped)
	return st
}

func (u *upstream) close() {
	u.cancel()
	u.mu.Lock()
	s := u.session
	u.session = nil
	if u.st.Connected {
		u.st.Connected, u.st.Since, u.st.Error = false, time.Now(), "closed"
	}
	u.mu.Unlock()
	if s != nil {
		_ = s.Close()
	}
}

// list asks the server for its tools, as Countersign tools, sorted by name.
// A tool whose name another tool has is skipped, and said so.
func (u *upstream) list(ctx context.Context, s *mcp.ClientSession) (out []*tools.Tool, skipped []string, err error) {
	seen := map[string]bool{}
	for t, err := range s.Tools(ctx, nil) {
		if err != nil {
			return nil, nil, fmt.Errorf("list tools: %s", u.set.Redact(err.Error()))
		}
		tool, err := u.proxy(t)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", t.Name, err))
			continue
		}
		if u.taken[tool.Name] || seen[tool.Name] {
			skipped = append(skipped, fmt.Sprintf("%s: %s is the name of another tool", t.Name, tool.Name))
			continue
		}
		seen[tool.Name] = true
		out = append(out, tool)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, skipped, nil
}

// call forwards one call to the server on the session in use now.
func (u *upstream) call(ctx context.Context, name string, risk tools.Risk, args map[string]any) (any, error) {
	u.mu.Lock()
	s, st := u.session, u.st
	u.mu.Unlock()
	server := u.spec.Name
	if s == nil {
		return nil, tools.Refuse("the %s MCP server is not answering (down since %s: %s); Countersign keeps trying to reconnect; nothing was changed",
			server, st.Since.UTC().Format("15:04:05 MST"), tools.Truncate(st.Error, 200))
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		select { // is it still there? (found out apart from this call)
		case u.check <- struct{}{}:
		default:
		}
		if errors.Is(err, mcp.ErrConnectionClosed) || risk == tools.RiskRead {
			// Not sent, or only a read: nothing changed.
			return nil, tools.Refuse("the %s MCP server is not answering (%s); nothing was changed", server, tools.Truncate(u.set.Redact(err.Error()), 200))
		}
		return nil, &tools.UnknownError{Message: "the " + server + " MCP server did not answer (" + u.set.Redact(err.Error()) + "); a team member will check what happened"}
	}
	text := contentText(res.Content)
	if res.IsError {
		return nil, tools.Refuse("%s", tools.Truncate(u.set.Redact(text), 1000))
	}
	// The result is the server's, as it sent it (every content block, the
	// structured content beside them, _meta), secrets hidden; the gateway
	// hands it on unchanged (agent/mcpgate).
	raw, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("encode the %s MCP server's result: %w", server, err)
	}
	return json.RawMessage(u.set.secrets.json(raw)), nil
}

var unsafeName = regexp.MustCompile(`[^a-z0-9_]+`)

// safeToolName is an upstream tool's name as Countersign offers it, after
// the server's prefix: lower case, runs of other characters as one _.
func safeToolName(upstream string) string {
	return strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(upstream), "_"), "_")
}

// proxy is one upstream tool as a Countersign tool. Its risk is the tools
// file's override, else read from the annotations, which are only hints:
// anything not marked read-only or non-destructive is a high-risk write.
func (u *upstream) proxy(t *mcp.Tool) (*tools.Tool, error) {
	ms := u.spec
	safe := safeToolName(t.Name)
	name := ms.Name + "__" + safe
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
	// The override is found by the name Countersign offers as well as by
	// the upstream's own: an upstream that renames Delete-Contact to
	// delete_contact (or back) keeps the risk the file gave it. Where
	// several entries match, the highest risk holds.
	var found tools.Risk
	for key, ov := range ms.Tools {
		same := key == t.Name || key == name || (key != "*" && safeToolName(key) == safe)
		if same && ov.Risk != "" && (found == "" || tools.Risk(ov.Risk).Above(found)) {
			found = tools.Risk(ov.Risk)
		}
	}
	if found != "" {
		risk, source = found, "tools file"
	}
	schema, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("input schema: %v", err)
	}
	idempotent := t.Annotations != nil && t.Annotations.IdempotentHint
	upstreamName := t.Name
	run := func(ctx context.Context, call tools.Call, args map[string]any) (any, error) {
		return u.call(ctx, upstreamName, u.riskNow(name, risk), args)
	}
	tool, err := tools.FromSpec(tools.Spec{Name: name, Description: t.Description, Risk: risk, Idempotent: idempotent,
		Schema: schema, Run: run})
	if err != nil {
		return nil, err
	}
	tool.Origin = "MCP server " + ms.Name + " (" + upstreamName + "); risk from " + source
	tool.Upstream = ms.Name
	tool.TrustListing = ms.TrustAnnotations
	if listing, err := json.Marshal(t); err == nil {
		tool.Listing = json.RawMessage(u.set.secrets.json(listing))
	}
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
