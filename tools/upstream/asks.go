//lint:file-ignore SA1019 sampling, elicitation and roots are deprecated in MCP 2026-07-28 but in use: a drop-in gateway passes them on

package upstream

import (
	"context"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// clientCaps is what the relay's client declared it can do (nil: it did
// not initialize, a stateless request).
func clientCaps(r *Relay) *mcp.ClientCapabilities {
	if p := r.Session.InitializeParams(); p != nil {
		return p.Capabilities
	}
	return nil
}

// relayHandlers are the client options that pass what an upstream says and
// asks during a call to the call's client.
func (u *Server) relayHandlers(opts *mcp.ClientOptions) {
	opts.ProgressNotificationHandler = func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		if !u.watched { // over HTTP, passed on as it came (watchedBody)
			u.progress(req.Params, nil)
		}
	}
	opts.LoggingMessageHandler = func(ctx context.Context, req *mcp.LoggingMessageRequest) {
		if u.watched {
			return
		}
		if r := u.relayFor(ctx, "", nil); r != nil {
			_ = r.Session.Log(r.Ctx, redacted(u, req.Params)) // at the level the client set
		} else {
			_ = u.unattributed("log message", "")
		}
	}
	opts.CreateMessageWithToolsHandler = func(ctx context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
		r := u.relayFor(ctx, "sampling/createMessage", req.Params)
		if r == nil {
			return nil, u.unattributed("sampling", "sampling/createMessage")
		}
		if r.Questions != nil {
			return askModern[mcp.CreateMessageWithToolsResult](ctx, r, "sampling", redacted(u, req.Params))
		}
		caps := clientCaps(r)
		if caps == nil || caps.Sampling == nil {
			return nil, errors.New("countersign: the client this call came from does not support sampling")
		}
		if len(req.Params.Tools) > 0 && caps.Sampling.Tools == nil {
			return nil, errors.New("countersign: the client this call came from does not support sampling with tools")
		}
		return r.Session.CreateMessageWithTools(r.Ctx, redacted(u, req.Params))
	}
	opts.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		r := u.relayFor(ctx, "elicitation/create", req.Params)
		if r == nil {
			return nil, u.unattributed("elicitation", "elicitation/create")
		}
		if r.Questions != nil {
			return askModern[mcp.ElicitResult](ctx, r, "elicitation", redacted(u, req.Params))
		}
		return r.Session.Elicit(r.Ctx, redacted(u, req.Params)) // refused there if the client cannot
	}
	// What Countersign can pass on: sampling with tools, both elicitation
	// modes, roots (a change of a client's roots is not passed on). Over
	// stdio, none of them (relayFor): the SDK declares sampling when a
	// handler is set, so a stdio server gets none and is refused by
	// refuseUnattributed, logged, if it asks all the same.
	if !u.watched {
		opts.CreateMessageWithToolsHandler, opts.ElicitationHandler = nil, nil
		opts.Capabilities = &mcp.ClientCapabilities{}
		return
	}
	opts.Capabilities = &mcp.ClientCapabilities{
		RootsV2:     &mcp.RootCapabilities{},
		Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}},
	}
}

// relayRoots answers an upstream's roots/list with the roots of the call's
// client; a request to the client that was not offered (over stdio) is
// refused and logged (the SDK would answer some of them itself).
func (u *Server) relayRoots(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "sampling/createMessage", "elicitation/create":
			if !u.watched && relayOf(ctx) == nil {
				return nil, u.unattributed(strings.SplitN(method, "/", 2)[0], method)
			}
			return next(ctx, method, req)
		case "roots/list":
		default:
			return next(ctx, method, req)
		}
		r := u.relayFor(ctx, method, req.GetParams())
		if r == nil {
			return nil, u.unattributed("request for its client's roots", method)
		}
		p, _ := req.GetParams().(*mcp.ListRootsParams)
		if r.Questions != nil {
			if p == nil {
				p = &mcp.ListRootsParams{}
			}
			return askModern[mcp.ListRootsResult](ctx, r, "roots", p)
		}
		if caps := clientCaps(r); caps == nil || caps.RootsV2 == nil {
			return nil, errors.New("countersign: the client this call came from does not support roots")
		}
		return r.Session.ListRoots(r.Ctx, p)
	}
}
