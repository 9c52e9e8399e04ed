package cli_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/archive"
	"github.com/belayhq/belay/cli"
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

// TestExportToAPlaceItCannotWrite: an -o in a directory that does not
// exist, or naming a directory, is a VALIDATION_ERROR that names the
// directory (never the temporary file tried in it), and writes nothing.
func TestExportToAPlaceItCannotWrite(t *testing.T) {
	project := t.TempDir()
	testtree.Write(t, project, map[string]string{"a.txt": "a\n"})
	c := newWSCLI(t, project)
	wsJSON[belay.Checkpoint](t, c, "save", "-m", "one")
	missing := filepath.Join(t.TempDir(), "no", "dir")
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ output, want string }{
		{filepath.Join(missing, "x.tgz"), "directory " + missing + " does not exist"},
		{filepath.Join(file, "x.tgz"), file + " is not a directory"},
		{dir, dir + " is a directory"},
	} {
		errOut := c.fails(t, cli.ExitError, "export", "-o", tc.output)
		if !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "(VALIDATION_ERROR)") || strings.Contains(errOut, ".tmp") {
			t.Errorf("export -o %s: %q, want %q (VALIDATION_ERROR)", tc.output, errOut, tc.want)
		}
	}
	if got := testtree.Read(t, project); len(got) != 1 {
		t.Errorf("the project holds %v", slicesKeys(got))
	}
}

func slicesKeys(m map[string]string) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// TestImportKeepsWhatOlderVersionsStored: an archive from a version that
// took control characters in tags and option labels imports, its tags find
// the checkpoint in list and search and print escaped; new input with them
// is refused.
func TestImportKeepsWhatOlderVersionsStored(t *testing.T) {
	h := newHarness(t)
	const tag, escape = "ci\tnightly", "red\x1b[31m"
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sess := &belay.Session{ID: "01900000-0000-7000-8000-000000000001", ProjectPath: h.project, Title: "old", Owner: "local",
		Status: belay.SessionRunning, LastSeq: 1, CheckpointCount: 1, CreatedAt: at, UpdatedAt: at}
	cp := &belay.Checkpoint{ID: "01900000-0000-7000-8000-000000000101", SessionID: sess.ID, Seq: 1, Type: belay.TypeHITL,
		Trigger: belay.TriggerUserRequest, Summary: "nightly deploy", ProjectPath: h.project, Tags: []string{tag, escape},
		HITLRequired: true, HITL: &belay.HITLRequest{Title: "Ship?", Options: []belay.HITLOption{
			{ID: "yes", Label: "Ship\nit", Action: belay.ActionApprove}, {ID: "no", Label: "No", Action: belay.ActionReject}}},
		CreatedAt: at}
	var err error
	if cp.Checksum, err = cp.ComputeChecksum(); err != nil {
		t.Fatal(err)
	}
	sess.HeadCheckpointID = cp.ID
	file := filepath.Join(t.TempDir(), "old"+belay.ArchiveSuffix)
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := archive.Write(f, &archive.Contents{Session: sess, Checkpoints: []*belay.Checkpoint{cp}, ExportedAt: at}, ""); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	h.ok(t, "", "import", file)
	if list := okJSON[belay.CheckpointList](t, h, "ls", "--tag", tag); len(list.Items) != 1 || list.Items[0].ID != cp.ID {
		t.Errorf("ls --tag %q = %+v", tag, list)
	}
	if res := okJSON[belay.SearchResult](t, h, "search", "nightly", "--tag", tag); len(res.Results) != 1 {
		t.Errorf("search --tag %q = %+v", tag, res)
	}
	if list := okJSON[belay.CheckpointList](t, h, "ls", "--tag", escape); len(list.Items) != 1 {
		t.Errorf("ls --tag %q = %+v", escape, list)
	}
	if out := h.ok(t, "", "show", "1"); !strings.Contains(out, `red\x1b[31m`) || strings.Contains(out, escape) {
		t.Errorf("show does not print the tag escaped:\n%s", out)
	}
	if r := h.run(t, "", "save", "-m", "new", "--tag", tag); r.code != cli.ExitError || !strings.Contains(r.stderr, "tags[0] must not contain control characters") {
		t.Errorf("save --tag %q: exit %d, stderr %q", tag, r.code, r.stderr)
	}
}
