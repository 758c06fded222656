package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/tools"
)

// mcpBody reads a POST's body for /mcp. Over AgentBodyLimit, the client is
// answered here, in MCP's words instead of an HTTP error the SDKs throw
// (and that ends a bridge's session): a tools/call gets a tool error
// result naming the limit, anything else a JSON-RPC error; false then.
// The body is read again from the request, and returned.
func mcpBody(c echo.Context) ([]byte, bool, error) {
	r := c.Request()
	limit := AgentBodyLimit()
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
	c.Response().Header().Set("Connection", "close") // the rest of the body is not read
	return nil, false, mcpRefuseStart(c, body, words)
}

// mcpRefuse answers an MCP message that is not taken, in MCP's words, from
// the start of its body: a tools/call gets a tool error result (the SDKs
// read it, and a bridge's session goes on), anything else a JSON-RPC error.
func mcpRefuse(c echo.Context, start io.Reader, words string) error {
	body, _ := io.ReadAll(start)
	return mcpRefuseStart(c, body, words)
}

func mcpRefuseStart(c echo.Context, body []byte, words string) error {
	id, method := envelopeStart(body)
	reply := map[string]any{"jsonrpc": "2.0", "id": id}
	if method == "tools/call" {
		reply["result"] = map[string]any{"content": []any{map[string]any{"type": "text", "text": words}}, "isError": true}
	} else {
		reply["error"] = map[string]any{"code": -32600, "message": words}
	}
	return c.JSON(http.StatusOK, reply)
}

// envelopeStart finds the id and method of a JSON-RPC message from the
// start of its body (they come before the params in what SDKs send); an
// id not found is null.
func envelopeStart(body []byte) (id json.RawMessage, method string) {
	id = json.RawMessage("null")
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return id, ""
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return id, method
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return id, method // the params, cut at the limit
		}
		switch key {
		case "id":
			if len(v) > 0 && (v[0] == '"' || v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) {
				id = v
			}
		case "method":
			_ = json.Unmarshal(v, &method)
		}
	}
	return id, method
}
