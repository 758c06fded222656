//lint:file-ignore SA1019 logging is deprecated in MCP 2026-07-28 but in use: the bridge passes the server's log messages on
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/cmd/countersign/internal/stdiolines"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools/upstream"
	"github.com/countersign/countersign/web/mcpgate"
)

// cmdMCP bridges stdio to a running server's /mcp, for MCP clients that only
// start processes (Claude Desktop, Claude Code): the tools are the server's,
// every call goes through its gate, with this agent key.
func cmdMCP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, _ := bareFlagSet("mcp", stderr)
	url := fs.String("url", "http://127.0.0.1:8080", "the running Countersign server")
	key := fs.String("agent-key", "", "the agent key (countersign agent add); env COUNTERSIGN_AGENT_KEY")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *key == "" {
		return usageError("mcp needs --agent-key (or COUNTERSIGN_AGENT_KEY)")
	}
	b := &bridge{endpoint: strings.TrimSuffix(*url, "/") + "/mcp", key: *key, stderr: stderr, conversation: "bridge:" + models.NewID("br"),
		listed: map[string]string{}, offered: map[string]string{}, subscribed: map[string]bool{},
		version: legacyMCP, answers: newAnswers()}
	if err := b.connect(ctx); err != nil {
		return fmt.Errorf("connect to %s: %w", b.endpoint, err)
	}
	// A call to a tool the server does not list goes to the server all the
	// same, which answers it as through /mcp (an error result, or the
	// call of a tool a server of its tools file does not list:
	// unlisted_tools); the tools are listed in the server's order, not the
	// SDK's by name. What the server lists and answers is written in its
	// bytes (mcp_bridge_bytes.go); a 2026-07-28 client is served at that
	// revision.
	b.local.AddReceivingMiddleware(mcpgate.OnUnknownTool(b.unlisted), b.inServersOrder, b.markListed, b.atClientsRevision, b.setLevel)
	go b.keep(ctx)
	defer b.close()
	out := stdiolines.NewWriter(stdout)
	return b.local.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdiolines.Guard(stdin, out)), Writer: nopWriteCloser{answering{b, out}}})
}

// bridge is the stdio side (local, the client's server) over a session with
// the running server (remote), kept: when the server's tool list changes the
// client is told, and when the server goes away (a restart, a dropped
// connection) the bridge connects again with backoff; a call made
// meanwhile waits for the new session, and asking again for a call that
// waited returns that call (the server joins the same call).
type bridge struct {
	endpoint, key string
	// conversation names this bridge's calls to the server (a stateless
	// request carries no session).
	conversation string
	stderr       io.Writer
	local        *mcp.Server
	asking       sync.Map // the bridge's progress token -> asked
	tokens       atomic.Int64
	answers      *answers

	mu     sync.Mutex
	remote *mcp.ClientSession
	ready  chan struct{}     // closed while remote is usable
	listed map[string]string // each tool as the server listed it (relist)
	// offered: each prompt, resource and template as the server listed
	// it (relistOffers); subscribed: the resources the client subscribed
	// to; level: the log level it set ("": none).
	offered     map[string]string
	offeredWire map[string]json.RawMessage // by upstream.WireKey
	subscribed  map[string]bool
	level       mcp.LoggingLevel
	place       map[string]int             // where the server lists each tool
	wire        map[string]json.RawMessage // each tool in the bytes the server listed it in
	// version is the revision the server is spoken to at: the client's
	// (legacyMCP, or "" for the latest, 2026-07-28, once the client is
	// seen to speak it); asks: what of the client the server may ask for
	// (its sampling and elicitation capabilities; nil: none, till the
	// client says).
	version     string
	asks        *mcp.ClientCapabilities
	initialized bool // the client initialized (a 2025 session)
}

func (b *bridge) client(asks *mcp.ClientCapabilities) *mcp.Client {
	opts := &mcp.ClientOptions{
		// Progress the server sends for a call goes back to the client that
		// asked, under the client's own token.
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			key, _ := req.Params.ProgressToken.(string)
			if a, ok := b.asking.Load(key); ok {
				p := *req.Params
				p.ProgressToken = a.(asked).token
				_ = a.(asked).ss.NotifyProgress(ctx, &p)
			}
		},
		ToolListChangedHandler: func(ctx context.Context, req *mcp.ToolListChangedRequest) {
			if err := b.relist(ctx, req.Session, true); err != nil {
				fmt.Fprintf(b.stderr, "countersign mcp: the server's new tool list could not be read: %v\n", err)
			}
		},
		PromptListChangedHandler: func(ctx context.Context, req *mcp.PromptListChangedRequest) {
			b.offersChanged(ctx, req.Session, upstream.ListPrompts)
		},
		ResourceListChangedHandler: func(ctx context.Context, req *mcp.ResourceListChangedRequest) {
			b.offersChanged(ctx, req.Session, upstream.ListResources)
		},
		ResourceUpdatedHandler: b.updated,
		LoggingMessageHandler:  b.logged,
		// An input-required result (2026-07-28) is the client's to answer,
		// as the server sent it: the bridge's client does not answer it
		// itself, which would ask its client in a request that revision
		// has not.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	}
	b.asksAs(opts, asks)
	c := mcp.NewClient(&mcp.Implementation{Name: mcpgate.BridgeClient, Version: "1"}, opts)
	c.AddReceivingMiddleware(b.rootsOfClient)
	return c
}

// connect opens a session with the server and offers its tools.
func (b *bridge) connect(ctx context.Context) error {
	b.mu.Lock()
	version, asks := b.version, b.asks
	b.mu.Unlock()
	remote, err := b.client(asks).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: b.endpoint,
		HTTPClient: &http.Client{Transport: upstream.KeepingResults(bearerAuth(b.key))}}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		return err
	}
	if b.local == nil { // the first session: the bridge's server declares what the server does
		b.local = b.newLocal(remote.InitializeResult().Capabilities)
	}
	if err := errors.Join(b.relist(ctx, remote, false), b.relistOffers(ctx, remote, "")); err != nil {
		remote.Close()
		return err
	}
	b.resubscribe(ctx, remote)
	b.mu.Lock()
	level := b.level
	b.mu.Unlock()
	if level != "" {
		_ = remote.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: level})
	}
	b.mu.Lock()
	b.remote = remote
	if b.ready == nil {
		b.ready = make(chan struct{})
	}
	close(b.ready)
	b.mu.Unlock()
	return nil
}

// keep waits for the session to end and connects again, with backoff.
func (b *bridge) keep(ctx context.Context) {
	for ctx.Err() == nil {
		b.mu.Lock()
		remote := b.remote
		b.mu.Unlock()
		_ = remote.Wait()
		if ctx.Err() != nil {
			return
		}
		b.mu.Lock()
		replaced := b.remote != remote // at the client's revision (speak)
		if !replaced {
			b.unready() // calls wait for the next session
		}
		b.mu.Unlock()
		if replaced {
			continue
		}
		fmt.Fprintf(b.stderr, "countersign mcp: the connection to %s ended; connecting again\n", b.endpoint)
		eb := backoff.NewExponentialBackOff()
		eb.InitialInterval, eb.MaxInterval = 200*time.Millisecond, 30*time.Second
		_, err := backoff.Retry(ctx, func() (struct{}, error) { return struct{}{}, b.connect(ctx) },
			backoff.WithBackOff(eb), backoff.WithMaxElapsedTime(0))
		if err != nil {
			return // ctx ended
		}
		fmt.Fprintf(b.stderr, "countersign mcp: connected again to %s\n", b.endpoint)
	}
}

// session is the session in use, waiting for one while the bridge
// reconnects.
func (b *bridge) session(ctx context.Context) (*mcp.ClientSession, error) {
	for {
		b.mu.Lock()
		ready, remote := b.ready, b.remote
		b.mu.Unlock()
		select {
		case <-ready:
			return remote, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// relist offers the server's tools now: new ones added, gone ones removed,
// changed ones or ones in a new place replaced; the SDK tells the client
// the list changed. said: the server said it changed, and a list the same
// as before is told as changed all the same.
func (b *bridge) relist(ctx context.Context, remote *mcp.ClientSession, said bool) error {
	seen, place, wire := map[string]string{}, map[string]int{}, map[string]json.RawMessage{}
	var tools []*mcp.Tool
	params := &mcp.ListToolsParams{}
	for page := 0; page == 0 || params.Cursor != ""; page++ {
		if page == maxListPages {
			return fmt.Errorf("list tools: more than %d pages", maxListPages)
		}
		pctx, got, _ := upstream.WithResultBytes(ctx)
		res, err := remote.ListTools(pctx, params)
		if err != nil {
			return err
		}
		listed := upstream.ListedTools(got(), len(res.Tools))
		for i, t := range res.Tools {
			sdk, _ := json.Marshal(t)
			seen[t.Name], place[t.Name], wire[t.Name] = string(sdk)+"\x00"+string(listed[i]), len(tools), listed[i]
			tools = append(tools, t)
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var gone []string
	for name := range b.listed {
		if _, ok := seen[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		b.local.RemoveTools(gone...)
	}
	changed := len(gone) > 0
	for i, t := range tools {
		name := t.Name
		was, ok := b.place[name]
		if ok && was == place[name] && b.listed[name] == seen[name] && (i > 0 || !said || changed) {
			continue // unchanged, in its place (a new order is a changed list)
		}
		changed = true
		b.local.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return b.call(ctx, name, req)
		})
	}
	b.listed, b.place, b.wire = seen, place, wire
	return nil
}

// maxListPages bounds the server's tool list (one that pages for ever).
const maxListPages = 1000

// inServersOrder lists the tools in the order the server listed them
// (Countersign's own, then each MCP server's in its own order).
func (b *bridge) inServersOrder(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if list, ok := res.(*mcp.ListToolsResult); ok && err == nil {
			b.mu.Lock()
			place := b.place
			b.mu.Unlock()
			sort.SliceStable(list.Tools, func(i, j int) bool { return place[list.Tools[i].Name] < place[list.Tools[j].Name] })
		}
		return res, err
	}
}

// unlisted forwards a call to a tool the server does not list.
func (b *bridge) unlisted(ctx context.Context, req *mcp.CallToolRequest) (mcp.Result, error) {
	res, err := b.call(ctx, req.Params.Name, req)
	if res == nil { // not a typed nil: the error stands
		return nil, err
	}
	return res, err
}

// call forwards one call on the session in use. A call cut by a lost
// connection is asked again on the next session: the server answers with
// the same call (it joins an agent's identical call), never a second one.
func (b *bridge) call(ctx context.Context, name string, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	// The calls of one bridge are one conversation (the server ties them to
	// one run), unless the client names its own.
	conversation := b.conversation
	if s, ok := req.Params.GetMeta()[mcpgate.MetaSession].(string); ok && s != "" {
		conversation = s
	}
	// The client's own _meta goes on as it came (a trace, a new intent),
	// with the conversation named.
	meta := mcp.Meta{}
	for k, v := range req.Params.GetMeta() {
		if k != "progressToken" {
			meta[k] = v
		}
	}
	meta[mcpgate.MetaSession] = conversation
	// A 2026-07-28 client's answers to an input-required result go on with
	// the server's state, as they came.
	params := &mcp.CallToolParams{Name: name, Arguments: req.Params.Arguments, Meta: meta,
		InputResponses: req.Params.InputResponses, RequestState: req.Params.RequestState}
	if tok := req.Params.GetProgressToken(); progressToken(tok) {
		// The server is sent a token of the bridge's, and the client's
		// goes back on each notification as it came (2.5, a string, …).
		key := fmt.Sprintf("countersign-bridge-progress-%d", b.tokens.Add(1))
		params.SetProgressToken(key)
		b.asking.Store(key, asked{req.Session, tok})
		defer b.asking.Delete(key)
	}
	for try := 0; ; try++ {
		remote, err := b.session(ctx)
		if err != nil {
			return nil, err
		}
		cctx, got, _ := upstream.WithResultBytes(ctx)
		res, err := remote.CallTool(cctx, params)
		if raw := got(); err == nil && raw != nil {
			return b.answers.standIn(raw), nil // written in the server's bytes
		}
		// Only a call the server never took is sent again: its session was
		// gone (a restart answers 404 before doing anything). A connection
		// lost after sending is the client's to retry.
		if err == nil || try >= 5 || ctx.Err() != nil || !errors.Is(err, mcp.ErrSessionMissing) {
			return res, err
		}
		b.drop(remote)
		select {
		case <-time.After(200 * time.Millisecond << try):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// drop ends a session the server no longer knows, so that keep connects
// again at once.
func (b *bridge) drop(remote *mcp.ClientSession) {
	b.mu.Lock()
	same := b.remote == remote
	if same {
		b.unready()
	}
	b.mu.Unlock()
	if same {
		_ = remote.Close()
	}
}

// unready makes calls wait for the next session (b.mu held); once per
// session lost, so that those already waiting are let go by connect.
func (b *bridge) unready() {
	select {
	case <-b.ready:
		b.ready = make(chan struct{})
	default: // already waiting for one
	}
}

func (b *bridge) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.remote != nil {
		b.remote.Close()
	}
}

// asked is a client's call in flight whose progress it asked for, under
// its own token.
type asked struct {
	ss    *mcp.ServerSession
	token any
}

// progressToken says whether a client's progress token is one MCP allows:
// a string or a number.
func progressToken(t any) bool {
	switch t.(type) {
	case string, float64, int, int32, int64, json.Number:
		return true
	}
	return false
}

// bearerAuth adds the agent key to every request.
type bearerAuth string

func (k bearerAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(k))
	return http.DefaultTransport.RoundTrip(r)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
