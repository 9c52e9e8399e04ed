package sqlite

import (
	"database/sql"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/storetest"
	"github.com/pressly/goose/v3"
)

func mustOpen(t testing.TB, path string) *DB {
	t.Helper()
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return db
}

// migratedTo opens a pool of its own on a new database at path, migrated up
// to version, for a test of a later migration: it writes rows as the older
// schema had them, then migrates on with the provider it gets back. The pool
// closes when the test ends, if the test has not closed it before.
func migratedTo(t *testing.T, path string, version int64, pragmas ...string) (*sql.DB, *goose.Provider) {
	t.Helper()
	raw, err := openPool(path, pragmas, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	p, err := goose.NewProvider(goose.DialectSQLite3, raw, mustSub(migrations, "migrations"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(t.Context(), version); err != nil {
		t.Fatal(err)
	}
	return raw, p
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return mustOpen(t, filepath.Join(t.TempDir(), "belay.db"))
	})
}

func pragma(t *testing.T, pool pragmaQuerier, name string) string {
	t.Helper()
	var v string
	if err := pool.QueryRowContext(t.Context(), "PRAGMA "+name).Scan(&v); err != nil {
		t.Fatalf("PRAGMA %s: %v", name, err)
	}
	return v
}

// TestPragmas checks, like Open does, that the settings belay relies on took
// effect on the writer connection and the read pool. synchronous is NORMAL
// (1): an acknowledged write survives a power loss because Update syncs the
// write-ahead log itself (TestFullAcknowledgesAfterSync).
func TestPragmas(t *testing.T) {
	db := mustOpen(t, filepath.Join(t.TempDir(), "belay.db"))
	defer db.Close()
	for _, tc := range []struct {
		pool string
		db   pragmaQuerier
		want map[string]string
	}{
		{"write", db.wconn, map[string]string{"journal_mode": "wal", "foreign_keys": "1", "busy_timeout": "10000", "synchronous": "1", "query_only": "0", "wal_autocheckpoint": "4000"}},
		{"read", db.read, map[string]string{"journal_mode": "wal", "foreign_keys": "1", "busy_timeout": "10000", "synchronous": "1", "query_only": "1"}},
	} {
		for name, want := range tc.want {
			if got := pragma(t, tc.db, name); got != want {
				t.Errorf("%s pool: PRAGMA %s = %s, want %s", tc.pool, name, got, want)
			}
		}
	}
	if _, err := db.read.ExecContext(t.Context(), `INSERT INTO users (name, created_at) VALUES ('x', 1)`); err == nil {
		t.Error("the read pool accepted a write")
	}
}

// TestDurabilityRelaxed: the opt-in relaxed mode runs synchronous=NORMAL (1)
// on both pools like the default, but a write does not wait for a sync of the
// write-ahead log; a name that is not a mode is refused.
func TestDurabilityRelaxed(t *testing.T) {
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "belay.db"), WithDurability(Relaxed))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for pool, q := range map[string]pragmaQuerier{"write": db.wconn, "read": db.read} {
		if got := pragma(t, q, "synchronous"); got != "1" {
			t.Errorf("%s pool: PRAGMA synchronous = %s, want 1 (NORMAL)", pool, got)
		}
	}
	if db.wal != nil {
		t.Error("the relaxed mode syncs the write-ahead log on every write")
	}
	for _, tc := range []struct {
		in   string
		want Durability
	}{{"full", Full}, {"relaxed", Relaxed}, {"FULL", Full}} {
		var d Durability
		if err := d.Set(tc.in); err != nil || d != tc.want || d.String() != strings.ToLower(tc.in) {
			t.Errorf("Set(%q) = %v, %v (String %q); want %v", tc.in, err, d, d.String(), tc.want)
		}
	}
	var d Durability
	if err := d.Set("normal"); err == nil {
		t.Error(`Set("normal") succeeded; the modes are full and relaxed`)
	}
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	db := mustOpen(t, path)
	s := &belay.Session{ID: "0190c2a0-0000-7000-8000-000000000001", Status: belay.SessionRunning}
	err := db.Update(t.Context(), func(tx store.Tx) error {
		if err := tx.InsertSession(t.Context(), s); err != nil {
			return err
		}
		return tx.AppendEvent(t.Context(), &belay.Event{Type: belay.EventSessionCreated, SessionID: s.ID})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = mustOpen(t, path)
	defer db.Close()
	if _, err := db.GetSession(t.Context(), s.ID); err != nil {
		t.Errorf("GetSession after reopening: %v", err)
	}
	if n, err := db.LastEventSeq(t.Context()); err != nil || n != 1 {
		t.Errorf("LastEventSeq after reopening = %d, %v; want 1", n, err)
	}
}

func appliedMigrations(t *testing.T, db *DB) int {
	t.Helper()
	var n int
	if err := db.read.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM goose_db_version WHERE version_id > 0`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestMigrateIdempotent(t *testing.T) {
	files, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("embedded migrations: %v, %v", files, err)
	}
	path := filepath.Join(t.TempDir(), "belay.db")
	for i := range 3 {
		db := mustOpen(t, path)
		if n := appliedMigrations(t, db); n != len(files) {
			t.Errorf("open %d: %d migrations applied, want %d", i+1, n, len(files))
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpenCreatesDataDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "belay.db")
	db := mustOpen(t, path)
	defer db.Close()
	if db.Path() != path {
		t.Errorf("Path() = %s, want %s", db.Path(), path)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database file: %v", err)
	}
}

// TestOpenRejectsURIPath: '?' or '#' in a path would be read as DSN options
// and could switch off the pragmas belay relies on.
func TestOpenRejectsURIPath(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"belay.db?_pragma=foreign_keys(0)", "belay?.db", "belay#1.db"} {
		path := filepath.Join(dir, name)
		db, err := Open(t.Context(), path)
		if err == nil {
			db.Close()
			t.Errorf("Open(%q) succeeded", name)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("a rejected Open left %s behind", e.Name())
	}
}

// TestStatementCacheAfterClose: a read that reaches the statement cache
// after Close closed it (a stream still running while a server shuts down)
// runs on the pool, which refuses it, instead of storing into the closed
// cache (a panic).
func TestStatementCacheAfterClose(t *testing.T) {
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := newStmtCache(db.read)
	c.close()
	if st, err := c.get(t.Context(), "SELECT 1"); st != nil || err != nil {
		t.Fatalf("get after close = %v, %v; want no statement", st, err)
	}
}
