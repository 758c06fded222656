package doorkit

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/models/storage"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/time/rate"
)

// Limiter is a token bucket per key (a client address, an address and an
// account, a run), used by sign-in, chat and the runs API alike.
//
// Its memory is bounded whatever clients send: keys are hashed to 16 bytes
// (a 60 KB email costs what a short one does), and at most maxKeys buckets
// are kept, the least recently used forgotten first. A forgotten bucket
// comes back full, which is what an idle one would have become anyway; an
// attacker who floods it with new keys to push a bucket out needs that many
// distinct keys, each of which the per-address bucket also charges.
//
// On PostgreSQL the buckets are shared by every instance (shared): a limit
// is the service's, not each process's, however a load balancer spreads
// the requests. Should the database not answer, the process's own bucket
// decides, so a limit never falls away.
type Limiter struct {
	every time.Duration
	burst int

	mu      sync.Mutex
	buckets *simplelru.LRU[[16]byte, *rate.Limiter]

	shared *SharedBuckets
	name   string
}

// SharedBuckets keeps rate limits in the database every instance uses.
type SharedBuckets struct {
	store *storage.Store
	log   *slog.Logger
}

// SharedLimits says where the limits live: nil keeps them in this process
// (SQLite, one instance).
func SharedLimits(store *storage.Store, log *slog.Logger) *SharedBuckets {
	if store == nil || !store.Shared() {
		return nil
	}
	return &SharedBuckets{store: store, log: log}
}

// ShareAs keeps the Limiter's buckets in the database under name.
func (l *Limiter) ShareAs(sb *SharedBuckets, name string) *Limiter {
	l.shared, l.name = sb, name
	return l
}

// DefaultLimiterKeys bounds each Limiter: about 200 bytes a bucket, so a
// few megabytes at most.
const DefaultLimiterKeys = 20000

func NewLimiter(every time.Duration, burst, maxKeys int) *Limiter {
	if maxKeys <= 0 {
		maxKeys = DefaultLimiterKeys
	}
	lru, err := simplelru.NewLRU[[16]byte, *rate.Limiter](maxKeys, nil)
	if err != nil {
		panic(err) // only for a size below 1, excluded above
	}
	return &Limiter{every: every, burst: burst, buckets: lru}
}

// sharedWait bounds how long a request waits for the shared bucket.
const sharedWait = 2 * time.Second

// Allow takes one token from key's bucket, if it has one.
func (l *Limiter) Allow(key string) bool { return l.AllowAt(key, l.every, l.burst) }

// AllowAt is Allow for a key with a limit of its own: a token every so
// often, after a burst of so many.
func (l *Limiter) AllowAt(key string, every time.Duration, burst int) bool {
	if every != l.every || burst != l.burst {
		// A limit of its own has a bucket of its own: a changed limit
		// starts full, here and in the shared buckets.
		key = fmt.Sprintf("%s|%d|%d", key, every, burst)
	}
	sum := sha256.Sum256([]byte(key))
	var k [16]byte
	copy(k[:], sum[:16])
	if l.shared != nil {
		ctx, cancel := context.WithTimeout(context.Background(), sharedWait)
		ok, err := l.shared.store.TakeToken(ctx, l.name, k[:], every, burst)
		cancel()
		if err == nil {
			return ok
		}
		l.shared.log.Warn("shared rate limit unavailable; this instance's own applies", "limit", l.name, "err", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets.Get(k)
	if !ok || b.Limit() != rate.Every(every) || b.Burst() != burst {
		b = rate.NewLimiter(rate.Every(every), burst) // new, or its limit was changed: full
		l.buckets.Add(k, b)
	}
	return b.Allow()
}

// Size is how many buckets are kept.
func (l *Limiter) Size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buckets.Len()
}

// PruneShared forgets, every minute until ctx ends, shared buckets idle
// long enough to have refilled (ten times what a full refill takes, at
// least an hour): a job of the core's (web.New adds it).
func PruneShared(ctx context.Context, limiters []*Limiter) {
	agent.Every(ctx, time.Minute, func(ctx context.Context) {
		for _, l := range limiters {
			if l.shared == nil {
				continue
			}
			idle := max(time.Hour, 10*l.every*time.Duration(l.burst))
			pctx, cancel := context.WithTimeout(ctx, time.Minute)
			if _, err := l.shared.store.PruneTokens(pctx, idle); err != nil && ctx.Err() == nil {
				l.shared.log.Warn("could not prune shared rate limits", "limit", l.name, "err", err)
			}
			cancel()
		}
	})
}
