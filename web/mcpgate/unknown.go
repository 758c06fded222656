package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/upstream"
)

// UnknownToolAsResult answers a call to a tool Countersign does not offer
// with a tool error result, as most MCP servers do (the TypeScript and
// Python SDKs' servers, the reference everything-server) and as a model
// reads best, instead of the Go SDK's JSON-RPC error: the client reads the
// refusal where it reads any failed call, and nothing reached a server.
// (Countersign does not forward such a call to learn how the server
// would have answered: a tool it does not list is one the gate knows
// nothing of.) modern: for clients of the revisions without sessions (or
// a session of such a revision, as the stdio bridge may have).
func UnknownToolAsResult(modern bool) mcp.Middleware {
	return OnUnknownTool(func(_ context.Context, call *mcp.CallToolRequest) (mcp.Result, error) {
		text, _ := json.Marshal(fmt.Sprintf("unknown tool %q: Countersign offers no tool of that name to this client (tools/list says which it does)",
			tools.Truncate(call.Params.Name, 100)))
		wire := `{"content":[{"type":"text","text":` + string(text) + `}],"isError":true`
		sessionless := modern
		if ss, ok := call.GetSession().(*mcp.ServerSession); ok && !modern && ss.InitializeParams() != nil {
			sessionless = ss.InitializeParams().ProtocolVersion >= upstream.ModernProtocol
		}
		if sessionless { // decoded, so that the client is told the result is complete, as of every other
			wire += `,"resultType":"complete"`
		}
		out := new(mcp.CallToolResult)
		if json.Unmarshal([]byte(wire+"}"), out) != nil {
			return nil, nil
		}
		return out, nil
	})
}

// OnUnknownTool is middleware that hands a tools/call the SDK's server
// refused as a call to a tool it does not have to answer; a nil result
// and error from answer leave the SDK's refusal.
func OnUnknownTool(answer func(context.Context, *mcp.CallToolRequest) (mcp.Result, error)) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			call, ok := req.(*mcp.CallToolRequest)
			if method != "tools/call" || !ok || !unknownTool(call, err) {
				return res, err
			}
			if out, err := answer(ctx, call); out != nil || err != nil {
				return out, err
			}
			return res, err
		}
	}
}

// unknownTool says whether err is the SDK's answer to a call to a tool
// the server does not have.
func unknownTool(call *mcp.CallToolRequest, err error) bool {
	var rpc *jsonrpc.Error
	return call.Params != nil && errors.As(err, &rpc) && rpc.Code == jsonrpc.CodeInvalidParams &&
		rpc.Message == fmt.Sprintf("unknown tool %q", call.Params.Name)
}

// unlisted puts a call to a tool Countersign does not offer through the
// gate when an MCP server of the tools file forwards calls to tools it
// does not list (unlisted_tools: the registry finds such a tool by name;
// it is never listed, so the SDK's server does not have it).
func (gw *Gateway) unlisted(ag *models.Agent) mcp.Middleware {
	return OnUnknownTool(func(ctx context.Context, call *mcp.CallToolRequest) (mcp.Result, error) {
		t, found := gw.Outside.Gate.Tools().Get(call.Params.Name)
		if !found || !t.Unlisted || !t.Executes() {
			return nil, nil
		}
		res, err := gw.call(ctx, ag, t, call)
		if res == nil { // not a typed nil: the error stands
			return nil, err
		}
		return res, err
	})
}
