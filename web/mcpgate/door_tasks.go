package mcpgate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"maps"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/web/doorkit"
)

// TasksMCP is the MCP revision whose sessions may ask for tasks (they are
// experimental in it): a held call answered with a task, polled with
// tasks/get and tasks/result, withdrawn with tasks/cancel.
const TasksMCP = "2025-11-25"

// rpcMessage is one JSON-RPC request as /mcp reads it to see whether it is
// Countersign's to answer.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// readMessage is a POST's one JSON-RPC message (nil: a batch, or not one).
func readMessage(body []byte) *rpcMessage {
	var m rpcMessage
	if len(body) == 0 || bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) || json.Unmarshal(body, &m) != nil {
		return nil
	}
	return &m
}

// mcpTasks answers, itself, the requests of a 2025-11-25 session that the
// Go SDK does not speak (mcpgate's tasks.go): a tools/call that asks for a
// task, and tasks/get, tasks/result and tasks/cancel. A task belongs to the
// agent, not to the MCP session: it is read after the session is gone, on
// another instance, after a restart. true when it answered.
func (ep *Door) tasks(c echo.Context, ag *models.Agent, m *rpcMessage, modern bool) (bool, error) {
	r := c.Request()
	if m == nil || len(m.ID) == 0 || string(m.ID) == "null" {
		return false, nil // the SDK's to answer or refuse
	}
	if modern {
		return ep.modernTasks(c, ag, *m)
	}
	if r.Header.Get("Mcp-Protocol-Version") != TasksMCP {
		return false, nil
	}
	ctx, gw := r.Context(), ep.gw
	var task struct {
		TaskID string `json:"taskId"`
	}
	switch m.Method {
	case "tools/call":
		var p TaskCall
		if json.Unmarshal(m.Params, &p) != nil || p.Task == nil || !ep.hasSession(ag, r.Header.Get("Mcp-Session-Id")) || !gw.Offers(p.Name, false) {
			return false, nil // no task asked for, no session (the SDK answers 404), no such tool (a tool error result)
		}
		if gw.TaskForbidden(p.Name, false) {
			// Nothing is decided or run: the client asked for what the tool
			// said it never does.
			return true, c.JSON(http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{
				"code": -32601, "message": "the tool " + p.Name + " is never called as a task (its execution.taskSupport is \"forbidden\"): call it without params.task"}})
		}
		t, err := gw.CreateTask(ctx, ag, r.Header.Get("Mcp-Session-Id"), p)
		return true, rpcReply(c, m.ID, map[string]any{"task": t}, err)
	case "tasks/get", "tasks/result", "tasks/cancel":
		if err := json.Unmarshal(m.Params, &task); err != nil || task.TaskID == "" {
			return true, rpcReply(c, m.ID, nil, fault.Errorf(fault.Invalid, "%s needs params.taskId", m.Method))
		}
	default:
		return false, nil
	}
	switch m.Method {
	case "tasks/get":
		t, err := gw.GetTask(ctx, ag, task.TaskID)
		return true, rpcReply(c, m.ID, t, err)
	case "tasks/cancel":
		t, err := gw.CancelTask(ctx, ag, task.TaskID)
		return true, rpcReply(c, m.ID, t, err)
	}
	// tasks/result waits until the task ends: a held request, as a held call.
	return true, ep.kit.Hold(c, false, func() error {
		doorkit.LongWrite(c)
		res, err := gw.TaskResult(c.Request().Context(), ag, task.TaskID)
		return rpcReply(c, m.ID, res, err)
	})
}

// mcpModernTasks answers the tasks extension's methods for a 2026-07-28
// request (a tools/call that waits becomes a task in the gateway's own
// server; taskCapable words it): tasks/get and tasks/cancel for a client
// that declared the extension in the request's _meta, the protocol's
// missing-capability error for one that did not. tasks/update (input for
// a task that asks for it) has nothing to update here: no held call asks
// its client anything.
func (ep *Door) modernTasks(c echo.Context, ag *models.Agent, m rpcMessage) (bool, error) {
	switch m.Method {
	case "tasks/get", "tasks/cancel", "tasks/update":
	default:
		return false, nil
	}
	var p struct {
		Meta   map[string]any `json:"_meta"`
		TaskID string         `json:"taskId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	if !DeclaresTasks(p.Meta) {
		return true, c.JSON(http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{
			"code": -32021, "message": m.Method + " needs the client capability " + TasksExtension + " (declare it in the request's _meta)",
			"data": map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}}}})
	}
	if p.TaskID == "" {
		return true, rpcReply(c, m.ID, nil, fault.Errorf(fault.Invalid, "%s needs params.taskId", m.Method))
	}
	ctx, gw := c.Request().Context(), ep.gw
	switch m.Method {
	case "tasks/get":
		t, err := gw.DetailedTask(ctx, ag, p.TaskID)
		return true, rpcReply(c, m.ID, t, err)
	case "tasks/cancel":
		// An ack, whatever the task's state (one that ended, or that a
		// person approved, stays as it is: tasks/get tells).
		_, err := gw.CancelTask(ctx, ag, p.TaskID)
		if fault.CodeOf(err) != fault.NotFound {
			err = nil
		}
		return true, rpcReply(c, m.ID, map[string]any{"resultType": "complete"}, err)
	}
	_, err := gw.GetTask(ctx, ag, p.TaskID)
	if err == nil {
		err = fault.Errorf(fault.Invalid, "task %s asks for no input", p.TaskID)
	}
	return true, rpcReply(c, m.ID, nil, err)
}

// rpcReply answers one JSON-RPC request with result, or with err in the
// protocol's words: an unknown task or a bad parameter is invalid params.
func rpcReply(c echo.Context, id json.RawMessage, result any, err error) error {
	if err == nil {
		if b, ok := rawReply(id, result); ok {
			return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, b)
		}
	}
	reply := map[string]any{"jsonrpc": "2.0", "id": id}
	if err != nil {
		code := -32603
		if k := fault.CodeOf(err); k == fault.Invalid || k == fault.NotFound || k == fault.Conflict {
			code = -32602
		}
		reply["error"] = map[string]any{"code": code, "message": fault.Message(err)}
	} else {
		reply["result"] = result
	}
	return c.JSON(http.StatusOK, reply)
}

// hasSession says whether the agent has the MCP session id open here.
func (ep *Door) hasSession(ag *models.Agent, id string) bool {
	if id == "" {
		return false
	}
	for ss := range ep.server(ag, false).Sessions() {
		if ss.ID() == id {
			return true
		}
	}
	return false
}

// taskCapable is where the SDK's answer to a 2025-11-25 session's
// initialize or tools/list is written, to be told, in Countersign's own
// words, that tasks are spoken here: the tasks capability (tools/call,
// cancel) in initialize's result, and each tool's execution.taskSupport
// "optional" in tools/list (a call may wait for a person; a client may
// wait as a task or be held); not to the stdio bridge (bridged). Other
// requests: w itself, and done does nothing.
func (ep *Door) taskCapable(w http.ResponseWriter, r *http.Request, ag *models.Agent, m *rpcMessage, modern bool) (http.ResponseWriter, func()) {
	if m == nil {
		return w, func() {}
	}
	// A 2025-11-25 session is told each tool may be called as a task.
	tasks := m.Method == "tools/list" && !modern && r.Header.Get("Mcp-Protocol-Version") == TasksMCP && !ep.bridged(ag, r, m)
	var p struct {
		Meta map[string]any `json:"_meta"`
	}
	switch {
	case modern && m.Method == "server/discover":
	case modern && m.Method == "tools/call" && json.Unmarshal(m.Params, &p) == nil && DeclaresTasks(p.Meta):
	case !modern && m.Method == "initialize" && !ep.bridged(ag, r, m):
	case m.Method == "tools/list": // each tool as its server listed it (door_listing.go)
	case CacheableList(m.Method): // entries as listed; no 2026-07-28 words to a 2025 session
	default:
		return w, func() {}
	}
	cw := &captured{ResponseWriter: w, code: http.StatusOK}
	return cw, func() {
		out := cw.buf.Bytes()
		if cw.code == http.StatusOK {
			out = rewriteMessages(out, func(res map[string]json.RawMessage) bool {
				stripped := !modern && CacheableList(m.Method)
				if stripped {
					WithoutCacheWords(res)
				}
				if m.Method == "tools/list" {
					return ToolsAsListed(res, ep.lister(modern), tasks) || stripped
				}
				if EntriesAsListed(res, m.Method, ep.gw.OfferedWire(modern)) {
					return true
				}
				return addTasks(m.Method, res) || stripped
			})
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(cw.code)
		_, _ = w.Write(out)
	}
}

// captured keeps what the SDK writes, to be written when it is done.
type captured struct {
	http.ResponseWriter
	buf  bytes.Buffer
	code int
}

func (c *captured) WriteHeader(code int)        { c.code = code }
func (c *captured) Write(b []byte) (int, error) { return c.buf.Write(b) }
func (c *captured) Flush()                      {}

// rewriteMessages applies edit to the result of each JSON-RPC response in
// body: one JSON message, or an event stream's data lines. What it cannot
// read, or edit left alone (false), is left as it was written.
func rewriteMessages(body []byte, edit func(map[string]json.RawMessage) bool) []byte {
	one := func(msg []byte) []byte {
		var env map[string]json.RawMessage
		if json.Unmarshal(msg, &env) != nil || env["result"] == nil {
			return msg
		}
		var res map[string]json.RawMessage
		if json.Unmarshal(env["result"], &res) != nil {
			return msg
		}
		if !edit(res) {
			return msg // as it was written
		}
		var err error
		if env["result"], err = MarshalRaw(res); err != nil {
			return msg
		}
		out, err := MarshalRaw(env)
		if err != nil {
			return msg
		}
		return out
	}
	if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '{' {
		return one(t)
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64*1024), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			out.WriteString("data: ")
			out.Write(one(data))
		} else {
			out.Write(line)
		}
		out.WriteByte('\n')
	}
	if sc.Err() != nil {
		return body
	}
	return out.Bytes()
}

// addTasks says that tasks are spoken: in initialize's result (when the
// session speaks 2025-11-25), the capability; in server/discover's, the
// extension; a tools/call that waits, as its task.
func addTasks(method string, res map[string]json.RawMessage) bool {
	switch method {
	case "server/discover":
		var caps, ext map[string]json.RawMessage
		if json.Unmarshal(res["capabilities"], &caps) != nil {
			return false
		}
		if json.Unmarshal(caps["extensions"], &ext) != nil || ext == nil {
			ext = map[string]json.RawMessage{}
		}
		ext[TasksExtension] = json.RawMessage(`{}`)
		caps["extensions"], _ = MarshalRaw(ext)
		res["capabilities"], _ = MarshalRaw(caps)
		return true
	case "tools/call":
		// A call that waits, as the task it became.
		var meta map[string]json.RawMessage
		var t Task
		if json.Unmarshal(res["_meta"], &meta) != nil || json.Unmarshal(meta[MetaTask], &t) != nil || t.TaskID == "" {
			return false
		}
		clear(res)
		for k, v := range t.Modern("task") {
			res[k], _ = MarshalRaw(v)
		}
		return true
	case "initialize":
		var v string
		var caps map[string]json.RawMessage
		if json.Unmarshal(res["protocolVersion"], &v) != nil || v != TasksMCP || json.Unmarshal(res["capabilities"], &caps) != nil {
			return false
		}
		caps["tasks"] = json.RawMessage(`{"cancel":{},"requests":{"tools":{"call":{}}}}`)
		res["capabilities"], _ = MarshalRaw(caps)
		return true
	}
	return false
}

// rawReply is the JSON-RPC response with result written as it is where it
// holds an upstream's result in the bytes it sent (json.RawMessage, or a
// map with one under "result", as a 2026-07-28 task holds it), which
// encoding/json would compact and escape anew.
func rawReply(id json.RawMessage, result any) ([]byte, bool) {
	var inner json.RawMessage
	switch r := result.(type) {
	case json.RawMessage:
		inner = r
	case map[string]any:
		raw, ok := r["result"].(json.RawMessage)
		if !ok {
			return nil, false
		}
		rest := maps.Clone(r)
		delete(rest, "result")
		b, err := MarshalRaw(rest)
		if err != nil || len(b) < 2 {
			return nil, false
		}
		if len(rest) > 0 {
			b = append(b[:len(b)-1], ',')
		} else {
			b = b[:len(b)-1]
		}
		inner = append(append(append(b, `"result":`...), raw...), '}')
	default:
		return nil, false
	}
	out := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	return append(append(append(out, `,"result":`...), inner...), '}'), true
}

// bridged says whether a 2025 session's initialize or tools/list comes
// from the stdio bridge (BridgeClient).
func (ep *Door) bridged(ag *models.Agent, r *http.Request, m *rpcMessage) bool {
	switch m.Method {
	case "initialize":
		var p struct {
			ClientInfo struct {
				Name string `json:"name"`
			} `json:"clientInfo"`
		}
		return json.Unmarshal(m.Params, &p) == nil && p.ClientInfo.Name == BridgeClient
	case "tools/list":
		id := r.Header.Get("Mcp-Session-Id")
		if id == "" {
			return false
		}
		for ss := range ep.server(ag, false).Sessions() {
			if ss.ID() == id {
				p := ss.InitializeParams()
				return p != nil && p.ClientInfo != nil && p.ClientInfo.Name == BridgeClient
			}
		}
	}
	return false
}
