package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// outsideDir returns a directory that is not below the test's temporary
// directory, which the tests use as the allowed root.
func outsideDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "belay-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	dir, err = filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestInsideRootsResolvesSymlinks(t *testing.T) {
	base := t.TempDir()
	rootDir := filepath.Join(base, "roots")
	outside := outsideDir(t)
	writeFiles(t, rootDir, map[string]string{
		"project/a.txt": "a",
		"out":           "->" + outside,
		"in":            "->project",
	})
	// A root named through a symlink is compared by its real path too.
	linkToRoots := filepath.Join(base, "roots-link")
	if err := os.Symlink(rootDir, linkToRoots); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path  string
		roots []string
		want  bool
	}{
		{filepath.Join(rootDir, "project"), []string{rootDir}, true},
		{rootDir, []string{rootDir}, true},
		{filepath.Join(rootDir, "in"), []string{rootDir}, true},
		{filepath.Join(rootDir, "out"), []string{rootDir}, false},
		{filepath.Join(rootDir, "out", "deeper"), []string{rootDir}, false},
		{filepath.Join(rootDir, "project", "not-yet"), []string{rootDir}, true},
		{filepath.Join(rootDir, "project"), []string{linkToRoots}, true},
		{filepath.Join(linkToRoots, "out"), []string{linkToRoots}, false},
		{filepath.Join(rootDir, "..", "roots", "project"), []string{rootDir}, true},
		{rootDir + "-other", []string{rootDir}, false},
		{outside, []string{rootDir}, false},
		{filepath.Join(rootDir, "project"), nil, false},
	} {
		if got := InsideRoots(c.path, c.roots); got != c.want {
			t.Errorf("InsideRoots(%q, %q) = %v, want %v", c.path, c.roots, got, c.want)
		}
	}
}

// TestConfinedOperationsRefuseARootOutside: with a confined context, every
// operation checks the real path of the workspace when it uses it, so a
// symlink swapped in after the caller's own check cannot lead outside.
func TestConfinedOperationsRefuseARootOutside(t *testing.T) {
	m := newManager(t)
	base := t.TempDir()
	rootDir := filepath.Join(base, "roots")
	outside := outsideDir(t)
	writeFiles(t, outside, map[string]string{"victim.txt": "precious\n"})
	writeFiles(t, rootDir, map[string]string{"project/a.txt": "a\n", "link": "->project"})
	link := filepath.Join(rootDir, "link")
	ctx := Confine(context.Background(), []string{rootDir})

	s1, err := m.Snapshot(ctx, SnapshotRequest{Root: link, Ref: "refs/belay/s/1", Message: "one\n"})
	if err != nil {
		t.Fatalf("snapshot through a link inside the roots: %v", err)
	}
	// The link now leads outside: a snapshot, diff or restore through it is
	// refused, whoever checked it before.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	before := hashTree(t, outside)
	_, err = m.Snapshot(ctx, SnapshotRequest{Root: link, Ref: "refs/belay/s/2", Message: "two\n"})
	wantCode(t, err, Forbidden)
	_, err = m.Diff(ctx, link, s1.Commit, "")
	wantCode(t, err, Forbidden)
	_, err = m.Restore(ctx, link, s1.Commit, s1.Commit, false)
	wantCode(t, err, Forbidden)
	_, err = m.Lock(ctx, link)
	wantCode(t, err, Forbidden)
	diffStates(t, "outside the roots", before, hashTree(t, outside))
	if _, err := os.Stat(filepath.Join(m.dataDir, "workspaces", keyOf(outside))); !os.IsNotExist(err) {
		t.Errorf("a shadow repository was made for the directory outside: %v", err)
	}

	// Without confinement (an admin) the same call is allowed.
	if _, err := m.Snapshot(context.Background(), SnapshotRequest{Root: link, Ref: "refs/belay/s/2", Message: "two\n"}); err != nil {
		t.Errorf("unconfined snapshot: %v", err)
	}
}

// TestFixedConfinementFollowsNoLink: confined to directories taken as they
// are (a token's projects), an operation through a link swapped in for the
// project is refused, though the link's own path is the project's; under
// both confinements a workspace must be inside both.
func TestFixedConfinementFollowsNoLink(t *testing.T) {
	m := newManager(t)
	base := t.TempDir()
	project, other := filepath.Join(base, "project"), filepath.Join(base, "other")
	writeFiles(t, base, map[string]string{"project/a.txt": "a\n", "other/b.txt": "b\n"})
	ctx := ConfineFixed(context.Background(), []string{project})
	if _, err := m.Snapshot(ctx, SnapshotRequest{Root: project, Ref: "refs/belay/s/1", Message: "one\n"}); err != nil {
		t.Fatalf("snapshot of the project itself: %v", err)
	}
	_, err := m.Snapshot(ctx, SnapshotRequest{Root: other, Ref: "refs/belay/s/2", Message: "two\n"})
	wantCode(t, err, Forbidden)
	// The project's directory replaced by a link to the other one.
	if err := os.Rename(project, project+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, project); err != nil {
		t.Fatal(err)
	}
	_, err = m.Snapshot(ctx, SnapshotRequest{Root: project, Ref: "refs/belay/s/3", Message: "three\n"})
	wantCode(t, err, Forbidden)
	_, err = m.Snapshot(Confine(ctx, []string{base}), SnapshotRequest{Root: project, Ref: "refs/belay/s/3", Message: "three\n"})
	wantCode(t, err, Forbidden)
}

// keyOf is the shadow directory name of a canonical root.
func keyOf(root string) string {
	sum := sha256.Sum256([]byte(root))
	return hex.EncodeToString(sum[:])[:16]
}

// TestRestoreRefusesARootSwappedAfterItWasResolved: a directory on the
// workspace's path replaced by a symlink after the workspace was resolved
// (and checked) must not let the restore write where the link points.
func TestRestoreRefusesARootSwappedAfterItWasResolved(t *testing.T) {
	m := newManager(t)
	base := t.TempDir()
	root := filepath.Join(base, "a", "project")
	writeFiles(t, root, map[string]string{"a.txt": "one\n", "gone.txt": "g\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	removeFiles(t, root, "gone.txt")
	writeFiles(t, root, map[string]string{"a.txt": "two\n", "new.txt": "n\n"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	ctx := context.Background()

	s, err := m.workspaceFor(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := m.lock(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	// Someone moves base/a away and puts a link to a look-alike outside.
	outside := outsideDir(t)
	writeFiles(t, outside, map[string]string{"project/a.txt": "victim\n", "project/new.txt": "victim\n"})
	if err := os.Rename(filepath.Join(base, "a"), filepath.Join(base, "a-moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(base, "a")); err != nil {
		t.Fatal(err)
	}
	before := hashTree(t, outside)
	moved := filepath.Join(base, "a-moved", "project")
	movedBefore := treeState(t, moved)

	if _, err := m.restore(ctx, s, s2.Commit, s1.Commit, false, nil, nil); err == nil {
		t.Error("restore through a swapped path succeeded")
	}
	diffStates(t, "outside", before, hashTree(t, outside))
	diffStates(t, "the moved workspace", movedBefore, treeState(t, moved))
}

// TestRestoreNeverWritesThroughASymlinkedDirectory: a directory of the work
// tree replaced by a symlink after the snapshot is not written through.
func TestRestoreNeverWritesThroughASymlinkedDirectory(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	outside := outsideDir(t)
	writeFiles(t, outside, map[string]string{"a.txt": "victim\n", "b.txt": "victim\n"})
	writeFiles(t, root, map[string]string{"dir/a.txt": "one\n", "dir/b.txt": "b\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	writeFiles(t, root, map[string]string{"dir/a.txt": "two\n", "dir/c.txt": "c\n"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	removeFiles(t, root, "dir")
	writeFiles(t, root, map[string]string{"dir": "->" + outside})
	before := hashTree(t, outside)

	// From the stale snapshot (the work tree changed since) and from a fresh
	// one that stores dir as a link: neither writes outside.
	if _, err := m.Restore(context.Background(), root, s2.Commit, s1.Commit, false); err == nil {
		t.Error("restore through a symlinked directory succeeded")
	}
	diffStates(t, "outside after the stale restore", before, hashTree(t, outside))
	s3 := snapshot(t, m, root, "refs/belay/s/3", s2.Commit)
	if _, err := m.Restore(context.Background(), root, s3.Commit, s1.Commit, false); err != nil {
		t.Fatal(err)
	}
	diffStates(t, "outside after the restore", before, hashTree(t, outside))
	diffStates(t, "workspace", map[string]string{"dir": "dir", "dir/a.txt": "file 644 one\n", "dir/b.txt": "file 644 b\n"}, treeState(t, root))

	// A link stored in a snapshot comes back as a link, not as the content
	// it pointed at.
	s4 := snapshot(t, m, root, "refs/belay/s/4", s1.Commit)
	if _, err := m.Restore(context.Background(), root, s4.Commit, s3.Commit, false); err != nil {
		t.Fatal(err)
	}
	if got := treeState(t, root)["dir"]; got != "link "+outside {
		t.Errorf("dir = %q after restoring the snapshot that stored it as a link", got)
	}
	diffStates(t, "outside after restoring the link", before, hashTree(t, outside))
}
