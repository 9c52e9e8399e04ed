package workspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// randomText is content no other snapshot shares, big enough to see go.
func randomText(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// hasObject reports whether the shadow repository of root holds an object.
func hasObject(t *testing.T, m *Manager, root, id string) bool {
	t.Helper()
	s, err := m.workspaceFor(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	_, code, err := m.runCode(context.Background(), s, runOpts{okCodes: []int{1, 128}}, "cat-file", "-e", id)
	if err != nil {
		t.Fatal(err)
	}
	return code == 0
}

func blobOf(t *testing.T, m *Manager, root, commit, path string) string {
	t.Helper()
	return strings.TrimSpace(shadowGit(t, m, root, "rev-parse", commit+":"+path))
}

// TestDeleteRefsReclaimsWhatOnlyThoseRefsUsed is the leak of issue 9: the
// objects of deleted snapshots stayed, pinned by the private index, and a
// workspace with no snapshot left kept its whole shadow directory.
func TestDeleteRefsReclaimsWhatOnlyThoseRefsUsed(t *testing.T) {
	for _, withGit := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "git"}[withGit], func(t *testing.T) {
			ctx := context.Background()
			m := newManager(t)
			root := t.TempDir()
			writeFiles(t, root, map[string]string{"shared.txt": "shared\n"})
			if withGit {
				initUserRepo(t, root)
			}
			kept := snapshot(t, m, root, "refs/belay/keep/1", "")
			// The other session's snapshot is the newest: the private index
			// holds its files.
			writeFiles(t, root, map[string]string{"only-deleted.txt": randomText(t, 256<<10)})
			gone := snapshot(t, m, root, "refs/belay/gone/1", "")
			blob := blobOf(t, m, root, gone.Commit, "only-deleted.txt")
			before, err := m.DiskUsage(ctx, root)
			if err != nil {
				t.Fatal(err)
			}

			rec, err := m.DeleteRefs(ctx, root, "refs/belay/gone")
			if err != nil {
				t.Fatal(err)
			}
			if hasObject(t, m, root, blob) || hasObject(t, m, root, gone.Commit) {
				t.Error("the deleted snapshot's objects are still in the shadow repository")
			}
			after, err := m.DiskUsage(ctx, root)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Removed || rec.Before != before || rec.After != after || before-after < 100<<10 {
				t.Errorf("reclaimed %+v; du %d → %d", rec, before, after)
			}
			if ok, err := m.HasCommit(ctx, root, kept.Commit); !ok || err != nil {
				t.Errorf("the kept snapshot: %v, %v", ok, err)
			}
			if err := m.Fsck(ctx, root); err != nil {
				t.Error(err)
			}
			// Snapshots go on from the private index: the file only the
			// deleted snapshot held is stored again.
			next := snapshot(t, m, root, "refs/belay/keep/2", kept.Commit)
			if !slices.Equal(next.Created, []string{"only-deleted.txt"}) || len(next.Modified)+len(next.Deleted) != 0 {
				t.Errorf("next snapshot: %+v", next)
			}

			// Without any snapshot left, the whole shadow directory goes.
			rec, err = m.DeleteRefs(ctx, root, "refs/belay/keep")
			if err != nil {
				t.Fatal(err)
			}
			if !rec.Removed || rec.After != 0 || rec.Before == 0 {
				t.Errorf("last refs deleted: %+v", rec)
			}
			if entries, err := os.ReadDir(filepath.Join(m.dataDir, "workspaces")); err != nil || len(entries) != 0 {
				t.Fatalf("workspaces dir after the last delete: %v, %v", entries, err)
			}
			if n, err := m.DiskUsage(ctx, root); n != 0 || err != nil {
				t.Errorf("du after the last delete = %d, %v", n, err)
			}
			if _, err := m.DeleteRefs(ctx, root, "refs/belay/keep"); !isCode(err, NotFound) {
				t.Errorf("delete refs of a removed shadow: %v", err)
			}
			// And the workspace can be snapshotted afresh.
			again := snapshot(t, m, root, "refs/belay/new/1", "")
			if len(again.Created) != 2 {
				t.Errorf("fresh snapshot: %+v", again)
			}
		})
	}
}

// TestShadowsAndCollect lists every shadow directory, removes one whose
// workspace is gone, and collects a live one's unreferenced objects.
func TestShadowsAndCollect(t *testing.T) {
	ctx := context.Background()
	m := newManager(t)
	live, gone := t.TempDir(), filepath.Join(t.TempDir(), "gone")
	writeFiles(t, live, map[string]string{"a.txt": "a\n"})
	writeFiles(t, gone, map[string]string{"b.txt": randomText(t, 64<<10)})
	snapshot(t, m, live, "refs/belay/s/1", "")
	snapshot(t, m, gone, "refs/belay/t/1", "")
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}
	// An unreferenced object, as a failed save leaves.
	s, _ := m.workspaceFor(context.Background(), live)
	junk := strings.TrimSpace(string(must(m.run(ctx, s, runOpts{stdin: []byte(randomText(t, 64<<10))}, "hash-object", "-w", "--stdin"))))

	shadows, err := m.Shadows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byRoot := map[string]ShadowInfo{}
	for _, sh := range shadows {
		byRoot[sh.Root] = sh
	}
	canonLive := m.Canonical(live)
	if len(shadows) != 2 || byRoot[canonLive].Bytes == 0 || byRoot[m.Canonical(gone)].Bytes == 0 {
		t.Fatalf("shadows = %+v", shadows)
	}

	// A dry run changes nothing.
	rec, err := m.RemoveShadow(ctx, byRoot[m.Canonical(gone)].ID, true, nil)
	if err != nil || !rec.Removed || rec.After != 0 || rec.Before != byRoot[m.Canonical(gone)].Bytes {
		t.Errorf("dry-run remove = %+v, %v", rec, err)
	}
	if again, _ := m.Shadows(ctx); len(again) != 2 {
		t.Errorf("a dry run removed a shadow: %+v", again)
	}
	if rec, err := m.Collect(ctx, byRoot[canonLive].ID, true, nil); err != nil || rec.After >= rec.Before || !hasObject(t, m, live, junk) {
		t.Errorf("dry-run collect = %+v, %v", rec, err)
	}

	if rec, err := m.RemoveShadow(ctx, byRoot[m.Canonical(gone)].ID, false, func() (bool, error) { return true, nil }); err != nil || !rec.Removed {
		t.Errorf("remove = %+v, %v", rec, err)
	}
	rec, err = m.Collect(ctx, byRoot[canonLive].ID, false, nil)
	if err != nil || rec.Removed || rec.After >= rec.Before || hasObject(t, m, live, junk) {
		t.Errorf("collect = %+v, %v", rec, err)
	}
	// Nothing is left to collect, and a dry run says so: the packs' indexes
	// and the repository's other files are no object a collect frees.
	if rec, err := m.Collect(ctx, byRoot[canonLive].ID, true, nil); err != nil || rec.After != rec.Before {
		t.Errorf("dry-run collect after a collect = %+v (would free %d bytes), %v", rec, rec.Before-rec.After, err)
	}
	shadows, err = m.Shadows(ctx)
	if err != nil || len(shadows) != 1 || shadows[0].Root != canonLive {
		t.Errorf("shadows after = %+v, %v", shadows, err)
	}
	if err := m.Fsck(ctx, live); err != nil {
		t.Error(err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
