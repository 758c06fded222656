package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Backup writes a consistent copy of the database to path while it stays in
// use: SQLite's VACUUM INTO reads everything committed before it began in one
// read transaction (writers carry on meanwhile) and writes it compacted into a
// single file, with no -wal beside it. The copy is written under a temporary
// name and renamed into place, so path never holds half a backup. A path that
// exists is refused rather than overwritten.
func (s *Store) Backup(ctx context.Context, path string) error {
	if s.d.pg {
		return errors.New("backup copies a SQLite file; back up PostgreSQL with pg_dump (docs/how-to/postgresql.md, \"Backups\")")
	}
	if path == "" {
		return errors.New("the backup needs a file name")
	}
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%s already exists: back up to a new file", path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	tmp := path + ".partial"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err // what an interrupted backup left, and it cannot be removed
	}
	pool, err := s.db.DB()
	if err != nil {
		return err
	}
	if _, err := pool.ExecContext(ctx, "VACUUM INTO ?", tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("back up to %s: %w", path, err)
	}
	if err := syncFile(tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("back up to %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("back up to %s: %w", path, err)
	}
	return nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
