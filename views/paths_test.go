package views

import "testing"

func TestReverseFillsAndEscapes(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Reverse(PathAction, "call_1"), "/actions/call_1"},
		{Reverse(PathStaffRevokeTokens, "stf_1"), "/staff/stf_1/tokens/revoke"},
		{Reverse(PathAuditExport, "csv"), "/audit/export.csv"},
		{Reverse(PathRun, "a/b?c"), "/runs/a%2Fb%3Fc"},
		{WithQuery(PathQueue, "page=2"), "/queue?page=2"},
		{WithQuery(PathQueue, ""), "/queue"},
	} {
		if tc.got != tc.want {
			t.Errorf("%q, want %q", tc.got, tc.want)
		}
	}
}
