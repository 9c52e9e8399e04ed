package workspace

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestUserInfoExcludeIsHonoured: what the user's .git/info/exclude lists is
// not snapshotted (a secret listed there was), in a worktree too, and
// .belayignore still applies beside it.
func TestUserInfoExcludeIsHonoured(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"main.go": "package main\n", ".belayignore": "*.tmp\n"})
	initUserRepo(t, root)
	writeFiles(t, root, map[string]string{"secret.env": "TOKEN=x\n", "local/notes.txt": "mine\n", "scratch.tmp": "tmp\n",
		".git/info/exclude": "# git ls-files --others --exclude-from=.git/info/exclude\nsecret.env\n/local/\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	if want := []string{".belayignore", "main.go"}; !slices.Equal(s1.Created, want) {
		t.Errorf("stored %q, want %q", s1.Created, want)
	}
	// An edit of info/exclude takes effect at the next snapshot.
	writeFiles(t, root, map[string]string{".git/info/exclude": "secret.env\n"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	if want := []string{"local/notes.txt"}; !slices.Equal(s2.Created, want) {
		t.Errorf("after editing info/exclude stored %q, want %q", s2.Created, want)
	}

	// A linked worktree reads the main repository's info/exclude.
	wt := filepath.Join(t.TempDir(), "wt")
	userGit(t, root, "worktree", "add", "-q", "-b", "other", wt)
	writeFiles(t, wt, map[string]string{"secret.env": "TOKEN=y\n", "b.txt": "b\n"})
	s3 := snapshot(t, m, wt, "refs/belay/w/1", "")
	if slices.Contains(s3.Created, "secret.env") || !slices.Contains(s3.Created, "b.txt") {
		t.Errorf("worktree snapshot stored %q", s3.Created)
	}
}

// TestSpecialFilesAreReported: named pipes and sockets cannot be stored;
// they are listed as skipped (git itself passes over them without a word),
// unless ignored.
func TestSpecialFilesAreReported(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a\n", ".gitignore": "ignored.fifo\n", "sub/b.txt": "b\n"})
	for _, p := range []string{"pipe", "sub/deep.fifo", "ignored.fifo", "node_modules/x.fifo"} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		if err := syscall.Mkfifo(filepath.Join(root, p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Socket paths are short: listen in the directory itself.
	wd, _ := os.Getwd()
	if err := os.Chdir(filepath.Join(root, "sub")); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", "agent.sock")
	os.Chdir(wd)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	reasons := map[string]string{}
	for _, sk := range s1.Skipped {
		reasons[sk.Path] = sk.Reason
	}
	if len(reasons) != 3 || !strings.Contains(reasons["pipe"], "named pipe") || !strings.Contains(reasons["sub/deep.fifo"], "named pipe") ||
		!strings.Contains(reasons["sub/agent.sock"], "socket") {
		t.Errorf("skipped %+v", s1.Skipped)
	}
	if want := []string{".gitignore", "a.txt", "sub/b.txt"}; !slices.Equal(s1.Created, want) {
		t.Errorf("stored %q, want %q", s1.Created, want)
	}
	// Naming it among the touched paths reports it too.
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit, "pipe")
	if len(s2.Skipped) != 1 || s2.Skipped[0].Path != "pipe" {
		t.Errorf("skipped with paths %+v", s2.Skipped)
	}
}

// TestMaxFileSizePerSnapshot: a snapshot may raise or lower the size cap.
func TestMaxFileSizePerSnapshot(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"small.txt": "small\n", "mid.bin": strings.Repeat("m", 2000)})
	s1, err := m.Snapshot(context.Background(), SnapshotRequest{Root: root, Ref: "refs/belay/s/1", Message: "one\n", MaxFileSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s1.Created, []string{"small.txt"}) || len(s1.Skipped) != 1 || !strings.Contains(s1.Skipped[0].Reason, "larger than 1000 bytes") {
		t.Errorf("with a 1000-byte cap: stored %q, skipped %+v", s1.Created, s1.Skipped)
	}
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	if !slices.Equal(s2.Created, []string{"mid.bin"}) || len(s2.Skipped) != 0 {
		t.Errorf("with the default cap: stored %q, skipped %+v", s2.Created, s2.Skipped)
	}
}

// TestBelayArchivesAreNeverSnapshotted: belay's own export archives (and
// their temporary files) stay out of snapshots, in shadow repositories made
// before the rule too.
func TestBelayArchivesAreNeverSnapshotted(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	// A shadow repository from before: its built-in excludes lack the rule.
	s, _ := m.workspaceFor(context.Background(), root)
	if err := os.WriteFile(filepath.Join(s.dir, "exclude"), []byte(".git\nnode_modules/\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, root, map[string]string{"0190aaaa.belay.tar.gz": "archive", ".0190aaaa.belay.tar.gz.tmp123": "partial", "b.txt": "b\n"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	if !slices.Equal(s2.Created, []string{"b.txt"}) {
		t.Errorf("stored %q, want [b.txt]", s2.Created)
	}
}

// TestSnapshotProgress: a snapshot reports the files it hashes and their
// bytes as it goes.
func TestSnapshotProgress(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	files := map[string]string{}
	var total int64
	for i := range 1000 {
		content := strings.Repeat("x", i)
		files[filepath.Join("d", string(rune('a'+i%26)), fmt.Sprintf("f%04d.txt", i))] = content
		total += int64(len(content))
	}
	writeFiles(t, root, files)
	var seen []Progress
	_, err := m.Snapshot(context.Background(), SnapshotRequest{Root: root, Ref: "refs/belay/s/1", Message: "one\n",
		Progress: func(p Progress) { seen = append(seen, p) }})
	if err != nil {
		t.Fatal(err)
	}
	// Scanning, hashing from 0, then after each batch of 200 files.
	if len(seen) != 7 || seen[0].Phase != "scanning" || seen[3].Files != 400 || seen[3].TotalFiles != 1000 {
		t.Fatalf("progress reports: %+v", seen)
	}
	last := seen[len(seen)-1]
	if last.Phase != "hashing" || last.Files != 1000 || last.TotalFiles != 1000 || last.Bytes != total || last.TotalBytes != total {
		t.Errorf("last progress = %+v, want 1000 files and %d bytes", last, total)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i].Files < seen[i-1].Files || seen[i].Bytes < seen[i-1].Bytes {
			t.Fatalf("progress went back: %+v then %+v", seen[i-1], seen[i])
		}
	}
}

// TestFirstSnapshotOfAGitProjectReportsTheCopy: the first snapshot of a git
// project copies in the objects it borrowed from the project's .git, and
// says so; a later snapshot has nothing to copy.
func TestFirstSnapshotOfAGitProjectReportsTheCopy(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a\n", "d/b.txt": "b\n"})
	initUserRepo(t, root)
	phases := func(ref, parent string) ([]string, *Snapshot) {
		var seen []string
		snap, err := m.Snapshot(context.Background(), SnapshotRequest{Root: root, Ref: ref, Parent: parent, Message: "m\n",
			Progress: func(p Progress) { seen = append(seen, p.Phase) }})
		if err != nil {
			t.Fatal(err)
		}
		return seen, snap
	}
	first, s1 := phases("refs/belay/s/1", "")
	if !slices.Contains(first, "copying") || first[len(first)-1] != "copying" {
		t.Errorf("the first snapshot's phases = %q, want copying last", first)
	}
	writeFiles(t, root, map[string]string{"c.txt": "c\n"})
	if again, _ := phases("refs/belay/s/2", s1.Commit); slices.Contains(again, "copying") {
		t.Errorf("a later snapshot's phases = %q, want no copying", again)
	}
}

// TestUnreadableDirectoriesAreReported: a new directory the snapshot cannot
// read is reported as skipped, as an unreadable file is, unless an ignore
// rule covers it.
func TestUnreadableDirectoriesAreReported(t *testing.T) {
	if os.Geteuid() == 0 {
		// Root reads every directory, and git's scan is another process:
		// the test runs again as nobody.
		runAsNobody(t)
		return
	}
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a\n", "locked/secret.txt": "s\n", "deep/er/locked/x.txt": "x\n",
		"ignored/y.txt": "y\n", ".gitignore": "ignored/\n"})
	for _, dir := range []string{"locked", "deep/er/locked", "ignored"} {
		path := filepath.Join(root, dir)
		if err := os.Chmod(path, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(path, 0o755) })
	}
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	if want := []string{".gitignore", "a.txt"}; !slices.Equal(s1.Created, want) {
		t.Errorf("stored %q, want %q", s1.Created, want)
	}
	var skipped []string
	for _, sk := range s1.Skipped {
		skipped = append(skipped, sk.Path)
		if !strings.HasPrefix(sk.Reason, "unreadable") || strings.Contains(sk.Reason, root) {
			t.Errorf("%s skipped for %q", sk.Path, sk.Reason)
		}
	}
	if want := []string{"deep/er/locked", "locked"}; !slices.Equal(skipped, want) {
		t.Errorf("skipped %+v, want %q", s1.Skipped, want)
	}
}

// runAsNobody runs the test t again in a child process as the user nobody,
// from a copy of the test binary nobody may run, and fails t as it fails;
// it skips t when that cannot be done.
func runAsNobody(t *testing.T) {
	dir, err := os.MkdirTemp("", "belay-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin, err := os.ReadFile(os.Args[0])
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "test"), bin, 0o755)
	}
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "test"), "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		t.Errorf("as nobody:\n%s", out)
	case err != nil:
		t.Skipf("cannot run the test as nobody: %v", err)
	case !strings.Contains(string(out), "--- PASS: "+t.Name()):
		t.Skipf("the test did not run as nobody:\n%s", out)
	}
}
