// Package audit proves the audit log outside the database: signed
// checkpoints of the chain's head kept where the operator chooses, and a
// check that the tables (calls, approvals, outcomes) agree with the events
// that recorded them. docs/explanation/security.md says what it does and
// does not protect against.
package audit
