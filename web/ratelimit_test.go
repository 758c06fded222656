package web

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// An attacker who sends a new, long key with every request (a 4 KB email
// address) must not grow the server's memory without bound: the limiter
// keeps a fixed number of fixed-size keys.
func TestLimiterMemoryIsBounded(t *testing.T) {
	l := newLimiter(12*time.Second, 5, 0)
	long := strings.Repeat("x", 4096)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	const keys = 60000 // three times the cap; 240 MB of key text
	for i := 0; i < keys; i++ {
		l.allow(fmt.Sprintf("%d%s", i, long))
	}
	grown := int64(heap()) - int64(before)
	if l.size() != defaultLimiterKeys {
		t.Fatalf("the limiter holds %d keys, want its cap %d", l.size(), defaultLimiterKeys)
	}
	if grown > 32<<20 {
		t.Fatalf("the limiter's heap grew by %d MB for %d keys", grown>>20, keys)
	}
}

func TestLimiterStillLimitsEachKey(t *testing.T) {
	l := newLimiter(time.Minute, 3, 10)
	for i := 0; i < 3; i++ {
		if !l.allow("a") {
			t.Fatalf("attempt %d refused", i+1)
		}
	}
	if l.allow("a") {
		t.Fatal("a fourth attempt within the minute was allowed")
	}
	if !l.allow("b") {
		t.Fatal("another key was refused because of the first")
	}
}

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
