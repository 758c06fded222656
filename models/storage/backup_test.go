package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/models"
)

// A backup taken while calls are being written holds a consistent database:
// it opens, its chain verifies, and it has every call committed before it.
func TestBackupWhileWriting(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(filepath.Join(dir, "live.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	write := func(id string) error {
		return s.Write(ctx, func(tx *Tx) error {
			if err := tx.CreateToolCall(&models.ToolCall{ID: id, RunID: "run_1", Tool: "t", Status: models.CallSucceeded}); err != nil {
				return err
			}
			return tx.Audit(models.Event{Actor: "test", Kind: models.EventCallAllowed, Subject: id})
		})
	}
	if err := s.Write(ctx, func(tx *Tx) error { return tx.CreateRun(&models.Run{ID: "run_1", Status: "active"}) }); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if err := write(fmt.Sprintf("call_before_%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // writes go on during the backup
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := write(fmt.Sprintf("call_during_%05d", i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	copyPath := filepath.Join(dir, "copy.db")
	err = s.Backup(ctx, copyPath)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(copyPath + ".partial"); !os.IsNotExist(err) {
		t.Fatalf("the temporary file is left: %v", err)
	}

	c, err := Open(copyPath, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rep, err := c.VerifyAuditChain(ctx)
	if err != nil || !rep.OK {
		t.Fatalf("the copy's chain: %+v %v", rep, err)
	}
	var before, all int64
	c.db.Table("tool_calls").Where("id LIKE 'call_before_%'").Count(&before)
	c.db.Table("tool_calls").Count(&all)
	if before != 100 || rep.Events != all {
		t.Fatalf("the copy has %d of the 100 earlier calls; %d calls and %d audit events", before, all, rep.Events)
	}

	// An existing file is never overwritten.
	if err := s.Backup(ctx, copyPath); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second backup to the same file: %v", err)
	}
}
