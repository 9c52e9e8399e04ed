package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayhq/belay/cli"
	"github.com/belayhq/belay/internal/testtree"
)

// TestRollbackRefusesToOverwriteAnIgnoredFile: a file that became ignored
// after belay saved it is in no later snapshot; a rollback to the checkpoint
// that holds the old one refuses to write over it (so does its dry run),
// naming it, and leaves it as it is.
func TestRollbackRefusesToOverwriteAnIgnoredFile(t *testing.T) {
	project := t.TempDir()
	testtree.Git(t, project, "init", "-q", "-b", "main")
	testtree.Write(t, project, map[string]string{"a": "a\n", "cache.out": "old\n"})
	c := newWSCLI(t, project)
	c.ok(t, "save", "-m", "one")
	if err := os.Remove(filepath.Join(project, "cache.out")); err != nil {
		t.Fatal(err)
	}
	c.ok(t, "save", "-m", "two")
	exclude := filepath.Join(project, ".git", "info", "exclude")
	data, err := os.ReadFile(exclude)
	if err != nil {
		t.Fatal(err)
	}
	testtree.Write(t, project, map[string]string{".git/info/exclude": string(data) + "*.out\n", "cache.out": "precious\n"})

	for _, args := range [][]string{{"rollback", "1", "--dry-run"}, {"rollback", "1"}} {
		errOut := c.fails(t, cli.ExitError, args...)
		if !strings.Contains(errOut, "RESTORE_FAILED") || !strings.Contains(errOut, "cache.out") || !strings.Contains(errOut, "overwrite") {
			t.Errorf("belay %q printed %s", args, errOut)
		}
		if got := testtree.Read(t, project)["cache.out"]; got != "precious\n" {
			t.Fatalf("after belay %q cache.out holds %q", args, got)
		}
	}
}
