package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
)

// Gate is the one way a tool call happens: validate, normalize, decide,
// record, and only then execute. Approvals, rejections and expiry of the
// calls it queued go through it too.
type Gate struct {
	store  *models.Store
	tools  *tools.Registry
	policy atomic.Pointer[Policy] // swapped whole when the policy is reloaded
	log    *slog.Logger

	// OnSettled, when set, is called after a call that waited for approval
	// reaches its end (executed, rejected, expired or cancelled). The run loop
	// uses it to resume the paused run.
	OnSettled func(ctx context.Context, call *models.ToolCall)
	// OnActionChange, when set, is called after anything happens to an
	// action: queued, approved by one person, decided, expired, executed.
	// The back office uses it to keep every open queue live.
	OnActionChange func(callID string)
}

func (g *Gate) actionChanged(callID string) {
	if g.OnActionChange != nil {
		g.OnActionChange(callID)
	}
}

// NewGate builds a gate.
func NewGate(store *models.Store, registry *tools.Registry, policy Policy, log *slog.Logger) *Gate {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Gate{store: store, tools: registry, log: log}
	g.policy.Store(&policy)
	return g
}

// Policy returns the policy in force.
func (g *Gate) Policy() Policy { return *g.policy.Load() }

// SetPolicy puts a new policy in force for every decision from now on. Calls
// already decided keep the decision, rule and policy version they recorded;
// an edit to a pending action is decided by the policy in force when it is
// made.
func (g *Gate) SetPolicy(p Policy) { g.policy.Store(&p) }

// Tools returns the registry of tools.
func (g *Gate) Tools() *tools.Registry { return g.tools }

// CallRequest is one tool call as the model asked for it, with who it is for.
type CallRequest struct {
	RunID              string
	CustomerID         string // empty: anonymous
	CustomerName       string
	CustomerAttributes map[string]any
	Channel            string
	// TurnID and ModelCallID tie the call to the assistant turn that asked for it.
	TurnID      int64
	ModelCallID string
	Tool        string
	Args        []byte // raw, exactly as the model sent them
}

// Outcome is what became of a call.
type Outcome struct {
	CallID   string
	Status   string
	Decision Decision
	// Result is the tool's output (JSON) when the call succeeded.
	Result json.RawMessage
	// Error says, in words safe for the model, why the call did not succeed.
	Error string
}

// IdempotencyKey is what a tool's backend receives to deduplicate a call.
func IdempotencyKey(callID string) string {
	sum := sha256.Sum256([]byte("countersign/tool-call/" + callID))
	return "cs_" + hex.EncodeToString(sum[:16])
}

// Call is the entry point for a tool call. The decision is committed before
// the tool runs; the result after. Only storage failures return an error:
// an invalid, denied or failed call is an Outcome the model should see.
func (g *Gate) Call(ctx context.Context, req CallRequest) (Outcome, error) {
	if req.RunID == "" {
		return Outcome{}, Errorf(CodeInvalid, "a tool call needs a run")
	}
	tool, ok := g.tools.Get(req.Tool)
	if !ok {
		return g.recordInvalid(ctx, req, "", fmt.Sprintf("there is no tool named %q; the tools are: %s",
			truncateRunes(req.Tool, 64), strings.Join(g.toolNames(), ", ")))
	}
	norm, err := tool.Normalize(req.Args)
	if err != nil {
		return g.recordInvalid(ctx, req, tool.Risk, err.Error())
	}
	d, err := g.Policy().Decide(ctx, Input{Tool: tool.Name, Risk: tool.Risk, Args: norm.Map, Facts: g.facts(req)})
	if err != nil {
		return Outcome{}, internal(err, "the policy could not decide")
	}
	call := &models.ToolCall{
		ID:            models.NewID("call"),
		RunID:         req.RunID,
		CustomerID:    req.CustomerID,
		TurnID:        req.TurnID,
		ModelCallID:   req.ModelCallID,
		Tool:          tool.Name,
		Risk:          string(tool.Risk),
		RawArgs:       rawForRecord(req.Args),
		Args:          string(norm.JSON),
		ArgsHash:      norm.Hash,
		Decision:      string(d.Verdict),
		Rule:          d.Rule,
		Reason:        d.Reason,
		PolicyVersion: d.PolicyVersion,
	}
	call.IdempotencyKey = IdempotencyKey(call.ID)
	switch d.Verdict {
	case Allow:
		call.Status = models.CallExecuting // recorded as started: a crash from here on is reconciled
	case Deny:
		call.Status = models.CallDenied
		call.Error = d.Reason
	case NeedsApproval:
		call.Status = models.CallPending
		call.RequiredApprovals = max(d.Approvals, 1)
		call.RequiredRole = string(d.Role)
	default:
		return Outcome{}, internal(fmt.Errorf("verdict %q", d.Verdict), "the policy gave an unknown verdict")
	}
	payload, err := models.EncodePayload(decisionEvent{RunID: call.RunID, Tool: call.Tool, ArgsHash: call.ArgsHash,
		Verdict: d.Verdict, Rule: d.Rule, Reason: d.Reason, PolicyVersion: d.PolicyVersion,
		Status: call.Status, RequiredApprovals: call.RequiredApprovals, RequiredRole: call.RequiredRole})
	if err != nil {
		return Outcome{}, internal(err, "the tool call could not be recorded")
	}
	kind := "call." + decisionEventKind(d.Verdict)
	err = g.store.Write(ctx, func(tx *models.Tx) error {
		if d.Verdict == NeedsApproval && d.Expires > 0 {
			at := tx.Now().Add(d.Expires)
			call.ExpiresAt = &at
		}
		if err := tx.CreateToolCall(call); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: "model", Kind: kind, Subject: call.ID, Payload: payload})
	})
	if err != nil {
		return Outcome{}, internal(err, "the tool call could not be recorded")
	}
	out := Outcome{CallID: call.ID, Status: call.Status, Decision: d, Error: call.Error}
	if d.Verdict == NeedsApproval {
		g.actionChanged(call.ID)
	}
	if d.Verdict != Allow {
		return out, nil
	}
	return g.execute(ctx, call, req.CustomerName, tool, norm)
}

// decisionEvent is the payload of the audit event a decision writes. Its
// fields are in alphabetical order, so it reads like every other payload
// (maps are written with sorted keys).
type decisionEvent struct {
	ArgsHash          string  `json:"args_hash"`
	PolicyVersion     string  `json:"policy_version"`
	Reason            string  `json:"reason"`
	RequiredApprovals int     `json:"required_approvals"`
	RequiredRole      string  `json:"required_role"`
	Rule              string  `json:"rule"`
	RunID             string  `json:"run_id"`
	Status            string  `json:"status"`
	Tool              string  `json:"tool"`
	Verdict           Verdict `json:"verdict"`
}

// outcomeEvent is the payload of the event that records how a call ran.
type outcomeEvent struct {
	Error      string `json:"error,omitempty"`
	ResultHash string `json:"result_hash,omitempty"`
	RunID      string `json:"run_id"`
	Status     string `json:"status"`
	Tool       string `json:"tool"`
}

func decisionEventKind(v Verdict) string {
	switch v {
	case Allow:
		return "allowed"
	case Deny:
		return "denied"
	}
	return "pending"
}

func (g *Gate) recordInvalid(ctx context.Context, req CallRequest, risk tools.Risk, msg string) (Outcome, error) {
	call := &models.ToolCall{
		ID:          models.NewID("call"),
		RunID:       req.RunID,
		CustomerID:  req.CustomerID,
		TurnID:      req.TurnID,
		ModelCallID: req.ModelCallID,
		Tool:        truncateRunes(req.Tool, 100),
		Risk:        string(risk),
		RawArgs:     rawForRecord(req.Args),
		Status:      models.CallInvalid,
		Error:       msg,
	}
	call.IdempotencyKey = IdempotencyKey(call.ID)
	err := g.store.Write(ctx, func(tx *models.Tx) error {
		if err := tx.CreateToolCall(call); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: "model", Kind: "call.invalid", Subject: call.ID,
			Payload: map[string]any{"run_id": call.RunID, "tool": call.Tool, "error": msg}})
	})
	if err != nil {
		return Outcome{}, internal(err, "the tool call could not be recorded")
	}
	return Outcome{CallID: call.ID, Status: models.CallInvalid, Error: msg}, nil
}

// rawForRecord keeps what the model sent, cut to the size limit so that a
// huge argument blob cannot fill the database.
func rawForRecord(raw []byte) string {
	if len(raw) > tools.MaxArgsBytes {
		return string(raw[:tools.MaxArgsBytes]) + "…(cut)"
	}
	return string(raw)
}

func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

func (g *Gate) toolNames() []string {
	var names []string
	for _, t := range g.tools.All() {
		names = append(names, t.Name)
	}
	return names
}

// execute runs a call that is already recorded as executing and records the
// result. The tool's own errors become a failed call, not an error here.
func (g *Gate) execute(ctx context.Context, call *models.ToolCall, customerName string, tool *tools.Tool, norm tools.Normalized) (Outcome, error) {
	tc := tools.Call{ID: call.ID, IdempotencyKey: call.IdempotencyKey, RunID: call.RunID, CustomerID: call.CustomerID, CustomerName: customerName}
	result, runErr := runTool(ctx, tool, tc, norm)
	status := models.CallSucceeded
	var encoded []byte
	if runErr == nil {
		var err error
		encoded, err = json.Marshal(result)
		if err != nil {
			runErr = fmt.Errorf("encode result: %w", err)
		}
	}
	ev := outcomeEvent{RunID: call.RunID, Tool: call.Tool}
	errForModel, errDetail := "", ""
	if runErr != nil {
		status = models.CallFailed
		var refusal *tools.RefusalError
		if errors.As(runErr, &refusal) {
			errForModel = refusal.Message
		} else {
			errForModel = "the tool failed unexpectedly; a team member has been told"
			g.log.Error("tool failed", "tool", call.Tool, "call_id", call.ID, "err", runErr)
		}
		errDetail = runErr.Error()
		ev.Error = errForModel
	} else {
		sum := sha256.Sum256(encoded)
		ev.ResultHash = hex.EncodeToString(sum[:])
	}
	ev.Status = status
	payload, err := models.EncodePayload(ev)
	if err != nil {
		return Outcome{}, internal(err, "the tool's result could not be recorded")
	}
	// The result must be recorded even if the caller gave up waiting.
	wctx := context.WithoutCancel(ctx)
	err = g.store.Write(wctx, func(tx *models.Tx) error {
		if err := tx.FinishCall(call.ID, status, string(encoded), errForModel, errDetail); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: "tool:" + call.Tool, Kind: "call." + status, Subject: call.ID, Payload: payload})
	})
	if err != nil {
		return Outcome{}, internal(err, "the tool ran but its result could not be recorded")
	}
	d := Decision{Verdict: Verdict(call.Decision), Rule: call.Rule, Reason: call.Reason, PolicyVersion: call.PolicyVersion}
	return Outcome{CallID: call.ID, Status: status, Decision: d, Result: encoded, Error: errForModel}, nil
}

func runTool(ctx context.Context, tool *tools.Tool, call tools.Call, norm tools.Normalized) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("tool %s panicked: %v", tool.Name, p)
		}
	}()
	return tool.Run(ctx, call, norm)
}

// customerName is the name of a call's customer, for calls run later than
// the request that made them.
func (g *Gate) customerName(ctx context.Context, runID string) string {
	if run, err := g.store.Run(ctx, runID); err == nil {
		return run.CustomerName
	}
	return ""
}

// gateFacts loads what the policy asks about, once per call.
type gateFacts struct {
	store *models.Store
	req   CallRequest
}

func (g *Gate) facts(req CallRequest) Facts { return gateFacts{store: g.store, req: req} }

func (f gateFacts) Customer(ctx context.Context) (CustomerFacts, error) {
	c := CustomerFacts{ID: f.req.CustomerID, Name: f.req.CustomerName, SignedIn: f.req.CustomerID != "", Attributes: f.req.CustomerAttributes}
	if c.ID == "" {
		return c, nil
	}
	cents, err := f.store.RefundedSince(ctx, c.ID, f.store.Now().Add(-24*time.Hour))
	if err != nil {
		return c, err
	}
	c.Refunded24h = float64(cents) / 100
	return c, nil
}

func (f gateFacts) Run(ctx context.Context) (RunFacts, error) {
	r := RunFacts{ID: f.req.RunID, Channel: f.req.Channel}
	counts, err := f.store.RunCallCounts(ctx, f.req.RunID)
	if err != nil {
		return r, err
	}
	r.CallsByTool = counts
	for _, n := range counts {
		r.Calls += n
	}
	return r, nil
}
