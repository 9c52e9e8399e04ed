//go:build linux && !belay_cgo

package sqlite

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// writeCalls returns how many write system calls the process has made.
func writeCalls(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no write counts: %v", err)
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("syscw: ")); ok {
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no syscw in /proc/self/io")
	return 0
}

// A commit writes its frames, one per page it changed, with one system call:
// SQLite's own VFS makes two per frame.
func TestWALCommitIsOneWrite(t *testing.T) {
	db := openWALPool(t, filepath.Join(t.TempDir(), "wal.db"))
	mustExec(t, db, "CREATE TABLE t (i INTEGER PRIMARY KEY, b BLOB NOT NULL, k TEXT NOT NULL, h INTEGER NOT NULL)")
	mustExec(t, db, "CREATE INDEX t_k ON t (k)")
	mustExec(t, db, "CREATE INDEX t_h ON t (h)")
	insert := func(i int) {
		mustExec(t, db, "INSERT INTO t (i, b, k, h) VALUES (?, ?, ?, ?)", i, rowBlob(i, 2000), strconv.Itoa(i*7919%1000), i*104729%997)
	}
	for i := range 20 {
		insert(i)
	}
	const commits = 200
	before := writeCalls(t)
	for i := range commits {
		insert(20 + i)
	}
	perCommit := float64(writeCalls(t)-before) / commits
	// Each commit changes the table's page and both indexes' pages: three
	// frames or more, six writes or more without gathering.
	if perCommit > 1.5 {
		t.Fatalf("%.2f write system calls per commit, want 1", perCommit)
	}
	t.Logf("%.2f write system calls per commit", perCommit)
}
