// Package sqlite is belay's embedded store: one SQLite file through the pure-Go
// modernc.org/sqlite driver, in WAL mode, with one writer connection and a pool
// of readers. Migrations are embedded and applied on open.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/belayhq/belay/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// BusyTimeoutMillis is how long a writer waits for another process's write
// transaction before giving up with SQLITE_BUSY.
const BusyTimeoutMillis = 10000

// DB is a belay database in one SQLite file. It implements store.Store.
type DB struct {
	reader
	write *sql.DB
	read  *sql.DB
	path  string
}

var _ store.Store = (*DB)(nil)

// Open opens (creating when needed) the database at path and migrates it to
// the newest schema. Several processes may open the same file at once.
func Open(ctx context.Context, path string) (*DB, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlite: database path %q must not contain '?' or '#'", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: create data dir: %w", err)
	}
	// busy_timeout first, so the pragmas after it already wait for a lock
	// held by another process instead of failing.
	base := path + fmt.Sprintf("?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)", BusyTimeoutMillis)
	write, err := sql.Open("sqlite", base+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// One writer: SQLite serialises writers anyway, and one connection makes
	// the wait happen in Go instead of in busy-retry loops.
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	db := &DB{write: write, path: path}
	if err := db.migrate(ctx); err != nil {
		write.Close()
		return nil, err
	}
	read, err := sql.Open("sqlite", base+"&_pragma=query_only(1)")
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	read.SetMaxOpenConns(n)
	read.SetMaxIdleConns(n)
	db.read = read
	db.reader = reader{q: read}
	for _, pool := range []*sql.DB{write, read} {
		if err := checkPragmas(ctx, pool); err != nil {
			db.Close()
			return nil, err
		}
	}
	return db, nil
}

// migrate applies the embedded migrations while holding an exclusive file
// lock, so two processes opening a new database do not race on its schema.
func (db *DB) migrate(ctx context.Context) error {
	lock, err := os.OpenFile(db.path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("sqlite: open migration lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("sqlite: take migration lock: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	p, err := goose.NewProvider(goose.DialectSQLite3, db.write, mustSub(migrations, "migrations"))
	if err != nil {
		return fmt.Errorf("sqlite: migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("sqlite: migrate %s: %w", db.path, err)
	}
	return nil
}

// checkPragmas verifies that the settings belay relies on really took effect:
// SQLite ignores a pragma it cannot apply instead of failing.
func checkPragmas(ctx context.Context, pool *sql.DB) error {
	var mode string
	var fk, busy int
	conn, err := pool.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: connect: %w", err)
	}
	defer conn.Close()
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("sqlite: read journal_mode: %w", err)
	}
	if err := conn.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
		return fmt.Errorf("sqlite: read foreign_keys: %w", err)
	}
	if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
		return fmt.Errorf("sqlite: read busy_timeout: %w", err)
	}
	if mode != "wal" || fk != 1 || busy != BusyTimeoutMillis {
		return fmt.Errorf("sqlite: pragmas did not take effect: journal_mode=%s foreign_keys=%d busy_timeout=%d", mode, fk, busy)
	}
	return nil
}

// Path returns the database file's path.
func (db *DB) Path() string { return db.path }

// Close closes both connection pools.
func (db *DB) Close() error {
	var errs []error
	if db.read != nil {
		errs = append(errs, db.read.Close())
	}
	errs = append(errs, db.write.Close())
	return errors.Join(errs...)
}

// Update runs fn in one BEGIN IMMEDIATE transaction on the writer connection.
func (db *DB) Update(ctx context.Context, fn func(store.Tx) error) (err error) {
	sqlTx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	defer func() {
		if p := recover(); p != nil {
			sqlTx.Rollback()
			panic(p)
		}
	}()
	if err := fn(&tx{reader: reader{q: sqlTx}, tx: sqlTx}); err != nil {
		sqlTx.Rollback()
		return err
	}
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	return nil
}
