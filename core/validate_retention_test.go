package core_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testtree"
)

// TestValidateDuringRetention: retention deletes checkpoints, then their
// snapshots, between validate's read of the checkpoints and its look at
// their snapshots. A checkpoint deleted meanwhile is no finding: validate
// reported its snapshot missing (CHECKPOINT_CORRUPTED in `belay validate`).
func TestValidateDuringRetention(t *testing.T) {
	e := newWSEnv(t)
	var saved []*belay.Checkpoint
	for _, content := range []string{"1\n", "2\n", "3\n", "4\n"} {
		testtree.Write(t, e.project, map[string]string{"a.txt": content})
		saved = append(saved, e.save(t, "step "+content))
	}
	st := &meanwhileStore{Store: e.db, meanwhile: func() {
		if _, err := e.svc.SetRetention(admin, belay.RetentionPolicy{ProjectPath: e.project, KeepLast: 1}); err != nil {
			t.Fatal(err)
		}
		if n, err := e.svc.ApplyRetention(localCtx); err != nil || n != len(saved)-1 {
			t.Fatalf("retention deleted %d checkpoints, %v; want %d", n, err, len(saved)-1)
		}
	}}
	v, err := e.over(st).Validate(admin, belay.ValidateInput{})
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK || len(v.Problems) != 0 {
		t.Errorf("validate during retention = %+v; want no problems", v.Problems)
	}
	if ok, err := e.ws.HasCommit(localCtx, e.project, saved[0].WorkspaceRef); ok || err != nil {
		t.Fatalf("the first checkpoint's snapshot after retention: there %v, %v; the test needs it gone", ok, err)
	}
}

// TestValidateDuringDelete: a checkpoint and its snapshot's ref are deleted
// between validate's read of the checkpoints and its look at the refs, its
// commit still there: no finding (validate reported the ref lost).
func TestValidateDuringDelete(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "1\n"})
	one := e.save(t, "one")
	testtree.Write(t, e.project, map[string]string{"a.txt": "2\n"})
	e.save(t, "two")
	repos, err := filepath.Glob(filepath.Join(e.data, "workspaces", "*", "repo.git"))
	if err != nil || len(repos) != 1 {
		t.Fatalf("shadow repositories %v, %v", repos, err)
	}
	st := &meanwhileStore{Store: e.db, meanwhile: func() {
		if err := e.svc.DeleteCheckpoint(alice, one.ID); err != nil {
			t.Fatal(err)
		}
		testtree.Git(t, e.project, "--git-dir="+repos[0], "update-ref", "-d", fmt.Sprintf("refs/belay/%s/%d", one.SessionID, one.Seq))
	}}
	v, err := e.over(st).Validate(admin, belay.ValidateInput{})
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK || len(v.Problems) != 0 {
		t.Errorf("validate during a delete = %+v; want no problems", v.Problems)
	}
}
