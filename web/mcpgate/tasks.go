package mcpgate

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/telemetry"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/tools"
)

// Tasks (MCP 2025-11-25, experimental there): a client that asks for a task
// on tools/call gets one at once, and polls it, instead of being held while
// a person decides. A task is the call itself: its id is the call's id, its
// state is the call's, kept in the database (a restart, another instance,
// the MCP session gone: nothing is lost), and only the agent that asked
// for it may read or cancel it. The Go SDK does not speak tasks; web
// answers these requests with what is here, in its own JSON-RPC replies.

// TaskPollInterval is how often a client is asked to poll a task: a person
// decides in seconds or minutes, so once every two seconds is prompt enough.
const TaskPollInterval = 2 * time.Second

// MetaRelatedTask is the _meta key that ties a task's result to the task.
const MetaRelatedTask = "io.modelcontextprotocol/related-task"

// Task is an MCP task as a client reads it (tasks/get, tasks/cancel, and
// the task of a CreateTaskResult).
type Task struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"` // working, completed, cancelled
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTL is null: the call, its outcome and result are kept for the audit,
	// not dropped after a while.
	TTL          *int64 `json:"ttl"`
	PollInterval int64  `json:"pollInterval,omitempty"`
}

// TaskCall is a tools/call's params with the task it asks for.
type TaskCall struct {
	Meta      mcp.Meta        `json:"_meta,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Task      *struct {
		TTL *int64 `json:"ttl,omitempty"`
	} `json:"task,omitempty"`
}

// AsTask is the words beside the agent's name in the audit log for a call
// whose client can wait as a task: staff see which way the agent is
// answered.
const AsTask = "answered as an MCP task when held"

// withTaskVia is ctx with AsTask beside how the agent came.
func withTaskVia(ctx context.Context) context.Context {
	via := AsTask
	if was := gate.ViaOf(ctx); was != "" {
		via = was + "; " + AsTask
	}
	return gate.WithVia(ctx, via)
}

// Offers says whether the tool named is offered to clients of the
// revisions with sessions (modern false) or without.
func (gw *Gateway) Offers(name string, modern bool) bool {
	_, ok := gw.offered(name, modern)
	return ok
}

// TaskForbidden says whether the tool named says, as its server listed it,
// that it is never called as a task (execution.taskSupport "forbidden"):
// a client that asks for one is refused (-32601), as MCP 2025-11-25 says.
// A tool that says nothing may be: Countersign lists it as "optional".
func (gw *Gateway) TaskForbidden(name string, modern bool) bool {
	tool, ok := gw.offered(name, modern)
	if !ok {
		return false
	}
	wire := tool.Wire
	if modern && tool.ModernWire != nil {
		wire = tool.ModernWire
	}
	if wire == nil {
		wire = tool.Listing
	}
	var t struct {
		Execution struct {
			TaskSupport string `json:"taskSupport"`
		} `json:"execution"`
	}
	return json.Unmarshal(wire, &t) == nil && t.Execution.TaskSupport == "forbidden"
}

func (gw *Gateway) offered(name string, modern bool) (*tools.Tool, bool) {
	tool, ok := gw.Outside.Gate.Tools().Get(name)
	if !ok || !tool.Executes() || !OfferedAt(tool, modern) {
		return nil, false
	}
	return tool, true
}

// CreateTask puts a call a client asked for as a task through the gate, in
// the run of its MCP session (sessionID), and answers with the task at
// once: working while a person decides or it runs, completed when it ended
// at once (allowed and run, denied, invalid). The same intent asked again is
// the same call, so the same task.
func (gw *Gateway) CreateTask(ctx context.Context, ag *models.Agent, sessionID string, p TaskCall) (*Task, error) {
	tool, ok := gw.offered(p.Name, sessionID == "")
	if !ok {
		return nil, fault.Errorf(fault.Invalid, "unknown tool %q", tools.Truncate(p.Name, 100))
	}
	ctx = telemetry.Continue(ctx, traceOf(p.Meta))
	ctx = withTaskVia(ctx)
	asked, err := gw.Outside.Ask(ctx, gw.outsideCall(ag, tool, p.Meta, sessionID, p.Arguments, false))
	if err != nil {
		return nil, err
	}
	call := asked.Brief()
	if call.CreatedAt.IsZero() {
		now := time.Now()
		call.CreatedAt, call.UpdatedAt = now, now // ended at once: not read back
	}
	return gw.taskOf(call), nil
}

// GetTask is the agent's task id as it stands.
func (gw *Gateway) GetTask(ctx context.Context, ag *models.Agent, id string) (*Task, error) {
	call, _, err := gw.Outside.AgentsCall(ctx, ag, id)
	if err != nil {
		return nil, taskNotFound(err, id)
	}
	return gw.taskOf(call), nil
}

// TaskResult is the result of the agent's task id, as a tools/call without
// a task would have answered it: it waits until the task ends (or ctx
// does, when the client gives up: an error then). An upstream's result is
// in the bytes it sent (json.RawMessage; ended), others an
// *mcp.CallToolResult.
func (gw *Gateway) TaskResult(ctx context.Context, ag *models.Agent, id string) (any, error) {
	call, _, err := gw.Outside.AgentsCall(ctx, ag, id)
	if err != nil {
		return nil, taskNotFound(err, id)
	}
	call = gw.Outside.Wait(ctx, call, 24*time.Hour, 0, nil)
	if gw.Outside.Waiting(call) {
		return nil, fault.Errorf(fault.Unavailable, "task %s is still working: a person has not decided yet", call.ID)
	}
	return gw.ended(ctx, call, member{MetaRelatedTask, map[string]any{"taskId": call.ID}}), nil
}

// ended is the result of a call that ended, handed over to the agent, with
// extra members in its _meta: an upstream's in the bytes it sent
// (json.RawMessage, Countersign's words spliced in), else the SDK's
// result (*mcp.CallToolResult).
func (gw *Gateway) ended(ctx context.Context, call *models.ToolCall, extra ...member) any {
	_ = gw.Outside.HandedOver(ctx, call)
	tool, ok := gw.Outside.Gate.Tools().Get(call.Tool)
	if !ok {
		tool = &tools.Tool{Name: call.Tool} // since removed: the result as recorded, in text
	}
	add, note := gw.said(ctx, tool, call, false, false)
	add.meta = append(add.meta, extra...)
	if b := asSent(tool, call, add); b != nil {
		return json.RawMessage(b)
	}
	return withSaid(result(call, tool, note, nil), add)
}

// CancelTask withdraws the agent's task id while it waits for a person: the
// action is cancelled and never runs. One a person approved (it runs or
// ran) or that ended cannot be cancelled.
func (gw *Gateway) CancelTask(ctx context.Context, ag *models.Agent, id string) (*Task, error) {
	call, _, err := gw.Outside.AgentsCall(ctx, ag, id)
	if err != nil {
		return nil, taskNotFound(err, id)
	}
	if call.Status == models.CallPending {
		err = gw.Outside.Gate.Withdraw(ctx, call.ID, ag)
		if now, rerr := gw.Outside.Store.ToolCall(ctx, call.ID); rerr == nil {
			call = now
		}
	}
	switch {
	case call.Status == models.CallCancelled && gw.withdrawn(call):
		return gw.taskOf(call), nil
	case gw.Outside.Waiting(call):
		return nil, fault.Errorf(fault.Invalid, "task %s cannot be cancelled: a person approved it and it runs", call.ID)
	case err != nil && fault.CodeOf(err) != fault.Conflict:
		return nil, err
	}
	return nil, fault.Errorf(fault.Invalid, "task %s cannot be cancelled: it already ended (%s)", call.ID, call.Status)
}

// taskOf is a call as a task.
func (gw *Gateway) taskOf(c *models.ToolCall) *Task {
	t := &Task{TaskID: c.ID, CreatedAt: c.CreatedAt.UTC().Format(time.RFC3339Nano), LastUpdatedAt: c.UpdatedAt.UTC().Format(time.RFC3339Nano)}
	switch {
	case gw.Outside.Waiting(c):
		t.Status, t.PollInterval = "working", TaskPollInterval.Milliseconds()
		t.StatusMessage = "Approved; running."
		if c.Status == models.CallPending {
			t.StatusMessage = "Waiting for a person to decide: " + c.Reason
		}
	case c.Status == models.CallCancelled && gw.withdrawn(c):
		t.Status, t.StatusMessage = "cancelled", "Cancelled: "+gate.Withdrawn+"; nothing was done."
	default:
		// Ended: the result says how (a tool error result for a denial,
		// rejection, expiry or failure), as a call without a task.
		t.Status = "completed"
		t.StatusMessage = string(c.Status)
		if told := gate.TellOutcome(c); told.Words != "" {
			t.StatusMessage = told.Words
		}
	}
	return t
}

func (gw *Gateway) withdrawn(c *models.ToolCall) bool {
	return strings.TrimPrefix(c.Error, "cancelled: ") == gate.Withdrawn
}

// taskNotFound: another agent's task, or none, is an unknown task id (the
// protocol's invalid params); a failure to read is said as one.
func taskNotFound(err error, id string) error {
	if fault.CodeOf(err) == fault.NotFound {
		return fault.Errorf(fault.NotFound, "task %s was not found", tools.Truncate(id, 64))
	}
	return err
}

// The tasks extension of MCP 2026-07-28 (SEP-2663): a client declares it in
// a request's _meta; Countersign then answers a call that waits for a
// person with a task (server-directed: calls that end at once are answered
// as before), read with tasks/get, whose answer holds the result once it
// ended, and withdrawn with tasks/cancel.

// TasksExtension is the tasks extension's name.
const TasksExtension = "io.modelcontextprotocol/tasks"

// MetaTask is the _meta key under which the gateway's own server hands web
// the task a 2026 call became, for web to answer with it (door_tasks.go);
// the result around it says, in text, that the call waits.
const MetaTask = "countersign/task"

// DeclaresTasks says whether a request's _meta declares the tasks extension
// among its client's capabilities.
func DeclaresTasks(meta map[string]any) bool {
	caps, _ := meta[mcp.MetaKeyClientCapabilities].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[TasksExtension].(map[string]any)
	return ok
}

// Modern is the task in the tasks extension's words: flat, with
// resultType, ttlMs and pollIntervalMs.
func (t *Task) Modern(resultType string) map[string]any {
	m := map[string]any{"resultType": resultType, "taskId": t.TaskID, "status": t.Status, "createdAt": t.CreatedAt,
		"lastUpdatedAt": t.LastUpdatedAt, "ttlMs": nil}
	if t.StatusMessage != "" {
		m["statusMessage"] = t.StatusMessage
	}
	if t.PollInterval > 0 {
		m["pollIntervalMs"] = t.PollInterval
	}
	return m
}

// DetailedTask is tasks/get in the tasks extension: the task and, once it
// ended, its result.
func (gw *Gateway) DetailedTask(ctx context.Context, ag *models.Agent, id string) (map[string]any, error) {
	call, _, err := gw.Outside.AgentsCall(ctx, ag, id)
	if err != nil {
		return nil, taskNotFound(err, id)
	}
	t := gw.taskOf(call)
	m := t.Modern("complete")
	if t.Status == "completed" {
		m["result"] = gw.ended(ctx, call)
	}
	return m, nil
}

// asTask is the answer to a 2026 call that waits, for a client that
// declared the tasks extension: the task, in _meta for web, around the
// words a client without tasks would have had.
func (gw *Gateway) asTask(call *models.ToolCall, tool *tools.Tool) *mcp.CallToolResult {
	r := result(call, tool, "", nil)
	r.SetMeta(map[string]any{MetaTask: gw.taskOf(call)})
	return r
}
