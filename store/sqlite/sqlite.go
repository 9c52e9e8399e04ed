// Package sqlite is belay's embedded store: one SQLite file through the pure-Go
// modernc.org/sqlite driver, in WAL mode, with one writer connection and a pool
// of readers. Migrations are embedded and applied on open.
//
// Built with the tags belay_cgo and sqlite_fts5, it uses SQLite's C library
// through github.com/mattn/go-sqlite3 instead (cgo); both pass the store
// conformance suite. bench/checkpoints measured the C library at 10-20 %
// less CPU per checkpoint, too little to give up the pure-Go build.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/pressly/goose/v3"

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
	// wconn is the one writer connection, held for the database's lifetime
	// and used only by the writer goroutine.
	wconn      *sql.Conn
	wstmts     map[string]*sql.Stmt
	writes     chan *pendingWrite
	closed     chan struct{}
	writerDone chan struct{}
	closeOnce  sync.Once
	rcache     *stmtCache
	path       string
	// turn is a token held by whoever runs a transaction on the writer
	// connection: the writer goroutine for a batch, or a caller on the fast
	// path (see Update). A channel, not a mutex, so a goroutine waiting for
	// it counts as blocked for testing/synctest.
	turn chan struct{}
	// queued counts the Update calls on their way to the writer goroutine;
	// the fast path is taken only when there are none.
	queued atomic.Int64

	// The fields below belong, like wconn, to the goroutine that holds the
	// writer connection: the writer, or the caller whose fn runs.

	// txLost is set by SQLite's rollback hook: the batch's transaction is
	// gone, rolled back by the writer or by SQLite itself after a failed
	// statement (an I/O error, a full disk).
	txLost bool
	// commitAllowed lets the writer's own COMMIT through the commit hook,
	// which refuses every other commit on the writer connection: a statement
	// run after SQLite lost the transaction would otherwise commit on its own.
	commitAllowed bool
	// fault is the first storage fault a statement of the batch met.
	fault error
	// mayHaveWritten counts the statements run on the writer connection
	// that may have written (all but transaction control, SELECTs and
	// reading PRAGMAs): a fn of Batch that fails without one leaves nothing
	// to undo.
	mayHaveWritten uint64

	// backfill copies the log into the database file beside the writer.
	backfill *backfiller

	// heads caches sessions' heads for the writer connection's saves.
	heads headCache

	// wal syncs the write-ahead log before a write is acknowledged; nil in
	// the Relaxed mode.
	wal *walSync
}

// walCheckpointPages is the writer's wal_autocheckpoint: the commit that
// makes the log this many pages long copies it into the database file. A save
// rewrites the same pages again and again (the indexes' last leaves, the
// session's row, page 1), and a WAL checkpoint copies each page once, so a
// longer log copies less per save: 4,000 pages (16 MiB) instead of SQLite's
// 1,000 took 6 % off a relaxed save's CPU in bench/checkpoints; the pause of
// the commit that checkpoints grows with it.
const walCheckpointPages = 4000

// synchronousNormal is SQLite's synchronous=NORMAL: in WAL mode a commit does
// not wait for the disk. Full durability syncs the log itself (walSync).
const synchronousNormal = 1

var (
	_ store.Store         = (*DB)(nil)
	_ store.Batcher       = (*DB)(nil)
	_ store.StatePreparer = (*DB)(nil)
)

// Open opens (creating when needed) the database at path and migrates it to
// the newest schema. Several processes may open the same file at once. Unless
// an option says otherwise, a write is on disk when Update returns (Full).
func Open(ctx context.Context, path string, opts ...Option) (*DB, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlite: database path %q must not contain '?' or '#'", path)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if !o.durability.valid() {
		return nil, fmt.Errorf("sqlite: unknown durability %s", o.durability)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: create data dir: %w", err)
	}
	// busy_timeout first, so the pragmas after it already wait for a lock
	// held by another process instead of failing.
	pragmas := []string{fmt.Sprintf("busy_timeout(%d)", BusyTimeoutMillis), "journal_mode(WAL)",
		fmt.Sprintf("synchronous(%d)", synchronousNormal), "foreign_keys(1)", "temp_store(MEMORY)"}
	write, err := openPool(path, append(pragmas, fmt.Sprintf("wal_autocheckpoint(%d)", walCheckpointPages)), true)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// One writer: SQLite serialises writers anyway, and one connection makes
	// the wait happen in Go instead of in busy-retry loops.
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	db := &DB{write: write, path: path}
	if o.durability == Full {
		db.wal = newWALSync(path)
	}
	if err := db.migrate(ctx); err != nil {
		write.Close()
		return nil, err
	}
	read, err := openPool(path, append(pragmas, "query_only(1)", "cache_size(-32768)", "mmap_size(1073741824)"), false)
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	read.SetMaxOpenConns(n)
	read.SetMaxIdleConns(n)
	db.read = read
	db.rcache = newStmtCache(read)
	db.reader = reader{q: cachedDB{db: read, cache: db.rcache}, vectors: newVectorIndex()}
	if db.wconn, err = write.Conn(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: writer connection: %w", err)
	}
	db.wstmts = map[string]*sql.Stmt{}
	db.heads.heads = map[string]sessionHead{}
	if err := db.hook(); err != nil {
		db.Close()
		return nil, err
	}
	for _, q := range []pragmaQuerier{db.wconn, read} {
		if err := checkPragmas(ctx, q, synchronousNormal); err != nil {
			db.Close()
			return nil, err
		}
	}
	bf, err := openPool(path, pragmas, false)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	db.backfill = newBackfiller(bf)
	db.writes, db.closed, db.writerDone = make(chan *pendingWrite), make(chan struct{}), make(chan struct{})
	db.turn = make(chan struct{}, 1)
	go db.writer()
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
	found, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: schema version: %w", err)
	}
	sources := p.ListSources()
	if err := store.CheckSchema("the SQLite database "+db.path, found, sources[len(sources)-1].Version); err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("sqlite: migrate %s: %w", db.path, err)
	}
	return nil
}

// hook registers the writer connection's commit and rollback hooks, which
// keep a fn from writing outside the batch's transaction (see commitAllowed).
func (db *DB) hook() error {
	return db.wconn.Raw(func(dc any) error {
		commit := func() int32 {
			if db.commitAllowed {
				return 0
			}
			return 1 // turns the commit into a rollback
		}
		return setHooks(dc, commit, func() {
			db.txLost = true
			db.heads.clear()
		})
	})
}

// pragmaQuerier reads a pragma on a connection or a pool.
type pragmaQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// checkPragmas verifies that the settings belay relies on really took effect:
// SQLite ignores a pragma it cannot apply instead of failing.
func checkPragmas(ctx context.Context, conn pragmaQuerier, synchronous int) error {
	var mode string
	var fk, busy, syncMode int
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("sqlite: read journal_mode: %w", err)
	}
	if err := conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncMode); err != nil {
		return fmt.Errorf("sqlite: read synchronous: %w", err)
	}
	if err := conn.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
		return fmt.Errorf("sqlite: read foreign_keys: %w", err)
	}
	if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
		return fmt.Errorf("sqlite: read busy_timeout: %w", err)
	}
	if mode != "wal" || fk != 1 || busy != BusyTimeoutMillis || syncMode != synchronous {
		return fmt.Errorf("sqlite: pragmas did not take effect: journal_mode=%s foreign_keys=%d busy_timeout=%d synchronous=%d",
			mode, fk, busy, syncMode)
	}
	return nil
}

// Path returns the database file's path.
func (db *DB) Path() string { return db.path }

// Size returns the bytes of the database file with its write-ahead log and
// shared-memory index.
func (db *DB) Size(context.Context) (int64, error) {
	var total int64
	for _, suffix := range []string{"", "-wal", "-shm"} {
		fi, err := os.Stat(db.path + suffix)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("sqlite: size: %w", err)
		}
		total += fi.Size()
	}
	return total, nil
}

// Close closes both connection pools.
func (db *DB) Close() error {
	var errs []error
	if db.writes != nil {
		db.closeOnce.Do(func() {
			close(db.closed)
			<-db.writerDone
			// Wait for a caller on the fast path; the turn is never given back.
			db.turn <- struct{}{}
			errs = append(errs, db.backfill.close())
		})
	}
	if db.wal != nil {
		errs = append(errs, db.wal.close())
	}
	for _, st := range db.wstmts {
		errs = append(errs, st.Close())
	}
	if db.wconn != nil {
		errs = append(errs, db.wconn.Close())
	}
	if db.rcache != nil {
		db.rcache.close()
	}
	if db.read != nil {
		errs = append(errs, db.read.Close())
	}
	errs = append(errs, db.write.Close())
	return errors.Join(errs...)
}

// maxBatch bounds how many Update calls share one SQLite transaction.
const maxBatch = 256

// pendingWrite is one Update call waiting for the writer.
type pendingWrite struct {
	ctx context.Context
	fn  func(store.Tx) error
	// again says fn may run more than once (Batch).
	again bool
	// turn hands the transaction to the caller when its fn may run, or nil
	// when it must not run (its context ended while it waited, or the
	// batch's transaction could not begin or was lost).
	turn chan *tx
	// ran reports how fn ended back to the writer.
	ran chan fnOutcome
	// committed reports the outcome of the commit to a caller whose fn
	// succeeded (after a successful one, seq numbers the commit for
	// walSync), errRunAgain when the batch was undone and fn must run again,
	// or a *ranHere when fn ran on the writer's goroutine and failed.
	committed chan error
	seq       uint64
}

type fnOutcome struct {
	err    error
	failed bool // fn returned an error, panicked or called runtime.Goexit
	// panicked tells a panic of a fn run on the writer's goroutine.
	panicked *fnPanic
}

// fnPanic is the panic of a Batch fn run on the writer's goroutine, raised
// again in its caller: what fn panicked with, and the stack it panicked on,
// which the caller's own would not show.
type fnPanic struct {
	value any
	stack []byte
}

func (p *fnPanic) Error() string {
	return fmt.Sprintf("%v\n\n[the fn panicked on the writer's goroutine]\n%s", p.value, p.stack)
}

// Unwrap returns what fn panicked with, when it is an error.
func (p *fnPanic) Unwrap() error {
	err, _ := p.value.(error)
	return err
}

// ranHere is what the writer sends a caller of Batch whose fn it ran on its
// own goroutine and which failed: the error fn returned, or its panic, which
// continues in the caller.
type ranHere fnOutcome

func (r *ranHere) Error() string { return fmt.Sprint("sqlite: fn failed: ", r.err) }

// resume returns the error fn returned, or panics as fn did.
func (r *ranHere) resume() error {
	if r.panicked != nil {
		panic(r.panicked)
	}
	return r.err
}

// Update runs fn atomically and returns after its writes are committed and,
// in the Full mode, on disk (see walSync).
//
// Concurrent calls are committed together (group commit): the writer
// goroutine takes every call waiting, opens one BEGIN IMMEDIATE transaction,
// and lets each caller run its fn, on the caller's own goroutine, inside a
// SAVEPOINT of its own; then it commits once. A fn that fails, panics or
// calls runtime.Goexit is rolled back to its savepoint alone, and the panic
// continues in the caller. Calls run one at a time in arrival order and each
// sees the writes of those before it, exactly as if they had run one by one,
// but the cost of a commit is shared. When no other write is running or
// waiting, and no commit waits for a sync to begin (see walSync.ready), the
// caller runs its transaction itself (the fast path), sparing the hand-offs
// to and from the writer goroutine.
//
// A failure of the storage (a full disk, a read-only file system, an I/O
// error) is a STORAGE_UNAVAILABLE error. When SQLite rolls the transaction
// back on its own after one, every caller of the batch gets an error and
// nothing of the batch is kept, even if a fn ignores the error and goes on.
func (db *DB) Update(ctx context.Context, fn func(store.Tx) error) error {
	return db.update(ctx, fn, false)
}

// Batch runs fn as Update does, but fn may run more than once, each time
// after the writes of the runs before were undone: it must act only through
// its tx, and assign anew on each run whatever it reports. A batch of such
// calls runs without a savepoint for each: when one of them fails after it
// wrote, the whole transaction is rolled back and the others run again,
// each in a savepoint of its own (unless only one is left). One that fails
// before it writes costs the
// others nothing. (Savepoints cost a save at 16 writers a tenth of its time
// in the writer's serial section: two statements and the copies of the pages
// the batch's saves before it wrote, in the sub-journal.)
//
// fn may also run on another goroutine than the caller's, sparing the
// writer two hand-offs between goroutines, each a thread's wake-up: a panic
// in fn continues in the caller, but fn must not call runtime.Goexit (as
// t.FailNow does): the process panics.
func (db *DB) Batch(ctx context.Context, fn func(store.Tx) error) error {
	return db.update(ctx, fn, true)
}

// errRunAgain tells a caller of Batch whose fn succeeded that the batch's
// transaction was rolled back: fn runs again at its next turn.
var errRunAgain = errors.New("sqlite: run again")

func (db *DB) update(ctx context.Context, fn func(store.Tx) error, again bool) error {
	if db.wal != nil {
		if err := db.wal.failed(); err != nil {
			return err
		}
	}
	if db.queued.Load() == 0 && (db.wal == nil || !db.wal.ahead()) {
		select {
		case db.turn <- struct{}{}:
			return db.runAlone(ctx, fn)
		default:
		}
	}
	db.queued.Add(1)
	defer db.queued.Add(-1)
	w := &pendingWrite{ctx: ctx, fn: fn, again: again, turn: make(chan *tx), ran: make(chan fnOutcome, 1), committed: make(chan error, 1)}
	select {
	case db.writes <- w:
	case <-ctx.Done():
		return ctx.Err()
	case <-db.closed:
		return errClosed
	}
	// Once queued, wait for the turn even if ctx ends: the writer checks ctx
	// before handing it over, and leaving early could report a failure for a
	// write that then commits.
	return w.outcome(db)
}

// outcome runs fn when the writer hands the caller its turn, as often as the
// writer asks, and returns the outcome of the write.
func (w *pendingWrite) outcome(db *DB) error {
	for {
		var err error
		select {
		case t := <-w.turn:
			if t == nil {
				// fn may not run (again): the outcome follows, after a word
				// to run again this caller may not have read yet.
				err := <-w.committed
				if err == errRunAgain {
					err = <-w.committed
				}
				return storageFault(err)
			}
			if err := w.run(db, t); err != nil {
				return err
			}
			err = <-w.committed
		case err = <-w.committed: // fn ran on the writer's goroutine
		}
		if err == errRunAgain {
			continue
		}
		if r, ok := err.(*ranHere); ok {
			return r.resume()
		}
		if err != nil {
			return storageFault(err)
		}
		return db.synced(w.seq)
	}
}

// committed numbers a commit the caller just made on the writer connection,
// for synced; 0 in the Relaxed mode.
func (db *DB) committed() uint64 {
	if db.wal == nil {
		return 0
	}
	return db.wal.commit()
}

// synced returns once commit n is on disk (at once in the Relaxed mode).
func (db *DB) synced(n uint64) error {
	if db.wal == nil {
		return nil
	}
	return db.wal.wait(n)
}

// run calls fn and reports how it ended, also when it panics or exits the
// goroutine. When SQLite lost the transaction while fn ran, fn failed,
// whatever it returned.
func (w *pendingWrite) run(db *DB, t *tx) error {
	normal := false
	defer func() {
		if !normal {
			w.ran <- fnOutcome{failed: true}
		}
	}()
	err := w.fn(t)
	if db.txLost {
		err = db.lostError(err)
	}
	normal = true
	w.ran <- fnOutcome{err: err, failed: err != nil}
	return err
}

// runHere runs the fn of a Batch call on the writer's goroutine and
// recovers its panic (see Batch).
func (db *DB) runHere(w *pendingWrite, t *tx) (out fnOutcome) {
	normal := false
	defer func() {
		if normal {
			return
		}
		r := recover()
		if r == nil {
			panic("sqlite: a fn of Batch called runtime.Goexit on the writer's goroutine")
		}
		out = fnOutcome{failed: true, panicked: &fnPanic{value: r, stack: debug.Stack()}}
	}()
	err := w.fn(t)
	normal = true
	return fnOutcome{err: err, failed: err != nil}
}

var errClosed = fmt.Errorf("sqlite: database is closed")

// runAlone is Update's fast path: the caller holds the turn and runs fn in a
// transaction of its own, on its own goroutine. A panic or runtime.Goexit in
// fn rolls the transaction back and continues. The turn is given back before
// the wait for the disk.
func (db *DB) runAlone(ctx context.Context, fn func(store.Tx) error) error {
	n, err := db.runAloneTx(ctx, fn)
	if err != nil {
		return err
	}
	return db.synced(n)
}

// runAloneTx runs fn and commits, holding the turn, and numbers the commit.
func (db *DB) runAloneTx(ctx context.Context, fn func(store.Tx) error) (uint64, error) {
	defer func() { <-db.turn }()
	select {
	case <-db.closed:
		return 0, errClosed
	default:
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := db.control("BEGIN IMMEDIATE"); err != nil {
		return 0, storageFault(fmt.Errorf("sqlite: begin: %w", err))
	}
	db.txLost, db.fault = false, nil
	db.heads.begin()
	committing := false
	defer func() {
		if !committing {
			db.rollback()
		}
	}()
	err := fn(&tx{reader: reader{q: writerQuerier{db}}})
	if db.txLost {
		err = db.lostError(err)
	}
	if err != nil {
		return 0, err
	}
	committing = true
	if err := db.commit(); err != nil {
		return 0, storageFault(err)
	}
	return db.committed(), nil
}

// control runs a transaction control statement on the writer connection,
// prepared once.
func (db *DB) control(query string) error {
	_, err := writerQuerier{db}.exec(context.Background(), query)
	return err
}

// rollback rolls the writer connection's transaction back, and the head
// cache forgets what it saw in it. A failed rollback leaves nothing to do:
// SQLite rolled the transaction back itself.
func (db *DB) rollback() {
	db.heads.clear()
	db.control("ROLLBACK")
}

// commit commits the writer connection's transaction, or rolls it back when
// the commit fails.
func (db *DB) commit() error {
	db.commitAllowed = true
	err := db.control("COMMIT")
	db.commitAllowed = false
	if err != nil {
		db.rollback()
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	db.backfill.committed()
	return nil
}

// lostError is the error of a fn during which SQLite rolled the transaction
// back: the storage fault that made it do so, when a statement met one.
func (db *DB) lostError(fnErr error) error {
	switch {
	case db.fault != nil:
		return db.fault
	case fnErr != nil:
		return fmt.Errorf("sqlite: transaction rolled back: %w", storageFault(fnErr))
	}
	return errors.New("sqlite: transaction rolled back")
}

// noteFault returns err as a storage fault when it is one. On the writer
// connection (db not nil) it remembers the batch's first, which explains a
// transaction SQLite then rolls back.
func (db *DB) noteFault(err error) error {
	err = storageFault(err)
	if db != nil && db.fault == nil && store.IsFault(err) {
		db.fault = err
	}
	return err
}

// writer runs queued Updates in batches until the database closes.
func (db *DB) writer() {
	defer close(db.writerDone)
	for {
		var first *pendingWrite
		select {
		case first = <-db.writes:
		case <-db.closed:
			return
		}
		db.turn <- struct{}{}
		if db.wal != nil {
			db.wal.ready()
		}
		batch := []*pendingWrite{first}
	drain:
		for len(batch) < maxBatch {
			select {
			case w := <-db.writes:
				batch = append(batch, w)
			default:
				break drain
			}
		}
		db.runBatch(batch, false)
		<-db.turn
	}
}

// runBatch commits a batch of Updates in one transaction. Unless guarded,
// a batch of several Batch calls runs without savepoints (see Batch).
func (db *DB) runBatch(batch []*pendingWrite, guarded bool) {
	if err := db.control("BEGIN IMMEDIATE"); err != nil {
		err = fmt.Errorf("sqlite: begin: %w", err)
		for _, w := range batch {
			w.turn <- nil
			w.committed <- err
		}
		return
	}
	db.txLost, db.fault = false, nil
	db.heads.begin()
	t := &tx{reader: reader{q: writerQuerier{db}}}
	// A batch of one needs no savepoint: on failure the transaction rolls back.
	alone := len(batch) == 1
	bare := alone || !guarded && !slices.ContainsFunc(batch, func(w *pendingWrite) bool { return !w.again })
	var succeeded []*pendingWrite
	var broken error
	for i, w := range batch {
		if broken != nil {
			w.turn <- nil
			w.committed <- broken
			continue
		}
		ok, err := db.runOne(t, w, alone, bare)
		if err == errRunAgain {
			// w failed after it wrote: undo the transaction, and run the
			// others again, guarded.
			db.rollback()
			for _, w := range succeeded {
				w.committed <- errRunAgain
			}
			if rest := append(succeeded, batch[i+1:]...); len(rest) > 0 {
				db.runBatch(rest, true)
			}
			return
		}
		if ok {
			succeeded = append(succeeded, w)
		}
		// The transaction itself failed (SQLite rolled it back, e.g. on an
		// I/O error): nothing of the batch can commit.
		broken = err
	}
	if alone && len(succeeded) == 0 && broken == nil {
		db.rollback()
		return
	}
	err := broken
	if err == nil {
		err = db.commit()
	} else {
		db.rollback()
	}
	var n uint64
	if err == nil && len(succeeded) > 0 {
		n = db.committed()
	}
	for _, w := range succeeded {
		w.seq = n
		w.committed <- err
	}
}

// runOne lets one caller run its fn inside a savepoint (none when it is alone
// in its batch, or bare) and reports whether it succeeded; on failure its
// writes are rolled back to the savepoint. errRunAgain means it failed after
// it wrote, bare: only undoing the transaction undoes it. Another non-nil
// error means the whole transaction is lost.
func (db *DB) runOne(t *tx, w *pendingWrite, alone, bare bool) (bool, error) {
	if err := w.ctx.Err(); err != nil {
		w.turn <- nil
		w.committed <- err
		return false, nil
	}
	if !bare {
		if err := db.control("SAVEPOINT w"); err != nil {
			err = fmt.Errorf("sqlite: savepoint: %w", err)
			w.turn <- nil
			w.committed <- err
			return false, err
		}
	}
	before := db.mayHaveWritten
	here := bare && w.again
	var out fnOutcome
	if here {
		out = db.runHere(w, t)
	} else {
		w.turn <- t
		out = <-w.ran
	}
	if db.txLost {
		out.failed, out.err = true, db.lostError(out.err)
	}
	if here && out.failed {
		r := ranHere(out)
		w.committed <- &r
	}
	if db.txLost {
		return false, out.err
	}
	if alone {
		return !out.failed, nil
	}
	if bare {
		if out.failed {
			db.heads.clear()
			if db.mayHaveWritten != before {
				return false, errRunAgain
			}
		}
		return !out.failed, nil
	}
	if out.failed {
		db.heads.clear()
		if err := db.control("ROLLBACK TO w"); err != nil {
			return false, fmt.Errorf("sqlite: rollback to savepoint: %w", err)
		}
	}
	if err := db.control("RELEASE w"); err != nil {
		// The transaction is gone: a fn that succeeded still waits for the
		// batch's (failed) outcome, so it counts as succeeded here.
		return !out.failed, fmt.Errorf("sqlite: release savepoint: %w", err)
	}
	return !out.failed, nil
}

// writerQuerier runs statements on the writer connection, prepared once per
// query text. Only the holder of the writer's turn uses it: the writer
// goroutine, or the caller whose fn runs. Its statements ignore the
// caller's cancellation: interrupting one would roll back the whole shared
// transaction, other callers' writes too; a caller's context is checked
// before its turn instead.
type writerQuerier struct{ db *DB }

// stmt returns the cached statement for query, or nil when the cache is full.
func (w writerQuerier) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := w.db.wstmts[query]; ok {
		return st, nil
	}
	if len(w.db.wstmts) >= maxCachedStatements {
		return nil, nil
	}
	st, err := w.db.wconn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	w.db.wstmts[query] = st
	return st, nil
}

func (w writerQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	w.db.mayHaveWritten++
	return w.exec(ctx, query, args...)
}

func (w writerQuerier) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx = context.WithoutCancel(ctx)
	st, err := w.stmt(ctx, query)
	var res sql.Result
	if err != nil || st == nil {
		res, err = w.db.wconn.ExecContext(ctx, query, args...)
	} else {
		res, err = st.ExecContext(ctx, args...)
	}
	return res, w.db.noteFault(err)
}

func (w writerQuerier) QueryContext(ctx context.Context, query string, args ...any) (*rows, error) {
	w.mayWrite(query)
	ctx = context.WithoutCancel(ctx)
	st, err := w.stmt(ctx, query)
	var rs *sql.Rows
	if err != nil || st == nil {
		rs, err = w.db.wconn.QueryContext(ctx, query, args...)
	} else {
		rs, err = st.QueryContext(ctx, args...)
	}
	if err != nil {
		return nil, w.db.noteFault(err)
	}
	return &rows{Rows: rs, db: w.db}, nil
}

func (w writerQuerier) QueryRowContext(ctx context.Context, query string, args ...any) scanner {
	w.mayWrite(query)
	ctx = context.WithoutCancel(ctx)
	st, err := w.stmt(ctx, query)
	if err != nil || st == nil {
		return row{w.db.wconn.QueryRowContext(ctx, query, args...), w.db}
	}
	return row{st.QueryRowContext(ctx, args...), w.db}
}

// mayWrite counts a query among the writes unless it is a SELECT or a PRAGMA
// that only reads.
func (w writerQuerier) mayWrite(query string) {
	query = strings.TrimLeft(query, " \t\n")
	if !strings.HasPrefix(query, "SELECT") && (!strings.HasPrefix(query, "PRAGMA") || strings.Contains(query, "=")) {
		w.db.mayHaveWritten++
	}
}
