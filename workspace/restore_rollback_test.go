package workspace

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestRestoreRollbackRemovesTheDirectoriesItMade: a restore that made a
// directory where a file was (a's file became a/x.txt) and then fails (a
// directory holding an ignored file is in the way of z) is rolled back:
// the file is back in place of the directory the restore made, and the
// next snapshot works and sees the work tree as before.
func TestRestoreRollbackRemovesTheDirectoriesItMade(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{".gitignore": "*.log\n", "a/x.txt": "x\n", "z": "z\n"})
	target := snapshot(t, m, root, "refs/belay/s/1", "")
	removeFiles(t, root, "a", "z")
	writeFiles(t, root, map[string]string{"a": "a is a file\n", "z/in.txt": "in\n"})
	from := snapshot(t, m, root, "refs/belay/s/2", target.Commit)
	writeFiles(t, root, map[string]string{"z/ignored.log": "never snapshotted\n"})
	before := treeState(t, root)

	_, err := m.Restore(context.Background(), root, from.Commit, target.Commit, false)
	wantCode(t, err, RestoreFailed)
	diffStates(t, "after the failed restore", before, treeState(t, root))
	// a is a file again, so looking up a/x.txt fails with "not a directory".
	if _, err := os.Stat(filepath.Join(root, "a", "x.txt")); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("a/x.txt: %v", err)
	}
	snap, err := m.Snapshot(context.Background(), SnapshotRequest{Root: root, Ref: "refs/belay/s/3", Parent: from.Commit, Message: "after\n"})
	if err != nil {
		t.Fatalf("snapshot after the failed restore: %v", err)
	}
	if snap.Tree != from.Tree {
		t.Errorf("snapshot after the failed restore: created %q modified %q deleted %q", snap.Created, snap.Modified, snap.Deleted)
	}
}

// TestRestoreRollbackKeepsOtherFilesInItsDirectories: a failed restore that
// made directories several levels deep where a file was (a became
// a/b/c/x.txt) and in which someone then put a file of their own cannot
// write a back: it removes what it wrote and the directories it made that
// are empty, keeps the other file, puts back every other path, says which
// path it could not put back, and leaves nothing for later snapshots and
// restores to retry: a restore to the snapshot before it works.
func TestRestoreRollbackKeepsOtherFilesInItsDirectories(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a/b/c/x.txt": "x\n", "z": "z\n"})
	target := snapshot(t, m, root, "refs/belay/s/1", "")
	removeFiles(t, root, "a", "z")
	writeFiles(t, root, map[string]string{"a": "a is a file\n", "z/in.txt": "in\n"})
	from := snapshot(t, m, root, "refs/belay/s/2", target.Commit)
	want := treeState(t, root)

	m.beforeWrite = func(path string) error {
		if path == "z" {
			writeFiles(t, root, map[string]string{"a/b/theirs.txt": "not the restore's\n"})
			return errors.New("injected fault")
		}
		return nil
	}
	_, err := m.Restore(context.Background(), root, from.Commit, target.Commit, false)
	m.beforeWrite = nil
	wantCode(t, err, RestoreFailed)
	if err == nil || !strings.Contains(err.Error(), "write a back") {
		t.Errorf("the error does not name a: %v", err)
	}
	want["a"], want["a/b"] = "dir", "dir"
	want["a/b/theirs.txt"] = "file 644 not the restore's\n"
	diffStates(t, "after the failed restore", want, treeState(t, root))
	if _, err := os.Stat(filepath.Join(root, "a", "b", "c")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a/b/c, made by the restore, was not removed: %v", err)
	}

	snap, err := m.Snapshot(context.Background(), SnapshotRequest{Root: root, Ref: "refs/belay/s/3", Parent: from.Commit, Message: "after\n"})
	if err != nil {
		t.Fatalf("snapshot after the failed restore: %v", err)
	}
	if !slices.Equal(snap.Created, []string{"a/b/theirs.txt"}) || !slices.Equal(snap.Deleted, []string{"a"}) || len(snap.Modified) != 0 {
		t.Errorf("snapshot after the failed restore: created %q modified %q deleted %q", snap.Created, snap.Modified, snap.Deleted)
	}
	if _, err := m.Restore(context.Background(), root, snap.Commit, from.Commit, false); err != nil {
		t.Fatalf("restore after the failed restore: %v", err)
	}
	delete(want, "a/b")
	delete(want, "a/b/theirs.txt")
	want["a"] = "file 644 a is a file\n"
	diffStates(t, "after the next restore", want, treeState(t, root))
}

// TestRestoreCrashedThenFailedRollsBackItsDirectories: a restore dies after
// making a directory where a file was; the next snapshot finishes it, which
// fails (a directory holding an ignored file is now in the way of z), and
// rolls it back, removing the directory the dead process made.
func TestRestoreCrashedThenFailedRollsBackItsDirectories(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{".gitignore": "*.log\n", "a/b/x.txt": "x\n", "z": "z\n"})
	target := snapshot(t, m, root, "refs/belay/s/1", "")
	removeFiles(t, root, "a", "z")
	writeFiles(t, root, map[string]string{"a": "a is a file\n", "z/in.txt": "in\n"})
	from := snapshot(t, m, root, "refs/belay/s/2", target.Commit)
	want := treeState(t, root)
	want["z/ignored.log"] = "file 644 never snapshotted\n"

	m.beforeWrite = func(path string) error {
		if path == "z" {
			runtime.Goexit()
		}
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Restore(context.Background(), root, from.Commit, target.Commit, false)
		t.Error("the restore was not interrupted")
	}()
	<-done
	m.beforeWrite = nil
	if _, err := os.Stat(filepath.Join(root, "a", "b", "x.txt")); err != nil {
		t.Fatalf("the restore died before writing a/b/x.txt: %v", err)
	}
	writeFiles(t, root, map[string]string{"z/ignored.log": "never snapshotted\n"})

	snap, err := m.Snapshot(context.Background(), SnapshotRequest{Root: root, Ref: "refs/belay/s/3", Parent: from.Commit, Message: "after\n"})
	if err != nil {
		t.Fatalf("snapshot after the crashed restore: %v", err)
	}
	diffStates(t, "after the snapshot", want, treeState(t, root))
	if snap.Tree != from.Tree {
		t.Errorf("snapshot after the crashed restore: created %q modified %q deleted %q", snap.Created, snap.Modified, snap.Deleted)
	}
}
