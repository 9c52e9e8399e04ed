package core_test

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testtree"
	"github.com/belayhq/belay/internal/testutil"
)

// TestRollbackNamesTheUnsavedFilesItWouldOverwrite: a rollback (and its dry
// run) that would write over a file no snapshot holds is RESTORE_FAILED
// with cause WOULD_OVERWRITE and the paths, and changes nothing.
func TestRollbackNamesTheUnsavedFilesItWouldOverwrite(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "a", "cache.out": "old"})
	one := e.save(t, "one")
	if err := os.Remove(filepath.Join(e.project, "cache.out")); err != nil {
		t.Fatal(err)
	}
	e.save(t, "two")
	testtree.Write(t, e.project, map[string]string{".belayignore": "*.out\n", "cache.out": "precious"})
	before := testtree.Read(t, e.project)
	for _, dryRun := range []bool{true, false} {
		_, err := e.svc.RestoreCheckpoint(alice, belay.RestoreInput{CheckpointID: one.ID, DryRun: dryRun})
		be := testutil.WantCode(t, err, belay.CodeRestoreFailed)
		if paths, _ := be.Details["paths"].([]string); be.Details["cause"] != "WOULD_OVERWRITE" || !slices.Equal(paths, []string{"cache.out"}) {
			t.Errorf("dry run %v: details %v", dryRun, be.Details)
		}
		if got := testtree.Read(t, e.project); !maps.Equal(got, before) {
			t.Errorf("dry run %v: the work tree changed", dryRun)
		}
	}
}
