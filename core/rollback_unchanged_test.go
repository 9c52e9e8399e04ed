package core_test

import (
	"encoding/json"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testtree"
)

// TestRollbackWithNothingChangedTakesNoSafetyCheckpoint: when the files and
// the agent state are still those of the session's head checkpoint, that
// checkpoint already holds them: rolling back saves no pre-rollback
// checkpoint, and undoing goes back to the head.
func TestRollbackWithNothingChangedTakesNoSafetyCheckpoint(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "one"})
	first := e.save(t, "first", func(in *belay.CreateCheckpointInput) { in.AgentState = json.RawMessage(`{"n":1}`) })
	testtree.Write(t, e.project, map[string]string{"a.txt": "two"})
	second := e.save(t, "second", func(in *belay.CreateCheckpointInput) { in.AgentState = json.RawMessage(`{"n":2}`) })

	// Nothing changed since #2: rolling back to #1 keeps #2 as the undo point.
	res := e.rollback(t, first)
	if res.SafetyCheckpoint == nil || res.SafetyCheckpoint.ID != second.ID || res.Rollback.FromCheckpointID != second.ID {
		t.Errorf("safety checkpoint = %+v, want #2 itself", res.SafetyCheckpoint)
	}
	if s := mustSession(t, e.svc, first.SessionID); s.LastSeq != 2 || s.CheckpointCount != 2 || s.HeadCheckpointID != first.ID {
		t.Errorf("session after the rollback = %+v; want no new checkpoint and head #1", s)
	}
	if got := testtree.Read(t, e.project)["a.txt"]; got != "one" {
		t.Errorf("a.txt = %q after the rollback, want one", got)
	}
	// Again, and back again: still nothing new.
	if res := e.rollback(t, first); res.SafetyCheckpoint.ID != first.ID {
		t.Errorf("second rollback to #1: safety = #%d, want #1 itself", res.SafetyCheckpoint.Seq)
	}
	if res := e.rollback(t, second); res.SafetyCheckpoint.ID != first.ID || testtree.Read(t, e.project)["a.txt"] != "two" {
		t.Errorf("undo: safety = #%d, a.txt = %q", res.SafetyCheckpoint.Seq, testtree.Read(t, e.project)["a.txt"])
	}
	if s := mustSession(t, e.svc, first.SessionID); s.LastSeq != 2 || string(s.State) != `{"n":2}` {
		t.Errorf("session after three rollbacks = %+v; want no new checkpoint, state of #2", s)
	}
	if rbs, err := e.svc.ListRollbacks(alice, first.SessionID); err != nil || len(rbs) != 3 {
		t.Errorf("rollbacks = %d, %v; each rollback is still recorded", len(rbs), err)
	}

	// A changed file is saved first, as always.
	testtree.Write(t, e.project, map[string]string{"a.txt": "three"})
	res = e.rollback(t, first)
	if res.SafetyCheckpoint.Seq != 3 || res.SafetyCheckpoint.ParentID != second.ID || testtree.Read(t, e.project)["a.txt"] != "one" {
		t.Errorf("rollback after a change: safety = %+v", res.SafetyCheckpoint)
	}
	if res := e.rollback(t, res.SafetyCheckpoint); testtree.Read(t, e.project)["a.txt"] != "three" || res.SafetyCheckpoint.ID != first.ID {
		t.Errorf("undo of that rollback: a.txt = %q, safety #%d", testtree.Read(t, e.project)["a.txt"], res.SafetyCheckpoint.Seq)
	}
}

// TestStateOnlyRollbackKeepsStateTheHeadLacks: a state-only rollback saves
// no safety checkpoint when the state is the head's, and saves one when it
// is not (the checkpoint that had it was deleted).
func TestStateOnlyRollbackKeepsStateTheHeadLacks(t *testing.T) {
	svc := newService(t, nil)
	project := t.TempDir()
	one := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "one", AgentState: json.RawMessage(`{"n":1}`)})
	two := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "two", AgentState: json.RawMessage(`{"n":2}`)})

	res, err := svc.RestoreCheckpoint(localCtx, belay.RestoreInput{CheckpointID: one.ID})
	if err != nil || res.SafetyCheckpoint.ID != two.ID {
		t.Fatalf("rollback with the state of the head: %+v, %v; want #2 as the safety checkpoint", res, err)
	}
	three := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "three", AgentState: json.RawMessage(`{"n":3}`)})
	if err := svc.DeleteCheckpoint(localCtx, three.ID); err != nil {
		t.Fatal(err)
	}
	// The head is #1 again, but the state is still #3's.
	res, err = svc.RestoreCheckpoint(localCtx, belay.RestoreInput{CheckpointID: one.ID})
	if err != nil || res.SafetyCheckpoint.Seq != 4 || string(res.SafetyCheckpoint.AgentState) != `{"n":3}` {
		t.Errorf("rollback with a state the head lacks: safety = %+v, %v; want #4 with {\"n\":3}", res.SafetyCheckpoint, err)
	}
}

// TestStateOnlyRollbackUndoKeepsTheFiles: a rollback to a checkpoint without
// a snapshot leaves the files alone, so its undo must too. The head, whose
// snapshot may differ from the files now, is no undo point for it: a
// state-only safety checkpoint is.
func TestStateOnlyRollbackUndoKeepsTheFiles(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "one"})
	e.save(t, "one")
	plain := e.save(t, "two", func(in *belay.CreateCheckpointInput) {
		in.Snapshot, in.AgentState = false, json.RawMessage(`{"n":2}`)
	})
	testtree.Write(t, e.project, map[string]string{"a.txt": "three"})
	head := e.save(t, "three", func(in *belay.CreateCheckpointInput) { in.AgentState = json.RawMessage(`{"n":3}`) })
	testtree.Write(t, e.project, map[string]string{"a.txt": "four"})

	res := e.rollback(t, plain)
	safety := res.SafetyCheckpoint
	if safety == nil || safety.ID == head.ID || safety.WorkspaceRef != "" || string(safety.AgentState) != `{"n":3}` {
		t.Fatalf("safety checkpoint = %+v; want a new one with #3's state and no snapshot", safety)
	}
	if got := testtree.Read(t, e.project)["a.txt"]; got != "four" {
		t.Errorf("a.txt = %q after a state-only rollback, want four", got)
	}
	e.rollback(t, safety)
	if got := testtree.Read(t, e.project)["a.txt"]; got != "four" {
		t.Errorf("a.txt = %q after undoing it, want four", got)
	}
	if s := mustSession(t, e.svc, head.SessionID); string(s.State) != `{"n":3}` {
		t.Errorf("state after the undo = %s, want #3's", s.State)
	}

	// A head without a snapshot is still its own undo point.
	again := e.rollback(t, plain)
	if e.rollback(t, again.SafetyCheckpoint); again.SafetyCheckpoint.ID != safety.ID {
		t.Errorf("undo point after a state-only head = #%d, want #%d", again.SafetyCheckpoint.Seq, safety.Seq)
	}
}
