// Package upstream keeps Countersign connected to the MCP servers a tools
// file names (stdio or streamable HTTP, with the official Go SDK): each
// server's tools become Countersign tools (risk from the file's override,
// else from the annotations, which are only hints), calls are forwarded on
// the session in use, a server that goes away is tried again with
// backoff, and a changed tool list is taken up and told. Nothing here
// decides: the gate does (agent/gate), and the tools file (tools/httptool)
// says which servers there are.
package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/tools"
)

// Spec is an upstream MCP server in a tools file: a command that speaks
// MCP over stdio, or a streamable HTTP url.
type Spec struct {
	Name    string                  `yaml:"name"`
	Command string                  `yaml:"command"`
	Args    []string                `yaml:"args"`
	Env     map[string]string       `yaml:"env"`
	URL     string                  `yaml:"url"`
	Headers map[string]string       `yaml:"headers"`
	Tools   map[string]ToolOverride `yaml:"tools"`
	// TrustAnnotations: this server's new and changed tool definitions
	// count at once (accepted as the tools file's), instead of being held
	// at high_write until an admin accepts them on /tools.
	TrustAnnotations bool `yaml:"trust_annotations"`
	// Prefix: false offers the server's tools under their own names
	// instead of "<name>__<tool>" (a drop-in gateway). Unset is true.
	Prefix *bool `yaml:"prefix"`
	// Prompts, Resources and Completions: false keeps the server's
	// prompts, its resources (and templates and subscriptions) or its
	// completions from the agents; unset passes them through.
	Prompts     *bool `yaml:"prompts"`
	Resources   *bool `yaml:"resources"`
	Completions *bool `yaml:"completions"`
	// UnlistedTools is the risk a call to a tool the server does not list
	// is gated at, and then forwarded ("": such a call is refused as an
	// unknown tool). For servers whose tools come and go between lists.
	UnlistedTools string `yaml:"unlisted_tools"`
}

// Prefixed says whether the server's tools are offered as
// "<name>__<tool>".
func (s Spec) Prefixed() bool { return s.Prefix == nil || *s.Prefix }

// ToolOverride is what the tools file says of one of the server's tools.
type ToolOverride struct {
	Risk string `yaml:"risk"`
}

var serverName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,30}$`)

// UpstreamProtocol is the MCP revision Countersign asks its upstreams to
// speak.
const UpstreamProtocol = "2025-11-25"

// ConnectTimeout bounds connecting to an upstream MCP server and listing
// its tools.
var ConnectTimeout = 30 * time.Second

// maxReconnect is the longest wait between two tries to reach an MCP server
// that went away.
const maxReconnect = time.Minute

// HealthEvery is how often a connected MCP server is pinged: one over HTTP
// that went away is otherwise only found by the next call.
var HealthEvery = 15 * time.Second

// Config is what a server needs of the tools file it comes from.
type Config struct {
	// Reconnect is the first wait before trying again (0: a second).
	Reconnect time.Duration
	// Taken says whether a name is one of the file's own tools.
	Taken func(name string) bool
	// Env fills ${NAME} in the entry's url, headers and env.
	Env func(string) (string, error)
	// Redact hides the file's secrets in text, RedactJSON in a JSON value.
	Redact     func(string) string
	RedactJSON func([]byte) []byte
	// Changed is told (on a goroutine of the server's) when its tools
	// changed.
	Changed func()
	// Told is told (on a goroutine of the server's) what the server said
	// that clients are to hear: a resource a client subscribed to changed,
	// or a list changed that Countersign found the same.
	Told func(Told)
	// At says where in the file a key of the entry is, for errors.
	At func(key string) string
	// Log is where what a server said or asked that reached no agent is
	// noted (nil: slog's default).
	Log *slog.Logger
}

func (u *Server) logger() *slog.Logger {
	if u.cfg.Log != nil {
		return u.cfg.Log
	}
	return slog.Default()
}

// Server is one MCP server of a tools file, kept connected: a server that
// goes away is tried again with backoff while its tools answer that it is
// down, and a changed tool list (announced by the server, or found on
// reconnecting) is taken up and told (Config.Changed).
type Server struct {
	spec      Spec
	cfg       Config
	via       string
	transport func() mcp.Transport // a new one for each connection
	reconnect time.Duration        // first wait before trying again

	ctx    context.Context // ended by close
	cancel context.CancelFunc
	check  chan struct{} // a call failed: is the server still there?
	// relisting: the lists being asked for again (told.go).
	relisting relisting

	mu      sync.Mutex
	session *mcp.ClientSession
	tools   []*tools.Tool // for clients of every revision (modern.go)
	// modern is the server spoken to at ModernProtocol too (nil: it does
	// not speak it, or is not over HTTP), with what each side listed.
	modern                       *mcp.ClientSession
	legacyTools, modernTools     []*tools.Tool
	legacySkipped, modernSkipped []string
	shape                        string // what the tools look like, to see a change
	st                           tools.UpstreamStatus

	offers              Offers // besides tools (offers.go)
	modernOffers        Offers // and as listed at ModernProtocol
	modernOffersSkipped []string
	offersSkipped       []string            // what of them could not be listed
	subs                map[string]bool     // resources subscribed to, again on reconnecting
	calls               map[string]*Relay   // in flight, by the progress token sent (relay.go)
	watched             bool                // over HTTP: what comes on a call's stream is that call's
	asked               map[string][]*Relay // the upstream's requests on calls' streams, not yet handled
}

// New reads an MCP server's entry and connects to it once. A server that
// cannot be reached now is not an error: it is tried again in the
// background (Keep) and its tools appear when it answers.
func New(ms Spec, cfg Config) (*Server, error) {
	at := cfg.At
	if !serverName.MatchString(ms.Name) {
		return nil, fmt.Errorf("%s: an MCP server's name is lower case letters, digits and _ (it prefixes its tools)", at("name"))
	}
	u := &Server{spec: ms, cfg: cfg, reconnect: cfg.Reconnect}
	switch {
	case ms.Command != "" && ms.URL == "":
		env := os.Environ()
		for k, v := range ms.Env {
			val, err := cfg.Env(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", at("env"), err)
			}
			env = append(env, k+"="+val)
		}
		u.via = "stdio: " + cfg.Redact(strings.Join(append([]string{ms.Command}, ms.Args...), " "))
		u.transport = func() mcp.Transport {
			cmd := exec.Command(ms.Command, ms.Args...)
			cmd.Env = env
			return stdioTransport{cmd}
		}
	case ms.URL != "" && ms.Command == "":
		url, err := cfg.Env(ms.URL)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", at("url"), err)
		}
		headers := map[string]string{}
		for k, v := range ms.Headers {
			if headers[k], err = cfg.Env(v); err != nil {
				return nil, fmt.Errorf("%s: %v", at("headers"), err)
			}
		}
		u.via, u.watched = cfg.Redact(url), true
		u.transport = func() mcp.Transport {
			return &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{
				Transport: watching{u, withHeaders{headers}}, CheckRedirect: tools.SameOriginOnly}}
		}
	default:
		return nil, fmt.Errorf("%s: an MCP server has either command (stdio) or url (streamable HTTP)", at("name"))
	}
	for name, ov := range ms.Tools {
		if ov.Risk != "" && !tools.Risk(ov.Risk).Valid() {
			return nil, fmt.Errorf("%s: tool %s: risk %q is not read, low_write or high_write", at("tools"), name, ov.Risk)
		}
	}
	if ms.UnlistedTools != "" && !tools.Risk(ms.UnlistedTools).Valid() {
		return nil, fmt.Errorf("%s: risk %q is not read, low_write or high_write", at("unlisted_tools"), ms.UnlistedTools)
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
func (u *Server) connect() error {
	ctx, cancel := context.WithTimeout(u.ctx, ConnectTimeout)
	defer cancel()
	opts := &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			if req.Params != nil {
				go u.tell(Told{Updated: req.Params.URI})
			}
		},
	}
	u.listHandlers(opts, u.relist) // told.go
	u.relayHandlers(opts)          // relay.go
	client := mcp.NewClient(&mcp.Implementation{Name: "countersign", Version: "1"}, opts)
	client.AddReceivingMiddleware(u.relayRoots)
	// 2025-11-25: the upstream may then ask the client during a call, and
	// report progress and log messages, all for the call's client
	// (relay.go); modern.go speaks 2026-07-28 beside it.
	session, err := client.Connect(ctx, u.transport(), &mcp.ClientSessionOptions{ProtocolVersion: UpstreamProtocol})
	if err != nil {
		return fmt.Errorf("connect: %s", u.cfg.Redact(err.Error()))
	}
	//lint:ignore SA1019 deprecated in 2026-07-28, in use by 2025-11-25 servers
	if ir := session.InitializeResult(); ir != nil && ir.Capabilities != nil && ir.Capabilities.Logging != nil {
		// Every level: each client's own level (logging/setLevel with
		// Countersign) decides what reaches it.
		//lint:ignore SA1019 deprecated in 2026-07-28, in use by 2025-11-25 servers
		_ = session.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"})
	}
	list, skipped, err := u.list(ctx, session)
	if err != nil {
		_ = session.Close()
		return err
	}
	offers, offersSkipped := u.listOffers(ctx, session)
	modern := &modernSide{} // over HTTP only: a second stdio process would be a second server
	if u.watched {
		if m := u.connectModern(ctx); m != nil {
			modern = m
		}
	}
	u.mu.Lock()
	subs := make([]string, 0, len(u.subs))
	for uri := range u.subs {
		subs = append(subs, uri)
	}
	u.mu.Unlock()
	for _, uri := range subs { // what clients subscribed to before it went away
		_ = session.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
	}
	u.mu.Lock()
	if u.ctx.Err() != nil {
		u.mu.Unlock()
		_ = session.Close()
		if modern.session != nil {
			_ = modern.session.Close()
		}
		return u.ctx.Err()
	}
	if u.modern != nil {
		_ = u.modern.Close()
	}
	offersChanged := offers.Shape() != u.offers.Shape() || modern.offers.Shape() != u.modernOffers.Shape()
	u.session, u.modern, u.modernTools, u.modernSkipped = session, modern.session, modern.tools, modern.skipped
	u.modernOffers, u.modernOffersSkipped = modern.offers, modern.offersSkipped
	changed := u.use(list, skipped) || offersChanged
	u.offers, u.offersSkipped = offers, offersSkipped
	u.st.Connected, u.st.Since, u.st.Error = true, time.Now(), ""
	u.mu.Unlock()
	if changed {
		u.cfg.Changed()
	}
	return nil
}

// Keep reconnects whenever the session ends, waiting longer after each
// failed try, until Close. New starts nothing: its owner runs Keep on a
// goroutine it tracks (httptool.Set.Keep).
func (u *Server) Keep() {
	wait := &backoff.ExponentialBackOff{InitialInterval: u.reconnect, Multiplier: 2,
		RandomizationFactor: 0, MaxInterval: maxReconnect}
	wait.Reset()
	for {
		u.mu.Lock()
		s, m := u.session, u.modern
		u.mu.Unlock()
		if s != nil {
			err := u.watch(s, m)
			_ = s.Close() // still open when the other one ended
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
// answering a ping (every HealthEvery, and after a call that failed); or
// when the one at ModernProtocol (m, nil: none) has, to be opened again
// with the other.
func (u *Server) watch(s, m *mcp.ClientSession) error {
	ended := make(chan error, 2)
	go func() { ended <- s.Wait() }()
	if m != nil {
		go func() {
			err := m.Wait()
			if err == nil {
				err = errors.New("the connection closed")
			}
			ended <- fmt.Errorf("at %s: %w", ModernProtocol, err)
		}()
	}
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
			return fmt.Errorf("no answer to a ping: %s", u.cfg.Redact(err.Error()))
		}
	}
}

// down notes that the server cannot be reached, and why.
func (u *Server) down(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.st.Connected {
		u.st.Since = time.Now()
	}
	u.session, u.st.Connected, u.st.Error = nil, false, u.cfg.Redact(err.Error())
	if u.modern != nil {
		_ = u.modern.Close()
		u.modern = nil
	}
}

// relist takes up a tool list the server says has changed.
func (u *Server) relist(s *mcp.ClientSession) {
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
	u.listed(ListTools, changed, err)
}

// use puts a list in force (u.mu held) and says whether it changed. A tool
// the server now marks as less risky than it was while Countersign ran
// keeps its higher risk: a server cannot lower its own tool's risk by
// announcing a new list (the tools file, reloaded, decides afresh).
func (u *Server) use(list []*tools.Tool, skipped []string) bool {
	u.legacyTools, u.legacySkipped = list, skipped
	list = u.merged(list)
	skipped = append(slices.Clone(skipped), u.modernSkipped...)
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
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%t\x00%s\x00%s\x00%d\x00%d\n", t.Name, t.Risk, t.Description, t.Schema, t.Idempotent, t.Revision, t.ModernWire, t.Place, t.ModernPlace)
	}
	shape := hex.EncodeToString(h.Sum(nil))
	u.st.Tools, u.st.Skipped = len(list), skipped
	if shape == u.shape {
		return false
	}
	u.tools, u.shape = list, shape
	return true
}

// Tools are the server's tools as it last listed them.
func (u *Server) Tools() []*tools.Tool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.tools
}

// Status says how the server is doing.
func (u *Server) Status() tools.UpstreamStatus {
	u.mu.Lock()
	defer u.mu.Unlock()
	st := u.st
	st.Skipped = append(slices.Concat(u.st.Skipped, u.offersSkipped), u.modernOffersSkipped...)
	o := u.offers
	if u.session == nil {
		o = Offers{Off: o.Off}
	}
	st.Prompts, st.Resources, st.Templates, st.Completions = len(o.Prompts), len(o.Resources), len(o.Templates), o.Completions
	st.Off = slices.Clone(o.Off)
	st.OverHTTP = u.watched
	st.Unlisted, st.Prefix = tools.Risk(u.spec.UnlistedTools), u.Prefix()
	st.Modern = u.modern != nil && u.session != nil
	for _, t := range u.tools {
		switch {
		case !st.Modern:
		case t.Revision == ModernProtocol:
			st.ModernOnly++
		case t.Revision == tools.LegacyOnly:
			st.LegacyOnly++
		}
	}
	return st
}

// Close ends the connection (and a stdio server's process) for good.
func (u *Server) Close() {
	u.cancel()
	u.mu.Lock()
	s, m := u.session, u.modern
	u.session, u.modern = nil, nil
	if u.st.Connected {
		u.st.Connected, u.st.Since, u.st.Error = false, time.Now(), "closed"
	}
	u.mu.Unlock()
	if s != nil {
		_ = s.Close()
	}
	if m != nil {
		_ = m.Close()
	}
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
