package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestRestoreFailureRollsBack(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "v1\n", "x": "x was a file\n", "m/keep.txt": "k\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	// x becomes a directory holding only an ignored file: the restore needs
	// a file there and must not delete the directory.
	removeFiles(t, root, "x", "m/keep.txt")
	writeFiles(t, root, map[string]string{"a.txt": "v2\n", "x/cache.pyc": "ignored\n", "z/new.txt": "new\n"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	before := treeState(t, root)

	_, err := m.Restore(context.Background(), root, s2.Commit, s1.Commit, false)
	wantCode(t, err, RestoreFailed)
	diffStates(t, "after failed restore", before, treeState(t, root))
	s, _ := m.workspaceFor(context.Background(), root)
	if _, err := os.Stat(s.journalPath()); !os.IsNotExist(err) {
		t.Errorf("journal left after rollback: %v", err)
	}
	// The index still matches the work tree.
	if s3 := snapshot(t, m, root, "refs/belay/s/3", s2.Commit); s3.Tree != s2.Tree {
		t.Errorf("snapshot after rollback differs from before: %+v", s3)
	}
}

func TestRestoreFaultMidwayRollsBack(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a1\n", "b.txt": "b1\n", "c.txt": "c1\n", "link": "->a.txt"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	removeFiles(t, root, "c.txt")
	writeFiles(t, root, map[string]string{"a.txt": "a2\n", "b.txt": "b2\n", "d/new.txt": "new\n", "link": "->b.txt"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	before := treeState(t, root)

	writes, faults := 0, 0
	m.beforeWrite = func(path string) error {
		writes++
		if path == "c.txt" && faults == 0 {
			faults++
			return errors.New("injected fault")
		}
		return nil
	}
	_, err := m.Restore(context.Background(), root, s2.Commit, s1.Commit, false)
	wantCode(t, err, RestoreFailed)
	if writes < 3 {
		t.Fatalf("fault hit after %d writes; want some applied first", writes)
	}
	m.beforeWrite = nil
	diffStates(t, "after rollback", before, treeState(t, root))
}

func TestRestoreJournalRecovery(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a1\n", "dir/b.txt": "b1\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	target := treeState(t, root)
	writeFiles(t, root, map[string]string{"a.txt": "a2\n", "c.txt": "c\n"})
	removeFiles(t, root, "dir")
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)

	// A restore from s2 to s1 died after removing c.txt, while writing a.txt
	// through its temporary file.
	removeFiles(t, root, "c.txt")
	writeFiles(t, root, map[string]string{".belay-0123456789-ABCDEFGH": "partial"})
	s, _ := m.workspaceFor(context.Background(), root)
	data, _ := json.Marshal(journal{From: s2.Commit, Target: s1.Commit, Pending: []string{"a.txt", "c.txt", "dir/b.txt"}, Temp: ".belay-0123456789-"})
	if err := os.WriteFile(s.journalPath(), data, 0o600); err != nil {
		t.Fatal(err)
	}

	s3 := snapshot(t, m, root, "refs/belay/s/3", s2.Commit)
	diffStates(t, "after recovery", target, treeState(t, root))
	if s3.Tree != s1.Tree {
		t.Errorf("snapshot after recovery has tree %s, want %s", s3.Tree, s1.Tree)
	}
	if _, err := os.Stat(s.journalPath()); !os.IsNotExist(err) {
		t.Errorf("journal not removed: %v", err)
	}
}

func TestLockedVariants(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a1\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	writeFiles(t, root, map[string]string{"a.txt": "a2\n"})
	ctx := context.Background()

	if _, err := m.SnapshotLocked(ctx, SnapshotRequest{Root: root, Ref: "refs/belay/s/2"}); err == nil {
		t.Fatal("SnapshotLocked without the lock succeeded")
	}
	unlock, err := m.Lock(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	// Snapshot then restore with no other writer in between.
	s2, err := m.SnapshotLocked(ctx, SnapshotRequest{Root: root, Ref: "refs/belay/s/2", Parent: s1.Commit})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.RestoreLocked(ctx, root, s2.Commit, s1.Commit, false); err != nil {
		t.Fatal(err)
	}
	// Another Manager (as another process would) cannot get in meanwhile.
	other, err := New(Options{DataDir: m.dataDir})
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := other.Snapshot(short, SnapshotRequest{Root: root, Ref: "refs/belay/s/3"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("snapshot while locked by another manager: %v", err)
	}
	unlock()
	if _, err := other.Snapshot(ctx, SnapshotRequest{Root: root, Ref: "refs/belay/s/3"}); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentSnapshotsAreSerialised(t *testing.T) {
	m := newManager(t)
	other, err := New(Options{DataDir: m.dataDir})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a\n"})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		mgr := m
		if i%2 == 1 {
			mgr = other
		}
		wg.Go(func() {
			name := fmt.Sprintf("f%02d.txt", i)
			if err := os.WriteFile(filepath.Join(root, name), []byte(name), 0o644); err != nil {
				errs <- err
				return
			}
			_, err := mgr.Snapshot(context.Background(), SnapshotRequest{Root: root, Ref: fmt.Sprintf("refs/belay/s/%d", i), Paths: []string{name}})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	refs, err := m.Refs(context.Background(), root, "refs/belay/s")
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 16 {
		t.Fatalf("%d refs, want 16", len(refs))
	}
	// Interleaved updates of the private index would have lost files or left
	// a corrupt index; a full snapshot now holds all 17.
	final := snapshot(t, m, root, "refs/belay/s/final", "")
	if len(final.Created) != 17 {
		t.Errorf("final snapshot has %d files, want 17", len(final.Created))
	}
	if err := m.Fsck(context.Background(), root); err != nil {
		t.Fatal(err)
	}
}
