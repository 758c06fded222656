package storage

import (
	"context"
	"path/filepath"
	"testing"
)

// A database is at the newest migration this binary has; one whose last
// migration is not recorded (a start that failed halfway) is behind, which
// /readyz reports.
func TestSchemaSaysWhereTheDatabaseIs(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "schema.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	have, want, err := s.Schema(ctx)
	if err != nil || have != want || want < 12 {
		t.Fatalf("a new database is at %d of %d (%v)", have, want, err)
	}
	if err := s.Write(ctx, func(tx *Tx) error {
		_, err := tx.exec("DELETE FROM "+sqliteVersionTable+" WHERE version_id = ?", want)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if have, _, _ := s.Schema(ctx); have != want-1 {
		t.Fatalf("with its last migration unrecorded the database is at %d, want %d", have, want-1)
	}
}
