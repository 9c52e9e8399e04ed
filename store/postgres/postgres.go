// Package postgres is belay's store on PostgreSQL, for several `belay serve`
// instances sharing one database. It passes the same conformance suite as
// the embedded SQLite store (store/storetest). Event sequence numbers are
// handed out in commit order through one counter row, so a follower never
// skips an event committed late; timeouts and lapsed leases are claimed with
// FOR UPDATE SKIP LOCKED; LISTEN/NOTIFY wakes other instances (store.Notifier).
package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	neturl "net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// channel is the LISTEN/NOTIFY channel commits are announced on.
const channel = "belay_events"

// DB is a belay database on PostgreSQL. It implements store.Store and
// store.Notifier.
type DB struct {
	reader
	db  *sql.DB
	url string

	mu        sync.Mutex
	listeners map[chan struct{}]struct{}
	listening bool
	// heard is closed once the LISTEN connection is first up.
	heard chan struct{}
	stop  context.CancelFunc
	done  chan struct{}
}

var (
	_ store.Store    = (*DB)(nil)
	_ store.Notifier = (*DB)(nil)
)

// Connection pool defaults, changed by the URL's query parameters
// pool_max_conns, pool_max_idle_conns and pool_max_conn_lifetime.
const (
	DefaultMaxConns     = 32
	DefaultMaxIdleConns = 8
)

// poolOptions are the pool settings taken from a URL.
type poolOptions struct {
	maxConns, maxIdle int
	lifetime          time.Duration
}

// splitPoolOptions removes the pool's own parameters from url and returns
// them with the rest of the URL, which pgx reads: other parameters (e.g.
// statement_timeout=5s, search_path) go to the server as settings of every
// connection.
func splitPoolOptions(raw string) (string, poolOptions, error) {
	o := poolOptions{maxConns: DefaultMaxConns, maxIdle: DefaultMaxIdleConns}
	u, err := neturl.Parse(raw)
	if err != nil {
		return "", o, belay.Invalid("db", "the database URL is not valid")
	}
	q := u.Query()
	count := func(name string, dst *int, least int) error {
		v := q.Get(name)
		if !q.Has(name) {
			return nil
		}
		q.Del(name)
		n, err := strconv.Atoi(v)
		if err != nil || n < least {
			return belay.Invalid("db", "%s must be a whole number of at least %d, got %q", name, least, belay.Clip(v, 20))
		}
		*dst = n
		return nil
	}
	if err := count("pool_max_conns", &o.maxConns, 2); err != nil {
		return "", o, err
	}
	if err := count("pool_max_idle_conns", &o.maxIdle, 0); err != nil {
		return "", o, err
	}
	o.maxIdle = min(o.maxIdle, o.maxConns)
	if q.Has("pool_max_conn_lifetime") {
		v := q.Get("pool_max_conn_lifetime")
		q.Del("pool_max_conn_lifetime")
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return "", o, belay.Invalid("db", "pool_max_conn_lifetime must be a duration such as 30m, got %q", belay.Clip(v, 20))
		}
		o.lifetime = d
	}
	u.RawQuery = q.Encode()
	return u.String(), o, nil
}

// Open connects to the database at url (postgres://…) and migrates it to
// the newest schema. Several processes may open one database at once: the
// migration takes an advisory lock.
//
// Besides libpq's parameters, the URL's query may set the pool:
// pool_max_conns (default 32, at least 2: migrating holds one connection
// for its lock while it works on another), pool_max_idle_conns (default 8) and
// pool_max_conn_lifetime (a duration, default none); any server setting,
// such as statement_timeout=5s or lock_timeout=2s, applies to every
// connection.
func Open(ctx context.Context, url string) (*DB, error) {
	url, pool, err := splitPoolOptions(url)
	if err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(pool.maxConns)
	db.SetMaxIdleConns(pool.maxIdle)
	db.SetConnMaxLifetime(pool.lifetime)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, storageError("connect", err)
	}
	d := &DB{db: db, url: url, listeners: map[chan struct{}]struct{}{}}
	d.reader = reader{q: rebinder{db}}
	// A statement timeout set for belay's queries would cancel a migration
	// of a large table: migrations run without one.
	mcfg := cfg.Copy()
	mcfg.RuntimeParams["statement_timeout"] = "0"
	mdb := stdlib.OpenDB(*mcfg)
	mdb.SetMaxOpenConns(2)
	err = migrate(ctx, mdb)
	if cerr := mdb.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return d, nil
}

// migrate applies the embedded migrations to db under an advisory lock.
func migrate(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	defer conn.Close()
	const lockKey = 0x62656c6179 // "belay"
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		return fmt.Errorf("postgres: migration lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockKey)
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub)
	if err != nil {
		return fmt.Errorf("postgres: migrations: %w", err)
	}
	found, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("postgres: schema version: %w", err)
	}
	sources := p.ListSources()
	if err := store.CheckSchema("the PostgreSQL database", found, sources[len(sources)-1].Version); err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	return buildSearchDocs(ctx, db)
}

// Close closes the connections and stops listening.
func (d *DB) Close() error {
	d.mu.Lock()
	stop, done := d.stop, d.done
	d.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	return d.db.Close()
}

// Update runs fn in one transaction. It rolls back when fn fails, panics or
// exits the goroutine, and commits otherwise.
func (d *DB) Update(ctx context.Context, fn func(store.Tx) error) (err error) {
	sqlTx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return storageError("begin", err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = sqlTx.Rollback()
		}
	}()
	if err := fn(&tx{reader: reader{q: rebinder{sqlTx}, inTx: true}}); err != nil {
		return err
	}
	// Delivered to every listener when, and only if, the commit succeeds:
	// other instances hear of it without a round trip after the commit.
	if _, err := sqlTx.ExecContext(ctx, notifySQL); err != nil {
		return storageError("notify", err)
	}
	if err := sqlTx.Commit(); err != nil {
		return storageError("commit", err)
	}
	committed = true
	return nil
}

// storageError wraps a driver error with what was being done, as
// STORAGE_UNAVAILABLE when the database failed (see storageFault).
func storageError(what string, err error) error {
	var be *belay.Error
	if errors.As(err, &be) {
		return err
	}
	return fmt.Errorf("postgres: %s: %w", what, storageFault(err))
}

// execer is what a query runs on: the pool or a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// rebinder runs the queries, written with ? placeholders as for SQLite, with
// PostgreSQL's $1, $2….
type rebinder struct{ e execer }

func (r rebinder) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	res, err := r.e.ExecContext(ctx, rebind(query), args...)
	return res, storageFault(err)
}

func (r rebinder) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	rows, err := r.e.QueryContext(ctx, rebind(query), args...)
	return rows, storageFault(err)
}

func (r rebinder) QueryRowContext(ctx context.Context, query string, args ...any) row {
	return row{r.e.QueryRowContext(ctx, rebind(query), args...)}
}

// rebind turns ? placeholders outside quotes into $1, $2….
func rebind(q string) string {
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// notifySQL announces a commit, run as the last statement of every Update.
const notifySQL = "NOTIFY " + channel

// listenWait bounds how long the first Listen waits for the LISTEN
// connection to come up; a listener that could not wait polls meanwhile.
const listenWait = 2 * time.Second

// Listen returns a channel that receives after every committed Update on the
// database, by any process, while the returned cancel is not called. One
// connection per DB listens for all of them; the first Listen returns once
// it is up (or after listenWait), so no commit after Listen returns is missed
// for want of it.
func (d *DB) Listen() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	d.mu.Lock()
	d.listeners[ch] = struct{}{}
	if !d.listening {
		d.listening = true
		ctx, stop := context.WithCancel(context.Background())
		d.stop, d.done, d.heard = stop, make(chan struct{}), make(chan struct{})
		go d.listen(ctx, d.done, d.heard)
	}
	heard := d.heard
	d.mu.Unlock()
	t := time.NewTimer(listenWait)
	select {
	case <-heard:
	case <-t.C:
	}
	t.Stop()
	return ch, func() {
		d.mu.Lock()
		delete(d.listeners, ch)
		d.mu.Unlock()
	}
}

// listen holds one LISTEN connection and fans notifications out; a lost
// connection is reopened (listeners poll meanwhile, as they always may).
func (d *DB) listen(ctx context.Context, done, heard chan struct{}) {
	defer close(done)
	var once sync.Once
	for ctx.Err() == nil {
		conn, err := pgx.Connect(ctx, d.url)
		if err != nil {
			if !sleep(ctx) {
				return
			}
			continue
		}
		if _, err := conn.Exec(ctx, "LISTEN "+channel); err == nil {
			once.Do(func() { close(heard) })
			// Commits between the lost connection and this one were not
			// heard: wake every listener to read the log.
			d.wake()
			for {
				if _, err := conn.WaitForNotification(ctx); err != nil {
					break
				}
				d.wake()
			}
		}
		conn.Close(context.Background())
		if !sleep(ctx) {
			return
		}
	}
}

func (d *DB) wake() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for ch := range d.listeners {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// sleep waits a moment before a reconnect, reporting whether ctx is live.
func sleep(ctx context.Context) bool {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
