package accounts_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storetest"
)

// Each password hash takes 64 MiB. Thirty-two sign-in attempts at once must
// not take thirty-two times that (2 GiB): they wait their turn. The bound
// leaves room for the garbage collector's lag on a busy machine.
func openStore(t *testing.T) *models.Store {
	t.Helper()
	return storetest.Open(t)
}

func TestSignInFloodsDoNotTakeMemoryPerAttempt(t *testing.T) {
	store := openStore(t)
	accts := accounts.New(store)
	if _, err := accts.AddStaff(context.Background(), "ann@x.test", "Ann", models.Approver, "correct horse battery staple", models.SystemActor); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	base := m.HeapInuse
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
		}
	}()
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			email := "ann@x.test"
			if i%2 == 1 {
				email = "nobody@x.test" // unknown emails hash too
			}
			if _, err := accts.Authenticate(context.Background(), email, "wrong password!!"); fault.CodeOf(err) != fault.Unauthorized {
				t.Errorf("attempt %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	grown := int64(peak.Load()) - int64(base)
	if grown > 12*64<<20 {
		t.Fatalf("32 concurrent sign-ins grew the heap by %d MiB (one hash is 64 MiB; %d run at once)", grown>>20, accounts.MaxConcurrentHashes)
	}
	t.Logf("heap grew by %d MiB at most", grown>>20)
}
