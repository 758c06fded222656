package models

import (
	"time"
)

// What the gate asks of its own record of earlier calls when it decides:
// totals of an argument and how many actions wait for a person. Each query
// exists twice, on the store (a first, cheap decision) and on a unit of
// work (the decision that counts, made in the transaction that records the
// call, so concurrent calls see each other).

// CallTotal sums a numeric argument over earlier calls.
type CallTotal struct {
	Tool  string
	Field string // a top-level argument name (checked by the policy at load)
	// Same: arguments the earlier calls must share (strings, numbers, bools).
	Same map[string]any
	// CustomerID scopes the sum; when empty, RunID does (anonymous runs).
	CustomerID, RunID string
	Since             time.Time // zero: all time
	// Before, when set, only counts calls made before it: the totals as
	// they stood when a recorded call was decided (policy replay).
	Before    time.Time
	ExcludeID string // a call left out (the action being edited)
}
