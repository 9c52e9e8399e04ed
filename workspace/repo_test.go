package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// userRepoWorkspace makes a workspace that is a git repository with n
// committed files, a stash, a second branch and local config.
func userRepoWorkspace(t *testing.T, n int) string {
	t.Helper()
	root := t.TempDir()
	files := make(map[string]string, n)
	for i := range n {
		files[fmt.Sprintf("src/d%02d/f%04d.txt", i%20, i)] = fmt.Sprintf("file %d\n", i)
	}
	files[".gitignore"] = "*.log\n"
	writeFiles(t, root, files)
	initUserRepo(t, root)
	userGit(t, root, "config", "user.name", "someone")
	userGit(t, root, "branch", "feature")
	writeFiles(t, root, map[string]string{"src/d00/f0000.txt": "stashed change\n"})
	userGit(t, root, "stash", "-q")
	writeFiles(t, root, map[string]string{"src/d01/f0001.txt": "uncommitted change\n", "untracked.txt": "u\n"})
	userGit(t, root, "add", "src/d01/f0001.txt") // staged
	return root
}

// looseAndPackedObjects counts the objects stored in a repository itself
// (not its alternates).
func looseAndPackedObjects(t *testing.T, m *Manager, root string) int {
	t.Helper()
	out := shadowGit(t, m, root, "count-objects", "-v")
	total := 0
	for line := range strings.Lines(out) {
		var n int
		if _, err := fmt.Sscanf(line, "count: %d", &n); err == nil {
			total += n
		}
		if _, err := fmt.Sscanf(line, "in-pack: %d", &n); err == nil {
			total += n
		}
	}
	return total
}

func TestFirstSnapshotReusesUserRepository(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	root := userRepoWorkspace(t, 600)
	hashed := int64(0)
	s1, err := m.Snapshot(ctx, SnapshotRequest{Root: root, Ref: "refs/belay/s/1", Message: "one\n",
		Progress: func(p Progress) { hashed = max(hashed, p.TotalFiles) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(s1.Created) != 602 || !slices.Contains(s1.Created, "untracked.txt") {
		t.Errorf("first snapshot stored %d files, want 602 including untracked.txt", len(s1.Created))
	}
	// The user's index said which files are unchanged: only the untracked
	// one was hashed.
	if hashed != 1 {
		t.Errorf("first snapshot hashed %d files, want 1", hashed)
	}
	// The snapshot borrowed the user's objects and copied them in before
	// it returned: the shadow repository holds them alone.
	if _, err := os.Stat(alternatesFile(t, m, root)); !os.IsNotExist(err) {
		t.Errorf("alternates still present after the first snapshot: %v", err)
	}
	if n := looseAndPackedObjects(t, m, root); n < 602 {
		t.Errorf("the shadow repository holds %d objects, want every file's at least (602)", n)
	}
	if err := os.RemoveAll(filepath.Join(root, ".git")); err != nil {
		t.Fatal(err)
	}
	if ok, err := m.HasCommit(ctx, root, s1.Commit); !ok || err != nil {
		t.Errorf("HasCommit without the user's .git = %v, %v", ok, err)
	}
	if err := m.Fsck(ctx, root); err != nil {
		t.Error(err)
	}
	// And snapshots go on from the same private index.
	writeFiles(t, root, map[string]string{"src/d03/f0003.txt": "changed\n"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	if !slices.Equal(s2.Modified, []string{"src/d03/f0003.txt"}) {
		t.Errorf("modified %q", s2.Modified)
	}
}

func mustKey(t *testing.T, m *Manager, root string) string {
	t.Helper()
	s, err := m.workspaceFor(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	return s.key
}

func alternatesFile(t *testing.T, m *Manager, root string) string {
	t.Helper()
	return filepath.Join(m.dataDir, "workspaces", mustKey(t, m, root), "repo.git", "objects", "info", "alternates")
}

// borrowAgain leaves the shadow repository of root as an older belay did, or
// a copy killed before it finished: the objects the user's repository has
// are read from there through objects/info/alternates, not held.
func borrowAgain(t *testing.T, m *Manager, root string) {
	t.Helper()
	alternates := alternatesFile(t, m, root)
	if err := os.MkdirAll(filepath.Dir(alternates), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alternates, []byte(filepath.Join(root, ".git", "objects")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	shadowGit(t, m, root, "repack", "-a", "-d", "-l", "-q")
	if n := looseAndPackedObjects(t, m, root); n > 10 {
		t.Fatalf("the shadow repository still holds %d objects", n)
	}
}

// TestSnapshotSurvivesUserRepositoryDeleted: the user's (or agent's) rm -rf
// .git takes no snapshot with it.
func TestSnapshotSurvivesUserRepositoryDeleted(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"code.txt": "important\n"})
	initUserRepo(t, root)
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	if err := os.RemoveAll(filepath.Join(root, ".git")); err != nil {
		t.Fatal(err)
	}
	removeFiles(t, root, "code.txt")
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	if !slices.Equal(s2.Deleted, []string{"code.txt"}) {
		t.Errorf("deleted %q, want code.txt", s2.Deleted)
	}
	if _, err := m.Restore(ctx, root, s2.Commit, s1.Commit, false); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(root, "code.txt")); string(data) != "important\n" {
		t.Errorf("code.txt = %q, %v", data, err)
	}
}

// TestSnapshotSurvivesUserGC: a commit the user drops and prunes
// (reset --hard, reflog expire, gc --prune=now) stays in the snapshot.
func TestSnapshotSurvivesUserGC(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a\n"})
	initUserRepo(t, root)
	writeFiles(t, root, map[string]string{"data.txt": "data\n"})
	userGit(t, root, "add", "data.txt")
	userGit(t, root, "commit", "-q", "-m", "data")
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	userGit(t, root, "reset", "-q", "--hard", "HEAD~1")
	userGit(t, root, "reflog", "expire", "--expire=now", "--all")
	userGit(t, root, "gc", "-q", "--prune=now")
	if err := m.Fsck(ctx, root); err != nil {
		t.Fatal(err)
	}
	if st, err := m.CheckCommit(ctx, root, s1.Commit); st != CommitComplete || err != nil {
		t.Errorf("CheckCommit after the user's gc = %v, %v", st, err)
	}
	d, err := m.Diff(ctx, root, s1.Commit, "")
	if err != nil || len(d.Files) != 1 || d.Files[0].Path != "data.txt" || d.Files[0].Status != "deleted" {
		t.Errorf("diff = %+v, %v", d, err)
	}
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	if _, err := m.Restore(ctx, root, s2.Commit, s1.Commit, false); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(root, "data.txt")); string(data) != "data\n" {
		t.Errorf("data.txt = %q, %v", data, err)
	}
}

// TestBorrowingFinishedFirst: a shadow repository still borrowing (from an
// older belay, or a copy killed midway) is made whole by the next snapshot
// or restore before it does anything else.
func TestBorrowingFinishedFirst(t *testing.T) {
	for _, op := range []string{"snapshot", "restore"} {
		t.Run(op, func(t *testing.T) {
			m := newManager(t)
			ctx := context.Background()
			root := userRepoWorkspace(t, 50)
			s1 := snapshot(t, m, root, "refs/belay/s/1", "")
			writeFiles(t, root, map[string]string{"agent.txt": "agent\n"})
			s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
			want := treeState(t, root)
			borrowAgain(t, m, root)
			if st, err := m.CheckCommit(ctx, root, s1.Commit); st != CommitComplete || err != nil {
				t.Errorf("CheckCommit while borrowing = %v, %v", st, err)
			}
			switch op {
			case "snapshot":
				snapshot(t, m, root, "refs/belay/s/3", s2.Commit)
			case "restore":
				if _, err := m.Restore(ctx, root, s2.Commit, s1.Commit, false); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := os.Stat(alternatesFile(t, m, root)); !os.IsNotExist(err) {
				t.Errorf("alternates still present after a %s: %v", op, err)
			}
			if err := os.RemoveAll(filepath.Join(root, ".git")); err != nil {
				t.Fatal(err)
			}
			if err := m.Fsck(ctx, root); err != nil {
				t.Fatal(err)
			}
			writeFiles(t, root, map[string]string{"src/d01/f0001.txt": "after\n"})
			s4 := snapshot(t, m, root, "refs/belay/s/4", s1.Commit)
			if _, err := m.Restore(ctx, root, s4.Commit, s2.Commit, false); err != nil {
				t.Fatal(err)
			}
			diffStates(t, "restored without the user's .git", want, treeState(t, root))
		})
	}
}

func TestBorrowedObjectsPrunedAreDetected(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	root := userRepoWorkspace(t, 20)
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	borrowAgain(t, m, root)
	// The user's git loses every object (as after a rewrite and
	// `git gc --prune=now`).
	userObjects := filepath.Join(root, ".git", "objects")
	entries, _ := os.ReadDir(userObjects)
	for _, e := range entries {
		if e.Name() != "info" {
			os.RemoveAll(filepath.Join(userObjects, e.Name()))
		}
	}
	if ok, err := m.HasCommit(ctx, root, s1.Commit); ok || err != nil {
		t.Errorf("HasCommit = %v, %v; want false", ok, err)
	}
	if st, err := m.CheckCommit(ctx, root, s1.Commit); st != CommitIncomplete || err != nil {
		t.Errorf("CheckCommit = %v, %v; want incomplete", st, err)
	}
	wantCode(t, m.Fsck(ctx, root), Corrupted)
	// A snapshot cannot copy what is gone: it says so and records nothing.
	_, err := m.Snapshot(ctx, SnapshotRequest{Root: root, Ref: "refs/belay/s/2", Parent: s1.Commit, Message: "two\n"})
	wantCode(t, err, Corrupted)
	if refs, err := m.Refs(ctx, root, "refs/belay/s"); err != nil || len(refs) != 1 {
		t.Errorf("refs after a failed snapshot = %v, %v", refs, err)
	}
	for _, c := range []struct {
		root, commit string
	}{{root, strings.Repeat("1", 40)}, {t.TempDir(), s1.Commit}} {
		if st, err := m.CheckCommit(ctx, c.root, c.commit); st != CommitAbsent || err != nil {
			t.Errorf("CheckCommit(%s) = %v, %v; want absent", c.commit, st, err)
		}
		if ok, err := m.HasCommit(ctx, c.root, c.commit); ok || err != nil {
			t.Errorf("HasCommit(%s) = %v, %v", c.commit, ok, err)
		}
	}
}

func TestUserRepositoryNeverModified(t *testing.T) {
	m := newManager(t)
	root := userRepoWorkspace(t, 200)
	gitDir := filepath.Join(root, ".git")
	before := hashTree(t, gitDir)
	indexInfo, _ := os.Stat(filepath.Join(gitDir, "index"))
	ctx := context.Background()

	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	writeFiles(t, root, map[string]string{"src/d04/f0004.txt": "agent edit\n", "agent.txt": "new\n"})
	removeFiles(t, root, "src/d05/f0005.txt")
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit, "src/d04/f0004.txt", "agent.txt", "src/d05/f0005.txt")
	if _, err := m.Diff(ctx, root, s1.Commit, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Diff(ctx, root, s1.Commit, s2.Commit); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Restore(ctx, root, s2.Commit, s1.Commit, false); err != nil {
		t.Fatal(err)
	}
	diffStates(t, ".git after snapshot, diff and restore", before, hashTree(t, gitDir))
	after, _ := os.Stat(filepath.Join(gitDir, "index"))
	if !after.ModTime().Equal(indexInfo.ModTime()) {
		t.Errorf("index mtime changed: %v -> %v", indexInfo.ModTime(), after.ModTime())
	}

	// ExportBranch adds objects, the branch and its reflog, and nothing else.
	if err := m.ExportBranch(ctx, root, "belay/session", []string{s1.Commit, s2.Commit}); err != nil {
		t.Fatal(err)
	}
	got := hashTree(t, gitDir)
	for name, sum := range got {
		if strings.HasPrefix(name, "objects/") || strings.Contains(name, "belay") {
			continue
		}
		if before[name] != sum {
			t.Errorf(".git/%s changed or appeared in export", name)
		}
	}
	for name := range before {
		if _, ok := got[name]; !ok {
			t.Errorf(".git/%s disappeared in export", name)
		}
	}
	after, _ = os.Stat(filepath.Join(gitDir, "index"))
	if !after.ModTime().Equal(indexInfo.ModTime()) {
		t.Errorf("index mtime changed by export")
	}
}

func TestExportBranch(t *testing.T) {
	m := newManager(t)
	root := userRepoWorkspace(t, 10)
	ctx := context.Background()
	head := strings.TrimSpace(userGit(t, root, "rev-parse", "HEAD"))
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	writeFiles(t, root, map[string]string{"agent.txt": "step 2\n"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	writeFiles(t, root, map[string]string{"agent.txt": "step 3\n"})
	s3 := snapshot(t, m, root, "refs/belay/s/3", s2.Commit)
	status := userGit(t, root, "status", "--porcelain")

	if err := m.ExportBranch(ctx, root, "belay/s", []string{s1.Commit, s2.Commit}); err != nil {
		t.Fatal(err)
	}
	log := userGit(t, root, "log", "--format=%T %P %s", "belay/s")
	lines := strings.Split(strings.TrimSpace(log), "\n")
	if len(lines) != 3 {
		t.Fatalf("branch log:\n%s", log)
	}
	if !strings.HasPrefix(lines[1], s1.Tree+" "+head+" checkpoint refs/belay/s/1") || !strings.HasPrefix(lines[0], s2.Tree+" ") {
		t.Errorf("branch log:\n%s", log)
	}
	// The repository is complete on its own: the objects were copied.
	userGit(t, root, "fsck", "--connectivity-only", "--no-dangling")
	// Exporting more fast-forwards.
	if err := m.ExportBranch(ctx, root, "belay/s", []string{s1.Commit, s2.Commit, s3.Commit}); err != nil {
		t.Fatal(err)
	}
	if got := userGit(t, root, "rev-list", "--count", "belay/s"); strings.TrimSpace(got) != "4" {
		t.Errorf("branch has %s commits, want 4", got)
	}
	if got := strings.TrimSpace(userGit(t, root, "rev-parse", "HEAD")); got != head {
		t.Errorf("HEAD moved to %s", got)
	}
	if got := userGit(t, root, "status", "--porcelain"); got != status {
		t.Errorf("status changed:\n%s\nwas:\n%s", got, status)
	}
	// A diverged branch is not overwritten; a checked-out one, here or in
	// another worktree, is refused.
	err := m.ExportBranch(ctx, root, "belay/s", []string{s2.Commit})
	wantCode(t, err, InvalidWorkspace)
	if err == nil || !strings.Contains(err.Error(), "exists and has commits this export does not hold") || strings.Contains(err.Error(), m.dataDir) {
		t.Errorf("export over a diverged branch: %v", err)
	}
	wantCode(t, m.ExportBranch(ctx, root, "main", []string{s1.Commit}), InvalidWorkspace)
	userGit(t, root, "worktree", "add", "-q", "-b", "elsewhere", filepath.Join(t.TempDir(), "wt"))
	wantCode(t, m.ExportBranch(ctx, root, "elsewhere", []string{s1.Commit}), InvalidWorkspace)
	wantCode(t, m.ExportBranch(ctx, root, "bad..name", []string{s1.Commit}), InvalidWorkspace)

	plain := t.TempDir()
	writeFiles(t, plain, map[string]string{"a.txt": "a\n"})
	p1 := snapshot(t, m, plain, "refs/belay/p/1", "")
	wantCode(t, m.ExportBranch(ctx, plain, "belay/p", []string{p1.Commit}), InvalidWorkspace)
}

func TestBundleRoundTrip(t *testing.T) {
	m := newManager(t)
	root := userRepoWorkspace(t, 30)
	ctx := context.Background()
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	writeFiles(t, root, map[string]string{"agent.txt": "agent\n", "link": "->agent.txt"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	bundle := filepath.Join(t.TempDir(), "session.bundle")
	if err := m.WriteBundle(ctx, root, []string{"refs/belay/s/1", "refs/belay/s/2"}, bundle); err != nil {
		t.Fatal(err)
	}
	want := treeState(t, root)
	delete(want, "untracked.txt.")

	// Another machine: another data dir and an empty workspace.
	other := newManager(t)
	root2 := t.TempDir()
	refs, err := other.ReadBundle(ctx, root2, bundle)
	if err != nil {
		t.Fatal(err)
	}
	if refs["refs/belay/s/1"] != s1.Commit || refs["refs/belay/s/2"] != s2.Commit || len(refs) != 2 {
		t.Errorf("bundle refs %v", refs)
	}
	if err := other.Fsck(ctx, root2); err != nil {
		t.Fatal(err)
	}
	msg, err := other.CommitMessage(ctx, root2, s2.Commit)
	if err != nil || msg != "checkpoint refs/belay/s/2\n" {
		t.Errorf("message %q, %v", msg, err)
	}
	empty := snapshot(t, other, root2, "refs/belay/local/0", "")
	if _, err := other.Restore(ctx, root2, empty.Commit, s2.Commit, false); err != nil {
		t.Fatal(err)
	}
	delete(want, ".git")
	for k := range want {
		if strings.HasPrefix(k, ".git/") {
			delete(want, k)
		}
	}
	diffStates(t, "restored from bundle", want, treeState(t, root2))
	// Reading it again is a no-op.
	if _, err := other.ReadBundle(ctx, root2, bundle); err != nil {
		t.Fatal(err)
	}
	if n, err := other.DiskUsage(ctx, root2); err != nil || n <= 0 {
		t.Errorf("DiskUsage = %d, %v", n, err)
	}
}

func TestDiff(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	ctx := context.Background()
	writeFiles(t, root, map[string]string{
		"a.txt":      "one\ntwo\nthree\n",
		"gone.txt":   "bye\n",
		"moved.txt":  strings.Repeat("a long enough line to detect a rename\n", 5),
		"bin.dat":    "\x00\x01\x02",
		"type.txt":   "file\n",
		"same.txt":   "same\n",
		".gitignore": "*.log\n",
	})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	removeFiles(t, root, "gone.txt", "moved.txt")
	writeFiles(t, root, map[string]string{
		"a.txt":         "one\n2\nthree\nfour\n",
		"new.txt":       "n\n",
		"dir/moved.txt": strings.Repeat("a long enough line to detect a rename\n", 5),
		"bin.dat":       "\x00\x01\x03",
		"type.txt":      "->same.txt",
		"debug.log":     "ignored\n",
	})
	want := []FileDiff{
		{Path: "a.txt", Status: "modified", Additions: 2, Deletions: 1},
		{Path: "bin.dat", Status: "modified", Binary: true},
		{Path: "dir/moved.txt", OldPath: "moved.txt", Status: "renamed"},
		{Path: "gone.txt", Status: "deleted", Deletions: 1},
		{Path: "new.txt", Status: "added", Additions: 1},
		{Path: "type.txt", Status: "modified", Additions: 1, Deletions: 1},
	}
	s, _ := m.workspaceFor(context.Background(), root)
	indexBefore := hashTree(t, s.index)
	refsBefore, _ := m.Refs(ctx, root, "refs/")
	live, err := m.Diff(ctx, root, s1.Commit, "")
	if err != nil {
		t.Fatal(err)
	}
	diffStates(t, "private index", indexBefore, hashTree(t, s.index))
	if refs, _ := m.Refs(ctx, root, "refs/"); len(refs) != len(refsBefore) {
		t.Errorf("diff against the work tree wrote refs: %v", refs)
	}
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	stored, err := m.Diff(ctx, root, s1.Commit, s2.Commit)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []*Diff{live, stored} {
		sortRenamesLast := func(a, b FileDiff) int { return strings.Compare(a.Path, b.Path) }
		slices.SortFunc(d.Files, sortRenamesLast)
		if !slices.Equal(d.Files, want) {
			t.Errorf("files:\n got %+v\nwant %+v", d.Files, want)
		}
		if d.Additions != 4 || d.Deletions != 3 {
			t.Errorf("totals +%d -%d, want +4 -3", d.Additions, d.Deletions)
		}
		for _, s := range []string{"-two\n+2\n", "+four\n", "rename from moved.txt", "Binary files", "new file mode 120000"} {
			if !strings.Contains(d.Patch, s) {
				t.Errorf("patch lacks %q:\n%s", s, d.Patch)
			}
		}
	}
	_, err = m.Diff(ctx, root, "refs/belay/missing", "")
	wantCode(t, err, NotFound)
}

// TestExportBranchRefusesAmbiguousNames: a branch name that reads as another
// ref is refused before anything is written.
func TestExportBranchRefusesAmbiguousNames(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a\n"})
	initUserRepo(t, root)
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	refs := userGit(t, root, "for-each-ref")
	for _, branch := range []string{"HEAD", "refs/heads/main", "@", "-x"} {
		err := m.ExportBranch(context.Background(), root, branch, []string{s1.Commit})
		wantCode(t, err, InvalidWorkspace)
	}
	if got := userGit(t, root, "for-each-ref"); got != refs {
		t.Errorf("refs changed:\n%s\nwant\n%s", got, refs)
	}
}

// TestExportBranchIntoASharedRepository: the objects an export writes into
// a repository shared with a group (core.sharedRepository) are the group's
// to read, whatever belay's umask, as a fetch there would make them.
func TestExportBranchIntoASharedRepository(t *testing.T) {
	m := newManager(t)
	root := userRepoWorkspace(t, 3)
	userGit(t, root, "config", "core.sharedRepository", "group")
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	old := syscall.Umask(0o077)
	err := m.ExportBranch(context.Background(), root, "belay/s", []string{s1.Commit})
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	packs, err := filepath.Glob(filepath.Join(root, ".git", "objects", "pack", "*"))
	if err != nil || len(packs) == 0 {
		t.Fatalf("packs: %v, %v", packs, err)
	}
	for _, p := range packs {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o040 == 0 {
			t.Errorf("%s is %v: the group cannot read it", filepath.Base(p), fi.Mode().Perm())
		}
	}
}
