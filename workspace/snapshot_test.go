package workspace

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"a.txt":              "alpha\n",
		"docs/guide.md":      "# guide\n",
		"ünï/çödé.txt":       "unicode\n",
		"new\nline.txt":      "newline name\n",
		"-rf":                "leading dash\n",
		"deep/er/still.txt":  "deep\n",
		"link":               "->a.txt",
		"dirlink":            "->docs",
		"outside":            "->/etc/passwd",
		"becomes-link.txt":   "plain\n",
		"space name.txt":     "spaces\n",
		"tab\tname.txt":      "tab\n",
		`back\slash.txt`:     "backslash\n",
		"quote\"name'.txt":   "quotes\n",
		"star*.txt":          "glob chars are literal\n",
		":(exclude)magic.go": "pathspec magic is literal\n",
		".gitignore":         "*.log\n",
	})
	writeFiles(t, root, map[string]string{"run.sh": "#!/bin/sh\n"})
	if err := os.Chmod(filepath.Join(root, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := treeState(t, root)
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	if len(s1.Created) != len(before)-4 { // minus the directories docs, ünï, deep, deep/er
		t.Errorf("first snapshot created %d files, want %d: %q", len(s1.Created), len(before)-4, s1.Created)
	}
	if !slices.Contains(treeFiles(t, m, root, s1.Commit), "120000 link") {
		t.Errorf("symlink not stored as a symlink: %q", treeFiles(t, m, root, s1.Commit))
	}
	if !slices.Contains(treeFiles(t, m, root, s1.Commit), "100755 run.sh") {
		t.Errorf("exec bit not stored: %q", treeFiles(t, m, root, s1.Commit))
	}

	// Change everything a session might change.
	writeFiles(t, root, map[string]string{
		"a.txt":             "alpha changed\n",
		"ünï/çödé.txt":      "unicode changed\n",
		"created/dir/f.txt": "created\n",
		"-rf":               "dash changed\n",
		"link":              "->docs/guide.md",
		"becomes-link.txt":  "->a.txt",
		"new\nline.txt":     "newline changed\n",
	})
	removeFiles(t, root, "deep", "space name.txt")
	if err := os.Chmod(filepath.Join(root, "run.sh"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Ignored and unknown files must survive the restore.
	writeFiles(t, root, map[string]string{
		"node_modules/pkg/index.js": "ignored\n",
		"cache.pyc":                 "ignored\n",
		"debug.log":                 "ignored by .gitignore\n",
		"created.txt":               "created\n",
	})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	wantCreated := []string{"created.txt", "created/dir/f.txt"}
	wantModified := []string{"-rf", "a.txt", "becomes-link.txt", "link", "new\nline.txt", "run.sh", "ünï/çödé.txt"}
	wantDeleted := []string{"deep/er/still.txt", "space name.txt"}
	if !slices.Equal(s2.Created, wantCreated) || !slices.Equal(s2.Modified, wantModified) || !slices.Equal(s2.Deleted, wantDeleted) {
		t.Errorf("changes: created %q modified %q deleted %q\nwant created %q modified %q deleted %q",
			s2.Created, s2.Modified, s2.Deleted, wantCreated, wantModified, wantDeleted)
	}
	changed := treeState(t, root)

	dry, err := m.Restore(context.Background(), root, s2.Commit, s1.Commit, true)
	if err != nil {
		t.Fatal(err)
	}
	diffStates(t, "dry run changed the work tree", changed, treeState(t, root))
	res, err := m.Restore(context.Background(), root, s2.Commit, s1.Commit, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dry.Changes, res.Changes) {
		t.Errorf("dry run %v differs from restore %v", dry.Changes, res.Changes)
	}
	wantChanges := []Change{
		{"-rf", ActionRestore}, {"a.txt", ActionRestore},
		{"becomes-link.txt", ActionRestore}, {"created.txt", ActionRemove}, {"created/dir/f.txt", ActionRemove},
		{"deep/er/still.txt", ActionRestore}, {"link", ActionRestore}, {"new\nline.txt", ActionRestore},
		{"run.sh", ActionRestore}, {"space name.txt", ActionRestore}, {"ünï/çödé.txt", ActionRestore},
	}
	if !slices.Equal(res.Changes, wantChanges) {
		t.Errorf("changes:\n got %q\nwant %q", res.Changes, wantChanges)
	}
	want := before
	for _, p := range []string{"node_modules", "node_modules/pkg", "node_modules/pkg/index.js", "cache.pyc", "debug.log"} {
		want[p] = changed[p]
	}
	diffStates(t, "after restore", want, treeState(t, root))

	// The private index follows: a snapshot now equals the target tree, and
	// restoring forward again works.
	s3 := snapshot(t, m, root, "refs/belay/s/3", s2.Commit)
	if s3.Tree != s1.Tree {
		t.Errorf("snapshot after restore has tree %s, want the target's %s", s3.Tree, s1.Tree)
	}
	if _, err := m.Restore(context.Background(), root, s3.Commit, s2.Commit, false); err != nil {
		t.Fatal(err)
	}
	diffStates(t, "after restoring forward", changed, treeState(t, root))
}

func TestSnapshotExcludes(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"keep.go":                  "package keep\n",
		".gitignore":               "*.log\n/secret/\n",
		"sub/.gitignore":           "local.txt\n",
		"sub/local.txt":            "ignored in sub\n",
		"sub/kept.txt":             "kept\n",
		".belayignore":             "*.tmp\nscratch/\n",
		"x.tmp":                    "belayignored\n",
		"scratch/s.txt":            "belayignored\n",
		"app.log":                  "ignored\n",
		"secret/key":               "ignored\n",
		"node_modules/a/b.js":      "built-in\n",
		".venv/bin/python":         "built-in\n",
		"pkg/__pycache__/m.pyc":    "built-in\n",
		"target/debug/app":         "built-in\n",
		"dist/app.js":              "built-in\n",
		"build/out.o":              "built-in\n",
		".DS_Store":                "built-in\n",
		"mod.pyc":                  "built-in\n",
		".belay/state.db":          "built-in\n",
		"web/node_modules/x/y.js":  "built-in, nested\n",
		"notes/build.md":           "a file named build is kept\n",
		"docs/distribution/doc.md": "kept\n",
	})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	want := []string{".belayignore", ".gitignore", "docs/distribution/doc.md", "keep.go", "notes/build.md", "sub/.gitignore", "sub/kept.txt"}
	if !slices.Equal(s1.Created, want) {
		t.Errorf("stored %q, want %q", s1.Created, want)
	}
	// Changing .belayignore takes effect at the next snapshot.
	writeFiles(t, root, map[string]string{".belayignore": "scratch/\n"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	if !slices.Equal(s2.Created, []string{"x.tmp"}) {
		t.Errorf("after editing .belayignore created %q, want [x.tmp]", s2.Created)
	}
}

func TestDataDirInsideWorkspaceIsNotSnapshotted(t *testing.T) {
	root := t.TempDir()
	m, err := New(Options{DataDir: filepath.Join(root, "state")})
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, root, map[string]string{"a.txt": "a\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	if !slices.Equal(s1.Created, []string{"a.txt"}) {
		t.Errorf("stored %q, want only a.txt", s1.Created)
	}
	_, err = m.Snapshot(context.Background(), SnapshotRequest{Root: filepath.Join(root, "state"), Ref: "refs/belay/s/1"})
	wantCode(t, err, InvalidWorkspace)
}

func TestNestedRepositoryStoredByPath(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"top.txt":               "top\n",
		"vendor/lib/lib.go":     "package lib\n",
		"vendor/lib/d/y.txt":    "y\n",
		"vendor/lib/.gitignore": "gen/\n",
		"vendor/lib/gen/g.go":   "generated, ignored by the nested .gitignore\n",
	})
	nested := filepath.Join(root, "vendor/lib")
	initUserRepo(t, nested)
	writeFiles(t, nested, map[string]string{"inner/deeper/f.txt": "in a repo in a repo\n"})
	initUserRepo(t, filepath.Join(nested, "inner"))
	gitBefore := hashTree(t, filepath.Join(nested, ".git"))

	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	want := []string{
		"100644 top.txt", "100644 vendor/lib/.gitignore", "100644 vendor/lib/d/y.txt",
		"100644 vendor/lib/inner/deeper/f.txt", "100644 vendor/lib/lib.go",
	}
	if got := treeFiles(t, m, root, s1.Commit); !slices.Equal(got, want) {
		t.Errorf("tree %q, want %q", got, want)
	}
	// New files in the nested repository are seen by later snapshots, and a
	// restore removes them without touching the nested .git.
	writeFiles(t, nested, map[string]string{"new.txt": "new\n", "lib.go": "package lib // changed\n"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	if !slices.Equal(s2.Created, []string{"vendor/lib/new.txt"}) || !slices.Equal(s2.Modified, []string{"vendor/lib/lib.go"}) {
		t.Errorf("created %q modified %q", s2.Created, s2.Modified)
	}
	if _, err := m.Restore(context.Background(), root, s2.Commit, s1.Commit, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(nested, "new.txt")); !os.IsNotExist(err) {
		t.Errorf("new.txt not removed: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(nested, "lib.go")); string(data) != "package lib\n" {
		t.Errorf("lib.go = %q", data)
	}
	diffStates(t, "nested .git", gitBefore, hashTree(t, filepath.Join(nested, ".git")))
}

func TestSubmoduleOfUserRepoStoredByPath(t *testing.T) {
	m := newManager(t)
	lib := t.TempDir()
	writeFiles(t, lib, map[string]string{"lib.go": "package lib\n"})
	initUserRepo(t, lib)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"main.go": "package main\n"})
	initUserRepo(t, root)
	userGit(t, root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "lib")
	userGit(t, root, "commit", "-q", "-m", "add submodule")

	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	want := []string{"100644 .gitmodules", "100644 lib/lib.go", "100644 main.go"}
	if got := treeFiles(t, m, root, s1.Commit); !slices.Equal(got, want) {
		t.Errorf("tree %q, want %q", got, want)
	}
}

func TestSkippedFiles(t *testing.T) {
	m, err := New(Options{DataDir: t.TempDir(), MaxFileSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	// Root reads every file, so unreadability is injected where the check is.
	m.openFile = func(name string) (*os.File, error) {
		if filepath.Base(name) == "locked.txt" {
			return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EACCES}
		}
		return os.Open(name)
	}
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"small.txt":  "small\n",
		"big.bin":    strings.Repeat("x", 101),
		"locked.txt": "secret\n",
	})
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	if !slices.Equal(s1.Created, []string{"small.txt"}) {
		t.Errorf("stored %q, want [small.txt]", s1.Created)
	}
	var skipped []string
	for _, sk := range s1.Skipped {
		skipped = append(skipped, sk.Path)
		if sk.Reason == "" {
			t.Errorf("%s skipped without a reason", sk.Path)
		}
	}
	slices.Sort(skipped)
	if !slices.Equal(skipped, []string{"big.bin", "fifo", "locked.txt"}) {
		t.Errorf("skipped %v, want big.bin, fifo and locked.txt", s1.Skipped)
	}
	// A skipped file is neither tree's, so a restore leaves it alone.
	writeFiles(t, root, map[string]string{"small.txt": "changed\n"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	if _, err := m.Restore(context.Background(), root, s2.Commit, s1.Commit, false); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(root, "big.bin")); len(data) != 101 {
		t.Errorf("big.bin touched by restore")
	}
}

func TestSnapshotWithPaths(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"a.txt": "a\n", "b.txt": "b\n", "d.txt": "d\n", "gone/x.txt": "x\n", "gone/y/z.txt": "z\n",
	})
	// The first snapshot scans everything whatever the paths say.
	s1 := snapshot(t, m, root, "refs/belay/s/1", "", "a.txt")
	if len(s1.Created) != 5 {
		t.Fatalf("first snapshot with paths stored %q", s1.Created)
	}
	writeFiles(t, root, map[string]string{
		"a.txt": "a2\n", "b.txt": "b2 (not reported)\n", "c.txt": "c\n", "node_modules/m.js": "ignored\n",
	})
	removeFiles(t, root, "d.txt", "gone")
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit, "a.txt", "./c.txt", "d.txt", "gone", "node_modules/m.js", ".git/config")
	if !slices.Equal(s2.Created, []string{"c.txt"}) ||
		!slices.Equal(s2.Modified, []string{"a.txt"}) ||
		!slices.Equal(s2.Deleted, []string{"d.txt", "gone/x.txt", "gone/y/z.txt"}) {
		t.Errorf("created %q modified %q deleted %q", s2.Created, s2.Modified, s2.Deleted)
	}
	// A full snapshot afterwards picks up b.txt.
	s3 := snapshot(t, m, root, "refs/belay/s/3", s2.Commit)
	if !slices.Equal(s3.Modified, []string{"b.txt"}) || len(s3.Created)+len(s3.Deleted) != 0 {
		t.Errorf("full snapshot after paths: created %q modified %q deleted %q", s3.Created, s3.Modified, s3.Deleted)
	}
	// A directory among the paths stands for everything below it, and
	// only that: b.txt waits for a full scan.
	writeFiles(t, root, map[string]string{"newdir/n.txt": "n\n", "newdir/sub/m.txt": "m\n", "newdir/node_modules/x.js": "x\n", "b.txt": "b3\n"})
	s4 := snapshot(t, m, root, "refs/belay/s/4", s3.Commit, "newdir")
	if !slices.Equal(s4.Created, []string{"newdir/n.txt", "newdir/sub/m.txt"}) || len(s4.Modified) != 0 {
		t.Errorf("created %q modified %q", s4.Created, s4.Modified)
	}
	// A file replaced by a directory, and the whole tree as ".".
	removeFiles(t, root, "c.txt")
	writeFiles(t, root, map[string]string{"c.txt/inner.txt": "i\n"})
	s5 := snapshot(t, m, root, "refs/belay/s/5", s4.Commit, "c.txt")
	if !slices.Equal(s5.Created, []string{"c.txt/inner.txt"}) || !slices.Equal(s5.Deleted, []string{"c.txt"}) || len(s5.Modified) != 0 {
		t.Errorf("file to directory: created %q modified %q deleted %q", s5.Created, s5.Modified, s5.Deleted)
	}
	s6 := snapshot(t, m, root, "refs/belay/s/6", s5.Commit, ".")
	if !slices.Equal(s6.Modified, []string{"b.txt"}) {
		t.Errorf("full scan: created %q modified %q deleted %q", s6.Created, s6.Modified, s6.Deleted)
	}
	_, err := m.Snapshot(context.Background(), SnapshotRequest{Root: root, Ref: "refs/belay/s/7", Paths: []string{"../escape"}})
	wantCode(t, err, InvalidWorkspace)
}

func TestSymlinkLeadingPathNotFollowed(t *testing.T) {
	m := newManager(t)
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"secret.txt": "outside\n"})
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"dir/f.txt": "f\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	// dir becomes a symlink to a directory outside the workspace.
	removeFiles(t, root, "dir")
	writeFiles(t, root, map[string]string{"dir": "->" + outside})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit, "dir/f.txt", "dir/secret.txt", "dir")
	if got := treeFiles(t, m, root, s2.Commit); !slices.Equal(got, []string{"120000 dir"}) {
		t.Errorf("tree %q, want only the symlink", got)
	}
	// Restoring dir/f.txt replaces the symlink; nothing is written outside.
	if _, err := m.Restore(context.Background(), root, s2.Commit, s1.Commit, false); err != nil {
		t.Fatal(err)
	}
	diffStates(t, "outside", map[string]string{"secret.txt": "file 644 outside\n"}, treeState(t, outside))
	diffStates(t, "workspace", map[string]string{"dir": "dir", "dir/f.txt": "file 644 f\n"}, treeState(t, root))
}

func TestInvalidWorkspace(t *testing.T) {
	m := newManager(t)
	file := filepath.Join(t.TempDir(), "file")
	writeFiles(t, filepath.Dir(file), map[string]string{"file": "x"})
	for _, root := range []string{"", "relative/path", filepath.Join(t.TempDir(), "missing"), file, m.dataDir, filepath.Join(m.dataDir, "workspaces")} {
		if root != "" && root != "relative/path" {
			os.MkdirAll(filepath.Join(m.dataDir, "workspaces"), 0o700)
		}
		_, err := m.Snapshot(context.Background(), SnapshotRequest{Root: root, Ref: "refs/belay/s/1"})
		wantCode(t, err, InvalidWorkspace)
	}
	fresh := t.TempDir()
	_, err := m.Restore(context.Background(), fresh, "HEAD", "HEAD", false)
	wantCode(t, err, NotFound)
	if _, err := m.Diff(context.Background(), fresh, "HEAD", ""); err == nil {
		t.Error("diff of a workspace never snapshotted succeeded")
	}
	if entries, _ := os.ReadDir(filepath.Join(m.dataDir, "workspaces")); len(entries) != 0 {
		t.Errorf("failed calls created shadow directories: %v", entries)
	}
	for version, ok := range map[string]bool{
		"git version 2.39.5\n": true, "git version 2.30.0": true, "git version 3.0.1": true,
		"git version 2.39.3 (Apple Git-146)": true, "git version 2.43.0.windows.1": true,
		"git version 2.29.2": false, "git version 1.9": false, "nonsense": false,
	} {
		if recentGit(version) != ok {
			t.Errorf("recentGit(%q) = %v", version, !ok)
		}
	}
	_, err = New(Options{DataDir: t.TempDir(), Git: "/nonexistent/git"})
	wantCode(t, err, GitMissing)
	if !strings.Contains(err.Error(), "git binary not found: install git") {
		t.Errorf("message %q", err)
	}
}
