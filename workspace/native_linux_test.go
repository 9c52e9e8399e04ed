package workspace

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

// countingManager returns a Manager whose git runs through a wrapper that
// counts its processes, and the count so far.
func countingManager(t *testing.T) (*Manager, func() int) {
	t.Helper()
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	counter := filepath.Join(dir, "count")
	wrapper := filepath.Join(dir, "git")
	script := fmt.Sprintf("#!/bin/sh\necho \"$*\" >> '%s'\nexec '%s' \"$@\"\n", counter, gitPath)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{DataDir: filepath.Join(dir, "data"), Git: wrapper})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	return m, func() int {
		data, _ := os.ReadFile(counter)
		n := bytes.Count(data, []byte("\n"))
		if n > seen {
			t.Logf("git ran: %q", bytes.Split(data, []byte("\n"))[seen:n])
		}
		defer func() { seen = n }()
		return n - seen
	}
}

// TestNativeSnapshotRunsNoGit: once the first snapshot has written the
// private index, a snapshot of edits, deletions and new files runs no git
// process but the one check-ignore for names never seen, and records what
// git would.
func TestNativeSnapshotRunsNoGit(t *testing.T) {
	m, gitRuns := countingManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"a.txt": "a\n", "src/b.go": "package b\n", "src/deep/c.go": "package c\n",
		".gitignore": "*.log\n", "keep.log": "ignored\n",
	})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	gitRuns()

	writeFiles(t, root, map[string]string{"a.txt": "a2\n", "src/new.go": "package b // new\n", "debug.log": "x\n"})
	removeFiles(t, root, "src/deep/c.go")
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	if n := gitRuns(); n != 1 {
		t.Errorf("a snapshot with two new names ran %d git processes, want 1 (check-ignore)", n)
	}
	if want := gitTree(t, m, root); s2.Tree != want {
		t.Errorf("tree %s, git records %s", s2.Tree, want)
	}
	if got := fmt.Sprint(s2.Created, s2.Modified, s2.Deleted); got != "[src/new.go] [a.txt] [src/deep/c.go]" {
		t.Errorf("changes %s", got)
	}
	gitRuns()

	// The ignored names are known now; an edit costs no git process.
	writeFiles(t, root, map[string]string{"src/b.go": "package b // 2\n", "debug.log": "y\n"})
	s3 := snapshot(t, m, root, "refs/belay/s/3", s2.Commit)
	if n := gitRuns(); n != 0 {
		t.Errorf("a snapshot of one edit ran %d git processes, want 0", n)
	}
	if want := gitTree(t, m, root); s3.Tree != want {
		t.Errorf("tree %s, git records %s", s3.Tree, want)
	}

	// A changed .gitignore makes every untracked name count again.
	writeFiles(t, root, map[string]string{".gitignore": "keep.log\n"})
	s4 := snapshot(t, m, root, "refs/belay/s/4", s3.Commit)
	if want := gitTree(t, m, root); s4.Tree != want {
		t.Errorf("after .gitignore changed: tree %s, git records %s", s4.Tree, want)
	}
	if got := fmt.Sprint(s4.Created); got != "[debug.log]" {
		t.Errorf("created %s, want [debug.log]", got)
	}
	gitRuns()
	// Nothing changed: no git, the same tree.
	s5 := snapshot(t, m, root, "refs/belay/s/5", s4.Commit)
	if n := gitRuns(); n != 0 || s5.Tree != s4.Tree {
		t.Errorf("an unchanged tree: %d git processes, tree %s (was %s)", n, s5.Tree, s4.Tree)
	}
	if out := shadowGit(t, m, root, "fsck", "--strict", "--no-dangling"); strings.TrimSpace(out) != "" {
		t.Errorf("git fsck: %s", out)
	}
}

// TestNativeIndexReadByGit: the index a snapshot writes is the one git
// would write: git sees no change in the work tree, and its tree is the
// snapshot's.
func TestNativeIndexReadByGit(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a\n", "d/e/f.txt": "f\n", "d/g.txt": "g\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	writeFiles(t, root, map[string]string{"d/e/f.txt": "f2\n", "d/h/i.txt": "i\n"})
	if err := os.Symlink("a.txt", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "a.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	if got := strings.TrimSpace(shadowGit(t, m, root, "write-tree")); got != s2.Tree {
		t.Errorf("git reads the index as tree %s, the snapshot is %s", got, s2.Tree)
	}
	if out := shadowGit(t, m, root, "diff", "--name-only"); out != "" {
		t.Errorf("git sees changes the index does not hold: %q", out)
	}
	if out := shadowGit(t, m, root, "ls-files", "-s", "link", "a.txt"); !strings.Contains(out, "120000") || !strings.Contains(out, "100755") {
		t.Errorf("modes: %s", out)
	}
}

// TestNativePacksRolledUp: each snapshot's objects go in a pack of their
// own, and many packs are rolled up.
func TestNativePacksRolledUp(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "0\n"})
	parent := snapshot(t, m, root, "refs/belay/s/0", "").Commit
	for i := 1; i <= maxPacks+2; i++ {
		writeFiles(t, root, map[string]string{"a.txt": fmt.Sprintf("%d\n", i)})
		parent = snapshot(t, m, root, fmt.Sprintf("refs/belay/s/%d", i), parent).Commit
	}
	s, err := m.workspaceFor(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	packs, _ := filepath.Glob(filepath.Join(s.repo, "objects", "pack", "*.pack"))
	if len(packs) == 0 || len(packs) > maxPacks {
		t.Errorf("%d packs after %d snapshots", len(packs), maxPacks+2)
	}
	if out := shadowGit(t, m, root, "fsck", "--strict", "--no-dangling"); strings.TrimSpace(out) != "" {
		t.Errorf("git fsck: %s", out)
	}
	if got := shadowGit(t, m, root, "show", parent+":a.txt"); got != fmt.Sprintf("%d\n", maxPacks+2) {
		t.Errorf("last snapshot holds %q", got)
	}
}

// TestNativeDamagedIndexRebuilt: an index cut short (a crash before its
// write-out reached the disk) is rebuilt by the next snapshot, which records
// the work tree as git would.
func TestNativeDamagedIndexRebuilt(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a\n", "d/b.txt": "b\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	writeFiles(t, root, map[string]string{"a.txt": "a2\n"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	s, err := m.workspaceFor(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(s.index)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.index, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, root, map[string]string{"d/c.txt": "c\n"})
	s3 := snapshot(t, m, root, "refs/belay/s/3", s2.Commit)
	if want := gitTree(t, m, root); s3.Tree != want {
		t.Errorf("tree %s, git records %s", s3.Tree, want)
	}
	if got := fmt.Sprint(s3.Created, s3.Modified, s3.Deleted); got != "[d/c.txt] [] []" {
		t.Errorf("changes %s", got)
	}
}

// TestNativeIndexWrittenBehind: with a watcher, a snapshot leaves the index
// file to be written later; whatever reads it first (git, another process)
// gets it current, the watcher keeps vouching across the write, and Close
// writes what is left.
func TestNativeIndexWrittenBehind(t *testing.T) {
	f := newWatchFixture(t, map[string]string{"a.txt": "a\n", "d/b.txt": "b\n"})
	f.snap("first", false)
	f.parent = snapshot(t, f.m, f.root, "refs/belay/s/settle", f.parent).Commit
	s, err := f.m.workspaceFor(t.Context(), f.root)
	if err != nil {
		t.Fatal(err)
	}
	before := readFileID(s.index)
	writeFiles(t, f.root, map[string]string{"a.txt": "a2\n"})
	s3 := f.snap("an edit", true)
	if readFileID(s.index) != before {
		t.Fatal("the index was written by the snapshot itself")
	}
	// git run under the lock (as every reader of the index in the package
	// is) gets the index written first.
	unlock, err := f.m.Lock(t.Context(), f.root)
	if err != nil {
		t.Fatal(err)
	}
	locked, err := f.m.lockedWorkspace(t.Context(), f.root, "test")
	if err != nil {
		t.Fatal(err)
	}
	out, err := f.m.run(t.Context(), locked, runOpts{}, "write-tree")
	unlock()
	if err != nil || strings.TrimSpace(string(out)) != s3.Tree {
		t.Fatalf("under the lock git reads the index as %s (%v), the snapshot is %s", out, err, s3.Tree)
	}
	if readFileID(s.index) == before {
		t.Fatal("git ran on the index before it was written")
	}
	writeFiles(t, f.root, map[string]string{"d/b.txt": "b2\n"})
	s4 := f.snap("after the write behind", true)
	if want := gitTree(t, f.m, f.root); s4.Tree != want {
		t.Errorf("tree %s, git records %s", s4.Tree, want)
	}
	// Another Manager (another process) snapshots meanwhile: the watched
	// Manager's state is stale, its watcher stops vouching, and nothing is
	// missed.
	other, err := New(Options{DataDir: f.m.dataDir})
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, f.root, map[string]string{"c.txt": "c\n"})
	snapshot(t, other, f.root, "refs/belay/other/1", s4.Commit)
	writeFiles(t, f.root, map[string]string{"a.txt": "a3\n"})
	s5 := f.snap("after another process", false)
	if want := gitTree(t, f.m, f.root); s5.Tree != want {
		t.Errorf("tree %s, git records %s", s5.Tree, want)
	}
	writeFiles(t, f.root, map[string]string{"d/e.txt": "e\n"})
	s6 := f.snap("vouched again", true)
	mid := readFileID(s.index)
	if err := f.m.Close(); err != nil {
		t.Fatal(err)
	}
	if readFileID(s.index) == mid {
		t.Fatal("Close left the index unwritten")
	}
	if got := strings.TrimSpace(shadowGit(t, f.m, f.root, "write-tree")); got != s6.Tree {
		t.Errorf("after Close the index holds %s, the snapshot is %s", got, s6.Tree)
	}
}

// TestNativeLargeChangeStoredLoose: a snapshot storing more than a pack is
// held in memory for writes loose objects, which git reads as well.
func TestNativeLargeChangeStoredLoose(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	big := bytes.Repeat([]byte("0123456789abcdef"), (maxPackedBytes+1<<20)/16)
	if err := os.WriteFile(filepath.Join(root, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	if want := gitTree(t, m, root); s2.Tree != want {
		t.Errorf("tree %s, git records %s", s2.Tree, want)
	}
	id := strings.TrimSpace(shadowGit(t, m, root, "rev-parse", s2.Commit+":big.bin"))
	s, err := m.workspaceFor(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.repo, "objects", id[:2], id[2:])); err != nil {
		t.Errorf("the large file is not a loose object: %v", err)
	}
	if out := shadowGit(t, m, root, "fsck", "--strict", "--no-dangling"); strings.TrimSpace(out) != "" {
		t.Errorf("git fsck: %s", out)
	}
}

// manyNewFiles snapshots a workspace of one file, then adds more files than
// a snapshot packs (so the next one writes loose objects).
func manyNewFiles(t *testing.T) (*Manager, string, *Snapshot) {
	t.Helper()
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	files := map[string]string{}
	for i := range maxPackedObjects + 1000 {
		files[fmt.Sprintf("d%d/f%d.txt", i%50, i)] = fmt.Sprintf("file %d\n", i)
	}
	writeFiles(t, root, files)
	return m, root, s1
}

// withFileLimit runs fn with the process's open-file limit at extra more
// descriptors than it holds open now, and puts the limit back after.
func withFileLimit(t *testing.T, extra int, fn func()) {
	t.Helper()
	open, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
		t.Fatal(err)
	}
	low := was
	low.Cur = uint64(len(open) + extra)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
			t.Error(err)
		}
	}()
	fn()
}

// TestNativeManyLooseObjectsStayWithinTheOpenFileLimit: a snapshot writing
// thousands of loose objects holds a bounded number of files open, so it
// succeeds under a low open-file limit.
func TestNativeManyLooseObjectsStayWithinTheOpenFileLimit(t *testing.T) {
	m, root, s1 := manyNewFiles(t)
	// Room for the files the snapshot holds open at once, and a margin for
	// descriptors the test binary's other goroutines may open meanwhile:
	// far below the thousands an unbounded writer would hold.
	var s2 *Snapshot
	withFileLimit(t, 2*maxOpenObjects+128, func() { s2 = snapshot(t, m, root, "refs/belay/s/2", s1.Commit) })
	if want := gitTree(t, m, root); s2.Tree != want {
		t.Errorf("tree %s, git records %s", s2.Tree, want)
	}
	if out := shadowGit(t, m, root, "fsck", "--strict", "--no-dangling"); strings.TrimSpace(out) != "" {
		t.Errorf("git fsck: %s", out)
	}
}

// TestNativeLooseObjectFailureFailsTheSnapshot: when objects renamed into
// place early fail to get there, the snapshot fails; it does not commit a
// tree naming them.
func TestNativeLooseObjectFailureFailsTheSnapshot(t *testing.T) {
	m, root, s1 := manyNewFiles(t)
	var renames atomic.Int64
	renameObject = func(from, to string) error {
		if renames.Add(1) == maxOpenObjects+10 {
			return errors.New("injected failure")
		}
		return os.Rename(from, to)
	}
	t.Cleanup(func() { renameObject = os.Rename })
	_, err := m.Snapshot(t.Context(), SnapshotRequest{Root: root, Ref: "refs/belay/s/2", Parent: s1.Commit})
	if err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("snapshot with a failed object = %v, want the failure", err)
	}
	renameObject = os.Rename
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	if want := gitTree(t, m, root); s2.Tree != want {
		t.Errorf("tree %s, git records %s", s2.Tree, want)
	}
	if out := shadowGit(t, m, root, "fsck", "--strict", "--no-dangling"); strings.TrimSpace(out) != "" {
		t.Errorf("git fsck: %s", out)
	}
}

// TestNativeOutOfFileDescriptorsFailsTheSnapshot: a snapshot that runs out
// of file descriptors (the process's fault, not a file's) fails; it never
// succeeds leaving the files it could not open out, as skipped. Whatever the
// limit, a snapshot that succeeds is whole.
func TestNativeOutOfFileDescriptorsFailsTheSnapshot(t *testing.T) {
	for _, extra := range []int{maxOpenObjects, maxOpenObjects + maxOpenObjects/4} {
		m, root, s1 := manyNewFiles(t)
		var snap *Snapshot
		var err error
		withFileLimit(t, extra, func() {
			snap, err = m.Snapshot(t.Context(), SnapshotRequest{Root: root, Ref: "refs/belay/s/2", Parent: s1.Commit})
		})
		if err != nil {
			continue
		}
		if len(snap.Skipped) > 0 {
			t.Errorf("%d descriptors more: the snapshot succeeded leaving %d files out, the first %+v", extra, len(snap.Skipped), snap.Skipped[0])
		}
		if want := gitTree(t, m, root); snap.Tree != want {
			t.Errorf("%d descriptors more: tree %s, git records %s", extra, snap.Tree, want)
		}
	}
}
