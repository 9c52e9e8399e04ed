package workspace

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRestoreTemporaryNamesAreNoUsersFiles: the temporary file a restore
// writes through is named afresh, never after the file: a file of the old
// fixed name (.<name>.belay-restore) is the user's and stays, and a file
// whose name leaves no room for a longer one is restored all the same.
func TestRestoreTemporaryNamesAreNoUsersFiles(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	long := strings.Repeat("n", 250)
	writeFiles(t, root, map[string]string{"a.txt": "a1\n", ".a.txt.belay-restore": "mine\n", long: "l1\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	want := treeState(t, root)
	writeFiles(t, root, map[string]string{"a.txt": "a2\n", long: "l2\n"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)

	res, err := m.Restore(context.Background(), root, s2.Commit, s1.Commit, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 2 {
		t.Errorf("changes %v, want a.txt and the long name", res.Changes)
	}
	diffStates(t, "after restore", want, treeState(t, root))
}

// TestRestoreKeepsPermissions: a file written back keeps the permission
// bits of the file it replaces (a private file stays private), with the
// executable bits the snapshot's mode says.
func TestRestoreKeepsPermissions(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{".env": "A=1\n", "tool": "v1\n"})
	chmod := func(name string, mode fs.FileMode) {
		t.Helper()
		if err := os.Chmod(filepath.Join(root, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	perm := func(name string) fs.FileMode {
		t.Helper()
		fi, err := os.Lstat(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm()
	}
	chmod(".env", 0o600)
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	writeFiles(t, root, map[string]string{".env": "A=2\n", "tool": "v2\n"})
	chmod(".env", 0o600)
	chmod("tool", 0o750)
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)

	if _, err := m.Restore(context.Background(), root, s2.Commit, s1.Commit, false); err != nil {
		t.Fatal(err)
	}
	if p := perm(".env"); p != 0o600 {
		t.Errorf(".env is %v after the restore, want -rw-------", p)
	}
	if p := perm("tool"); p != 0o640 {
		t.Errorf("tool is %v after the restore to 100644, want -rw-r-----", p)
	}
	if _, err := m.Restore(context.Background(), root, s1.Commit, s2.Commit, false); err != nil {
		t.Fatal(err)
	}
	if p := perm("tool"); p != 0o750 {
		t.Errorf("tool is %v after the restore to 100755, want -rwxr-x---", p)
	}
}

// TestRestoreReplacesEmptyDirectories: a directory in the way of a file a
// restore writes is removed when it holds no file at all, however deep (as
// git checkout replaces it); one holding a file stays, and the restore
// fails and is rolled back.
func TestRestoreReplacesEmptyDirectories(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a\n", "b": "f\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	want := treeState(t, root)
	removeFiles(t, root, "b")
	if err := os.MkdirAll(filepath.Join(root, "b", "x", "y"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "b", "z"), 0o755); err != nil {
		t.Fatal(err)
	}
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	if _, err := m.Restore(context.Background(), root, s2.Commit, s1.Commit, false); err != nil {
		t.Fatal(err)
	}
	diffStates(t, "after restore", want, treeState(t, root))

	removeFiles(t, root, "b")
	writeFiles(t, root, map[string]string{"b/x/y/.keep.pyc": ""})
	if err := os.WriteFile(filepath.Join(root, ".belayignore"), []byte("*.pyc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s3 := snapshot(t, m, root, "refs/belay/s/3", s2.Commit)
	before := treeState(t, root)
	_, err := m.Restore(context.Background(), root, s3.Commit, s1.Commit, false)
	wantCode(t, err, RestoreFailed)
	diffStates(t, "after a failed restore", before, treeState(t, root))
}
