package gate

import (
	"testing"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
)

// The gate's audit payloads are structs for speed; they must read exactly
// like the maps (sorted keys, nothing escaped) they replaced.
func TestGatePayloadsReadLikeMaps(t *testing.T) {
	reason := `refund of $900.00 on <A1002> & "friends" needs a person`
	d := decisionEvent{RunID: "run_1", Tool: "issue_refund", ArgsHash: "ab", Verdict: policy.NeedsApproval, Rule: "big-refund",
		Reason: reason, PolicyVersion: "v1", Status: models.CallPending, RequiredApprovals: 2, RequiredRole: "supervisor"}
	same(t, d, map[string]any{"run_id": "run_1", "tool": "issue_refund", "args_hash": "ab", "verdict": policy.NeedsApproval,
		"rule": "big-refund", "reason": reason, "policy_version": "v1", "status": models.CallPending,
		"required_approvals": 2, "required_role": "supervisor"})
	same(t, outcomeEvent{RunID: "run_1", Tool: "get_order_status", Status: models.CallSucceeded, ResultHash: "cd"},
		map[string]any{"run_id": "run_1", "tool": "get_order_status", "status": models.CallSucceeded, "result_hash": "cd"})
	same(t, outcomeEvent{RunID: "run_1", Tool: "cancel_order", Status: models.CallFailed, Error: "order <A1> & shipped"},
		map[string]any{"run_id": "run_1", "tool": "cancel_order", "status": models.CallFailed, "error": "order <A1> & shipped"})
}

func same(t *testing.T, v any, m map[string]any) {
	t.Helper()
	got, err := models.EncodePayload(v)
	if err != nil {
		t.Fatal(err)
	}
	want, err := models.EncodePayload(m)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("payload\n got %s\nwant %s", got, want)
	}
}
