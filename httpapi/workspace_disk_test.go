package httpapi_test

import (
	"context"
	"crypto/rand"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testtree"
	"github.com/belayhq/belay/internal/testutil"
)

// TestSnapshotOnAFullDiskOverHTTP: a snapshot that fills the disk of the
// data directory is STORAGE_UNAVAILABLE (503), as a full disk under the
// database is, and leaves nothing half-written: once there is room the next
// snapshot and validate go through.
func TestSnapshotOnAFullDiskOverHTTP(t *testing.T) {
	ctx := context.Background()
	tiny, project := testutil.SmallDisk(t), t.TempDir()
	c := serveWorkspaces(t, t.TempDir(), tiny, nil).as(t, "root")

	testtree.Write(t, project, map[string]string{"a.txt": "alpha"})
	first, err := c.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: project, Summary: "small", Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	// Random bytes do not compress: 6 MiB does not fit in 4.
	if err := os.Mkdir(filepath.Join(project, "big"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		data := make([]byte, 1<<20)
		rand.Read(data)
		if err := os.WriteFile(filepath.Join(project, "big", strconv.Itoa(i)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.CreateCheckpoint(ctx, belay.CreateCheckpointInput{SessionID: first.SessionID, Summary: "big", Snapshot: true})
	if be := testutil.WantCode(t, err, belay.CodeStorageUnavailable); be != nil && !strings.Contains(be.Message, "full") {
		t.Errorf("message %q does not say the disk is full", be.Message)
	}
	if err := os.RemoveAll(filepath.Join(project, "big")); err != nil {
		t.Fatal(err)
	}
	filepath.WalkDir(tiny, func(p string, d fs.DirEntry, err error) error {
		if err == nil && (strings.Contains(d.Name(), ".tmp") || strings.HasPrefix(d.Name(), "tmp_")) {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
	testtree.Write(t, project, map[string]string{"a.txt": "after"})
	if _, err := c.CreateCheckpoint(ctx, belay.CreateCheckpointInput{SessionID: first.SessionID, Summary: "after", Snapshot: true}); err != nil {
		t.Fatal(err)
	}
	if rep, err := c.Validate(ctx, belay.ValidateInput{}); err != nil || !rep.OK {
		t.Errorf("validate = %+v, %v", rep, err)
	}
}
