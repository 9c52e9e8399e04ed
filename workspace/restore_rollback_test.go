package workspace

import (
	"context"
	"os"
	"path/filepath"
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
	if _, err := os.Stat(filepath.Join(root, "a", "x.txt")); !os.IsNotExist(err) {
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
