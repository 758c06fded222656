package models

import (
	"time"
)

// ActionRow is a pending action with what the queue shows beside it.
type ActionRow struct {
	ToolCall
	CustomerName string
	// Agent is the outside agent that asked ("" for Countersign's own runs).
	Agent     string
	Approvals int // distinct approvals of the arguments now in force
}

// ActionFilter narrows the queue. Zero values match everything.
type ActionFilter struct {
	Tool string
	// Customer matches a customer id exactly, or a name's beginning.
	Customer string
	// MinAmount and MaxAmount bound the call's sum of money: the argument
	// AmountArgs names for its tool, in cents. A call of a tool without one
	// does not match an amount.
	MinAmount, MaxAmount *Cents
	AmountArgs           map[string]string // tool -> argument
	Offset, Limit        int
}

// RunRow is a run with its number of turns and of tool calls.
type RunRow struct {
	Run
	Turns, Calls int64
	// FirstMessage is the start of what the customer wrote first.
	FirstMessage string
}

// AuditQuery filters the audit list.
type AuditQuery struct {
	Tool, Decision, Staff, Customer, Text string
	Status                                CallStatus
	// DecisionsOnly leaves out allowed reads: what a person or a rule
	// actually decided.
	DecisionsOnly bool
	From, To      time.Time // zero: open
	// Keyset cursor: rows strictly older than this (created_at, id).
	BeforeCreated time.Time
	BeforeID      string
	Limit         int
}

// AuditRow is one tool call with who decided it.
type AuditRow struct {
	ToolCall
	CustomerName string
	DecidedBy    string // names of the staff who gave a verdict, comma separated
}
