package workspace

import (
	"slices"
	"testing"
)

// TestSnapshotPathsIgnoredFileReplacingADirectory: a file that replaced a
// stored directory and that an ignore rule matches is not stored by a
// snapshot given its path, as by a full one (git add -A): the directory's
// files are deleted, the ignored file is left out.
func TestSnapshotPathsIgnoredFileReplacingADirectory(t *testing.T) {
	for _, paths := range [][]string{nil, {"a"}} {
		m := newManager(t)
		root := t.TempDir()
		writeFiles(t, root, map[string]string{"keep.txt": "k\n", "a/x.txt": "x\n"})
		s1 := snapshot(t, m, root, "refs/belay/s/1", "")
		// a/x.txt stays stored although the new rule matches it.
		writeFiles(t, root, map[string]string{".gitignore": "/a\n"})
		s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
		removeFiles(t, root, "a")
		writeFiles(t, root, map[string]string{"a": "an ignored file\n"})
		s3 := snapshot(t, m, root, "refs/belay/s/3", s2.Commit, paths...)
		if len(s3.Created) != 0 || len(s3.Modified) != 0 || !slices.Equal(s3.Deleted, []string{"a/x.txt"}) {
			t.Errorf("paths %q: created %q modified %q deleted %q, want only a/x.txt deleted", paths, s3.Created, s3.Modified, s3.Deleted)
		}
	}
}
