package models

import (
	"encoding/json"
	"time"
)

// Run is one agent session with one customer on one channel.
type Run struct {
	ID           string    `gorm:"primaryKey;size:40"`
	CustomerID   string    `gorm:"size:64;index"` // empty for an anonymous run
	CustomerName string    `gorm:"size:200"`
	Channel      string    `gorm:"size:32"`
	Status       RunStatus `gorm:"size:16;index"`
	// TokenHash is the SHA-256 of the run token; the token itself is never stored.
	TokenHash string `gorm:"size:64;index"`
	// LastError is what went wrong when the run failed, for staff.
	LastError string `gorm:"type:text"`
	// AgentID and Session are set for the calls of an outside agent (the
	// gate API): one run per agent and session, with no transcript.
	AgentID   string `gorm:"size:40;uniqueIndex:idx_runs_agent_session,priority:1,where:agent_id <> ''"`
	Session   string `gorm:"size:200;uniqueIndex:idx_runs_agent_session,priority:2,where:agent_id <> ''"`
	CreatedAt time.Time
	UpdatedAt time.Time
	// Worker is the instance stepping the run until LeaseUntil: one
	// instance at a time works on a run (Store.LeaseRun).
	Worker     string `gorm:"size:40;default:''"`
	LeaseUntil *time.Time
}

// Turn is one entry of a run's transcript.
type Turn struct {
	ID    int64  `gorm:"primaryKey;autoIncrement"`
	RunID string `gorm:"size:40;not null;uniqueIndex:idx_turns_run_seq,priority:1;uniqueIndex:idx_turns_run_marker,priority:1,where:marker <> ''"`
	Run   *Run   `gorm:"constraint:OnDelete:RESTRICT"`
	Seq   int64  `gorm:"uniqueIndex:idx_turns_run_seq,priority:2"`
	Role  string `gorm:"size:16"` // customer | assistant | tool | system
	Text  string `gorm:"type:text"`
	// Calls is what an assistant turn asked for: JSON [{id, tool, args}].
	Calls string `gorm:"type:text"`
	// ToolCallID links a tool-result turn to its call.
	ToolCallID string `gorm:"size:40"`
	// Marker makes a turn the run loop appends at most once (a tool result,
	// a pending notice), so a step repeated after a crash adds nothing twice.
	Marker    string `gorm:"size:80;uniqueIndex:idx_turns_run_marker,priority:2,where:marker <> ''"`
	CreatedAt time.Time
}

// ToolCall is what the model asked for, with the gate's decision and outcome.
// A tool call whose decision is needs_approval is what staff call an action;
// the action shares the call's id.
type ToolCall struct {
	ID string `gorm:"primaryKey;size:40;index:idx_tool_calls_created,priority:2;index:idx_tool_calls_status_created,priority:3;index:idx_tool_calls_tool_created,priority:3;index:idx_tool_calls_customer_created,priority:3"`
	// The run's calls that are not done yet, by status (the waiting limits
	// count them).
	RunID      string `gorm:"size:40;index;index:idx_tool_calls_run_waiting,priority:1,where:status <> 'succeeded';not null"`
	Run        *Run   `gorm:"constraint:OnDelete:RESTRICT"`
	CustomerID string `gorm:"size:64;index:idx_tool_calls_customer_created,priority:1"`
	// TurnID and ModelCallID say which assistant turn asked for the call and
	// under which of its call ids (0 and "" for calls made outside a run loop).
	TurnID      int64  `gorm:"default:0"`
	ModelCallID string `gorm:"size:100"`
	Tool        string `gorm:"size:100;index:idx_tool_calls_tool_created,priority:1"`
	Risk        string `gorm:"size:16"`
	// RawArgs is exactly what the model sent.
	RawArgs string `gorm:"type:text"`
	// Args is the normalized argument set in force (after an edit, the edited one).
	Args     string `gorm:"type:text"`
	ArgsHash string `gorm:"size:64"`
	// OriginalArgs keeps the normalized arguments the model asked for when
	// staff edited them before approving; empty when never edited.
	OriginalArgs string `gorm:"type:text"`

	// The status index leaves out succeeded calls (the great majority, never
	// looked up by status alone): an allowed call is one index entry while it
	// runs and none after. Queries by another status say so with
	// notSucceeded, so that the planner may use it.
	Status            CallStatus `gorm:"size:16;index:idx_tool_calls_status_created,priority:1,where:status <> 'succeeded';index:idx_tool_calls_run_waiting,priority:2,where:status <> 'succeeded'"`
	Decision          string     `gorm:"size:16"` // DecidedAllow, DecidedNeedsApproval, DecidedDeny, or "" (invalid)
	Rule              string     `gorm:"size:100"`
	Reason            string     `gorm:"type:text"`
	PolicyVersion     string     `gorm:"size:64"`
	RequiredApprovals int
	RequiredRole      StaffRole `gorm:"size:16"`
	ExpiresAt         *time.Time

	// IdempotencyKey is derived from the id, so it is as unique as the id.
	IdempotencyKey string `gorm:"size:80"`
	// AgentKey is "<agent id>:<the agent's Idempotency-Key>" for a call an
	// outside agent made with one: the same key gives back the same call.
	AgentKey string `gorm:"size:300;uniqueIndex:idx_tool_calls_agent_key,where:agent_key <> ''"`
	// Context is what an outside agent said about the call, for approvers.
	Context     string `gorm:"type:text"`
	Error       string `gorm:"type:text"` // safe to show the model and the customer
	ErrorDetail string `gorm:"type:text"` // for staff only
	Result      string `gorm:"type:text"`

	CreatedAt  time.Time `gorm:"index:idx_tool_calls_status_created,priority:2;index:idx_tool_calls_created,priority:1;index:idx_tool_calls_tool_created,priority:2;index:idx_tool_calls_customer_created,priority:2"`
	UpdatedAt  time.Time
	DecidedAt  *time.Time
	FinishedAt *time.Time
	// Owner is the instance that started running the call: recovery after
	// a crash only takes calls whose owner is gone (Store.OrphanedCalls).
	Owner string `gorm:"size:40;default:''"`
	// OverdueAt is when a pending action was found unanswered for too long
	// and its supervisors were told; RemindedAt when its approvers were
	// reminded that it is about to expire.
	OverdueAt  *time.Time
	RemindedAt *time.Time
	// ToolHash is the definition hash of the tool the call was made against
	// (tools.Tool.DefinitionHash): an approver is told when it changed since.
	ToolHash string `gorm:"size:64;default:''"`
	// DeliveredAt is when the outside agent that asked was handed the
	// outcome of a call that waited for a person (Store.MarkDelivered).
	DeliveredAt *time.Time
	// Trace is the W3C traceparent of the call's span, with tracing on: a
	// person's decision and the execution later join its trace.
	Trace string `gorm:"size:64;default:''"`
	// PasskeyRequired: an edit made the action one whose verdicts are
	// signed with a passkey (the rule the edited arguments matched asks for
	// it); the original rule may ask too (Gate.AsksPasskeyOf).
	PasskeyRequired bool `gorm:"default:false"`
	// Chain is the audit chain the call's events go to: that of the
	// instance that recorded it (Store.Chain), whichever acts on it later.
	Chain int64 `gorm:"not null;default:0"`
}

// Instance is one running server: it beats while it lives, and its calls are
// its own until it stops beating.
type Instance struct {
	ID          string `gorm:"primaryKey;size:40"`
	Host        string `gorm:"size:200"`
	StartedAt   time.Time
	HeartbeatAt time.Time
	// PolicyVersion and ToolsVersion are what the instance decides with now.
	PolicyVersion string `gorm:"size:64;default:''"`
	ToolsVersion  string `gorm:"size:64;default:''"`
	// PolicyError says why the instance could not load the version in
	// force ("" when it runs it): it then decides nothing (fail closed).
	PolicyError string `gorm:"type:text;default:''"`
}

// Approval is one staff member's verdict on an action, kept forever.
type Approval struct {
	ID         int64     `gorm:"primaryKey;autoIncrement"`
	ToolCallID string    `gorm:"size:40;index;not null"`
	ToolCall   *ToolCall `gorm:"constraint:OnDelete:RESTRICT"`
	StaffID    string    `gorm:"size:64;index;index:idx_approvals_insights,priority:2"`
	StaffName  string    `gorm:"size:200"`
	StaffRole  StaffRole `gorm:"size:16"`
	Verdict    string    `gorm:"size:16;index:idx_approvals_insights,priority:3"` // approve | reject
	Note       string    `gorm:"type:text"`
	// Args and ArgsHash are the argument set this verdict was given on.
	Args      string    `gorm:"type:text"`
	ArgsHash  string    `gorm:"size:64"`
	Edited    bool      `gorm:"index:idx_approvals_insights,priority:4"`
	CreatedAt time.Time `gorm:"index:idx_approvals_insights,priority:1"`
	// Seen is what the person was shown before deciding (EncodeFacts of
	// their Review), "" when they were shown none (the API, Slack).
	Seen string `gorm:"type:text"`
	// For insights, without a join: the call's tool and rule; TookS, the
	// seconds from the action reaching this person (held, or the approver
	// before them signing) to their verdict; SettledS, when this verdict
	// decided the action, the seconds from held to decided.
	Tool     string   `gorm:"size:100;default:'';index:idx_approvals_insights,priority:5"`
	Rule     string   `gorm:"size:100;default:'';index:idx_approvals_insights,priority:6"`
	TookS    float64  `gorm:"index:idx_approvals_insights,priority:7"`
	SettledS *float64 `gorm:"index:idx_approvals_insights,priority:8"`
	// Passkey is the person's passkey signature over this verdict
	// (PasskeySignature as JSON), "" when the rule asked for none.
	Passkey string `gorm:"type:text;default:''"`
	// ToolHash and PolicyVersion are the tool's definition and the policy
	// in force when the person gave this verdict: an approved call runs
	// only while both still say what its approvers signed under.
	ToolHash      string `gorm:"size:64;default:''"`
	PolicyVersion string `gorm:"size:64;default:''"`
	// Settles: this verdict decides the action (not stored: SettledS is).
	Settles bool `gorm:"-"`
}

// AuditEvent is one link of the append-only, hash-chained audit log.
type AuditEvent struct {
	Seq      int64     `gorm:"primaryKey;autoIncrement:false" json:"seq"`
	At       time.Time `json:"at"`
	Actor    string    `gorm:"size:200" json:"actor"`
	Kind     EventKind `gorm:"size:64" json:"kind"`
	Subject  string    `gorm:"size:64;index" json:"subject"`
	Payload  string    `gorm:"type:text" json:"payload"`
	PrevHash string    `gorm:"size:64" json:"prev_hash"`
	Hash     string    `gorm:"size:64" json:"hash"`
	// Chain is the chain the event belongs to (0: the first, and the only
	// one a single instance writes); Seq numbers the events within it. On
	// PostgreSQL (chain, seq) is the key; SQLite, one instance, has one
	// chain, keyed by seq (its rowid) alone.
	Chain int64 `gorm:"not null;default:0" json:"chain,omitempty"`
}

// UnmarshalJSON reads an event in the keys of the chain export (seq, at,
// prev_hash…) and in those an evidence bundle had before it used them
// (Seq, At, PrevHash…), so that an older bundle still checks.
func (e *AuditEvent) UnmarshalJSON(b []byte) error {
	type plain AuditEvent
	var v struct {
		plain
		OldPrevHash string `json:"PrevHash"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*e = AuditEvent(v.plain)
	if e.PrevHash == "" {
		e.PrevHash = v.OldPrevHash
	}
	return nil
}

// AuditHead remembers the last link of a chain, so that removing the newest
// events is detected too.
type AuditHead struct {
	Chain int64 `gorm:"primaryKey;autoIncrement:false"`
	Seq   int64
	Hash  string `gorm:"size:64"`
}

// Agent is an outside agent allowed to ask the gate (POST /api/v1/calls)
// with its key. The key itself is never stored.
type Agent struct {
	ID         string `gorm:"primaryKey;size:40"`
	Name       string `gorm:"size:100;uniqueIndex"`
	KeyHash    string `gorm:"size:64;uniqueIndex"`
	CreatedAt  time.Time
	RevokedAt  *time.Time
	LastUsedAt *time.Time
	// CallsPerSecond, CallBurst and MaxWaiting are this agent's own
	// limits: calls a second after a burst of so many, and calls waiting
	// for a person at once (0: the instance's, from its flags).
	CallsPerSecond int `gorm:"default:0"`
	CallBurst      int `gorm:"default:0"`
	MaxWaiting     int `gorm:"default:0"`
}

// ShadowDecision is a call on which the shadow policy (tried beside the one
// in force, deciding nothing) disagreed with the decision made.
type ShadowDecision struct {
	ID            int64     `gorm:"primaryKey;autoIncrement"`
	ToolCallID    string    `gorm:"size:40;not null;index"`
	PolicyVersion string    `gorm:"size:64;index:idx_shadow_decisions_version_created,priority:1"`
	Decided       string    `gorm:"size:64"` // what the policy in force decided
	Shadow        string    `gorm:"size:64"` // what the shadow would have
	CreatedAt     time.Time `gorm:"index:idx_shadow_decisions_version_created,priority:2"`
}

// The decisions a call records (ToolCall.Decision): the policy's verdicts
// (agent/policy's Verdict constants are these words).
const (
	DecidedAllow         = "allow"
	DecidedNeedsApproval = "needs_approval"
	DecidedDeny          = "deny"
)

// CallHour counts the calls made in one hour (UTC, "2006-01-02 15") by
// tool, rule, decision and outcome, kept by the audit log's follower
// (storage.Store.Follow) as calls are recorded and change: insights read a
// month of them, not a million calls. The outcome is "allowed" or "denied" as decided, and for a held
// call pending, approved (whatever ran after), rejected, expired or
// cancelled: an allowed call that runs moves no count.
type CallHour struct {
	Hour     string `gorm:"primaryKey;size:16"`
	Tool     string `gorm:"primaryKey;size:100"`
	Rule     string `gorm:"primaryKey;size:100"`
	Decision string `gorm:"primaryKey;size:16"`
	Outcome  string `gorm:"primaryKey;size:16"`
	N        int64  `gorm:"not null;default:0"`
}

// CallCounted is how call_hours counts one call now, so that the follower
// moves a call's count when its outcome changes.
type CallCounted struct {
	CallID   string `gorm:"primaryKey;size:40"`
	Hour     string `gorm:"size:16"`
	Tool     string `gorm:"size:100"`
	Rule     string `gorm:"size:100"`
	Decision string `gorm:"size:16"`
	Outcome  string `gorm:"size:16"`
}

// TableName is call_counted.
func (CallCounted) TableName() string { return "call_counted" }

// DerivedMark is how far one derived table (call_hours, call_text) has
// followed one audit chain: every event up to Seq; CaughtUpAt is when it
// last read the chain to its end.
type DerivedMark struct {
	Name       string `gorm:"primaryKey;size:32"`
	Chain      int64  `gorm:"primaryKey;autoIncrement:false"`
	Seq        int64  `gorm:"not null;default:0"`
	CaughtUpAt *time.Time
}
