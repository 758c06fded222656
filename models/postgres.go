package models

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's "pgx"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/countersign/countersign/models/migrations"
)

// PostgreSQL: several instances may share the database, so nothing may lean
// on being the only writer. Each unit of work runs in a transaction of its
// own (READ COMMITTED), and the rules that SQLite's single writer kept
// without saying are kept by locks taken in the unit:
//   - a call read to be changed is locked (Tx.ToolCall: FOR UPDATE), so two
//     approvals of one action are counted one after the other;
//   - a run is locked before a turn is numbered (Tx.AppendTurn);
//   - the audit chain's head row is locked by the first event a unit appends
//     (Tx.loadChain), so the chain stays one line across instances.
// A unit that meets a deadlock or a serialization failure is run again from
// the start, as a unit on SQLite may be (Write's contract).

// pgPoolSize is how many connections one instance keeps to PostgreSQL.
const pgPoolSize = 16

func openPostgres(dsn string) (*Store, error) {
	pool, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	pool.SetMaxOpenConns(pgPoolSize)
	pool.SetMaxIdleConns(pgPoolSize)
	pool.SetConnMaxIdleTime(5 * time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pool.PingContext(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open database %s: %w", redactDSN(dsn), err)
	}
	if err := migratePostgres(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrate database %s: %w", redactDSN(dsn), err)
	}
	db, err := gorm.Open(postgres.New(postgres.Config{Conn: pool}), &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	return &Store{db: db, wdb: db, pool: pool, d: dialect{pg: true}, dsn: dsn, self: NewID("inst"), Now: func() time.Time { return time.Now().UTC() }}, nil
}

// migratePostgres applies the migrations not applied yet, holding
// PostgreSQL's advisory lock so that instances starting together migrate
// once: the others wait, then find nothing left to do.
func migratePostgres(ctx context.Context, pool *sql.DB) error {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return err
	}
	dir, err := fs.Sub(migrations.Postgres, "postgres")
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, pool, dir, goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}

// writePostgres runs one unit of work in its own transaction. Once begun it
// runs to its end even if the caller gives up (as on SQLite), and it is run
// again when PostgreSQL asks for that (deadlock, serialization failure).
func (s *Store) writePostgres(ctx context.Context, fn func(*Tx) error) error {
	ctx = context.WithoutCancel(ctx)
	var err error
	for attempt := 0; attempt < 8; attempt++ {
		if err = s.writePostgresOnce(ctx, fn); !retryable(err) {
			return err
		}
		time.Sleep(time.Duration(attempt+1) * 5 * time.Millisecond)
	}
	return err
}

func (s *Store) writePostgresOnce(ctx context.Context, fn func(*Tx) error) error {
	stx, err := s.pool.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	gtx := s.db.Session(&gorm.Session{NewDB: true, Context: ctx})
	gtx.Statement.ConnPool = stx
	tx := &Tx{db: gtx, pg: stx, ctx: ctx, self: s.self, now: s.now().Truncate(time.Microsecond)}
	if err := callUnit(fn, tx); err != nil {
		stx.Rollback()
		return err
	}
	if err := tx.saveChainHead(); err != nil {
		stx.Rollback()
		return err
	}
	if err := stx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// retryable: PostgreSQL ended the transaction so that another could go on;
// running it again is the answer (40001 serialization failure, 40P01
// deadlock).
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// pgQueryRow is Tx.queryRow on PostgreSQL.
func pgQueryRow(ctx context.Context, tx *sql.Tx, query string, args []any) ([]driver.Value, error) {
	rows, err := tx.QueryContext(ctx, dialect{pg: true}.rebind(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, sql.ErrNoRows
	}
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	out := make([]driver.Value, len(vals))
	for i, v := range vals {
		out[i] = v
	}
	return out, rows.Err()
}

// RedactDSN is a --db value fit for a log: a SQLite path as it is, a
// PostgreSQL URL without its password.
func RedactDSN(dsn string) string {
	if !IsPostgres(dsn) {
		return dsn
	}
	return redactDSN(dsn)
}

// redactDSN leaves the password out of a database URL shown in an error.
func redactDSN(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "(the PostgreSQL URL)"
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}
