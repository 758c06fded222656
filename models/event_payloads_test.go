package models

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Every payload type, as the audit log holds them.
var payloadTypes = []EventPayload{
	CallDecidedPayload{},
	CallInvalidPayload{},
	CallExecutingPayload{},
	CallEndedPayload{},
	CallReconciledPayload{},
	ActionEditedPayload{},
	ActionApprovalPayload{},
	ActionRejectedPayload{},
	ActionCancelledPayload{},
	ActionExpiredPayload{},
	ActionOverduePayload{},
	ActionReminderPayload{},
	ActionRequirementsRaisedPayload{},
	GrantCreatedPayload{},
	GrantUsedPayload{},
	GrantRevokedPayload{},
	RunCreatedPayload{},
	RunMessagePayload{},
	RunTurnPayload{},
	RunStatusChanged{},
	RunRetriedPayload{},
	RunClosedPayload{},
	StaffCreatedPayload{},
	StaffChangePayload{},
	StaffChangeSignedPayload{},
	StaffChangeRejectedPayload{},
	StaffEnrollPayload{},
	StaffPasskeyPayload{},
	StaffGroupsPayload{},
	StaffUpdatedPayload{},
	StaffSessionPayload{},
	StaffTokenPayload{},
	StaffTokensRevokedPayload{},
	AgentCreatedPayload{},
	AgentRevokedPayload{},
	OAuthClientRegisteredPayload{},
	OAuthClientAuthorizedPayload{},
	OAuthClientRevokedPayload{},
	PolicyReloadedPayload{},
	PolicyReloadFailedPayload{},
	PolicyProposedPayload{},
	PolicySignedPayload{},
	PolicyInForcePayload{},
	PolicyRejectedPayload{},
	PolicyPeopleSetPayload{},
	AgentLimitsSetPayload{},
	PolicyNotLoadedPayload{},
	ToolsReloadedPayload{},
	ToolAcceptedPayload{},
	InstanceInForcePayload{},
	DeliveryPayload{},
	ShopSeededPayload{},
	ShopOrdersAddedPayload{},
	ShopRefundedPayload{},
	ShopOrderCancelledPayload{},
	ShopAddressChangedPayload{},
}

// A typed payload reads like the sorted-key map it replaced: its fields are
// in the order of their JSON names, and nothing is HTML-escaped.
func TestPayloadsReadLikeSortedMaps(t *testing.T) {
	t.Parallel()
	for _, p := range payloadTypes {
		typ := reflect.TypeOf(p)
		var names []string
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				t.Errorf("%s.%s has no JSON name", typ.Name(), f.Name)
			}
			names = append(names, name)
		}
		if !slices.IsSorted(names) {
			t.Errorf("%s's fields are not in the order of their JSON names: %v", typ.Name(), names)
		}
	}
	reason := `refund of $900.00 on <A1002> & "friends" needs a person`
	typed, err := encodePayload(CallDecidedPayload{RunID: "run_1", Tool: "issue_refund", ArgsHash: "ab", Verdict: DecidedNeedsApproval,
		Rule: "big-refund", Reason: reason, PolicyVersion: "v1", Status: CallPending, RequiredApprovals: 2, RequiredRole: Supervisor})
	if err != nil {
		t.Fatal(err)
	}
	loose, err := encodeJSON(map[string]any{"run_id": "run_1", "tool": "issue_refund", "args_hash": "ab", "verdict": "needs_approval",
		"rule": "big-refund", "reason": reason, "policy_version": "v1", "status": "pending", "required_approvals": 2, "required_role": "supervisor"})
	if err != nil {
		t.Fatal(err)
	}
	if typed != loose {
		t.Errorf("payload\n got %s\nwant %s", typed, loose)
	}
	disabled := true
	if got, _ := encodePayload(StaffUpdatedPayload{Disabled: &disabled}); got != `{"disabled":true}` {
		t.Errorf("a change of one thing says only that: %s", got)
	}
}
