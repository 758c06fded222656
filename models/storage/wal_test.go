package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/models"
)

// The writer's connection never checkpoints by itself, so the log must still
// start over once it is long, even with readers busy all the while: the
// background walCheckpointer and the writer's finish together keep it bounded.
func TestTheLogStartsOverUnderLoad(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "wal.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A smaller limit than production's, so that the test writes a few
	// thousand pages rather than a few hundred thousand. Set before the first
	// write: the walCheckpointer only reads it after a commit has woken it.
	const limit = 1000
	s.wal.limit = limit
	ctx := context.Background()
	if err := s.Write(ctx, func(tx *Tx) error { return tx.CreateRun(&models.Run{ID: "run_1", Status: "active"}) }); err != nil {
		t.Fatal(err)
	}
	logPages := func() int {
		var busy, pages, copied int
		if err := s.db.Raw("PRAGMA wal_checkpoint(PASSIVE)").Row().Scan(&busy, &pages, &copied); err != nil {
			t.Fatal(err)
		}
		return pages
	}
	big := strings.Repeat("x", 3000) // about a page per call
	var (
		mu sync.Mutex
		n  int
	)
	deadline := time.Now().Add(30 * time.Second)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				id := fmt.Sprintf("call_%d_%d", g, i)
				if err := s.Write(ctx, func(tx *Tx) error {
					return tx.CreateToolCall(&models.ToolCall{ID: id, RunID: "run_1", Tool: "t", Status: models.CallSucceeded, Result: big})
				}); err != nil {
					t.Error(err)
					return
				}
				if _, err := s.ToolCall(ctx, id); err != nil { // readers all the while
					t.Error(err)
					return
				}
				mu.Lock()
				n++
				done := n > 4*limit
				mu.Unlock()
				if done {
					return
				}
			}
		}(g)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// More than four limits' worth of pages went through the log; it must
	// have started over on the way (SQLite's own checkpoint is off).
	if p := logPages(); p >= 3*limit {
		t.Fatalf("the log holds %d pages after %d calls of a page each; it should have started over below %d", p, n, 3*limit)
	}
}
