package gate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/agent/telemetry"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// Gate is the one way a tool call happens: validate, normalize, decide,
// record, and only then execute. Approvals, rejections and expiry of the
// calls it queued go through it too.
type Gate struct {
	store *storage.Store
	// inForce is the tools and the policy in force, swapped together when
	// they are reloaded: a decision never sees one without the other.
	inForce atomic.Pointer[inForce]
	// putting serializes putting tools or a policy in force (Reload,
	// PutInForce, Repin): none puts back what another just replaced.
	putting sync.Mutex
	// intentWindow: Config.IntentWindow (0: off).
	intentWindow time.Duration
	// reloading serializes PutInForce: its audit, swap and redeciding
	// happen as one, one reload after another.
	reloading sync.Mutex
	// shadow is a policy tried beside the one in force (SetShadow), and
	// shadowSeen how many calls it decided.
	shadow     atomic.Pointer[policy.Policy]
	shadowSeen atomic.Int64
	log        *slog.Logger

	// Limits bound how many actions one run or customer may have waiting.
	Limits Limits
	// ExecutionWait is how long Approve waits for the approved call to run
	// before it answers that the call is still running.
	ExecutionWait time.Duration
	// inflight counts approved calls running apart from their approver.
	inflight sync.WaitGroup
	// keep holds outcomes of calls that ran while the database was away.
	keep *keeper

	notify   Notifier
	business BusinessFacts
	// runs is told when an action of a run settled (the run loop).
	runs Runs
	// metrics counts what the gate decided and ran (nil: nothing).
	metrics *telemetry.Metrics
	// receipt signs a call's receipt in the unit that records its outcome
	// (SignReceiptsWith; nil: receipts are signed after).
	receipt ReceiptSigner
}

// ReceiptSigner signs a call's receipt in the unit of work that records
// its outcome; known, when set, are the call's records as the gate wrote
// them, every one (nil: they are to be read).
type ReceiptSigner func(ctx context.Context, tx *storage.Tx, callID string, known *models.ReceiptRecords) error

// SignReceiptsWith has fn sign, in the unit of work that records how a
// call ended, the receipt of a call whose asker waits for it (WantsReceipt):
// its answer then carries the receipt without another read or write.
// fn's error leaves the unit as it was.
func (g *Gate) SignReceiptsWith(fn ReceiptSigner) {
	g.receipt = fn
}

type wantsReceiptKey struct{}

// WantsReceipt marks calls made with ctx as asked by someone whose answer
// carries the call's receipt (an MCP client).
func WantsReceipt(ctx context.Context) context.Context {
	return context.WithValue(ctx, wantsReceiptKey{}, true)
}

func wantsReceipt(ctx context.Context) bool {
	v, _ := ctx.Value(wantsReceiptKey{}).(bool)
	return v
}

type askedKey struct{}

// withAsked is ctx carrying the audit event that recorded an allowed call
// (its only one before its outcome), as stored: the receipt signed with
// the outcome is made of what the gate wrote, not read back.
func withAsked(ctx context.Context, ev models.AuditEvent) context.Context {
	return context.WithValue(ctx, askedKey{}, ev)
}

func askedOf(ctx context.Context, callID string) (models.AuditEvent, bool) {
	ev, ok := ctx.Value(askedKey{}).(models.AuditEvent)
	return ev, ok && ev.Subject == callID && ev.Seq > 0
}

// Notifier carries the news that something others watch has changed: an
// action (queued, approved by one person, decided, expired, executed), seen
// by the queue and the action's page, and the tools in force (a reload),
// seen by the MCP clients connected.
type Notifier interface {
	ActionChanged(callID string)
	ToolsChanged()
}

// Runs is how the gate tells the run loop that a call it asked for settled
// after a person decided (approved and executed, rejected, expired or
// cancelled): the run that waited may go on.
type Runs interface {
	Settled(runID string)
}

// BusinessFacts adds what the business keeps about a customer, in its own
// systems, to the facts a policy reads: customer.<name>. The demo shop's
// says what it refunded the customer in the last 24 hours.
type BusinessFacts interface {
	CustomerFacts(ctx context.Context, customerID string) (map[string]any, error)
}

// Config is what a gate is built from. Store, Tools and Policy are needed.
type Config struct {
	Store  *storage.Store
	Tools  *tools.Registry
	Policy policy.Policy
	// ToolsVersion covers the tools file Tools came from ("" without one).
	ToolsVersion string
	Log          *slog.Logger       // nil: quiet
	Notifier     Notifier           // nil: nobody watches
	Business     BusinessFacts      // nil: no business facts
	Runs         Runs               // nil: no run loop waits for the gate
	Metrics      *telemetry.Metrics // nil: no metrics
	// ExecutionWait is how long an approval waits for the call it runs
	// (Gate.ExecutionWait); 0: 10 s.
	ExecutionWait time.Duration
	// IntentWindow is how long after a call a person decided ended the
	// same intent asked again is answered with it (CallRequest.JoinSame);
	// 0: models.IntentWindow; NoIntentWindow: only while it waits or runs.
	IntentWindow time.Duration
}

// NoIntentWindow turns the intent window off (serve --intent-window 0): the
// same intent joins a call only while it waits or runs.
const NoIntentWindow time.Duration = -1

// New builds a gate with the tools and the policy in force.
func New(cfg Config) *Gate {
	g := &Gate{store: cfg.Store, log: cfg.Log, notify: cfg.Notifier, business: cfg.Business, runs: cfg.Runs, metrics: cfg.Metrics,
		ExecutionWait: cfg.ExecutionWait, intentWindow: cfg.IntentWindow, keep: newKeeper()}
	switch {
	case g.intentWindow == 0:
		g.intentWindow = models.IntentWindow
	case g.intentWindow < 0:
		g.intentWindow = 0
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.notify == nil {
		g.notify = quiet{}
	}
	if g.runs == nil {
		g.runs = quiet{}
	}
	if g.ExecutionWait == 0 {
		g.ExecutionWait = 10 * time.Second
	}
	g.reload(cfg.Tools, cfg.ToolsVersion, cfg.Policy)
	return g
}

// Close waits for the approved calls still running apart from their
// approvers to finish and be recorded, then gives the outcomes the
// database could not take a last moment to land.
func (g *Gate) Close() {
	g.inflight.Wait()
	g.closeKeeper(5 * time.Second)
}

// heldFor notes, once the unit that decides a held call commits, how long
// it waited for its outcome (approved, rejected, expired, cancelled) and
// who decided: a metric, and a span in the call's trace.
func (g *Gate) heldFor(tx *storage.Tx, call *models.ToolCall, outcome, by string) {
	held, decided, trace := call.CreatedAt, tx.Now(), call.Trace
	if g.metrics == nil && trace == "" {
		return
	}
	tx.AfterCommit(func() {
		g.metrics.ActionDecided(outcome, decided.Sub(held))
		telemetry.WaitSpan(trace, held, decided, outcome, by)
	})
}

// quiet is the notifier when nobody watches, and the run loop when there is none.
type quiet struct{}

func (quiet) ActionChanged(string) {}
func (quiet) ToolsChanged()        {}
func (quiet) Settled(string)       {}

type inForce struct {
	// given is the registry as loaded; tools the same with every upstream
	// tool whose definition is not accepted held at high_write (pins.go),
	// by the accepted definitions pins.
	given, tools *tools.Registry
	pins         map[string]models.ToolPin
	policy       policy.Policy
	// toolsVersion covers the tools file they came from ("" without one).
	toolsVersion string
}

// Policy returns the policy in force.
func (g *Gate) Policy() policy.Policy { return g.inForce.Load().policy }

// SetShadow tries a policy beside the one in force (nil: none): it decides
// every call too, nothing follows from its decision, and where it disagrees
// the call is noted (models.ShadowDecision).
func (g *Gate) SetShadow(p policy.Policy) {
	if p == nil {
		g.shadow.Store(nil)
		return
	}
	g.shadow.Store(&p)
	g.shadowSeen.Store(0)
}

// Shadow is the policy tried beside the one in force (nil: none) and how
// many calls it decided since it was set.
func (g *Gate) Shadow() (policy.Policy, int64) {
	p := g.shadow.Load()
	if p == nil {
		return nil, 0
	}
	return *p, g.shadowSeen.Load()
}

// tryShadow decides a call with the shadow policy, if there is one, and
// notes where it disagrees with what was decided.
func (g *Gate) tryShadow(ctx context.Context, req CallRequest, in policy.Input, call *models.ToolCall) {
	p := g.shadow.Load()
	if p == nil {
		return
	}
	g.shadowSeen.Add(1)
	in.Facts = &gateFacts{store: g.store, business: g.business, req: req, exclude: call.ID}
	d, err := (*p).Decide(ctx, in)
	shadow := verdictText(string(d.Verdict), d.Approvals, string(d.Role))
	if err != nil {
		shadow = "error: " + tools.Truncate(err.Error(), 50)
	}
	decided := ruledText(call)
	if shadow == decided {
		return
	}
	if err := g.store.RecordShadow(context.WithoutCancel(ctx), &models.ShadowDecision{ToolCallID: call.ID,
		PolicyVersion: (*p).Version(), Decided: decided, Shadow: shadow}); err != nil {
		g.log.Warn("could not note the shadow policy's decision", "call_id", call.ID, "err", err)
	}
}

// Tools returns the registry of tools in force.
func (g *Gate) Tools() *tools.Registry { return g.inForce.Load().tools }

// Reload puts new tools and a new policy in force together. A call already
// waiting for a tool that is gone cannot run; it says so when approved. An
// MCP server's tool whose definition was not accepted is held at
// high_write (pins.go).
// PutInForce is the audited way; this one records nothing.
func (g *Gate) Reload(reg *tools.Registry, p policy.Policy) {
	g.reload(reg, g.ToolsVersion(), p)
}

func (g *Gate) reload(reg *tools.Registry, toolsVersion string, p policy.Policy) {
	g.putting.Lock()
	defer g.putting.Unlock()
	held, pins := g.pin(reg)
	g.swap(&inForce{given: reg, tools: held, pins: pins, policy: p, toolsVersion: toolsVersion})
}

func (g *Gate) swap(next *inForce) {
	prev := g.inForce.Swap(next)
	if prev != nil && prev.tools != next.tools {
		g.notify.ToolsChanged()
	}
}

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
	// For an outside agent's call (the gate API): who asked, as the audit
	// names it ("agent:<name>"; empty: the model), its Idempotency-Key as
	// "<agent id>:<key>", and what it said about the call for approvers.
	Actor, AgentKey, Context string
	// AgentID is the outside agent that asked ("" for the model of a run):
	// its own waiting limit applies.
	AgentID string
	// JoinSame: a call of this agent that needs a person, while the same
	// call (tool, arguments, customer) of the agent waits, or within the
	// intent window after a person decided it, is that call, from any
	// session, process or instance (Outcome.Joined), never a second action.
	JoinSame bool
	// NewIntent: the agent means a second identical action (a new
	// Idempotency-Key, _meta["countersign/new-intent"]): nothing is joined.
	NewIntent bool
}

// Outcome is what became of a call.
type Outcome struct {
	CallID   string
	Status   models.CallStatus
	Decision policy.Decision
	// Result is the tool's output (JSON) when the call succeeded.
	Result json.RawMessage
	// Error says, in words safe for the model, why the call did not succeed.
	Error string
	// Joined: the call was already asked for (CallRequest.JoinSame); this
	// is that call as it stands.
	Joined bool
	// Call is the call as its outcome was committed, when the gate ran it
	// and wrote every field itself (nil otherwise: read it).
	Call *models.ToolCall
}

// IdempotencyKey is what a tool's backend receives to deduplicate a call.
func IdempotencyKey(callID string) string {
	sum := sha256.Sum256([]byte("countersign/tool-call/" + callID))
	return "cs_" + hex.EncodeToString(sum[:16])
}

// joined stops recording a call that is already there (CallRequest.JoinSame).
type joined struct{ call *models.ToolCall }

func (j *joined) Error() string { return "the same call is already recorded: " + j.call.ID }

func (j *joined) outcome() Outcome {
	c := j.call
	d := policy.Decision{Verdict: policy.Verdict(c.Decision), Rule: c.Rule, Reason: c.Reason, PolicyVersion: c.PolicyVersion}
	return Outcome{CallID: c.ID, Status: c.Status, Decision: d, Result: json.RawMessage(c.Result), Error: c.Error, Joined: true}
}

// recordedDecision is a decision turned into what the call row and its
// audit event record.
type recordedDecision struct {
	decision policy.Decision
	status   models.CallStatus
	errText  string
	kind     models.EventKind
	payload  models.Payload
}

func prepareDecision(call *models.ToolCall, d policy.Decision, executes bool) (recordedDecision, error) {
	rec := recordedDecision{decision: d, kind: decisionEventKind(d.Verdict)}
	required := 0
	switch d.Verdict {
	case policy.Allow:
		rec.status = models.CallExecuting // recorded as started: a crash from here on is reconciled
		if !executes {
			rec.status = models.CallAllowed // the agent that asked carries it out and reports
		}
	case policy.Deny:
		rec.status, rec.errText = models.CallDenied, d.Reason
	case policy.NeedsApproval:
		rec.status = models.CallPending
		required = max(d.Approvals, 1)
	default:
		return rec, fault.Wrap(fmt.Errorf("verdict %q", d.Verdict), "the policy gave an unknown verdict")
	}
	payload, err := models.EncodePayload(models.CallDecidedPayload{RunID: call.RunID, Tool: call.Tool, ArgsHash: call.ArgsHash,
		Verdict: string(d.Verdict), Rule: d.Rule, Reason: d.Reason, PolicyVersion: d.PolicyVersion,
		Status: rec.status, RequiredApprovals: required, RequiredRole: d.Role})
	if err != nil {
		return rec, fault.Wrap(err, "the tool call could not be recorded")
	}
	rec.payload = payload
	return rec, nil
}

func (rec recordedDecision) apply(call *models.ToolCall) {
	d := rec.decision
	call.Decision, call.Rule, call.Reason, call.PolicyVersion = string(d.Verdict), d.Rule, d.Reason, d.PolicyVersion
	call.Status, call.Error = rec.status, rec.errText
	call.RequiredApprovals, call.RequiredRole, call.ExpiresAt = 0, "", nil
	if d.Verdict == policy.NeedsApproval {
		call.RequiredApprovals, call.RequiredRole = max(d.Approvals, 1), d.Role
	}
}

func decisionEventKind(v policy.Verdict) models.EventKind {
	switch v {
	case policy.Allow:
		return models.EventCallAllowed
	case policy.Deny:
		return models.EventCallDenied
	}
	return models.EventCallPending
}

// Refuse records a call as invalid without deciding it, with the reason
// the model is told: the run loop uses it for calls past a turn's limit.
func (g *Gate) Refuse(ctx context.Context, req CallRequest, reason string) (Outcome, error) {
	if req.RunID == "" {
		return Outcome{}, fault.Errorf(fault.Invalid, "a tool call needs a run")
	}
	risk := tools.Risk("")
	if tool, ok := g.Tools().Get(req.Tool); ok {
		risk = tool.Risk
	}
	return g.recordInvalid(ctx, req, risk, reason)
}

func (g *Gate) recordInvalid(ctx context.Context, req CallRequest, risk tools.Risk, msg string) (Outcome, error) {
	call := callRecord(req, tools.Truncate(req.Tool, 100), risk)
	call.Status, call.Error = models.CallInvalid, msg
	err := g.store.Write(ctx, func(tx *storage.Tx) error {
		if err := tx.CreateToolCall(call); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: "model", Kind: models.EventCallInvalid, Subject: call.ID,
			Payload: models.CallInvalidPayload{RunID: call.RunID, Tool: call.Tool, Error: msg}})
	})
	if err != nil {
		return Outcome{}, fault.Wrap(err, "the tool call could not be recorded")
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

func (g *Gate) toolNames() []string {
	var names []string
	for _, t := range g.Tools().All() {
		names = append(names, t.Name)
	}
	return names
}
