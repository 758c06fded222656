package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/migrations"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// PostgreSQL: several instances may share the database, so nothing may lean
// on being the only writer. Each instance writes as on SQLite, through one
// batching writer (writer.go: units of work grouped in one transaction, READ
// COMMITTED here), and the rules that SQLite's single writer kept without
// saying are kept by locks:
//   - a call read to be changed is locked (Tx.ToolCall: FOR UPDATE), so two
//     approvals of one action are counted one after the other;
//   - a run is locked before a turn is numbered (Tx.AppendTurn);
//   - each instance appends to an audit chain of its own (chains.go), whose
//     head row is locked when a batch begins (writer.attempt), so the chain
//     stays one line even when another instance appends an event about one
//     of its calls;
//   - a customer's decisions are made one at a time, and so are the first
//     sight of an agent's session and the values instances settle at start
//     (Tx.Serialize).
// A batch that meets a deadlock or a serialization failure is run again from
// the start, as a unit on SQLite may be (Write's contract).

// pgPoolSize is how many connections one instance keeps to PostgreSQL.
const pgPoolSize = 16

func openPostgres(dsn string, opts Options) (*Store, error) {
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
	if err := migratePostgres(ctx, pool, migrations.Postgres, "postgres", versionTable); err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrate database %s: %w", redactDSN(dsn), err)
	}
	if opts.Own != nil {
		if err := migratePostgres(ctx, pool, opts.Own.Postgres, ".", opts.Own.versionTable()); err != nil {
			pool.Close()
			return nil, fmt.Errorf("set up %s's tables in %s: %w", opts.Own.Name, redactDSN(dsn), err)
		}
	}
	// Two gorm handles on the one pool: reads, and the writer's (which
	// points its statements at the writer's transaction).
	var dbs [2]*gorm.DB
	for i := range dbs {
		if dbs[i], err = gorm.Open(postgres.New(postgres.Config{Conn: pool}), &gorm.Config{
			Logger:                 logger.Discard,
			SkipDefaultTransaction: true,
			NowFunc:                func() time.Time { return time.Now().UTC() },
		}); err != nil {
			pool.Close()
			return nil, fmt.Errorf("open database: %w", err)
		}
	}
	// People's heavy reads get a pool of their own (ReportConns).
	rpool, err := sql.Open("pgx", dsn)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	rpool.SetMaxOpenConns(ReportConns)
	rpool.SetMaxIdleConns(ReportConns)
	rpool.SetConnMaxIdleTime(5 * time.Minute)
	reports, err := gorm.Open(postgres.New(postgres.Config{Conn: rpool}), &gorm.Config{Logger: logger.Discard, SkipDefaultTransaction: true,
		NowFunc: func() time.Time { return time.Now().UTC() }})
	if err != nil {
		rpool.Close()
		pool.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	s := &Store{db: dbs[0], wdb: dbs[1], reports: reports, pool: pool, d: dialect{pg: true}, dsn: dsn, self: models.NewID("inst"), own: opts.Own.name(),
		Now: func() time.Time { return time.Now().UTC() }}
	if err := s.claimChain(ctx); err != nil {
		rpool.Close()
		pool.Close()
		return nil, err
	}
	if s.writer, err = newWriter(s, pool, 0); err != nil {
		s.chainConn.Close()
		rpool.Close()
		pool.Close()
		return nil, err
	}
	return s, nil
}

// migratePostgres applies the migrations not applied yet, holding
// PostgreSQL's advisory lock so that instances starting together migrate
// once: the others wait, then find nothing left to do.
func migratePostgres(ctx context.Context, pool *sql.DB, files fs.FS, folder, versions string) error {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return err
	}
	dir, err := fs.Sub(files, folder)
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, pool, dir, goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true), goose.WithTableName(versions))
	if err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}

// retryable: PostgreSQL ended the transaction so that another could go on;
// running it again is the answer (40001 serialization failure, 40P01
// deadlock).
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
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
