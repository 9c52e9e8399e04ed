package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
	"github.com/belayhq/belay/cmd/belay/wire"
	"github.com/belayhq/belay/internal/testtree"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/sqlite"
)

// wsCLI runs belay in-process in a project directory against a data directory.
type wsCLI struct {
	project, data, home string
}

func newWSCLI(t *testing.T, project string) *wsCLI {
	t.Helper()
	return &wsCLI{project: project, data: t.TempDir(), home: t.TempDir()}
}

func (c *wsCLI) run(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	env := map[string]string{"HOME": c.home, "BELAY_DATA_DIR": c.data}
	code := cli.Run(context.Background(), args, cli.Env{Backend: wire.Backend(),
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut,
		Getenv: func(k string) string { return env[k] },
		Getwd:  func() (string, error) { return c.project, nil },
	})
	return code, out.String(), errOut.String()
}

func (c *wsCLI) ok(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := c.run(args...)
	if code != cli.ExitOK {
		t.Fatalf("belay %q: exit %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
	}
	return out
}

// fails runs a command that must exit with code and returns its stderr.
func (c *wsCLI) fails(t *testing.T, code int, args ...string) string {
	t.Helper()
	got, out, errOut := c.run(args...)
	if got != code {
		t.Fatalf("belay %q: exit %d, want %d\nstdout: %s\nstderr: %s", args, got, code, out, errOut)
	}
	return errOut
}

func wsJSON[T any](t *testing.T, c *wsCLI, args ...string) T {
	t.Helper()
	out := c.ok(t, append([]string{"--json"}, args...)...)
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("belay --json %q: %v\n%s", args, err, out)
	}
	return v
}

func wsSparseFile(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

// TestWorkspaceEndToEnd is the "done when": save, break files, diff,
// roll back, undo the rollback, export, import elsewhere and roll back there,
// with the user's .git untouched.
func TestWorkspaceEndToEnd(t *testing.T) {
	for _, withGit := range []bool{true, false} {
		name := "plain directory"
		if withGit {
			name = "git repository"
		}
		t.Run(name, func(t *testing.T) {
			project := t.TempDir()
			testtree.Write(t, project, map[string]string{"a.txt": "alpha\n", "b.txt": "bravo\n", "sub/c.txt": "charlie\n",
				".gitignore": "*.log\n", "-dash ünïcødé.txt": "dash\n", "new\nline.txt": "newline\n"})
			var gitBefore string
			if withGit {
				testtree.Git(t, project, "init", "-q", "-b", "main")
				testtree.Git(t, project, "add", "-A")
				testtree.Git(t, project, "commit", "-q", "-m", "initial")
				gitBefore = testtree.Digest(t, filepath.Join(project, ".git"))
			}
			c := newWSCLI(t, project)
			out := c.ok(t, "save", "-m", "first", "--name", "init")
			if !strings.HasPrefix(out, "Saved checkpoint #1 ") || !strings.Contains(out, "Snapshot ") || !strings.Contains(out, "6 created") {
				t.Errorf("save printed %q", out)
			}
			atFirst := testtree.Read(t, project)

			// Break things: modify, delete, create; an ignored file and a
			// file too big to snapshot appear too.
			testtree.Write(t, project, map[string]string{"a.txt": "broken\n", "created.txt": "new\n", "debug.log": "ignored\n"})
			os.Remove(filepath.Join(project, "b.txt"))
			os.Remove(filepath.Join(project, "-dash ünïcødé.txt"))
			wsSparseFile(t, filepath.Join(project, "big.bin"), 60<<20)
			broken := testtree.Read(t, project)

			out = c.ok(t, "diff", "1")
			for _, want := range []string{"Changes from checkpoint #1 to the working tree:", "modified", "deleted", "added",
				"created.txt", "-dash ünïcødé.txt", "4 files changed", "+broken", "@@"} {
				if !strings.Contains(out, want) {
					t.Errorf("diff 1 lacks %q:\n%s", want, out)
				}
			}
			if out := c.ok(t, "diff", "1", "--stat"); strings.Contains(out, "@@") || !strings.Contains(out, "4 files changed") {
				t.Errorf("diff --stat printed:\n%s", out)
			}
			d := wsJSON[belay.DiffResult](t, c, "diff", "1")
			if len(d.Files) != 4 || d.From.Seq != 1 || d.To != nil {
				t.Errorf("diff --json = %+v", d)
			}

			out = c.ok(t, "rollback", "1", "--dry-run")
			if !strings.Contains(out, "dry run") || !strings.Contains(out, "remove   created.txt") || !maps.Equal(testtree.Read(t, project), broken) {
				t.Errorf("dry run printed %q or changed files", out)
			}
			code, out, errOut := c.run("rollback", "1", "--reason", "broke it")
			if code != 0 || !strings.Contains(out, "Rolled back to checkpoint #1") || !strings.Contains(out, "Undo with: belay rollback 2") {
				t.Fatalf("rollback: exit %d\n%s%s", code, out, errOut)
			}
			if !strings.Contains(errOut, "big.bin") {
				t.Errorf("the file left out of the pre-rollback snapshot is not reported: %q", errOut)
			}
			want := maps.Clone(atFirst)
			want["debug.log"], want["big.bin"] = broken["debug.log"], broken["big.bin"]
			if got := testtree.Read(t, project); !maps.Equal(got, want) {
				t.Errorf("after rollback:\n got %q\nwant %q", got, want)
			}

			// Undo the rollback.
			c.ok(t, "rollback", "2")
			if got := testtree.Read(t, project); !maps.Equal(got, broken) {
				t.Errorf("after undo:\n got %q\nwant %q", got, broken)
			}
			list := wsJSON[belay.CheckpointList](t, c, "checkpoints")
			if list.TotalCount != 3 || list.Items[0].Name != "pre-rollback" || list.Items[0].ParentID != list.Items[2].ID {
				t.Errorf("checkpoints after undo = %+v", list.Items)
			}
			c.ok(t, "validate")

			archive := filepath.Join(t.TempDir(), "session.tar.gz")
			if out := c.ok(t, "export", "-o", archive); !strings.Contains(out, "Exported session") {
				t.Errorf("export printed %q", out)
			}

			// Another data directory, as on another machine.
			other := newWSCLI(t, project)
			whole, err := os.ReadFile(archive)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{5, len(whole) - 4} {
				cut := filepath.Join(t.TempDir(), "cut.tar.gz")
				if err := os.WriteFile(cut, whole[:n], 0o600); err != nil {
					t.Fatal(err)
				}
				if errOut := other.fails(t, cli.ExitError, "import", cut); !strings.Contains(errOut, "truncated") {
					t.Errorf("import of the archive cut at %d of %d bytes: %s", n, len(whole), errOut)
				}
			}
			if out := other.ok(t, "import", archive); !strings.Contains(out, "3 checkpoints, 2 rollbacks, 3 snapshots") {
				t.Errorf("import printed %q", out)
			}
			other.ok(t, "rollback", "1")
			if got := testtree.Read(t, project); !maps.Equal(got, want) {
				t.Errorf("rollback after import:\n got %q\nwant %q", got, want)
			}
			other.ok(t, "validate")
			if withGit {
				if got := testtree.Digest(t, filepath.Join(project, ".git")); got != gitBefore {
					t.Error("the user's .git changed")
				}
			}
		})
	}
}

// wsTamper rewrites a stored checkpoint behind belay's back.
func wsTamper(t *testing.T, dataDir string, seq int64, change func(*belay.Checkpoint)) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(dataDir, "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sessions, _, _, err := db.ListSessions(ctx, store.SessionQuery{Scope: store.Everything, Limit: 1})
	if err != nil || len(sessions) != 1 {
		t.Fatalf("sessions: %v %v", sessions, err)
	}
	err = db.Update(ctx, func(tx store.Tx) error {
		cp, err := tx.GetCheckpointBySeq(ctx, sessions[0].ID, seq)
		if err != nil {
			return err
		}
		change(cp)
		if err := tx.DeleteCheckpoint(ctx, cp.ID); err != nil {
			return err
		}
		return tx.InsertCheckpoint(ctx, cp)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestWorkspaceValidateRepairStorageAndBranch(t *testing.T) {
	project := t.TempDir()
	testtree.Write(t, project, map[string]string{"a.txt": "a\n"})
	testtree.Git(t, project, "init", "-q", "-b", "main")
	testtree.Git(t, project, "add", "-A")
	testtree.Git(t, project, "commit", "-q", "-m", "initial")
	c := newWSCLI(t, project)
	c.ok(t, "save", "-m", "one")
	testtree.Write(t, project, map[string]string{"a.txt": "a2\n"})
	second := wsJSON[belay.Checkpoint](t, c, "save", "-m", "two")

	wsTamper(t, c.data, 2, func(cp *belay.Checkpoint) { cp.Summary = "tampered" })
	code, out, _ := c.run("validate")
	if code != cli.ExitError {
		t.Errorf("validate with a corrupted checkpoint: exit %d", code)
	}
	for _, want := range []string{"CHECKPOINT CORRUPTED: cp-02", "Options:", "belay rollback 1 --session " + second.SessionID,
		"belay validate --repair --session " + second.SessionID, "continue"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}
	if code, out, _ := c.run("--json", "validate"); code != cli.ExitError || !strings.Contains(out, `"ok": false`) {
		t.Errorf("validate --json: exit %d\n%s", code, out)
	}
	if out := c.ok(t, "validate", "--repair"); !strings.Contains(out, "REPAIRED: cp-02") || !strings.Contains(out, "No problems left") {
		t.Errorf("validate --repair printed:\n%s", out)
	}
	c.ok(t, "validate")
	if got := wsJSON[belay.Checkpoint](t, c, "show", "2"); got.Summary != "two" || got.Checksum != second.Checksum {
		t.Errorf("repaired checkpoint = %+v", got)
	}

	du := wsJSON[belay.DiskUsageReport](t, c, "du")
	if len(du.Workspaces) != 1 || du.Workspaces[0].Bytes == 0 || len(du.Sessions) != 1 || du.Sessions[0].Checkpoints != 2 {
		t.Errorf("du = %+v", du)
	}
	if out := c.ok(t, "du"); !strings.Contains(out, project) || !strings.Contains(out, second.SessionID) {
		t.Errorf("du printed:\n%s", out)
	}

	head := testtree.Git(t, project, "rev-parse", "HEAD")
	if out := c.ok(t, "export", "--git-branch"); !strings.Contains(out, "belay/"+second.SessionID) || !strings.Contains(out, "2 commits") {
		t.Errorf("export --git-branch printed %q", out)
	}
	if log := testtree.Git(t, project, "log", "--format=%s", "belay/"+second.SessionID); !strings.HasPrefix(log, "checkpoint: step-2 - two\ncheckpoint: step-1 - one\ninitial") {
		t.Errorf("branch log:\n%s", log)
	}
	if testtree.Git(t, project, "rev-parse", "HEAD") != head {
		t.Error("HEAD moved")
	}

	c.ok(t, "rollback", "1")
	if out := c.ok(t, "rollbacks"); !strings.Contains(out, second.SessionID[:8]) && !strings.Contains(out, "PRE-ROLLBACK") {
		t.Errorf("rollbacks printed:\n%s", out)
	}
	if out := c.ok(t, "sessions", "delete", second.SessionID, "--yes"); !strings.Contains(out, "Deleted session "+second.SessionID) {
		t.Errorf("sessions delete printed %q", out)
	}
	if errOut := c.fails(t, cli.ExitError, "session-info", second.SessionID); !strings.Contains(errOut, "SESSION_NOT_FOUND") {
		t.Errorf("session-info after delete: %s", errOut)
	}
}

func TestWorkspaceSaveFlagsAndErrors(t *testing.T) {
	project := t.TempDir()
	testtree.Write(t, project, map[string]string{"a.txt": "a", "b.txt": "b"})
	c := newWSCLI(t, project)
	cp := wsJSON[belay.Checkpoint](t, c, "save", "-m", "plain", "--no-snapshot")
	if cp.WorkspaceRef != "" || cp.Files != nil {
		t.Errorf("--no-snapshot snapshotted: %+v", cp)
	}
	c.ok(t, "save", "-m", "full")
	testtree.Write(t, project, map[string]string{"a.txt": "a2", "b.txt": "b2"})
	cp = wsJSON[belay.Checkpoint](t, c, "save", "-m", "only a", "--paths", "a.txt")
	if cp.Files == nil || len(cp.Files.Modified) != 1 || cp.Files.Modified[0] != "a.txt" {
		t.Errorf("--paths a.txt: files = %+v", cp.Files)
	}
	wsSparseFile(t, filepath.Join(project, "big.bin"), 60<<20)
	code, out, errOut := c.run("save", "-m", "big")
	if code != 0 || !strings.Contains(errOut, "1 files were not snapshotted") || !strings.Contains(errOut, "big.bin (larger than") {
		t.Errorf("save with a big file: exit %d\n%s%s", code, out, errOut)
	}

	c.fails(t, cli.ExitUsage, "diff")
	c.fails(t, cli.ExitUsage, "rollback")
	if errOut := c.fails(t, cli.ExitError, "rollback", "99"); !strings.Contains(errOut, "CHECKPOINT_NOT_FOUND") {
		t.Errorf("rollback 99: %s", errOut)
	}
	if errOut := c.fails(t, cli.ExitError, "diff", "1"); !strings.Contains(errOut, "no workspace snapshot") {
		t.Errorf("diff of a checkpoint without snapshot: %s", errOut)
	}
	if errOut := c.fails(t, cli.ExitError, "save", "-m", "x", "--paths", "../out"); !strings.Contains(errOut, "VALIDATION_ERROR") {
		t.Errorf("--paths ../out: %s", errOut)
	}
	if errOut := c.fails(t, cli.ExitError, "import", filepath.Join(project, "a.txt")); !strings.Contains(errOut, "not a belay export") {
		t.Errorf("import of a text file: %s", errOut)
	}

	// A project inside the data directory is refused.
	inside := newWSCLI(t, "")
	inside.project = filepath.Join(inside.data, "project")
	os.MkdirAll(inside.project, 0o755)
	if errOut := inside.fails(t, cli.ExitError, "save", "-m", "x"); !strings.Contains(errOut, "inside the belay data dir") {
		t.Errorf("project inside the data dir: %s", errOut)
	}
}

func TestWorkspaceWithoutGit(t *testing.T) {
	project := t.TempDir()
	testtree.Write(t, project, map[string]string{"a.txt": "a"})
	c := newWSCLI(t, project)
	c.ok(t, "save", "-m", "with git")
	t.Setenv("PATH", t.TempDir())
	errOut := c.fails(t, cli.ExitError, "save", "-m", "no git")
	if !strings.Contains(errOut, "git 2.30 or newer") || !strings.Contains(errOut, "INTERNAL_ERROR") {
		t.Errorf("save without git: %s", errOut)
	}
	c.ok(t, "save", "-m", "no snapshot", "--no-snapshot")
	c.ok(t, "checkpoints")
	if errOut := c.fails(t, cli.ExitError, "rollback", "1"); !strings.Contains(errOut, "RESTORE_FAILED") || !strings.Contains(errOut, "git") {
		t.Errorf("rollback without git: %s", errOut)
	}
}

// TestWorkspaceRollbackChild is the process TestWorkspaceKilledMidRestore kills.
func TestWorkspaceRollbackChild(t *testing.T) {
	project := os.Getenv("BELAY_WS_CHILD_PROJECT")
	if project == "" {
		t.Skip("only run by TestWorkspaceKilledMidRestore")
	}
	c := &wsCLI{project: project, data: os.Getenv("BELAY_WS_CHILD_DATA"), home: project}
	code, out, errOut := c.run("rollback", "1")
	fmt.Print(out, errOut)
	os.Exit(code)
}

func TestWorkspaceKilledMidRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a process mid-restore")
	}
	project := t.TempDir()
	const n = 2000
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("d%02d/f%04d.txt", i%30, i)] = strings.Repeat("original ", 100)
	}
	testtree.Write(t, project, files)
	c := newWSCLI(t, project)
	c.ok(t, "save", "-m", "original")
	atFirst := testtree.Read(t, project)
	for name := range files {
		files[name] = strings.Repeat("changed ", 100)
	}
	testtree.Write(t, project, files)

	cmd := exec.Command(os.Args[0], "-test.run=^TestWorkspaceRollbackChild$")
	cmd.Env = append(os.Environ(), "BELAY_WS_CHILD_PROJECT="+project, "BELAY_WS_CHILD_DATA="+c.data)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	killed := false
	deadline := time.Now().Add(30 * time.Second)
	for !killed && time.Now().Before(deadline) {
		select {
		case <-done:
			t.Logf("the rollback finished before it could be killed:\n%s", out.String())
			deadline = time.Time{}
			continue
		default:
		}
		if journals, _ := filepath.Glob(filepath.Join(c.data, "workspaces", "*", "restore.json")); len(journals) > 0 {
			cmd.Process.Kill()
			<-done
			killed = true
		}
		time.Sleep(time.Millisecond) // the journal stays for the whole restore
	}
	if killed {
		t.Log("killed the rollback mid-restore")
	}

	// validate names the rollback the kill left unfinished; the next command
	// finishes it, and records it, from the journal.
	journals, _ := filepath.Glob(filepath.Join(c.data, "workspaces", "*", "restore.json"))
	code, report, _ := c.run("validate")
	if len(journals) > 0 && (code != cli.ExitError || !strings.Contains(report, "rollback to checkpoint #1") || !strings.Contains(report, "interrupted")) ||
		len(journals) == 0 && code != cli.ExitOK {
		t.Errorf("validate after the kill (journal left: %v): exit %d\n%s", len(journals) > 0, code, report)
	}
	// A file the rollback had not reached is edited before it is finished:
	// the edit is someone's work, which finishing the rollback leaves alone
	// and the save keeps.
	want := maps.Clone(atFirst)
	for name, content := range testtree.Read(t, project) {
		if killed && content == files[name] {
			want[name] = "edited after the crash\n"
			testtree.Write(t, project, map[string]string{name: want[name]})
			break
		}
	}
	c.ok(t, "save", "-m", "after the crash")
	if got := testtree.Read(t, project); !maps.Equal(got, want) {
		t.Errorf("the interrupted restore was not finished, or not around the edit: %q differ", wsDiffKeys(got, want))
	}
	if rbs := wsJSON[map[string][]belay.Rollback](t, c, "rollbacks")["items"]; killed && len(rbs) != 1 {
		t.Errorf("rollbacks after the crash = %+v, want the interrupted one", rbs)
	}
	c.ok(t, "validate")
}

func wsDiffKeys(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, k)
		}
	}
	return out
}

// committedProject is a git repository holding files, committed.
func committedProject(t *testing.T, files map[string]string) string {
	t.Helper()
	project := t.TempDir()
	testtree.Write(t, project, files)
	testtree.Git(t, project, "init", "-q", "-b", "main")
	testtree.Git(t, project, "add", ".")
	testtree.Git(t, project, "commit", "-q", "-m", "files")
	return project
}

// TestWorkspaceSnapshotOutlivesUsersGit: a snapshot of a git project is
// restorable after the project's .git is deleted (A) or the commit it was
// taken at is pruned (B), the accidents belay exists to undo.
func TestWorkspaceSnapshotOutlivesUsersGit(t *testing.T) {
	t.Run("rm -rf .git", func(t *testing.T) {
		project := committedProject(t, map[string]string{"code.txt": "important\n"})
		c := newWSCLI(t, project)
		c.ok(t, "save", "-m", "good state")
		if err := os.RemoveAll(filepath.Join(project, ".git")); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(project, "code.txt"))
		c.ok(t, "rollback", "1")
		if got := testtree.Read(t, project); !maps.Equal(got, map[string]string{"code.txt": "important\n"}) {
			t.Errorf("after rollback: %q", got)
		}
		c.ok(t, "validate")
	})
	t.Run("git gc --prune=now", func(t *testing.T) {
		project := committedProject(t, map[string]string{"a.txt": "a\n"})
		testtree.Write(t, project, map[string]string{"data.txt": "data\n"})
		testtree.Git(t, project, "add", "data.txt")
		testtree.Git(t, project, "commit", "-q", "-m", "data")
		c := newWSCLI(t, project)
		c.ok(t, "save", "-m", "with data")
		testtree.Git(t, project, "reset", "-q", "--hard", "HEAD~1")
		testtree.Git(t, project, "reflog", "expire", "--expire=now", "--all")
		testtree.Git(t, project, "gc", "-q", "--prune=now")
		c.ok(t, "validate")
		if out := c.ok(t, "diff", "1"); !strings.Contains(out, "data.txt") || !strings.Contains(out, "-data") {
			t.Errorf("diff 1 printed:\n%s", out)
		}
		c.ok(t, "rollback", "1")
		if got := testtree.Read(t, project); got["data.txt"] != "data\n" {
			t.Errorf("after rollback: %q", got)
		}
	})
	// A snapshot an older belay left borrowing from .git, whose objects are
	// gone: the error says the snapshot lost objects, not that another
	// instance holds it.
	t.Run("borrowed objects lost", func(t *testing.T) {
		project := committedProject(t, map[string]string{"code.txt": "important\n"})
		c := newWSCLI(t, project)
		c.ok(t, "save", "-m", "good state")
		repos, err := filepath.Glob(filepath.Join(c.data, "workspaces", "*", "repo.git"))
		if err != nil || len(repos) != 1 {
			t.Fatalf("shadow repositories %q, %v", repos, err)
		}
		os.MkdirAll(filepath.Join(repos[0], "objects", "info"), 0o700)
		alternate := filepath.Join(project, ".git", "objects") + "\n"
		if err := os.WriteFile(filepath.Join(repos[0], "objects", "info", "alternates"), []byte(alternate), 0o600); err != nil {
			t.Fatal(err)
		}
		testtree.Git(t, repos[0], "repack", "-a", "-d", "-l", "-q")
		if err := os.RemoveAll(filepath.Join(project, ".git")); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"rollback", "1"}, {"diff", "1"}} {
			errOut := c.fails(t, cli.ExitError, args...)
			if strings.Contains(errOut, "not in this belay instance's data directory") || !strings.Contains(errOut, "snapshot is missing objects") {
				t.Errorf("belay %s: %s", strings.Join(args, " "), errOut)
			}
		}
	})
}

// TestWorkingThroughALink: a project whose working directory is reached
// through a symlink is the directory it leads to, for the CLI as for an
// agent that posts its process's working directory; the CLI's own output
// treats the two paths as one.
func TestWorkingThroughALink(t *testing.T) {
	real := t.TempDir()
	via := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, via); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(real, "a.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newWSCLI(t, via)
	c.ok(t, "save", "-m", "first")
	agent := *c
	agent.project = real
	agent.ok(t, "save", "-m", "second, by the directory's own path")
	out := c.ok(t, "checkpoints")
	if !strings.Contains(out, "first") || !strings.Contains(out, "second") {
		t.Errorf("the checkpoints of the project through the link:\n%s", out)
	}
	if err := os.WriteFile(filepath.Join(real, "a.txt"), []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out = c.ok(t, "rollback", "1")
	if !strings.Contains(out, "Rolled back to checkpoint #1") || strings.Contains(out, " in ") {
		t.Errorf("a rollback in this project through the link names the project as another:\n%s", out)
	}
}

// TestShowSaysALabelIsNoSnapshot: belay show prints a snapshot's commit as
// it is, and a workspaceRef its caller named (a label) as one, so no one
// takes it for files belay can restore.
func TestShowSaysALabelIsNoSnapshot(t *testing.T) {
	project := t.TempDir()
	testtree.Write(t, project, map[string]string{"a.txt": "a\n"})
	ws := newWSCLI(t, project)
	snap := wsJSON[belay.Checkpoint](t, ws, "save", "-m", "one")
	if out := ws.ok(t, "show", "1"); !strings.Contains(out, "  Workspace:    "+snap.WorkspaceRef+"\n") {
		t.Errorf("show of a snapshot:\n%s", out)
	}

	c := newHITLCLI(t)
	sess, err := c.svc.CreateSession(hitlAgent, belay.CreateSessionInput{Title: "labelled"})
	if err != nil {
		t.Fatal(err)
	}
	const ref = "0123456789abcdef0123456789abcdef01234567"
	cp, err := c.svc.CreateCheckpoint(hitlAgent, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "at a commit of mine", WorkspaceRef: ref})
	if err != nil {
		t.Fatal(err)
	}
	if out := c.ok(t, nil, "show", cp.ID); !strings.Contains(out, "  Workspace:    "+ref+" (a label: no snapshot)\n") {
		t.Errorf("show of a label:\n%s", out)
	}
}
