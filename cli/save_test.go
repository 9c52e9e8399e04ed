package cli_test

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
	"github.com/belayhq/belay/internal/testtree"
)

// TestSaveMaxFileSizeAndSkippedFiles: --max-file-size sets the cap per save,
// within bounds; what the user's .git/info/exclude lists stays out; a named
// pipe is reported as skipped.
func TestSaveMaxFileSizeAndSkippedFiles(t *testing.T) {
	project := t.TempDir()
	testtree.Write(t, project, map[string]string{"small.txt": "s", "mid.bin": strings.Repeat("m", 5000)})
	testtree.Git(t, project, "init", "-q", "-b", "main")
	testtree.Write(t, project, map[string]string{".git/info/exclude": "secret.env\n", "secret.env": "TOKEN=x\n"})
	if err := syscall.Mkfifo(filepath.Join(project, "agent.pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newWSCLI(t, project)

	code, out, errOut := c.run("save", "-m", "capped", "--max-file-size", "4KiB")
	if code != 0 || !strings.Contains(errOut, "mid.bin (larger than 4096 bytes") || !strings.Contains(errOut, "agent.pipe (a named pipe") {
		t.Errorf("save --max-file-size 4KiB: exit %d\n%s%s", code, out, errOut)
	}
	cp := wsJSON[belay.Checkpoint](t, c, "show", "1")
	if cp.Files == nil || strings.Join(cp.Files.Created, " ") != "small.txt" {
		t.Errorf("stored %+v, want small.txt alone", cp.Files)
	}
	cp = wsJSON[belay.Checkpoint](t, c, "save", "-m", "default cap")
	if cp.Files == nil || strings.Join(cp.Files.Created, " ") != "mid.bin" {
		t.Errorf("stored %+v, want mid.bin", cp.Files)
	}

	if errOut := c.fails(t, cli.ExitUsage, "save", "-m", "x", "--max-file-size", "lots"); !strings.Contains(errOut, "--max-file-size") {
		t.Errorf("--max-file-size lots: %s", errOut)
	}
	if errOut := c.fails(t, cli.ExitError, "save", "-m", "x", "--max-file-size", "2GiB"); !strings.Contains(errOut, "VALIDATION_ERROR") {
		t.Errorf("--max-file-size 2GiB: %s", errOut)
	}
	if errOut := c.fails(t, cli.ExitError, "save", "-m", "x", "--max-file-size", "1M", "--no-snapshot"); !strings.Contains(errOut, "maxFileSize") {
		t.Errorf("--max-file-size with --no-snapshot: %s", errOut)
	}
}
