package web

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/time/rate"
)

// limiter is a token bucket per key (a client address, an address and an
// account, a run), used by sign-in, chat and the runs API alike.
//
// Its memory is bounded whatever clients send: keys are hashed to 16 bytes
// (a 60 KB email costs what a short one does), and at most maxKeys buckets
// are kept, the least recently used forgotten first. A forgotten bucket
// comes back full, which is what an idle one would have become anyway; an
// attacker who floods it with new keys to push a bucket out needs that many
// distinct keys, each of which the per-address bucket also charges.
type limiter struct {
	every time.Duration
	burst int

	mu      sync.Mutex
	buckets *simplelru.LRU[[16]byte, *rate.Limiter]
}

// defaultLimiterKeys bounds each limiter: about 200 bytes a bucket, so a
// few megabytes at most.
const defaultLimiterKeys = 20000

func newLimiter(every time.Duration, burst, maxKeys int) *limiter {
	if maxKeys <= 0 {
		maxKeys = defaultLimiterKeys
	}
	lru, err := simplelru.NewLRU[[16]byte, *rate.Limiter](maxKeys, nil)
	if err != nil {
		panic(err) // only for a size below 1, excluded above
	}
	return &limiter{every: every, burst: burst, buckets: lru}
}

// allow takes one token from key's bucket, if it has one.
func (l *limiter) allow(key string) bool {
	sum := sha256.Sum256([]byte(key))
	var k [16]byte
	copy(k[:], sum[:16])
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets.Get(k)
	if !ok {
		b = rate.NewLimiter(rate.Every(l.every), l.burst)
		l.buckets.Add(k, b)
	}
	return b.Allow()
}

// size is how many buckets are kept.
func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buckets.Len()
}
