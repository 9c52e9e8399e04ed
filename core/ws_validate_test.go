package core_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testtree"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store"
)

func TestValidateFindsAndRepairsCheckpointsFromGit(t *testing.T) {
	e := newWSEnv(t)
	ctx := localCtx
	testtree.Write(t, e.project, map[string]string{"a.txt": "a"})
	one := e.save(t, "one", func(in *belay.CreateCheckpointInput) {
		in.Name, in.Tags, in.AgentState = "init", []string{"x"}, json.RawMessage(`{"n":1}`)
		in.Context = map[string]string{"k": "v"}
	})
	testtree.Write(t, e.project, map[string]string{"a.txt": "a2", "b.txt": "b"})
	big, err := os.Create(filepath.Join(e.project, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	big.Truncate(60 << 20)
	big.Close()
	two := e.save(t, "two", func(in *belay.CreateCheckpointInput) { in.HITL = &belay.HITLInput{Required: true} })
	if _, err := e.svc.Decide(alice, belay.DecideInput{CheckpointID: two.ID, Action: belay.ActionApprove, SelectedOption: "approve"}); err != nil {
		t.Fatal(err)
	}
	two, _ = e.svc.GetCheckpoint(alice, two.ID)
	testtree.Write(t, e.project, map[string]string{"c.txt": "c"})
	three := e.save(t, "three")
	deleted := e.save(t, "deleted on purpose")
	if err := e.svc.DeleteCheckpoint(alice, deleted.ID); err != nil {
		t.Fatal(err)
	}

	if rep, err := e.svc.Validate(alice, belay.ValidateInput{}); err != nil || !rep.OK || len(rep.Problems) != 0 ||
		rep.Sessions != 1 || rep.Checkpoints != 3 || rep.Workspaces != 1 {
		t.Fatalf("clean validate = %+v, %v", rep, err)
	}

	// Damage: #2's row no longer matches its checksum, #3's row is gone
	// without a trace in the event log, #1's row points at a wrong commit.
	wsTamper(t, e.db, two.ID, func(cp *belay.Checkpoint) { cp.Summary = "tampered" })
	err = e.db.Update(ctx, func(tx store.Tx) error { return tx.DeleteCheckpoint(ctx, three.ID) })
	if err != nil {
		t.Fatal(err)
	}
	wsTamper(t, e.db, one.ID, func(cp *belay.Checkpoint) {
		cp.WorkspaceRef = strings.Repeat("ab", 20)
		cp.Checksum, _ = cp.ComputeChecksum()
	})

	// gc drops the snapshot of the checkpoint deleted on purpose, not #3's:
	// its row is gone without a deletion, and repair rebuilds it from it.
	if gc, err := e.svc.CollectGarbage(admin, belay.GCInput{}); err != nil || len(gc.Workspaces) != 1 || gc.Workspaces[0].DeletedCheckpoints != 1 {
		t.Fatalf("gc = %+v, %v", gc, err)
	}
	rep, err := e.svc.Validate(alice, belay.ValidateInput{SessionID: one.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || len(rep.Problems) != 3 {
		t.Fatalf("report = %+v", rep)
	}
	kinds := map[int64]string{}
	for _, p := range rep.Problems {
		kinds[p.Seq] = p.Kind
		if p.Repaired || len(p.Recovery) == 0 || p.Recovery[len(p.Recovery)-1].Action != belay.RecoverContinue {
			t.Errorf("problem %+v", p)
		}
	}
	if kinds[1] != belay.ProblemMissingCommit || kinds[2] != belay.ProblemChecksum || kinds[3] != belay.ProblemMissingRow {
		t.Errorf("kinds = %v", kinds)
	}
	for _, p := range rep.Problems {
		if first := p.Recovery[0]; p.Seq == 2 && first.SessionID != one.SessionID &&
			(first.Action != belay.RecoverRollback || first.Seq != 1) && first.Action != belay.RecoverRepair {
			t.Errorf("recovery of #2 = %+v", p.Recovery)
		}
	}

	_, err = e.svc.Validate(wsAs("mallory", false), belay.ValidateInput{SessionID: one.SessionID, Repair: true})
	testutil.WantCode(t, err, belay.CodeSessionNotFound)
	_, err = e.svc.Validate(alice, belay.ValidateInput{Repair: true})
	testutil.WantCode(t, err, belay.CodeUnauthorized)

	rep, err = e.svc.Validate(alice, belay.ValidateInput{SessionID: one.SessionID, Repair: true})
	if err != nil || !rep.OK {
		t.Fatalf("repair = %+v, %v", rep, err)
	}
	for _, orig := range []*belay.Checkpoint{one, two, three} {
		got, err := e.svc.GetCheckpoint(alice, orig.ID)
		if err != nil {
			t.Fatalf("#%d after repair: %v", orig.Seq, err)
		}
		if !reflect.DeepEqual(got, orig) {
			t.Errorf("#%d rebuilt from git differs:\n got %+v\nwant %+v", orig.Seq, got, orig)
		}
	}
	if s := mustSession(t, e.svc, one.SessionID); s.CheckpointCount != 3 {
		t.Errorf("checkpoint count = %d", s.CheckpointCount)
	}
	if rep, err := e.svc.Validate(alice, belay.ValidateInput{}); err != nil || !rep.OK {
		t.Errorf("validate after repair = %+v, %v", rep, err)
	}
}

func TestValidateReportsDamagedSnapshotRepository(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "precious content"})
	cp := e.save(t, "one")
	blob := strings.TrimSpace(testtree.Git(t, e.project, "hash-object", "a.txt"))
	objects, _ := filepath.Glob(filepath.Join(e.data, "workspaces", "*", "repo.git", "objects", blob[:2], blob[2:]))
	if len(objects) != 1 {
		t.Fatalf("object %s not found loose in the shadow repository", blob)
	}
	if err := os.Remove(objects[0]); err != nil {
		t.Fatal(err)
	}
	rep, err := e.svc.Validate(alice, belay.ValidateInput{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || len(rep.Problems) != 1 || rep.Problems[0].Kind != belay.ProblemWorkspace || rep.Problems[0].ProjectPath != e.project {
		t.Errorf("report = %+v", rep)
	}
	testtree.Write(t, e.project, map[string]string{"a.txt": "changed"})
	_, err = e.svc.RestoreCheckpoint(alice, belay.RestoreInput{CheckpointID: cp.ID})
	testutil.WantCode(t, err, belay.CodeRestoreFailed)
	if got := testtree.Read(t, e.project)["a.txt"]; got != "changed" {
		t.Errorf("a.txt = %q after a failed rollback", got)
	}
}
