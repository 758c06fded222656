package models

// The lists below are the only ones: every other package names statuses and
// roles through these types (ARCHITECTURE.md, "The life of a tool call").

// CallStatus is where a tool call is in its life.
type CallStatus string

// Tool call statuses.
const (
	CallInvalid   CallStatus = "invalid"
	CallDenied    CallStatus = "denied"
	CallAllowed   CallStatus = "allowed"
	CallPending   CallStatus = "pending"
	CallApproved  CallStatus = "approved"
	CallRejected  CallStatus = "rejected"
	CallExpired   CallStatus = "expired"
	CallCancelled CallStatus = "cancelled"
	CallExecuting CallStatus = "executing"
	CallSucceeded CallStatus = "succeeded"
	CallFailed    CallStatus = "failed"
	CallUnknown   CallStatus = "unknown"
	// CallInvalidated: approved, but what was approved no longer matched
	// what would run (the tool's definition, the policy, an approver):
	// nothing was run.
	CallInvalidated CallStatus = "invalidated"
)

// CallStatuses lists every call status.
var CallStatuses = []CallStatus{CallInvalid, CallDenied, CallAllowed, CallPending, CallApproved, CallRejected,
	CallExpired, CallCancelled, CallExecuting, CallSucceeded, CallFailed, CallUnknown, CallInvalidated}

// Valid reports whether s is a known call status.
func (s CallStatus) Valid() bool { return oneOf(s, CallStatuses) }

// callClass is what a call status says about its call.
type callClass struct {
	// open: Countersign still has the call: a person may yet decide, or
	// it runs.
	open bool
	// underWay: the call has no outcome yet (open, or allowed and waiting
	// for the agent that asked to report).
	underWay bool
	// mayHaveHappened: the call did, may yet, or may have happened (what
	// the policy's totals count).
	mayHaveHappened bool
	// next are the statuses the call may move to; none: it is over.
	next []CallStatus
}

// callClasses is the one table of what each call status means and where a
// call may go from it (Tx.ChangeCallStatus refuses any other move).
// Nothing else lists statuses by class: ask the status.
var callClasses = map[CallStatus]callClass{
	CallInvalid:     {},
	CallDenied:      {},
	CallAllowed:     {underWay: true, next: []CallStatus{CallSucceeded, CallFailed}},
	CallPending:     {open: true, underWay: true, mayHaveHappened: true, next: []CallStatus{CallApproved, CallRejected, CallExpired, CallCancelled}},
	CallApproved:    {open: true, underWay: true, mayHaveHappened: true, next: []CallStatus{CallExecuting, CallSucceeded, CallFailed, CallInvalidated}},
	CallExecuting:   {open: true, underWay: true, mayHaveHappened: true, next: []CallStatus{CallSucceeded, CallFailed, CallUnknown}},
	CallRejected:    {},
	CallExpired:     {},
	CallCancelled:   {},
	CallSucceeded:   {mayHaveHappened: true},
	CallFailed:      {},
	CallUnknown:     {mayHaveHappened: true, next: []CallStatus{CallSucceeded, CallFailed}},
	CallInvalidated: {},
}

// Open reports whether Countersign still has the call: a person may yet
// decide it (pending), or it is about to run or running.
func (s CallStatus) Open() bool { return callClasses[s].open }

// UnderWay reports whether the call has no outcome yet: open, or allowed
// and waiting for the agent that asked to report how it went.
func (s CallStatus) UnderWay() bool { return callClasses[s].underWay }

// MayHaveHappened reports whether the call did, may yet, or may have
// happened: what a total of earlier calls counts.
func (s CallStatus) MayHaveHappened() bool { return callClasses[s].mayHaveHappened }

// Final reports whether the call is over: no status follows. Every final
// call has one signed receipt.
func (s CallStatus) Final() bool { _, ok := callClasses[s]; return ok && len(callClasses[s].next) == 0 }

// Replayed are the statuses of a call a person decided whose outcome
// answers the same intent asked again: it ran (or may have), or a person
// said no. An expired, cancelled or invalidated call was never decided
// as it stood: asking again asks anew.
func (s CallStatus) Replayed() bool {
	switch s {
	case CallSucceeded, CallFailed, CallUnknown, CallRejected:
		return true
	}
	return false
}

// MayBecome reports whether a call may move from s to t.
func (s CallStatus) MayBecome(t CallStatus) bool { return oneOf(t, callClasses[s].next) }

// CallStatusesWhere lists the call statuses of which is says true, in the
// order of CallStatuses.
func CallStatusesWhere(is func(CallStatus) bool) []CallStatus {
	var out []CallStatus
	for _, s := range CallStatuses {
		if is(s) {
			out = append(out, s)
		}
	}
	return out
}

// RunStatus is where a run is in its life.
type RunStatus string

// Run statuses.
const (
	RunActive  RunStatus = "active"  // the model or tools are working
	RunWaiting RunStatus = "waiting" // the customer has the last word
	RunPaused  RunStatus = "paused"  // one or more actions are pending
	RunFailed  RunStatus = "failed"  // the model or provider failed; staff may retry
	RunClosed  RunStatus = "closed"
)

// RunStatuses lists every run status.
var RunStatuses = []RunStatus{RunActive, RunWaiting, RunPaused, RunFailed, RunClosed}

// Valid reports whether s is a known run status.
func (s RunStatus) Valid() bool { return oneOf(s, RunStatuses) }

// StaffRole is a staff member's role.
type StaffRole string

// Staff roles. Auditors read everything and decide nothing; admins manage
// accounts and may decide as a supervisor would.
const (
	Approver   StaffRole = "approver"
	Supervisor StaffRole = "supervisor"
	Auditor    StaffRole = "auditor"
	Admin      StaffRole = "admin"
)

// StaffRoles lists every role, least authority first among those who decide.
var StaffRoles = []StaffRole{Approver, Supervisor, Auditor, Admin}

func (r StaffRole) authority() int {
	switch r {
	case Approver:
		return 1
	case Supervisor:
		return 2
	case Admin:
		return 3
	}
	return 0
}

// Valid reports whether r is a known role.
func (r StaffRole) Valid() bool { return oneOf(r, StaffRoles) }

// Name is the role as a message names it: "(none)" for no role.
func (r StaffRole) Name() string {
	if r == "" {
		return "(none)"
	}
	return string(r)
}

// CanDecide reports whether the role may approve or reject actions at all.
func (r StaffRole) CanDecide() bool { return r.authority() > 0 }

// IsAdmin reports whether the role manages accounts.
func (r StaffRole) IsAdmin() bool { return r == Admin }

// AtLeast reports whether r has the authority of min (an empty min is met
// by every deciding role).
func (r StaffRole) AtLeast(min StaffRole) bool {
	if min == "" {
		return r.CanDecide()
	}
	return r.authority() >= min.authority()
}

// Higher returns whichever of r and other has more authority (r on a tie).
func (r StaffRole) Higher(other StaffRole) StaffRole {
	if other.authority() > r.authority() {
		return other
	}
	return r
}

func oneOf[T comparable](x T, list []T) bool {
	for _, y := range list {
		if x == y {
			return true
		}
	}
	return false
}
