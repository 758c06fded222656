package models

// EventKind is what an audit event says happened. Every kind the product
// writes is one of EventKinds.
type EventKind string

// The kinds of audit event, by what they are about.
const (
	EventCallInvalid    EventKind = "call.invalid"
	EventCallAllowed    EventKind = "call.allowed"
	EventCallDenied     EventKind = "call.denied"
	EventCallPending    EventKind = "call.pending"
	EventCallExecuting  EventKind = "call.executing"
	EventCallSucceeded  EventKind = "call.succeeded"
	EventCallFailed     EventKind = "call.failed"
	EventCallUnknown    EventKind = "call.unknown"
	EventCallReconciled EventKind = "call.reconciled"
	// An approved call not run: what was approved no longer matched what
	// would run (CallEndedPayload.Reason says what changed).
	EventCallInvalidated EventKind = "call.invalidated"

	EventActionEdited             EventKind = "action.edited"
	EventActionApprovalAdded      EventKind = "action.approval_added"
	EventActionApproved           EventKind = "action.approved"
	EventActionRejected           EventKind = "action.rejected"
	EventActionExpired            EventKind = "action.expired"
	EventActionCancelled          EventKind = "action.cancelled"
	EventActionOverdue            EventKind = "action.overdue"
	EventActionReminder           EventKind = "action.reminder"
	EventActionRequirementsRaised EventKind = "action.requirements_raised"

	EventGrantCreated EventKind = "grant.created"
	EventGrantUsed    EventKind = "grant.used"
	EventGrantRevoked EventKind = "grant.revoked"

	EventRunCreated EventKind = "run.created"
	EventRunMessage EventKind = "run.message"
	EventRunTurn    EventKind = "run.turn"
	EventRunStatus  EventKind = "run.status"
	EventRunRetried EventKind = "run.retried"
	EventRunClosed  EventKind = "run.closed"

	EventStaffCreated       EventKind = "staff.created"
	EventStaffUpdated       EventKind = "staff.updated"
	EventStaffSignedIn      EventKind = "staff.signed_in"
	EventStaffSignedOut     EventKind = "staff.signed_out"
	EventStaffTokenCreated  EventKind = "staff.token_created"
	EventStaffTokenRevoked  EventKind = "staff.token_revoked"
	EventStaffTokensRevoked EventKind = "staff.tokens_revoked"
	// A change of who may sign: proposed, signed by another admin, in
	// effect, or rejected; an enrollment link made, and used.
	EventStaffChangeProposed EventKind = "staff.change_proposed"
	EventStaffChangeSigned   EventKind = "staff.change_signed"
	EventStaffChangeDone     EventKind = "staff.change_done"
	EventStaffChangeRejected EventKind = "staff.change_rejected"
	EventStaffEnrollLink     EventKind = "staff.enroll_link"
	EventStaffEnrolled       EventKind = "staff.enrolled"
	EventStaffPasskeyAdded   EventKind = "staff.passkey_added"
	EventStaffPasskeyRemoved EventKind = "staff.passkey_removed"
	EventStaffGroupsSet      EventKind = "staff.groups_set"

	EventAgentCreated EventKind = "agent.created"
	EventAgentRevoked EventKind = "agent.revoked"

	EventOAuthClientRegistered EventKind = "oauth.client_registered"
	EventOAuthClientAuthorized EventKind = "oauth.client_authorized"
	EventOAuthClientRevoked    EventKind = "oauth.client_revoked"

	EventPolicyReloaded     EventKind = "policy.reloaded"
	EventPolicyReloadFailed EventKind = "policy.reload_failed"
	EventPolicyProposed     EventKind = "policy.proposed"
	EventPolicySigned       EventKind = "policy.signed"
	EventPolicyInForce      EventKind = "policy.in_force"
	EventPolicyRejected     EventKind = "policy.rejected"
	EventPolicyNotLoaded    EventKind = "policy.not_loaded"
	EventPolicyPeopleSet    EventKind = "policy.people_set"
	EventAgentLimitsSet     EventKind = "agent.limits_set"

	EventToolsReloaded EventKind = "tools.reloaded"

	EventToolAccepted EventKind = "tool.accepted"

	// EventInstanceInForce records what an instance decides with; its
	// published kind keeps the older word.
	EventInstanceInForce EventKind = "instance.versions"

	EventDeliveryDelivered EventKind = "delivery.delivered"
	EventDeliveryRetrying  EventKind = "delivery.retrying"
	EventDeliveryFailed    EventKind = "delivery.failed"

	EventShopSeeded         EventKind = "shop.seeded"
	EventShopRefunded       EventKind = "shop.refunded"
	EventShopOrdersAdded    EventKind = "shop.orders_added"
	EventShopOrderCancelled EventKind = "shop.order_cancelled"
	EventShopAddressChanged EventKind = "shop.address_changed"
)

// EventKinds is every kind of audit event the product writes.
var EventKinds = []EventKind{
	EventCallInvalid, EventCallAllowed, EventCallDenied, EventCallPending, EventCallExecuting,
	EventCallSucceeded, EventCallFailed, EventCallUnknown, EventCallReconciled, EventCallInvalidated, EventActionEdited,
	EventActionApprovalAdded, EventActionApproved, EventActionRejected, EventActionExpired,
	EventActionCancelled, EventActionOverdue, EventActionReminder, EventActionRequirementsRaised,
	EventGrantCreated, EventGrantUsed, EventGrantRevoked, EventRunCreated, EventRunMessage,
	EventRunTurn, EventRunStatus, EventRunRetried, EventRunClosed, EventStaffCreated,
	EventStaffUpdated, EventStaffSignedIn, EventStaffSignedOut, EventStaffTokenCreated,
	EventStaffTokenRevoked, EventStaffTokensRevoked, EventStaffChangeProposed, EventStaffChangeSigned,
	EventStaffChangeDone, EventStaffChangeRejected, EventStaffEnrollLink, EventStaffEnrolled, EventStaffPasskeyAdded, EventStaffPasskeyRemoved, EventStaffGroupsSet, EventAgentCreated, EventAgentRevoked, EventAgentLimitsSet,
	EventOAuthClientRegistered, EventOAuthClientAuthorized, EventOAuthClientRevoked,
	EventPolicyReloaded, EventPolicyReloadFailed, EventPolicyProposed, EventPolicySigned,
	EventPolicyInForce, EventPolicyRejected, EventPolicyNotLoaded, EventPolicyPeopleSet, EventToolsReloaded, EventToolAccepted,
	EventInstanceInForce, EventDeliveryDelivered, EventDeliveryRetrying, EventDeliveryFailed,
	EventShopSeeded, EventShopRefunded, EventShopOrdersAdded, EventShopOrderCancelled,
	EventShopAddressChanged,
}

// CallEnded is the kind of event that records a call ending in status:
// call.succeeded, call.failed or call.unknown.
func CallEnded(status CallStatus) EventKind {
	switch status {
	case CallSucceeded:
		return EventCallSucceeded
	case CallFailed:
		return EventCallFailed
	}
	return EventCallUnknown
}
