package core_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/belayhq/belay"
)

// TestSnapshotOfANameThatIsNotUTF8: a file whose name is not valid UTF-8 (a
// byte 0xff) is snapshotted and rolled back like any other, and the
// checkpoint listing it reads back whole: its file list names it with
// U+FFFD, as JSON can, and still matches its checksum.
func TestSnapshotOfANameThatIsNotUTF8(t *testing.T) {
	e := newWSEnv(t)
	name := "bad\xffbyte.txt"
	if err := os.WriteFile(filepath.Join(e.project, name), []byte("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	first := e.save(t, "with a strange name")
	got, err := e.svc.GetCheckpoint(alice, first.ID)
	if err != nil {
		t.Fatalf("reading the checkpoint back: %v", err)
	}
	if got.Files == nil || !slices.Contains(got.Files.Created, "bad\uFFFDbyte.txt") {
		t.Errorf("files = %+v, want the name with U+FFFD", got.Files)
	}
	if err := os.WriteFile(filepath.Join(e.project, name), []byte("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := e.rollback(t, first)
	if b, err := os.ReadFile(filepath.Join(e.project, name)); err != nil || string(b) != "v1" {
		t.Fatalf("after the rollback the file holds %q, %v; want v1", b, err)
	}
	if _, err := e.svc.GetCheckpoint(alice, res.SafetyCheckpoint.ID); err != nil {
		t.Errorf("reading the undo checkpoint back: %v", err)
	}
	list, err := e.svc.ListCheckpoints(alice, belay.ListCheckpointsInput{SessionID: first.SessionID})
	if err != nil || len(list.Corrupted) != 0 {
		t.Errorf("list: %v, corrupted %v", err, list.Corrupted)
	}
}
