package backoffice

import (
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/models"
)

// What the approver is told after approving follows the call as it is:
// never "the call ran" when it failed or nobody knows.
func TestApprovalOutcomeSaysWhatHappened(t *testing.T) {
	for _, tc := range []struct {
		call     models.ToolCall
		ok, bad  string
		approved int
	}{
		{models.ToolCall{Status: models.CallSucceeded}, "The call ran", "", 1},
		{models.ToolCall{Status: models.CallFailed, Error: "only $60.00 of order A1003 is left to refund (asked for $100.00)"}, "",
			"Approved, but the call failed: only $60.00 of order A1003 is left to refund (asked for $100.00). The customer's assistant has been told.", 1},
		{models.ToolCall{Status: models.CallUnknown}, "", "whether the call took effect is unknown: the system stopped while it ran", 1},
		{models.ToolCall{Status: models.CallUnknown, Error: "the refunds service did not confirm it (it timed out)"}, "",
			"unknown: the refunds service did not confirm it (it timed out). A supervisor must check", 1},
		{models.ToolCall{Status: models.CallPending, RequiredApprovals: 2, RequiredRole: "supervisor"}, "1 of 2", "", 1},
		{models.ToolCall{Status: models.CallExecuting}, "is running", "", 1},
		{models.ToolCall{Status: models.CallExpired}, "", "This action was expired", 0},
	} {
		ok, bad := approvalOutcome(&tc.call, tc.approved, false)
		if (tc.ok == "") != (ok == "") || !strings.Contains(ok, tc.ok) || (tc.bad == "") != (bad == "") || !strings.Contains(bad, tc.bad) {
			t.Errorf("%s: ok %q bad %q", tc.call.Status, ok, bad)
		}
	}
	if s := sentence("the note is longer than 1000 characters"); s != "The note is longer than 1000 characters." {
		t.Errorf("sentence: %q", s)
	}
}

func TestStaffNeverSeeARegularExpression(t *testing.T) {
	got := staffWords(`"a1002" does not match the pattern ^[A-Z][0-9]+$`)
	if strings.Contains(got, "^[A-Z]") || !strings.HasPrefix(got, `"a1002" is not in the form`) {
		t.Fatalf("%q", got)
	}
}

// The banner of an action that waits for more approvals gives the time of
// the last approval, not of the policy's decision to wait.
func TestTheBannerSaysWhenThePersonApproved(t *testing.T) {
	decided := time.Date(2026, 12, 7, 5, 41, 48, 0, time.Local)
	approved := decided.Add(6 * time.Second)
	call := &models.ToolCall{Status: models.CallPending, RequiredApprovals: 2, ArgsHash: "h", DecidedAt: &decided}
	news := actionNews(call, []models.Approval{{StaffName: "Ann", Verdict: "approve", ArgsHash: "h", CreatedAt: approved}})
	if want := "Approved by Ann at " + clock(approved) + ": 1 of 2 so far."; news != want {
		t.Fatalf("the banner says %q, want %q", news, want)
	}
}
