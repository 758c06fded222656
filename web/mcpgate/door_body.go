package mcpgate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/rawjson"
	"github.com/countersign/countersign/web/doorkit"
)

// mcpBody reads a POST's body for /mcp. Over AgentBodyLimit, the client is
// answered here, in MCP's words instead of an HTTP error the SDKs throw
// (and that ends a bridge's session): a tools/call gets a tool error
// result naming the limit, anything else a JSON-RPC error; false then.
// The body is read again from the request, and returned.
func readBody(c echo.Context) ([]byte, bool, error) {
	r := c.Request()
	limit := doorkit.BodyLimit()
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(body)) <= limit {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		return body, true, nil
	}
	size := fmt.Sprintf("more than %d bytes", limit)
	if r.ContentLength > 0 {
		size = fmt.Sprintf("%d bytes", r.ContentLength)
	}
	words := fmt.Sprintf("The request is %s, over Countersign's limit of %d bytes for one MCP message (a call's arguments are at most %d bytes): nothing was done. Send smaller arguments, or split the work into several calls.",
		size, limit, tools.MaxArgsBytes)
	return nil, false, Refuse(c, io.MultiReader(bytes.NewReader(body), r.Body), words)
}

// refuseReadsUpTo bounds what is read of a message refused unread to find
// its id (streamed, nothing kept): past it the client is answered with
// id null and the connection closed.
const refuseReadsUpTo = 256 << 20

// mcpRefuse answers an MCP message that is not taken, in MCP's words, read
// from body as it streams (not kept) for its id and method, wherever the
// client wrote them (both TypeScript SDKs write the id after the params):
// a tools/call gets a tool error result (the SDKs read it, and a bridge's
// session goes on), anything else a JSON-RPC error.
func Refuse(c echo.Context, body io.Reader, words string) error {
	env := rawjson.Envelope(io.LimitReader(body, refuseReadsUpTo), "id", "method")
	id := json.RawMessage("null")
	if v := env["id"]; len(v) > 0 && (v[0] == '"' || v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) {
		id = v
	}
	var method string
	_ = json.Unmarshal(env["method"], &method)
	c.Response().Header().Set("Connection", "close") // what is left of the body is not read
	reply := map[string]any{"jsonrpc": "2.0", "id": id}
	if method == "tools/call" {
		reply["result"] = map[string]any{"content": []any{map[string]any{"type": "text", "text": words}}, "isError": true}
	} else {
		reply["error"] = map[string]any{"code": -32600, "message": words}
	}
	return c.JSON(http.StatusOK, reply)
}
