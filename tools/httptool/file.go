// Package httptool builds tools from a tools file: each tool's input schema
// is written in JSON Schema, and a tool with `http` is run by calling the
// business's own backend over HTTP (signed, with an idempotency key). A
// tool without `http` is decision-only: Countersign decides and records,
// and the agent that asked carries it out.
package httptool

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/upstream"
)

// fileSpec is a tools file as written.
type fileSpec struct {
	Tools      []toolSpec      `yaml:"tools"`
	MCPServers []upstream.Spec `yaml:"mcp_servers"`
}

type toolSpec struct {
	Name        string         `yaml:"name"`
	Description string         `yaml:"description"`
	Risk        string         `yaml:"risk"`
	Idempotent  bool           `yaml:"idempotent"`
	InputSchema map[string]any `yaml:"input_schema"`
	Summary     string         `yaml:"summary"`
	Request     string         `yaml:"request"`
	Amount      string         `yaml:"amount"`
	HTTP        *httpSpec      `yaml:"http"`
	Review      []reviewSpec   `yaml:"review"`
}

type httpSpec struct {
	Method  string            `yaml:"method"`
	URL     string            `yaml:"url"`
	Timeout string            `yaml:"timeout"`
	Headers map[string]string `yaml:"headers"`
	Secret  string            `yaml:"secret"`
}

type reviewSpec struct {
	Tool  string            `yaml:"tool"`
	Label string            `yaml:"label"`
	Args  map[string]string `yaml:"args"`
	// Key names the fields of the lookup's answer the decision turns on
	// (the money an order has left): shown beside the decision, under
	// "What it comes to", as well as with the others.
	Key []keySpec `yaml:"key"`
}

// keySpec is one key fact of a review lookup: a top-level field of its
// answer, the label it is shown under (default: the field's name in
// words) and how its value is written ("money": a number of dollars as
// "$1,200.00").
type keySpec struct {
	Field  string `yaml:"field"`
	Label  string `yaml:"label"`
	Format string `yaml:"format"`
}

// Options are what loading needs besides the file.
type Options struct {
	// Env looks up ${NAME}; nil: the process environment.
	Env func(string) (string, bool)
	// Client sends the requests; nil: a client of its own.
	Client *http.Client
	// Retries is how often a call of an idempotent tool is tried again after
	// a 5xx or a timeout; Backoff is the first wait (doubled each time).
	Retries int
	Backoff time.Duration
	// Reconnect is the first wait before connecting again to an MCP server
	// that went away (doubled each failed try, up to a minute); 0: 1 s.
	Reconnect time.Duration
}

// Set is the tools of one file, with what they must keep out of sight. The
// tools of its MCP servers follow those servers: see Tools and Watch.
type Set struct {
	// fixed are the tools the file defines itself.
	fixed []*tools.Tool
	// upstreams are the file's MCP servers, each kept connected.
	upstreams []*upstream.Server
	// secrets hides the values of every ${NAME} the file uses.
	secrets redactor
	// digest is the SHA-256 of the bytes the set was loaded from.
	digest [sha256.Size]byte

	mu     sync.Mutex
	watch  func()
	tellTo func(upstream.Told)
	// loaded: Load is done. Before, a server's tool with the name of
	// another tool makes the file refused; after, it is skipped and said.
	loaded bool
}

// Tools are the file's tools now: its own, then each MCP server's as that
// server last listed them (kept while it is down: they answer so).
func (s *Set) Tools() []*tools.Tool {
	out := slices.Clone(s.fixed)
	seen := map[string]bool{}
	for _, t := range out {
		seen[t.Name] = true
	}
	for _, u := range s.upstreams {
		for _, t := range u.Tools() {
			// Two servers that took up one name at the same moment: the
			// first in the file keeps it (the other's next list skips it).
			if !seen[t.Name] {
				seen[t.Name] = true
				out = append(out, t)
			}
		}
	}
	return out
}

// Watch sets what is called whenever an MCP server's tools change:
// announced by the server, or found on reconnecting. It is called on the
// server's own goroutine and must not block (the core only takes note, and
// a job of its own builds the tools again).
func (s *Set) Watch(f func()) {
	s.mu.Lock()
	s.watch = f
	s.mu.Unlock()
}

// WatchTold sets what is told (on a goroutine of its own) what one of the
// file's MCP servers said that clients are to hear (upstream.Told): a
// resource a client subscribed to changed, a list said changed.
func (s *Set) WatchTold(f func(upstream.Told)) {
	s.mu.Lock()
	s.tellTo = f
	s.mu.Unlock()
}

func (s *Set) told(t upstream.Told) {
	s.mu.Lock()
	f := s.tellTo
	s.mu.Unlock()
	if f != nil {
		f(t)
	}
}

func (s *Set) changed() {
	s.mu.Lock()
	f := s.watch
	s.mu.Unlock()
	if f != nil {
		f()
	}
}

// Upstreams says how each MCP server of the file is doing.
func (s *Set) Upstreams() []tools.UpstreamStatus {
	if s == nil {
		return nil
	}
	var out []tools.UpstreamStatus
	for _, u := range s.upstreams {
		out = append(out, u.Status())
	}
	return out
}

// Close ends the connections to the file's MCP servers (their processes
// stop) and stops reconnecting; their tools answer that they are down.
func (s *Set) Close() {
	if s == nil {
		return
	}
	for _, u := range s.upstreams {
		u.Close()
	}
}

// Digest is the SHA-256 of the file's bytes the set was read from: what a
// recorded version names is the file that was loaded, not one read later.
func (s *Set) Digest() [sha256.Size]byte { return s.digest }

// Redact replaces every secret the file uses in s.
// (also as JSON encoders escape them).
func (s *Set) Redact(text string) string { return s.secrets.text(text) }

// Load reads a tools file. Every problem is refused with the file, the line
// and why: unknown keys, a bad schema, a missing variable, a name used twice.
func Load(data []byte, source string, o Options) (*Set, error) {
	o.defaults()
	var spec fileSpec
	if err := yaml.UnmarshalWithOptions(data, &spec, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("tools %s: %s", source, yaml.FormatError(err, false, true))
	}
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, fmt.Errorf("tools %s: %v", source, err)
	}
	at := func(path string) string {
		if line := lineOf(file, path); line > 0 {
			return fmt.Sprintf("tools %s, line %d", source, line)
		}
		return "tools " + source
	}
	if len(spec.Tools) == 0 && len(spec.MCPServers) == 0 {
		return nil, fmt.Errorf("tools %s: no tools (the file needs a list under tools: or mcp_servers:)", source)
	}
	if err := oneUnlistedByOwnName(spec, at); err != nil {
		return nil, err
	}
	set := &Set{digest: sha256.Sum256(data)}
	seen := map[string]bool{}
	byName := map[string]*tools.Tool{}
	for i, ts := range spec.Tools {
		where := at(fmt.Sprintf("$.tools[%d]", i))
		if seen[ts.Name] {
			return nil, fmt.Errorf("%s: the name %q is used by an earlier tool", where, ts.Name)
		}
		seen[ts.Name] = true
		t, err := set.build(ts, o, byName, func(key string) string { return at(fmt.Sprintf("$.tools[%d].%s", i, key)) })
		if err != nil {
			if strings.HasPrefix(err.Error(), "tools ") {
				return nil, err
			}
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		byName[t.Name] = t
		set.fixed = append(set.fixed, t)
	}
	servers := map[string]bool{}
	for i, ms := range spec.MCPServers {
		at := func(key string) string { return at(fmt.Sprintf("$.mcp_servers[%d].%s", i, key)) }
		if servers[ms.Name] {
			set.Close()
			return nil, fmt.Errorf("%s: the name %q is used by an earlier MCP server", at("name"), ms.Name)
		}
		servers[ms.Name] = true
		u, err := upstream.New(ms, set.upstreamConfig(o, at, len(set.upstreams)))
		if err != nil {
			set.Close()
			return nil, err
		}
		set.mu.Lock()
		set.upstreams = append(set.upstreams, u)
		set.mu.Unlock()
		for _, t := range u.Tools() {
			if seen[t.Name] {
				set.Close()
				return nil, fmt.Errorf("%s: the MCP tool %s has the name of another tool", at("name"), t.Name)
			}
		}
	}
	if err := set.sameNames(spec, at); err != nil {
		set.Close()
		return nil, err
	}
	set.mu.Lock()
	set.loaded = true
	set.mu.Unlock()
	return set, nil
}

// defaults fills what the options leave zero.
func (o *Options) defaults() {
	if o.Env == nil {
		o.Env = os.LookupEnv
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.Retries == 0 {
		o.Retries = 2
	}
	if o.Backoff == 0 {
		o.Backoff = 200 * time.Millisecond
	}
	if o.Reconnect == 0 {
		o.Reconnect = time.Second
	}
}

// sameNames refuses two MCP servers that would offer the same tool or
// prompt name.
func (set *Set) sameNames(spec fileSpec, at func(string) string) error {
	// Two servers offering the same name (prefix: false, or a server
	// named so that "<a>__<b>" meets another's own name): refused, both
	// named.
	offers := map[string]string{}
	for i, u := range set.upstreams {
		for _, t := range u.Tools() {
			if other, ok := offers[t.Name]; ok {
				return fmt.Errorf("%s: the MCP servers %s and %s both offer a tool named %s (give one prefix: true, the default)",
					at(fmt.Sprintf("$.mcp_servers[%d].name", i)), other, spec.MCPServers[i].Name, t.Name)
			}
			offers[t.Name] = spec.MCPServers[i].Name
		}
	}
	// Prompts as listed at either revision (a server may list one to
	// 2026-07-28 clients only).
	prompts := map[string]string{}
	for i, u := range set.upstreams {
		names := map[string]bool{}
		for _, modern := range []bool{false, true} {
			for _, p := range u.OffersAt(modern).Prompts {
				names[p.Name] = true
			}
		}
		for _, name := range slices.Sorted(maps.Keys(names)) {
			if other, ok := prompts[name]; ok {
				return fmt.Errorf("%s: the MCP servers %s and %s both offer a prompt named %s (give one prefix: true, the default, or prompts: false)",
					at(fmt.Sprintf("$.mcp_servers[%d].name", i)), other, spec.MCPServers[i].Name, name)
			}
			prompts[name] = spec.MCPServers[i].Name
		}
	}
	return nil
}

func (set *Set) isLoaded() bool {
	set.mu.Lock()
	defer set.mu.Unlock()
	return set.loaded
}

// offeredByAnother says whether an MCP server of the file other than the
// i-th offers a tool named name now.
func (set *Set) offeredByAnother(i int, name string) bool {
	set.mu.Lock()
	ups := set.upstreams
	set.mu.Unlock()
	for j, u := range ups {
		if j == i {
			continue
		}
		for _, t := range u.Tools() {
			if t.Name == name {
				return true
			}
		}
	}
	return false
}

// upstreamConfig is what an MCP server of the file needs of it.
func (set *Set) upstreamConfig(o Options, at func(string) string, i int) upstream.Config {
	taken := map[string]bool{}
	for _, t := range set.fixed {
		taken[t.Name] = true
	}
	return upstream.Config{Reconnect: o.Reconnect, At: at, Changed: set.changed, Told: set.told,
		Taken:  func(name string) bool { return set.isLoaded() && (taken[name] || set.offeredByAnother(i, name)) },
		Env:    func(s string) (string, error) { return set.env(s, o) },
		Redact: set.Redact, RedactJSON: set.secrets.json}
}

func (set *Set) build(ts toolSpec, o Options, earlier map[string]*tools.Tool, at func(key string) string) (*tools.Tool, error) {
	if ts.InputSchema == nil {
		ts.InputSchema = map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false}
	}
	schema, err := json.Marshal(ts.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("%s: input_schema: %v", at("input_schema"), err)
	}
	spec := tools.Spec{Name: ts.Name, Description: ts.Description, Summary: ts.Summary, Request: ts.Request, Amount: ts.Amount,
		Risk: tools.Risk(ts.Risk), Idempotent: ts.Idempotent, Schema: schema}
	props, _ := ts.InputSchema["properties"].(map[string]any)
	if ts.HTTP != nil {
		ex, err := set.executor(ts, props, o, at)
		if err != nil {
			return nil, err
		}
		spec.Run, spec.Check, spec.Target = ex.run, ex.check, target(ex.method, ts.HTTP)
	}
	if len(ts.Review) > 0 {
		var lookups []lookup
		for j, r := range ts.Review {
			t, ok := earlier[r.Tool]
			if !ok {
				return nil, fmt.Errorf("%s: review uses %q, which is not a tool defined above it", at(fmt.Sprintf("review[%d].tool", j)), r.Tool)
			}
			if t.Risk != tools.RiskRead || !t.Executes() {
				return nil, fmt.Errorf("%s: review uses %q, which is not a read tool with http: approvers only get read-only lookups", at(fmt.Sprintf("review[%d].tool", j)), r.Tool)
			}
			for _, v := range r.Args {
				if err := checkPlaceholders(v, props); err != nil {
					return nil, fmt.Errorf("%s: %v", at(fmt.Sprintf("review[%d].args", j)), err)
				}
			}
			label := r.Label
			if label == "" {
				label = r.Tool
			}
			for k, key := range r.Key {
				if key.Field == "" || (key.Format != "" && key.Format != "money") {
					return nil, fmt.Errorf("%s: a key fact names a field of the lookup's answer, and its format is money or none", at(fmt.Sprintf("review[%d].key[%d]", j, k)))
				}
			}
			lookups = append(lookups, lookup{tool: t, label: label, args: r.Args, key: r.Key})
		}
		spec.Review = reviewer(lookups, set.Redact)
	}
	return tools.FromSpec(spec)
}

// target is where and how an HTTP tool sends its calls, as the file
// writes it (placeholders unfilled, so no secret's value is in it): the
// method, the URL, the names of its headers, and whether its body is
// signed.
func target(method string, h *httpSpec) string {
	names := make([]string, 0, len(h.Headers))
	for name := range h.Headers {
		names = append(names, http.CanonicalHeaderKey(name))
	}
	slices.Sort(names)
	return fmt.Sprintf("%s %s headers=%s signed=%t", method, h.URL, strings.Join(names, ","), h.Secret != "")
}

var (
	envRef      = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	argRef      = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	validMethod = map[string]bool{"GET": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true}
)

// env fills ${NAME} from the environment and remembers the values as secrets.
func (set *Set) env(s string, o Options) (string, error) {
	var missing []string
	out := envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := envRef.FindStringSubmatch(ref)[1]
		v, ok := o.Env(name)
		if !ok || v == "" {
			missing = append(missing, name)
			return ""
		}
		set.secrets.add(v)
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("the environment variable %s is not set", strings.Join(missing, ", "))
	}
	return out, nil
}

// checkPlaceholders refuses {field} naming no top-level property.
func checkPlaceholders(s string, props map[string]any) error {
	for _, m := range argRef.FindAllStringSubmatch(envRef.ReplaceAllString(s, ""), -1) {
		if _, ok := props[m[1]]; !ok {
			return fmt.Errorf("{%s} is not one of the input's properties", m[1])
		}
	}
	return nil
}

// lineOf is the line of a path in the file (0 when it is not there).
func lineOf(file *ast.File, path string) int {
	p, err := yaml.PathString(path)
	if err != nil {
		return 0
	}
	node, err := p.FilterFile(file)
	if err != nil || node == nil || node.GetToken() == nil {
		return 0
	}
	return node.GetToken().Position.Line
}
