package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/jackc/pgx/v5"
)

// Instances sharing PostgreSQL tell each other what changed (an action, a
// run's turn) with NOTIFY, and hear it on a connection of their own with
// LISTEN. On SQLite, with one server, there is nobody else to tell.

// Notify sends payload on channel to every instance listening (this one
// too). It does nothing on SQLite.
func (s *Store) Notify(ctx context.Context, channel, payload string) error {
	if !s.d.pg {
		return nil
	}
	_, err := s.pool.ExecContext(ctx, "SELECT pg_notify($1, $2)", channel, payload)
	return err
}

// Listen hands fn every payload sent on channel, until ctx ends, on a
// connection of its own. A lost connection is made again with backoff;
// connected is called on each (re)connection, and down while there is none,
// so the caller can catch up on what it may have missed. It returns at once
// on SQLite.
func (s *Store) Listen(ctx context.Context, channel string, fn func(payload string), connected func(), down func(error)) {
	if !s.d.pg {
		return
	}
	// 100 ms doubled after each failed try, up to 10 s, with jitter so that
	// instances losing one database do not come back in step.
	wait := &backoff.ExponentialBackOff{InitialInterval: 100 * time.Millisecond, Multiplier: 2,
		RandomizationFactor: 0.2, MaxInterval: 10 * time.Second}
	wait.Reset()
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, channel, fn, func() {
			wait.Reset()
			connected()
		})
		if ctx.Err() != nil {
			return
		}
		down(err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait.NextBackOff()):
		}
	}
}

func (s *Store) listenOnce(ctx context.Context, channel string, fn func(string), connected func()) error {
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return fmt.Errorf("connect to listen: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	connected()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fn(n.Payload)
	}
}
