package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/models"
)

// takeToken is a token bucket kept in PostgreSQL, shared by every instance:
// a bucket's tokens refill at one per `every` up to `burst`; a request takes
// one when there is one. One statement, atomic under concurrent callers on
// any instance. No row comes back when the bucket is empty.
const takeToken = `INSERT INTO rate_buckets AS b (name, key, tokens, at) VALUES ($1, $2, $3::float8 - 1, now())
	ON CONFLICT (name, key) DO UPDATE SET
		tokens = LEAST($3::float8, b.tokens + EXTRACT(EPOCH FROM now() - b.at)::float8 / $4::float8) - 1, at = now()
	WHERE LEAST($3::float8, b.tokens + EXTRACT(EPOCH FROM now() - b.at)::float8 / $4::float8) >= 1
	RETURNING tokens`

// ErrNotShared says that the store keeps no shared rate limits (SQLite:
// one instance, whose own limits are the limits).
var ErrNotShared = errors.New("rate limits are kept in each process on SQLite")

// TakeToken takes a token from the bucket `name`/`key` that every instance
// on this PostgreSQL database shares, and says whether there was one.
func (s *Store) TakeToken(ctx context.Context, name string, key []byte, every time.Duration, burst int) (bool, error) {
	if !s.d.pg {
		return false, ErrNotShared
	}
	pool, err := s.db.DB()
	if err != nil {
		return false, err
	}
	var left float64
	err = pool.QueryRowContext(ctx, takeToken, name, key, float64(burst), every.Seconds()).Scan(&left)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(notFound(err), models.ErrNotFound):
		return false, nil
	}
	return false, fmt.Errorf("take a rate-limit token: %w", err)
}

// PruneTokens forgets the shared buckets untouched for `idle`: a bucket
// left that long has refilled, which is what a new one starts as.
func (s *Store) PruneTokens(ctx context.Context, idle time.Duration) (int64, error) {
	if !s.d.pg {
		return 0, ErrNotShared
	}
	res := s.db.WithContext(ctx).Exec(`DELETE FROM rate_buckets WHERE at < now() - make_interval(secs => ?)`, idle.Seconds())
	return res.RowsAffected, res.Error
}
