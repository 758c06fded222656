package backoffice

import "testing"

func TestSafeNextStaysOnThisSite(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "/queue"},
		{"/runs?status=paused", "/runs?status=paused"},
		{"/actions/call_1", "/actions/call_1"},
		{"/\t/evil.example/x", "/queue"},
		{"/\n/evil.example/x", "/queue"},
		{"//evil.example/x", "/queue"},
		{"/\\evil.example/x", "/queue"},
		{"\\\\evil.example", "/queue"},
		{"/%2F/evil.example", "/%2F/evil.example"}, // a path on this site, never a host
		{"https://evil.example/", "/queue"},
		{"https:/evil.example", "/queue"},
		{"javascript:alert(1)", "/queue"},
		{"evil.example", "/queue"},
		{" /queue", "/queue"},
		{"/\x7f/evil.example", "/queue"},
		{"///evil.example", "/queue"},
	} {
		if got := safeNext(tc.in); got != tc.want {
			t.Errorf("safeNext(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
