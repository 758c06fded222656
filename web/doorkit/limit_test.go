package doorkit

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
	l := NewLimiter(12*time.Second, 5, 0)
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
		l.Allow(fmt.Sprintf("%d%s", i, long))
	}
	grown := int64(heap()) - int64(before)
	if l.Size() != DefaultLimiterKeys {
		t.Fatalf("the limiter holds %d keys, want its cap %d", l.Size(), DefaultLimiterKeys)
	}
	if grown > 32<<20 {
		t.Fatalf("the limiter's heap grew by %d MB for %d keys", grown>>20, keys)
	}
}

func TestLimiterStillLimitsEachKey(t *testing.T) {
	l := NewLimiter(time.Minute, 3, 10)
	for i := 0; i < 3; i++ {
		if !l.Allow("a") {
			t.Fatalf("attempt %d refused", i+1)
		}
	}
	if l.Allow("a") {
		t.Fatal("a fourth attempt within the minute was allowed")
	}
	if !l.Allow("b") {
		t.Fatal("another key was refused because of the first")
	}
}
