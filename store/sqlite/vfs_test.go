//go:build !belay_cgo

package sqlite

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/belayhq/belay/internal/testutil"
)

// openWALPool opens a pool on path through the belay-wal VFS, as Open does,
// with SQLite's automatic WAL checkpoint off: the log keeps every frame.
func openWALPool(t *testing.T, path string, pragmas ...string) *sql.DB {
	t.Helper()
	db, err := openPool(path, append([]string{"journal_mode(WAL)", "synchronous(1)", "wal_autocheckpoint(0)"}, pragmas...), false)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// openPlain opens path through SQLite's own VFS, as another program would.
func openPlain(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func mustExec(t *testing.T, db interface {
	Exec(string, ...any) (sql.Result, error)
}, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// row is the content of row i: distinct, and not compressible into fewer pages.
func rowBlob(i, size int) []byte {
	var b bytes.Buffer
	for n := 0; b.Len() < size; n++ {
		s := sha256.Sum256(fmt.Appendf(nil, "%d/%d", i, n))
		b.Write(s[:])
	}
	return b.Bytes()[:size]
}

// checkRows checks through SQLite's own VFS that the database is sound and
// holds exactly rows 0..n-1 of size bytes.
func checkRows(t *testing.T, path string, n, size int) {
	t.Helper()
	db := openPlain(t, path)
	var ok string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check: %q, %v", ok, err)
	}
	rows, err := db.Query("SELECT i, b FROM t ORDER BY i")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := 0
	for rows.Next() {
		var i int
		var b []byte
		if err := rows.Scan(&i, &b); err != nil {
			t.Fatal(err)
		}
		if i != got || !bytes.Equal(b, rowBlob(i, size)) {
			t.Fatalf("row %d: got row %d (%d bytes), not as written", got, i, len(b))
		}
		got++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Fatalf("%d rows, want %d", got, n)
	}
}

// A transaction rolled back after SQLite spilled its pages into the log, then
// commits small and large (past the gathering bound and SQLite's 128 KiB
// write limit): every commit is in the file as written, and a connection of
// SQLite's own VFS reads each one the moment it is committed.
func TestWALVFSGatheredFrames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wal.db")
	db := openWALPool(t, path)
	mustExec(t, db, "CREATE TABLE t (i INTEGER PRIMARY KEY, b BLOB NOT NULL)")
	other := openPlain(t, path)

	// A cache of 10 pages makes the transaction write its pages to the log
	// long before its end.
	mustExec(t, db, "PRAGMA cache_size = 10")

	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		mustExec(t, tx, "INSERT INTO t (i, b) VALUES (?, ?)", 1000+i, rowBlob(1000+i, 3000))
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, "PRAGMA cache_size = -65536")

	n := 0
	commit := func(rows, size int) {
		t.Helper()
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for range rows {
			mustExec(t, tx, "INSERT INTO t (i, b) VALUES (?, ?)", n, rowBlob(n, size))
			n++
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		var seen int
		if err := other.QueryRow("SELECT count(*) FROM t").Scan(&seen); err != nil {
			t.Fatal(err)
		}
		if seen != n {
			t.Fatalf("another connection sees %d rows after the commit, want %d", seen, n)
		}
	}
	for range 20 {
		commit(1, 3000)
	}
	commit(400, 3000) // about 1.6 MB of frames in one commit
	for range 20 {
		commit(1, 3000)
	}
	// Read from the log, then from the database file it is copied into.
	if size := testutil.FileSize(t, path+"-wal"); size < 1<<20 {
		t.Fatalf("the log has %d bytes: the commits did not go through it", size)
	}
	checkRows(t, path, n, 3000)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	checkRows(t, path, n, 3000)
}

// envVFSChild makes the test binary a child of TestWALVFSKilledMidCommit: it
// commits into the database the variable names until it is killed.
const envVFSChild = "BELAY_SQLITE_VFS_CHILD_DB"

// TestWALVFSChild is the child's body; alone it does nothing.
func TestWALVFSChild(t *testing.T) {
	path := os.Getenv(envVFSChild)
	if path == "" {
		t.Skip("the child of TestWALVFSKilledMidCommit")
	}
	db := openWALPool(t, path)
	var n int
	if err := db.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	for {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		// 1 to 40 rows of 3,000 bytes: 2 to 60 frames a commit, past the
		// 64 KiB pieces and into the 1 MiB bound of what is gathered.
		rows := 1 + n%40
		for i := range rows {
			mustExec(t, tx, "INSERT INTO t (i, b) VALUES (?, ?)", n+i, rowBlob(n+i, 3000))
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		n += rows
		fmt.Printf("committed %d\n", n)
	}
}

// A process killed while it commits through the VFS, its frames gathered or
// half written, leaves a sound database with every commit it finished: the
// log's checksums end it at the last whole commit, as with SQLite's own VFS.
func TestWALVFSKilledMidCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	path := filepath.Join(t.TempDir(), "wal.db")
	db := openWALPool(t, path)
	mustExec(t, db, "CREATE TABLE t (i INTEGER PRIMARY KEY, b BLOB NOT NULL)")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	committed := 0
	for round := range 3 {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestWALVFSChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), envVFSChild+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		var other strings.Builder
		commits := 0
		for lines.Scan() {
			v, ok := strings.CutPrefix(lines.Text(), "committed ")
			if !ok {
				fmt.Fprintln(&other, lines.Text())
				continue
			}
			if committed, err = strconv.Atoi(v); err != nil {
				t.Fatal(err)
			}
			if commits++; commits == 100+50*round {
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := cmd.Wait(); commits < 100+50*round {
			t.Fatalf("round %d: the child stopped after %d commits: %v\n%s", round, commits, err, other.String())
		}
		// The child may have finished commits after the last one it
		// printed; the rows are those of whole commits, each the next.
		db := openPlain(t, path)
		var n int
		if err := db.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n < committed {
			t.Fatalf("round %d: %d rows after the kill, but %d were committed", round, n, committed)
		}
		checkRows(t, path, n, 3000)
		committed = n
		db.Close()
	}
}
