package storage_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
)

// On PostgreSQL a token bucket lives in the database: its burst is taken,
// then refused, another key is its own, and tokens come back with time.
// SQLite keeps no shared buckets and says so.
func TestSharedTokenBuckets(t *testing.T) {
	s := storetest.Open(t)
	ctx := context.Background()
	a, b := []byte("aaaaaaaaaaaaaaaa"), []byte("bbbbbbbbbbbbbbbb")
	const every = 200 * time.Millisecond
	if !storetest.Postgres() {
		if _, err := s.TakeToken(ctx, "test", a, every, 3); !errors.Is(err, storage.ErrNotShared) {
			t.Fatalf("SQLite: %v", err)
		}
		return
	}
	take := func(key []byte) bool {
		t.Helper()
		ok, err := s.TakeToken(ctx, "test", key, every, 3)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for i := range 3 {
		if !take(a) {
			t.Fatalf("token %d of a burst of 3 refused", i+1)
		}
	}
	if take(a) {
		t.Fatal("a fourth token at once was given")
	}
	if !take(b) {
		t.Fatal("another key was refused because of the first")
	}
	time.Sleep(3 * every) // at least one token back, whatever else runs
	if !take(a) {
		t.Fatal("no token came back with time")
	}
	if n, err := s.PruneTokens(ctx, 0); err != nil || n != 2 {
		t.Fatalf("pruned %d buckets: %v", n, err)
	}
}

// BenchmarkTakeToken is one shared rate-limit check on PostgreSQL (what a
// sign-in, a chat message or a runs API request pays per limit), over
// 1,000 keys, serial and from 16 callers.
func BenchmarkTakeToken(b *testing.B) {
	if !storetest.Postgres() {
		b.Skip("shared rate limits are kept on PostgreSQL (" + storetest.Env + ")")
	}
	s := storetest.Open(b)
	ctx := context.Background()
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = []byte{byte(i), byte(i >> 8), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	}
	b.Run("serial", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := s.TakeToken(ctx, "bench", keys[i%len(keys)], time.Second, 1<<20); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("callers16", func(b *testing.B) {
		b.SetParallelism(8)
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.TakeToken(ctx, "bench", keys[int(n.Add(1))%len(keys)], time.Second, 1<<20); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
