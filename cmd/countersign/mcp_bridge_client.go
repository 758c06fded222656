//lint:file-ignore SA1019 sampling, elicitation and roots are deprecated in MCP 2026-07-28 but in use: the bridge passes them on
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The bridge speaks to the server as its client speaks to it: at the
// client's revision, declaring what the client can be asked (a sampled
// message, a form), and what the server asks during a call reaches the
// client and its answer the server. The client's roots are asked of the
// client each time the server asks for them.

// legacyMCP is the revision the server is spoken to at for a client that
// initializes (2025-11-25 and before): a session, and each tool and result
// as /mcp gives such a client.
const legacyMCP = "2025-11-25"

// atClientsRevision follows the client once it has said who it is
// (initialize, or server/discover, which only a 2026-07-28 client sends):
// the server is then spoken to at its revision, with its capabilities. A
// 2026-07-28 client may have asked server/discover of another process
// (the TypeScript SDK's stdio transport probes a throwaway one): its
// first request here says its revision and capabilities in _meta, and is
// followed as discover would have been.
func (b *bridge) atClientsRevision(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "initialize" && method != "server/discover" {
			if caps, ok := b.unheralded(req); ok {
				b.follow(ctx, "", caps)
			}
		}
		res, err := next(ctx, method, req)
		if err != nil || (method != "initialize" && method != "server/discover") {
			return res, err
		}
		version := legacyMCP
		if method == "server/discover" {
			version = ""
		} else {
			b.mu.Lock()
			b.initialized = true
			b.mu.Unlock()
		}
		var caps *mcp.ClientCapabilities
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss.InitializeParams() != nil {
			caps = ss.InitializeParams().Capabilities
		}
		b.follow(ctx, version, caps)
		return res, err
	}
}

// unheralded says whether req is a 2026-07-28 request (its _meta names
// the revision) while the server is spoken to at an earlier one, which no
// initialize chose, and the capabilities it declares.
func (b *bridge) unheralded(req mcp.Request) (*mcp.ClientCapabilities, bool) {
	p := req.GetParams()
	if p == nil || reflect.ValueOf(p).IsNil() { // a notification may have no params: a nil pointer
		return nil, false
	}
	meta := p.GetMeta()
	if v, _ := meta[mcp.MetaKeyProtocolVersion].(string); v < "2026-07-28" {
		return nil, false
	}
	b.mu.Lock()
	legacy, initialized := b.version == legacyMCP, b.initialized
	b.mu.Unlock()
	if !legacy || initialized {
		return nil, false
	}
	var caps *mcp.ClientCapabilities
	if raw, err := json.Marshal(meta[mcp.MetaKeyClientCapabilities]); err == nil && string(raw) != "null" {
		caps = &mcp.ClientCapabilities{}
		if json.Unmarshal(raw, caps) != nil {
			caps = nil
		}
	}
	return caps, true
}

// follow connects to the server anew at version, declaring what of caps
// the server may ask, unless it is already spoken to so; calls wait
// meanwhile. Should the connection fail, keep connects again, with
// backoff.
func (b *bridge) follow(ctx context.Context, version string, caps *mcp.ClientCapabilities) {
	var asks *mcp.ClientCapabilities
	if caps != nil && (caps.Sampling != nil || caps.Elicitation != nil) {
		asks = &mcp.ClientCapabilities{Sampling: caps.Sampling, Elicitation: caps.Elicitation}
	}
	b.mu.Lock()
	if b.version == version && sameJSON(b.asks, asks) {
		b.mu.Unlock()
		return
	}
	b.version, b.asks = version, asks
	old := b.remote
	b.unready()
	b.mu.Unlock()
	if err := b.connect(ctx); err != nil {
		fmt.Fprintf(b.stderr, "countersign mcp: connecting to %s as the client speaks: %v\n", b.endpoint, err)
	}
	_ = old.Close()
}

func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// asksAs makes the bridge's client declare and answer what the client can
// be asked: sampling and elicitation go to the client. Roots are declared
// as the Go SDK does by default, and asked of the client (rootsOfClient).
func (b *bridge) asksAs(opts *mcp.ClientOptions, asks *mcp.ClientCapabilities) {
	opts.Capabilities = &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{ListChanged: true}}
	if asks == nil {
		return
	}
	opts.Capabilities.Sampling, opts.Capabilities.Elicitation = asks.Sampling, asks.Elicitation
	if asks.Sampling != nil {
		opts.CreateMessageWithToolsHandler = func(ctx context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
			ss, err := b.clientSession()
			if err != nil {
				return nil, err
			}
			return ss.CreateMessageWithTools(ctx, req.Params)
		}
	}
	if asks.Elicitation != nil {
		opts.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			ss, err := b.clientSession()
			if err != nil {
				return nil, err
			}
			return ss.Elicit(ctx, req.Params)
		}
	}
}

// rootsOfClient answers the server's roots/list with the client's roots.
func (b *bridge) rootsOfClient(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "roots/list" {
			return next(ctx, method, req)
		}
		ss, err := b.clientSession()
		if err != nil {
			return nil, err
		}
		p, _ := req.GetParams().(*mcp.ListRootsParams)
		return ss.ListRoots(ctx, p)
	}
}

// clientSession is the session of the bridge's client (over stdio, one).
func (b *bridge) clientSession() (*mcp.ServerSession, error) {
	for ss := range b.local.Sessions() {
		return ss, nil
	}
	return nil, errors.New("countersign mcp: no client is connected")
}
