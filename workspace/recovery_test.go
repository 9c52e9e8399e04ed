package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// problemNames lists "<kind> <name>" for each problem, sorted.
func problemNames(ps []Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, string(p.Kind)+" "+p.Name)
	}
	slices.Sort(out)
	return out
}

func mustCheck(t *testing.T, m *Manager, root string) []Problem {
	t.Helper()
	ps, err := m.Check(context.Background(), root)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	return ps
}

// TestStaleGitLocksAreReportedAndRemoved: a git command killed with belay
// leaves its lock files. Under the workspace lock nothing else can be
// running on the shadow repository, so the next snapshot removes them; Check
// reports them and RepairLocked removes them too.
func TestStaleGitLocksAreReportedAndRemoved(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	s, _ := m.workspaceFor(context.Background(), root)
	locks := []string{
		filepath.Join(s.dir, "index.lock"),
		filepath.Join(s.repo, "packed-refs.lock"),
		filepath.Join(s.repo, "refs", "belay", "s", "2.lock"),
	}
	for _, l := range locks {
		if err := os.WriteFile(l, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"stale-lock index.lock", "stale-lock repo.git/packed-refs.lock", "stale-lock repo.git/refs/belay/s/2.lock"}
	if got := problemNames(mustCheck(t, m, root)); !slices.Equal(got, want) {
		t.Errorf("check = %q, want %q", got, want)
	}
	writeFiles(t, root, map[string]string{"a.txt": "a2\n"})
	snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	for _, l := range locks {
		if _, err := os.Stat(l); !os.IsNotExist(err) {
			t.Errorf("%s left after the next snapshot: %v", l, err)
		}
	}

	// RepairLocked removes them as well.
	for _, l := range locks {
		if err := os.WriteFile(l, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	repair(t, m, root, nil)
	if got := mustCheck(t, m, root); len(got) != 0 {
		t.Errorf("after repair: %+v", got)
	}
}

func repair(t *testing.T, m *Manager, root string, known map[string]string) []Problem {
	t.Helper()
	ctx := context.Background()
	unlock, err := m.Lock(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	lost, err := m.RepairLocked(ctx, root, known, nil)
	if err != nil {
		t.Fatalf("repair: %v", err)
	}
	return lost
}

// TestGitChildrenHoldTheWorkspaceLock: the lock is passed to every git
// command, so a git process that outlives belay (belay killed, git not) keeps
// the workspace locked until it exits, and its lock files are never taken
// for stale.
func TestGitChildrenHoldTheWorkspaceLock(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "git")
	script := "#!/bin/sh\nif [ \"$1\" = version ]; then echo 'git version 2.39.5'; exit 0; fi\n" +
		"sleep 1 </dev/null >/dev/null 2>&1 &\nexit 0\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{DataDir: t.TempDir(), Git: fake})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	ctx := context.Background()
	s, err := m.workspaceFor(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := m.lock(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.run(ctx, s, runOpts{}, "update-index"); err != nil {
		t.Fatal(err)
	}
	unlock()
	// The background child of "git" still runs: another process waits.
	other, err := New(Options{DataDir: m.dataDir, Git: fake})
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := other.Lock(short, root); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lock while a git child of the holder runs: %v", err)
	}
	unlockOther, err := other.Lock(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	unlockOther()
}

// TestRecordedRestoreWaitsToBeCommitted: a restore begun with a record keeps
// its journal, with the record, once the files are moved, until the caller
// commits or undoes it; a snapshot meanwhile leaves it alone.
func TestRecordedRestoreWaitsToBeCommitted(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	ctx := context.Background()
	writeFiles(t, root, map[string]string{"a.txt": "one\n", "gone.txt": "g\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	atOne := treeState(t, root)
	removeFiles(t, root, "gone.txt")
	writeFiles(t, root, map[string]string{"a.txt": "two\n", "new.txt": "n\n"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	atTwo := treeState(t, root)

	unlock, err := m.Lock(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := m.BeginRestoreLocked(ctx, root, s2.Commit, s1.Commit, []byte(`{"id":1}`), nil); err != nil {
		t.Fatal(err)
	}
	diffStates(t, "after begin", atOne, treeState(t, root))
	if _, err := m.SnapshotLocked(ctx, SnapshotRequest{Root: root, Ref: "refs/belay/s/3", Parent: s1.Commit, Message: "three\n"}); err != nil {
		t.Fatal(err)
	}
	p, err := m.PendingRestoreLocked(ctx, root)
	if err != nil || p == nil {
		t.Fatalf("pending = %+v, %v", p, err)
	}
	if string(p.Record) != `{"id":1}` || p.From != s2.Commit || p.Target != s1.Commit ||
		!slices.Equal(p.Changes, []Change{{"a.txt", ActionRestore}, {"gone.txt", ActionRestore}, {"new.txt", ActionRemove}}) {
		t.Errorf("pending = %+v", p)
	}
	// Another restore must not overwrite the record.
	if _, err := m.RestoreLocked(ctx, root, s1.Commit, s2.Commit, false); err == nil {
		t.Error("a restore ran over a restore waiting to be recorded")
	}
	if err := m.CommitRestoreLocked(ctx, root); err != nil {
		t.Fatal(err)
	}
	if p, err := m.PendingRestoreLocked(ctx, root); err != nil || p != nil {
		t.Errorf("pending after commit = %+v, %v", p, err)
	}
	diffStates(t, "after commit", atOne, treeState(t, root))

	// Undo moves the files back and forgets the record.
	if _, err := m.BeginRestoreLocked(ctx, root, s1.Commit, s2.Commit, []byte(`{"id":2}`), nil); err != nil {
		t.Fatal(err)
	}
	diffStates(t, "after the second begin", atTwo, treeState(t, root))
	if err := m.UndoRestoreLocked(ctx, root); err != nil {
		t.Fatal(err)
	}
	diffStates(t, "after undo", atOne, treeState(t, root))
	if p, err := m.PendingRestoreLocked(ctx, root); err != nil || p != nil {
		t.Errorf("pending after undo = %+v, %v", p, err)
	}
}

// TestRecordedRestoreInterruptedMidwayIsFinished: the process dies while
// the files are moved (simulated by ending the goroutine on the spot, which
// runs no error handling); the next caller finishes moving them and gets
// the record back.
func TestRecordedRestoreInterruptedMidwayIsFinished(t *testing.T) {
	m, root := newManager(t), t.TempDir()
	ctx := context.Background()
	_, s2, atOne := interruptRecordedRestore(t, m, root)
	if got := problemNames(mustCheck(t, m, root)); !slices.Equal(got, []string{"unfinished-restore restore.json"}) {
		t.Errorf("check = %q", got)
	}

	// A snapshot finishes moving the files and keeps the record.
	snapshot(t, m, root, "refs/belay/s/3", s2.Commit)
	diffStates(t, "after the next snapshot", atOne, treeState(t, root))
	unlock, err := m.Lock(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	p, err := m.PendingRestoreLocked(ctx, root)
	if err != nil || p == nil || string(p.Record) != `"rollback"` || len(p.Changes) != 20 {
		t.Fatalf("pending = %+v, %v", p, err)
	}
	if err := m.CommitRestoreLocked(ctx, root); err != nil {
		t.Fatal(err)
	}
}

// TestRepairRebuildsWhatACrashLeftEmpty: a crash (power loss) can leave the
// files git renamed into place empty. Check names each; RepairLocked
// rebuilds HEAD, the settings, refs (from the commits the caller knows, or
// packed-refs) and the private index (from the newest snapshot), and says
// which ref it could not rebuild.
func TestRepairRebuildsWhatACrashLeftEmpty(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	ctx := context.Background()
	writeFiles(t, root, map[string]string{"a.txt": "a\n", "tracked.log": "kept though ignored later\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	writeFiles(t, root, map[string]string{"a.txt": "a2\n", ".belayignore": "*.log\n"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	s3 := snapshot(t, m, root, "refs/belay/s/3", s2.Commit)
	shadowGit(t, m, root, "pack-refs", "--all")
	writeFiles(t, root, map[string]string{"b.txt": "b\n"})
	s4 := snapshot(t, m, root, "refs/belay/s/4", s3.Commit)
	s, _ := m.workspaceFor(ctx, root)
	for _, name := range []string{
		"repo.git/HEAD", "repo.git/config", "repo.git/info/attributes", "exclude", "index",
		"repo.git/refs/belay/s/1", // packed, and known
		"repo.git/refs/belay/s/4", // known only
		"repo.git/refs/belay/s/5", // a ref nobody knows
	} {
		if err := os.WriteFile(filepath.Join(s.dir, filepath.FromSlash(name)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		"broken-ref refs/belay/s/1", "broken-ref refs/belay/s/4", "broken-ref refs/belay/s/5",
		"damaged-file exclude", "damaged-file repo.git/HEAD", "damaged-file repo.git/config", "damaged-file repo.git/info/attributes",
		"damaged-index index",
	}
	if got := problemNames(mustCheck(t, m, root)); !slices.Equal(got, want) {
		t.Errorf("check =\n%q\nwant\n%q", got, want)
	}
	lost := repair(t, m, root, map[string]string{"refs/belay/s/4": s4.Commit})
	if got := problemNames(lost); !slices.Equal(got, []string{"broken-ref refs/belay/s/5"}) || !strings.Contains(lost[0].Message, "refs/belay/s/5") {
		t.Errorf("lost = %+v", lost)
	}
	if got := mustCheck(t, m, root); len(got) != 0 {
		t.Errorf("after repair: %+v", got)
	}
	refs, err := m.Refs(ctx, root, "refs/belay/s")
	if err != nil {
		t.Fatal(err)
	}
	if refs["refs/belay/s/1"] != s1.Commit || refs["refs/belay/s/4"] != s4.Commit || len(refs) != 4 {
		t.Errorf("refs after repair = %v", refs)
	}
	if err := m.Fsck(ctx, root); err != nil {
		t.Fatal(err)
	}
	// The index was rebuilt from the newest snapshot: the ignored file it
	// tracks stays stored, and the next snapshot sees no change.
	s6 := snapshot(t, m, root, "refs/belay/s/6", s4.Commit)
	if s6.Tree != s4.Tree || len(s6.Modified)+len(s6.Created)+len(s6.Deleted) != 0 {
		t.Errorf("snapshot after repair = %+v", s6)
	}
}

// TestShadowRepositoryIsSynced: git syncs what it writes to the shadow
// repository, for new repositories and ones made before.
func TestShadowRepositoryIsSynced(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	for _, key := range []string{"core.fsync", "core.fsyncMethod"} {
		if got := strings.TrimSpace(shadowGit(t, m, root, "config", key)); got == "" {
			t.Errorf("%s is not set", key)
		}
	}
	if got := strings.TrimSpace(shadowGit(t, m, root, "config", "core.fsync")); got != "committed,index" {
		t.Errorf("core.fsync = %q", got)
	}
	// A repository made before has the settings after its next snapshot.
	s, _ := m.workspaceFor(context.Background(), root)
	// What earlier versions wrote: git init's settings, then belay's.
	old := "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n\tprecomposeunicode = true\n" +
		"[core]\n\tautocrlf = \"false\"\n\tsymlinks = \"true\"\n\tfileMode = \"true\"\n\tuntrackedCache = \"false\"\n" +
		"\tsplitIndex = \"true\"\n\tlogAllRefUpdates = \"false\"\n\tbigFileThreshold = \"16m\"\n" +
		"[gc]\n\tauto = \"0\"\n[maintenance]\n\tauto = \"false\"\n[fetch]\n\tfsckObjects = \"true\"\n" +
		"[core]\n\texcludesFile = " + quoteConfig(filepath.Join(s.dir, "exclude")) + "\n"
	if err := os.WriteFile(filepath.Join(s.repo, "config"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := mustCheck(t, m, root); len(got) != 0 {
		t.Errorf("an older configuration is reported: %+v", got)
	}
	snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	if got := strings.TrimSpace(shadowGit(t, m, root, "config", "core.fsyncMethod")); got != "batch" {
		t.Errorf("core.fsyncMethod after upgrade = %q", got)
	}
	if got := strings.TrimSpace(shadowGit(t, m, root, "config", "core.splitIndex")); got != "false" {
		t.Errorf("core.splitIndex after upgrade = %q", got)
	}
	// What git init wrote, from probing the file system, is kept.
	if got := strings.TrimSpace(shadowGit(t, m, root, "config", "core.precomposeunicode")); got != "true" {
		t.Errorf("core.precomposeunicode after upgrade = %q", got)
	}
}

// TestRecordedRestoreKeepsWhatItIsTold: a path the caller keeps is not
// removed by the restore, is not among its pending changes, and is left as
// it is when the restore is undone.
func TestRecordedRestoreKeepsWhatItIsTold(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	ctx := context.Background()
	writeFiles(t, root, map[string]string{"a.txt": "one\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	writeFiles(t, root, map[string]string{"a.txt": "two\n", "kept.bin": "k\n", "new.txt": "n\n"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	atTwo := treeState(t, root)

	unlock, err := m.Lock(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	res, err := m.BeginRestoreLocked(ctx, root, s2.Commit, s1.Commit, []byte(`{"id":1}`), []string{"kept.bin", "not-there.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Kept, []string{"kept.bin"}) || !slices.Equal(res.Changes, []Change{{"a.txt", ActionRestore}, {"new.txt", ActionRemove}}) {
		t.Errorf("restore = %+v", res)
	}
	if got, err := os.ReadFile(filepath.Join(root, "kept.bin")); err != nil || string(got) != "k\n" {
		t.Errorf("kept.bin = %q, %v after the restore", got, err)
	}
	p, err := m.PendingRestoreLocked(ctx, root)
	if err != nil || p == nil || !slices.Equal(p.Changes, res.Changes) {
		t.Fatalf("pending = %+v, %v", p, err)
	}
	if err := m.UndoRestoreLocked(ctx, root); err != nil {
		t.Fatal(err)
	}
	diffStates(t, "after undo", atTwo, treeState(t, root))
}

// TestInterruptedRestoreLeavesLaterEditsAlone: finishing a restore whose
// process died writes a path only while it holds what the restore found
// there (or already what it writes): a file edited after the crash, reached
// by the restore or not, stays as it is, and the pending restore names it;
// undoing the restore leaves it too.
func TestInterruptedRestoreLeavesLaterEditsAlone(t *testing.T) {
	m, root := newManager(t), t.TempDir()
	ctx := context.Background()
	files, _, _ := interruptRecordedRestore(t, m, root)
	// fa.txt was restored before the crash, fs.txt was not reached: both
	// are edited since.
	writeFiles(t, root, map[string]string{"fa.txt": "edited\n", "fs.txt": "edited\n"})

	unlock, err := m.Lock(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	p, err := m.PendingRestoreLocked(ctx, root)
	if err != nil || p == nil {
		t.Fatalf("pending = %+v, %v", p, err)
	}
	if !slices.Equal(p.Left, []string{"fa.txt", "fs.txt"}) || len(p.Changes) != 18 {
		t.Errorf("pending restore left %q and changed %d files, want fa.txt and fs.txt left and 18 changed", p.Left, len(p.Changes))
	}
	want := map[string]string{}
	for name := range files {
		want[name] = "file 644 one\n"
	}
	want["fa.txt"], want["fs.txt"] = "file 644 edited\n", "file 644 edited\n"
	diffStates(t, "after finishing the restore", want, treeState(t, root))

	if err := m.UndoRestoreLocked(ctx, root); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		want[name] = "file 644 two\n"
	}
	want["fa.txt"], want["fs.txt"] = "file 644 edited\n", "file 644 edited\n"
	diffStates(t, "after undoing the restore", want, treeState(t, root))
}

// interruptRecordedRestore snapshots 20 files in root twice, then begins a
// recorded restore from the second snapshot to the first whose process dies
// (its goroutine ends on the spot, running no error handling) at its
// seventh write. It returns the files as the first snapshot holds them (by
// name), the second snapshot, and the tree at the first.
func interruptRecordedRestore(t *testing.T, m *Manager, root string) (map[string]string, *Snapshot, map[string]string) {
	t.Helper()
	ctx := context.Background()
	files := map[string]string{}
	for i := range 20 {
		files["f"+string(rune('a'+i))+".txt"] = "one\n"
	}
	writeFiles(t, root, files)
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	atOne := treeState(t, root)
	two := map[string]string{}
	for name := range files {
		two[name] = "two\n"
	}
	writeFiles(t, root, two)
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	writes := 0
	m.beforeWrite = func(string) error {
		if writes++; writes == 7 {
			runtime.Goexit()
		}
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		unlock, err := m.Lock(ctx, root)
		if err != nil {
			t.Error(err)
			return
		}
		defer unlock()
		m.BeginRestoreLocked(ctx, root, s2.Commit, s1.Commit, []byte(`"rollback"`), nil)
		t.Error("the restore was not interrupted")
	}()
	<-done
	m.beforeWrite = nil
	return files, s2, atOne
}
