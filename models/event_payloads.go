package models

import "time"

// The payload of every audit event kind, each a type (EventPayload): an
// Event takes nothing else, so a payload cannot be a loose map. Fields are
// in the order of their JSON names, so an event reads like those written
// before payloads were typed (maps, encoded with sorted keys); the chain
// stores and hashes a payload's text as it was encoded, so the order only
// keeps the log uniform. Amounts in payloads stay in dollars, as auditors
// and webhook receivers have always read them.

// EventPayload is what an Event carries: one of the payload types below, or
// a Payload encoded ahead of time from one of them.
type EventPayload interface{ eventPayload() }

// FromTo is a value that changed.
type FromTo[T any] struct {
	From T `json:"from"`
	To   T `json:"to"`
}

// CallDecidedPayload is the payload of call.allowed, call.denied and
// call.pending: what the policy decided and why.
type CallDecidedPayload struct {
	ArgsHash          string     `json:"args_hash"`
	PolicyVersion     string     `json:"policy_version"`
	Reason            string     `json:"reason"`
	RequiredApprovals int        `json:"required_approvals"`
	RequiredRole      StaffRole  `json:"required_role"`
	Rule              string     `json:"rule"`
	RunID             string     `json:"run_id"`
	Status            CallStatus `json:"status"`
	Tool              string     `json:"tool"`
	Verdict           string     `json:"verdict"`
}

// CallInvalidPayload is the payload of call.invalid: a call that was not
// decided, and why.
type CallInvalidPayload struct {
	Error string `json:"error"`
	RunID string `json:"run_id"`
	Tool  string `json:"tool"`
}

// CallExecutingPayload is the payload of call.executing: an approved call
// starting.
type CallExecutingPayload struct {
	ArgsHash string `json:"args_hash"`
}

// CallEndedPayload is the payload of call.succeeded, call.failed and
// call.unknown: how a call ran (Reason: why its outcome is unknown, when a
// process stopped under it).
type CallEndedPayload struct {
	Error      string     `json:"error,omitempty"`
	Reason     string     `json:"reason,omitempty"`
	ResultHash string     `json:"result_hash,omitempty"`
	RunID      string     `json:"run_id"`
	Status     CallStatus `json:"status"`
	Tool       string     `json:"tool"`
}

// CallReconciledPayload is the payload of call.reconciled: a person's word
// on a call whose outcome was unknown.
type CallReconciledPayload struct {
	Happened bool       `json:"happened"`
	Note     string     `json:"note"`
	Status   CallStatus `json:"status"`
}

// ActionEditedPayload is the payload of action.edited: the arguments an
// approver changed, and the decision made again over them.
type ActionEditedPayload struct {
	Args        string `json:"args"`
	EditReason  string `json:"edit_reason"`
	EditRule    string `json:"edit_rule"`
	EditVerdict string `json:"edit_verdict"`
	// ExpiresAt and Passkey are the edited action's (omitted: no expiry,
	// no passkey asked), the stricter of the two rules'.
	ExpiresAt         *time.Time `json:"expires_at,omitempty"`
	FromArgsHash      string     `json:"from_args_hash"`
	Passkey           bool       `json:"passkey,omitempty"`
	RequiredApprovals int        `json:"required_approvals"`
	RequiredRole      StaffRole  `json:"required_role"`
	ToArgsHash        string     `json:"to_args_hash"`
}

// ActionApprovalPayload is the payload of action.approval_added and
// action.approved: one person's approval, and how many there are of how
// many needed (GrantID: the standing grant the last one gave).
type ActionApprovalPayload struct {
	Approvals int          `json:"approvals"`
	ArgsHash  string       `json:"args_hash"`
	GrantID   string       `json:"grant_id,omitempty"`
	Note      string       `json:"note"`
	Required  int          `json:"required"`
	Seen      []ReviewFact `json:"seen,omitempty"` // what the approver was shown
}

// ActionRejectedPayload is the payload of action.rejected.
type ActionRejectedPayload struct {
	ArgsHash string       `json:"args_hash"`
	Reason   string       `json:"reason"`
	Seen     []ReviewFact `json:"seen,omitempty"` // what the person was shown
}

// ActionCancelledPayload is the payload of action.cancelled.
type ActionCancelledPayload struct {
	Reason string `json:"reason"`
}

// ActionExpiredPayload is the payload of action.expired.
type ActionExpiredPayload struct {
	ExpiresAt string `json:"expires_at"` // RFC 3339
}

// ActionOverduePayload is the payload of action.overdue.
type ActionOverduePayload struct {
	After        string `json:"after"`         // how long is overdue, as a Go duration
	WaitingSince string `json:"waiting_since"` // RFC 3339
}

// ActionReminderPayload is the payload of action.reminder.
type ActionReminderPayload struct {
	ExpiresAt string `json:"expires_at"` // RFC 3339
}

// ActionRequirementsRaisedPayload is the payload of
// action.requirements_raised: a reloaded policy asks more of a waiting
// action.
type ActionRequirementsRaisedPayload struct {
	PolicyVersion     string    `json:"policy_version"`
	Reason            string    `json:"reason"`
	RequiredApprovals int       `json:"required_approvals"`
	RequiredRole      StaffRole `json:"required_role"`
	Rule              string    `json:"rule"`
}

// GrantCreatedPayload is the payload of grant.created.
type GrantCreatedPayload struct {
	AgentID          string  `json:"agent_id"`
	CustomerID       string  `json:"customer_id"`
	ExpiresAt        string  `json:"expires_at"` // RFC 3339
	MaxAmount        float64 `json:"max_amount"` // dollars
	MaxAmountDefault bool    `json:"max_amount_default"`
	MaxUses          int64   `json:"max_uses"`
	Note             string  `json:"note"`
	SourceCallID     string  `json:"source_call_id"`
	Tool             string  `json:"tool"`
}

// GrantUsedPayload is the payload of grant.used: a call a standing grant
// allowed, and what is left of it.
type GrantUsedPayload struct {
	Amount       float64 `json:"amount"` // dollars
	CallID       string  `json:"call_id"`
	CustomerID   string  `json:"customer_id"`
	MaxAmount    float64 `json:"max_amount"`
	MaxUses      int64   `json:"max_uses"`
	PolicyReason string  `json:"policy_reason"`
	PolicyRule   string  `json:"policy_rule"`
	Tool         string  `json:"tool"`
	UsedAmount   float64 `json:"used_amount"`
	Uses         int64   `json:"uses"`
}

// GrantRevokedPayload is the payload of grant.revoked.
type GrantRevokedPayload struct {
	CustomerID string  `json:"customer_id"`
	Reason     string  `json:"reason"`
	Tool       string  `json:"tool"`
	UsedAmount float64 `json:"used_amount"`
	Uses       int64   `json:"uses"`
}

// RunCreatedPayload is the payload of run.created. A message is recorded by
// its hash: the text is in the run's turns.
type RunCreatedPayload struct {
	Channel    string `json:"channel"`
	CustomerID string `json:"customer_id"`
	TextSHA256 string `json:"text_sha256"`
	TurnSeq    int64  `json:"turn_seq"`
}

// RunMessagePayload is the payload of run.message.
type RunMessagePayload struct {
	TextSHA256 string `json:"text_sha256"`
	TurnSeq    int64  `json:"turn_seq"`
}

// RunTurnPayload is the payload of run.turn.
type RunTurnPayload struct {
	Role       string `json:"role"`
	Seq        int64  `json:"seq"`
	TextSHA256 string `json:"text_sha256"`
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// RunStatusChanged is the payload of run.status.
type RunStatusChanged struct {
	Error string    `json:"error"`
	From  RunStatus `json:"from"`
	To    RunStatus `json:"to"`
}

// RunRetriedPayload is the payload of run.retried.
type RunRetriedPayload struct{}

// RunClosedPayload is the payload of run.closed.
type RunClosedPayload struct {
	Reason string `json:"reason"`
}

// PolicyReloadedPayload is the payload of policy.reloaded.
type PolicyReloadedPayload struct {
	File        string `json:"file"`
	FromVersion string `json:"from_version"`
	ToVersion   string `json:"to_version"`
}

// PolicyReloadFailedPayload is the payload of policy.reload_failed.
type PolicyReloadFailedPayload struct {
	Error         string `json:"error"`
	PolicyVersion string `json:"policy_version"` // the one still in force
}

// PolicyProposedPayload is the payload of policy.proposed (subject: the
// version's id).
type PolicyProposedPayload struct {
	BaseID       int64  `json:"base_id,omitempty"`
	Hash         string `json:"hash"`
	Note         string `json:"note,omitempty"`
	PeopleNeeded int    `json:"people_needed"`
	ReplayDigest string `json:"replay_digest"`
	Source       string `json:"source"`
}

// PolicySignedPayload is the payload of policy.signed: an admin approved a
// proposed version (the author's own signature only in a single-person
// shop).
type PolicySignedPayload struct {
	Hash         string `json:"hash"`
	Note         string `json:"note,omitempty"`
	PeopleNeeded int    `json:"people_needed"`
	ReplayDigest string `json:"replay_digest"`
	Signatures   int    `json:"signatures"` // the author's counted
}

// PolicyInForcePayload is the payload of policy.in_force.
type PolicyInForcePayload struct {
	FromHash string `json:"from_hash,omitempty"`
	FromID   int64  `json:"from_id,omitempty"`
	Hash     string `json:"hash"`
	// How: "countersigned", "seeded" (the first version of a database),
	// "from file" (--policy-from-file: the file rules).
	How string `json:"how"`
}

// PolicyRejectedPayload is the payload of policy.rejected.
type PolicyRejectedPayload struct {
	Hash   string `json:"hash"`
	Reason string `json:"reason"`
}

// AgentLimitsSetPayload is the payload of agent.limits_set: an agent's
// own limits (0: the instance's).
type AgentLimitsSetPayload struct {
	CallBurst      int    `json:"call_burst"`
	CallsPerSecond int    `json:"calls_per_second"`
	MaxWaiting     int    `json:"max_waiting"`
	Name           string `json:"name"`
}

// PolicyPeopleSetPayload is the payload of policy.people_set: how many
// people sign a policy change in this deployment, set by the first
// instance from its flag or changed on a host (`countersign policy people`).
type PolicyPeopleSetPayload struct {
	From int    `json:"from,omitempty"`
	Host string `json:"host"`
	How  string `json:"how"`
	To   int    `json:"to"`
}

// PolicyNotLoadedPayload is the payload of policy.not_loaded: an instance
// could not load the version in force and decides nothing until it can.
type PolicyNotLoadedPayload struct {
	Error     string `json:"error"`
	Hash      string `json:"hash"`
	VersionID int64  `json:"version_id"`
}

// ToolsReloadedPayload is the payload of tools.reloaded.
type ToolsReloadedPayload struct {
	File        string   `json:"file"`
	FromVersion string   `json:"from_version"`
	ToVersion   string   `json:"to_version"`
	Tools       []string `json:"tools"`
	Why         string   `json:"why"`
}

// ToolAcceptedPayload is the payload of tool.accepted.
type ToolAcceptedPayload struct {
	DefinitionHash string `json:"definition_hash"`
	Upstream       string `json:"upstream"`
	Why            string `json:"why"`
}

// InstanceInForcePayload is the payload of instance.versions.
type InstanceInForcePayload struct {
	Host          string `json:"host"`
	PolicyVersion string `json:"policy_version"`
	ToolsVersion  string `json:"tools_version"`
	Why           string `json:"why"`
}

// DeliveryPayload is the payload of delivery.delivered, delivery.retrying
// and delivery.failed.
type DeliveryPayload struct {
	About   string `json:"about"`
	Attempt int    `json:"attempt"`
	Channel string `json:"channel"`
	Error   string `json:"error,omitempty"`
	Event   string `json:"event"`
	Target  string `json:"target"`
}

// ShopSeededPayload is the payload of shop.seeded.
type ShopSeededPayload struct {
	Records int `json:"records"`
}

// ShopOrdersAddedPayload is the payload of shop.orders_added.
type ShopOrdersAddedPayload struct {
	Count int `json:"count"`
}

// ShopRefundedPayload is the payload of shop.refunded.
type ShopRefundedPayload struct {
	AmountCents    Cents  `json:"amount_cents"`
	IdempotencyKey string `json:"idempotency_key"`
	RefundID       string `json:"refund_id"`
}

// ShopOrderCancelledPayload is the payload of shop.order_cancelled.
type ShopOrderCancelledPayload struct {
	IdempotencyKey string `json:"idempotency_key"`
	Reason         string `json:"reason"`
}

// ShopAddressChangedPayload is the payload of shop.address_changed.
type ShopAddressChangedPayload struct {
	Address        string `json:"address"`
	IdempotencyKey string `json:"idempotency_key"`
}

func (Payload) eventPayload()                         {}
func (CallDecidedPayload) eventPayload()              {}
func (CallInvalidPayload) eventPayload()              {}
func (CallExecutingPayload) eventPayload()            {}
func (CallEndedPayload) eventPayload()                {}
func (CallReconciledPayload) eventPayload()           {}
func (ActionEditedPayload) eventPayload()             {}
func (ActionApprovalPayload) eventPayload()           {}
func (ActionRejectedPayload) eventPayload()           {}
func (ActionCancelledPayload) eventPayload()          {}
func (ActionExpiredPayload) eventPayload()            {}
func (ActionOverduePayload) eventPayload()            {}
func (ActionReminderPayload) eventPayload()           {}
func (ActionRequirementsRaisedPayload) eventPayload() {}
func (GrantCreatedPayload) eventPayload()             {}
func (GrantUsedPayload) eventPayload()                {}
func (GrantRevokedPayload) eventPayload()             {}
func (RunCreatedPayload) eventPayload()               {}
func (RunMessagePayload) eventPayload()               {}
func (RunTurnPayload) eventPayload()                  {}
func (RunStatusChanged) eventPayload()                {}
func (RunRetriedPayload) eventPayload()               {}
func (RunClosedPayload) eventPayload()                {}
func (StaffCreatedPayload) eventPayload()             {}
func (StaffChangePayload) eventPayload()              {}
func (StaffChangeSignedPayload) eventPayload()        {}
func (StaffChangeRejectedPayload) eventPayload()      {}
func (StaffEnrollPayload) eventPayload()              {}
func (StaffPasskeyPayload) eventPayload()             {}
func (StaffGroupsPayload) eventPayload()              {}
func (StaffUpdatedPayload) eventPayload()             {}
func (StaffSessionPayload) eventPayload()             {}
func (StaffTokenPayload) eventPayload()               {}
func (StaffTokensRevokedPayload) eventPayload()       {}
func (AgentCreatedPayload) eventPayload()             {}
func (AgentRevokedPayload) eventPayload()             {}
func (OAuthClientRegisteredPayload) eventPayload()    {}
func (OAuthClientAuthorizedPayload) eventPayload()    {}
func (OAuthClientRevokedPayload) eventPayload()       {}
func (PolicyReloadedPayload) eventPayload()           {}
func (PolicyReloadFailedPayload) eventPayload()       {}
func (PolicyProposedPayload) eventPayload()           {}
func (PolicySignedPayload) eventPayload()             {}
func (PolicyInForcePayload) eventPayload()            {}
func (PolicyRejectedPayload) eventPayload()           {}
func (PolicyNotLoadedPayload) eventPayload()          {}
func (PolicyPeopleSetPayload) eventPayload()          {}
func (AgentLimitsSetPayload) eventPayload()           {}
func (ToolsReloadedPayload) eventPayload()            {}
func (ToolAcceptedPayload) eventPayload()             {}
func (InstanceInForcePayload) eventPayload()          {}
func (DeliveryPayload) eventPayload()                 {}
func (ShopSeededPayload) eventPayload()               {}
func (ShopOrdersAddedPayload) eventPayload()          {}
func (ShopRefundedPayload) eventPayload()             {}
func (ShopOrderCancelledPayload) eventPayload()       {}
func (ShopAddressChangedPayload) eventPayload()       {}
