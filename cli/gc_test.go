package cli_test

import (
	"encoding/json"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
	"github.com/belayhq/belay/internal/testtree"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/sqlite"
)

// shadowDirs lists the data directory's snapshot repositories.
func shadowDirs(t *testing.T, data string) []string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(data, "workspaces", "*", "repo.git"))
	return dirs
}

// TestSessionsDeleteReclaimsSpace is issue 9's leak: after `sessions delete`
// nothing of the session's snapshots stays on disk.
func TestSessionsDeleteReclaimsSpace(t *testing.T) {
	project := t.TempDir()
	testtree.Write(t, project, map[string]string{"big.txt": strings.Repeat("x", 200<<10)})
	c := newWSCLI(t, project)
	cp := wsJSON[belay.Checkpoint](t, c, "save", "-m", "one")
	if len(shadowDirs(t, c.data)) != 1 {
		t.Fatal("no snapshot repository after save")
	}

	// Without a terminal to ask on, it wants --yes.
	errOut := c.fails(t, cli.ExitUsage, "sessions", "delete", cp.SessionID)
	if !strings.Contains(errOut, "--yes") {
		t.Errorf("delete without --yes: %s", errOut)
	}
	if len(shadowDirs(t, c.data)) != 1 {
		t.Fatal("a refused delete removed snapshots")
	}
	out := c.ok(t, "sessions", "delete", cp.SessionID, "--yes")
	if !strings.Contains(out, "Deleted session "+cp.SessionID) || !strings.Contains(out, "freed") {
		t.Errorf("delete printed %q", out)
	}
	if dirs := shadowDirs(t, c.data); len(dirs) != 0 {
		t.Errorf("snapshot repositories left: %v", dirs)
	}
	du := wsJSON[belay.DiskUsageReport](t, c, "du")
	if len(du.Workspaces) != 0 || du.WorkspaceBytes != 0 || du.DatabaseBytes == 0 {
		t.Errorf("du after delete = %+v", du)
	}
}

// TestDuAndGCShowAndRemoveOrphans: snapshots whose session vanished are
// listed by du as orphaned and removed by gc.
func TestDuAndGCShowAndRemoveOrphans(t *testing.T) {
	project := t.TempDir()
	testtree.Write(t, project, map[string]string{"a.txt": strings.Repeat("a", 64<<10)})
	c := newWSCLI(t, project)
	cp := wsJSON[belay.Checkpoint](t, c, "save", "-m", "one")
	db, err := sqlite.Open(t.Context(), filepath.Join(c.data, "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(t.Context(), func(tx store.Tx) error { return tx.DeleteSession(t.Context(), cp.SessionID) })
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	out := c.ok(t, "du")
	if !strings.Contains(out, project+" (orphaned)") || !strings.Contains(out, "belay gc") {
		t.Errorf("du printed:\n%s", out)
	}
	du := wsJSON[belay.DiskUsageReport](t, c, "du")
	if len(du.Workspaces) != 1 || !du.Workspaces[0].Orphaned || du.WorkspaceBytes < 1000 {
		t.Errorf("du --json = %+v", du)
	}

	out = c.ok(t, "gc", "--dry-run")
	if !strings.Contains(out, "would remove") || !strings.Contains(out, "dry run") || len(shadowDirs(t, c.data)) != 1 {
		t.Errorf("gc --dry-run printed:\n%s", out)
	}
	rep := wsJSON[belay.GCReport](t, c, "gc")
	if len(rep.Workspaces) != 1 || !rep.Workspaces[0].Removed || rep.FreedBytes != du.WorkspaceBytes {
		t.Errorf("gc --json = %+v (du said %d)", rep, du.WorkspaceBytes)
	}
	if dirs := shadowDirs(t, c.data); len(dirs) != 0 {
		t.Errorf("snapshot repositories left: %v", dirs)
	}
	if out := c.ok(t, "gc"); !strings.Contains(out, "Freed 0 B") {
		t.Errorf("second gc printed:\n%s", out)
	}
	if _, err := os.Stat(project); err != nil {
		t.Errorf("gc touched the project: %v", err)
	}
}

// TestGCOfAMovedProjectCleansItsSnapshots: gc gives back the space of a
// deleted checkpoint's snapshot in the shadow repository of a project whose
// directory moved away, and keeps the snapshots its checkpoints need, so a
// rollback works once the project is back.
func TestGCOfAMovedProjectCleansItsSnapshots(t *testing.T) {
	base := t.TempDir()
	project := filepath.Join(base, "p")
	testtree.Write(t, project, map[string]string{"a.txt": "a"})
	c := newWSCLI(t, project)
	c.ok(t, "save", "-m", "one")
	noise := make([]byte, 256<<10)
	rand.NewChaCha8([32]byte{1}).Read(noise)
	testtree.Write(t, project, map[string]string{"big.bin": string(noise)})
	c.ok(t, "save", "-m", "big")
	if err := os.Remove(filepath.Join(project, "big.bin")); err != nil {
		t.Fatal(err)
	}
	c.ok(t, "save", "-m", "three")
	c.ok(t, "delete", "2")
	moved := filepath.Join(base, "moved")
	if err := os.Rename(project, moved); err != nil {
		t.Fatal(err)
	}
	c.project = base
	var rep belay.GCReport
	if err := json.Unmarshal([]byte(c.ok(t, "gc", "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Workspaces) != 1 || rep.Workspaces[0].Error != "" || rep.FreedBytes < 200<<10 {
		t.Fatalf("gc of a moved project = %+v", rep)
	}
	if err := os.Rename(moved, project); err != nil {
		t.Fatal(err)
	}
	c.project = project
	c.ok(t, "rollback", "1")
	if got := testtree.Read(t, project); !maps.Equal(got, map[string]string{"a.txt": "a"}) {
		t.Errorf("after the rollback the project holds %v", got)
	}
}

// TestDuAndGCEscapeProjectPaths: a project path holding a terminal escape
// is printed escaped by du and gc.
func TestDuAndGCEscapeProjectPaths(t *testing.T) {
	project := filepath.Join(t.TempDir(), "q\x1b]0;pwn\x07")
	testtree.Write(t, project, map[string]string{"a.txt": "a"})
	c := newWSCLI(t, project)
	c.ok(t, "save", "-m", "one")
	for _, args := range [][]string{{"du"}, {"gc", "--dry-run"}, {"validate"}} {
		if out := c.ok(t, args...); strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, `q\x1b]0;pwn\x07`) && args[0] == "du" {
			t.Errorf("belay %s printed %q", strings.Join(args, " "), out)
		}
	}
}
