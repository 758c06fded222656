package models

import (
	"slices"
	"testing"
)

// The table of call statuses is whole and says one consistent thing: every
// status has a row; a call Countersign still has is under way and may
// have happened; a status with no way on is over; every move ends in a
// known status; nothing moves back to pending or invalid.
func TestCallStatusTableIsConsistent(t *testing.T) {
	if len(callClasses) != len(CallStatuses) {
		t.Fatalf("%d rows for %d statuses", len(callClasses), len(CallStatuses))
	}
	for _, s := range CallStatuses {
		c, ok := callClasses[s]
		if !ok {
			t.Fatalf("%s has no row", s)
		}
		if c.open && (!c.underWay || !c.mayHaveHappened) {
			t.Errorf("%s is open but not under way or not counted", s)
		}
		if c.underWay && len(c.next) == 0 {
			t.Errorf("%s is under way with nowhere to go", s)
		}
		for _, n := range c.next {
			if !n.Valid() || n == CallPending || n == CallInvalid || n == s {
				t.Errorf("%s -> %s", s, n)
			}
		}
	}
	if got := CallStatusesWhere(CallStatus.Open); !slices.Equal(got, []CallStatus{CallPending, CallApproved, CallExecuting}) {
		t.Errorf("open: %v", got)
	}
	if got := CallStatusesWhere(CallStatus.MayHaveHappened); !slices.Equal(got, []CallStatus{CallPending, CallApproved, CallExecuting, CallSucceeded, CallUnknown}) {
		t.Errorf("may have happened: %v", got)
	}
	for _, bad := range [][2]CallStatus{{CallSucceeded, CallFailed}, {CallRejected, CallApproved}, {CallPending, CallExecuting}, {CallExpired, CallApproved}, {CallDenied, CallApproved}} {
		if bad[0].MayBecome(bad[1]) {
			t.Errorf("%s may become %s", bad[0], bad[1])
		}
	}
}
