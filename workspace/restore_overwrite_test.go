package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestRestoreRefusesToOverwriteUnsavedFiles: a file on disk that the
// snapshot a restore starts from does not hold (ignored, say) is in no
// snapshot; a restore that would write over it refuses, as git checkout
// does, naming it and changing nothing.
func TestRestoreRefusesToOverwriteUnsavedFiles(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a\n", "cache.out": "old\n", "d/x.out": "old\n"})
	initUserRepo(t, root)
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	removeFiles(t, root, "cache.out", "d")
	writeFiles(t, root, map[string]string{"a.txt": "a2\n"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	f, err := os.OpenFile(filepath.Join(root, ".git", "info", "exclude"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("*.out\n")
	f.Close()
	writeFiles(t, root, map[string]string{"cache.out": "precious\n", "d/x.out": "precious\n"})
	s3 := snapshot(t, m, root, "refs/belay/s/3", s2.Commit)
	before := treeState(t, root)

	for _, dryRun := range []bool{true, false} {
		_, err := m.Restore(context.Background(), root, s3.Commit, s1.Commit, dryRun)
		wantCode(t, err, WouldOverwrite)
		var e *Error
		if errors.As(err, &e); !slices.Equal(e.Paths, []string{"cache.out", "d/x.out"}) {
			t.Errorf("dry run %v: the error names %q, want cache.out and d/x.out", dryRun, e.Paths)
		}
		diffStates(t, "after a refused restore", before, treeState(t, root))
	}
	// Without the files in the way the restore goes ahead.
	removeFiles(t, root, "cache.out", "d")
	if _, err := m.Restore(context.Background(), root, s3.Commit, s1.Commit, false); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreThroughALinkedDirectoryOverwritesNothing: a directory that has
// become a link to another in the work tree (old -> new) holds none of the
// paths below it: the restore replaces the link, writing nothing through
// it, so the files the link shows (new's, in the snapshot) are no reason to
// refuse.
func TestRestoreThroughALinkedDirectoryOverwritesNothing(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"old/a.go": "a\n", "old/b.go": "b\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	if err := os.Rename(filepath.Join(root, "old"), filepath.Join(root, "new")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("new", filepath.Join(root, "old")); err != nil {
		t.Fatal(err)
	}
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	if _, err := m.Restore(context.Background(), root, s2.Commit, s1.Commit, false); err != nil {
		t.Fatalf("restore across the link: %v", err)
	}
	if fi, err := os.Lstat(filepath.Join(root, "old")); err != nil || !fi.IsDir() {
		t.Errorf("old after the restore: %v, %v; want a directory again", fi, err)
	}
}
