package models

import "time"

// CallChange is a conditional state change of a tool call.
type CallChange struct {
	ID   string
	From []CallStatus // the statuses the call must be in
	To   CallStatus
	// Error (for the model and the customer) and Result (JSON) are written
	// when To ends or refuses the call: rejected, cancelled, expired,
	// succeeded, failed, unknown. Moving to approved or executing leaves them.
	Error  string
	Result string
}

// CallEdit is a pending call's arguments as staff edited them, with the
// approvals the edited call needs.
type CallEdit struct {
	Args, ArgsHash string
	// OriginalArgs are the arguments the model asked for, kept across edits.
	OriginalArgs      string
	RequiredApprovals int
	RequiredRole      StaffRole
	// PasskeyRequired and ExpiresAt are what the edit asks for: the
	// strictest of the original rule's and the rule the edited arguments
	// matched.
	PasskeyRequired bool
	ExpiresAt       *time.Time
}
