package models

// What `audit verify` compares with the chain: each tool call row, the
// events about it, and its approvals, walked together in id order so that
// memory stays flat however many calls there are.

// CallRecord is one call as the tables hold it, with the audit events
// whose subject it is and how many approvals rows it has. Call is nil when
// events name a call that has no row.
type CallRecord struct {
	ID        string
	Call      *ToolCall
	Events    []AuditEvent
	Approvals []Approval
}
