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
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
)

// Each password hash takes 64 MiB. Thirty-two sign-in attempts at once must
// not take thirty-two times that (2 GiB): they wait their turn. The bound
// leaves room for the garbage collector's lag on a busy machine.
func openStore(t *testing.T) *storage.Store {
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

// While the database does not answer, a good key or session is not called
// invalid (a client told 401 throws its key away): the lookup says the
// database is unavailable. A key that is not there is still unauthorized.
func TestKeysAreNotRefusedWhileTheDatabaseIsAway(t *testing.T) {
	ctx := context.Background()
	store, err := storage.Open(storetest.DSN(t), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	svc := accounts.New(store)
	key, _, err := svc.AddAgent(ctx, "bot", models.Actor{ID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AgentForKey(ctx, "csa_nope"); fault.CodeOf(err) != fault.Unauthorized {
		t.Fatalf("an unknown key: %v", err)
	}
	store.Close()
	if _, err := svc.AgentForKey(ctx, key); fault.CodeOf(err) != fault.Unavailable {
		t.Fatalf("agent key while the database is away: %v", err)
	}
	if _, err := svc.StaffForToken(ctx, "cst_whatever"); fault.CodeOf(err) != fault.Unavailable {
		t.Fatalf("staff token while the database is away: %v", err)
	}
	if _, _, err := svc.Session(ctx, "cookie"); fault.CodeOf(err) != fault.Unavailable {
		t.Fatalf("session while the database is away: %v", err)
	}
}

// The single sign-on group mapping is the deployment's: the first
// instance's flags keep it; an instance whose flags disagree does not
// start; one without flags uses the mapping kept.
func TestGroupMappingIsTheDeployments(t *testing.T) {
	ctx := context.Background()
	svc := accounts.New(openStore(t))
	if err := svc.SettleGroups(ctx, nil, "h1"); err == nil {
		t.Fatal("no mapping anywhere was accepted")
	}
	first := []accounts.GroupRole{{Group: "cs-admins", Role: models.Admin}, {Group: "support", Role: models.Approver}}
	if err := svc.SettleGroups(ctx, first, "h1"); err != nil {
		t.Fatal(err)
	}
	if err := svc.SettleGroups(ctx, first, "h2"); err != nil {
		t.Fatalf("the same flags: %v", err)
	}
	other := []accounts.GroupRole{{Group: "everyone", Role: models.Admin}}
	if err := svc.SettleGroups(ctx, other, "h3"); err == nil {
		t.Fatal("an instance's own mapping was accepted")
	}
	if err := svc.SettleGroups(ctx, nil, "h4"); err != nil {
		t.Fatalf("no flags with a mapping kept: %v", err)
	}
	got, err := svc.Groups(ctx)
	if err != nil || accounts.FormatGroups(got) != "cs-admins=admin\nsupport=approver" {
		t.Fatalf("kept: %v %v", got, err)
	}
}
