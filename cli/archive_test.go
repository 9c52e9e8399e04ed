package cli_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testtree"
)

// TestExportKeepsArchivesOutOfTheProject: the default archive is written
// outside the workspace (the data directory's exports/ when the working
// directory is inside it), and archives named *.belay.tar.gz are never
// snapshotted, so a rollback does not delete them.
func TestExportKeepsArchivesOutOfTheProject(t *testing.T) {
	project := t.TempDir()
	testtree.Write(t, project, map[string]string{"a.txt": "a\n"})
	c := newWSCLI(t, project)
	cp := wsJSON[belay.Checkpoint](t, c, "save", "-m", "one")
	name := cp.SessionID + belay.ArchiveSuffix

	out := c.ok(t, "export")
	inData := filepath.Join(c.data, "exports", name)
	if !strings.Contains(out, inData) || !strings.Contains(out, "inside the project") {
		t.Errorf("export inside the project printed %q", out)
	}
	if _, err := os.Stat(inData); err != nil {
		t.Errorf("no archive in the data directory: %v", err)
	}
	if got := testtree.Read(t, project); len(got) != 1 {
		t.Errorf("the project holds %v", got)
	}

	outside := &wsCLI{project: t.TempDir(), data: c.data, home: c.home}
	res := wsJSON[map[string]string](t, outside, "export", cp.SessionID)
	if want := filepath.Join(outside.project, name); res["file"] != want {
		t.Errorf("export outside the project wrote %q, want %q", res["file"], want)
	}

	// An archive named so inside the project is never snapshotted.
	c.ok(t, "export", "-o", "mine"+belay.ArchiveSuffix)
	code, _, errOut := c.run("export", "-o", "plain.tar.gz")
	if code != 0 || !strings.Contains(errOut, "plain.tar.gz is inside the project") || !strings.Contains(errOut, belay.ArchiveSuffix) {
		t.Errorf("export -o plain.tar.gz: exit %d, stderr %q", code, errOut)
	}
	os.Remove(filepath.Join(project, "plain.tar.gz"))
	second := wsJSON[belay.Checkpoint](t, c, "save", "-m", "two")
	if second.Files == nil || len(second.Files.Created) != 0 {
		t.Errorf("the second save stored %+v", second.Files)
	}
	c.ok(t, "rollback", "1")
	if got := testtree.Read(t, project); !slices.Contains(slicesKeys(got), "mine"+belay.ArchiveSuffix) {
		t.Errorf("the rollback removed the archive: %v", slicesKeys(got))
	}
}

func slicesKeys(m map[string]string) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
