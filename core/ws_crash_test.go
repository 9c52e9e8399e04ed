package core_test

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testtree"
	"github.com/belayhq/belay/store"
)

// afterStore calls hook after each Update that succeeded, with the call's
// number (from 1).
type afterStore struct {
	store.Store
	calls int32
	hook  func(call int32)
}

func (a *afterStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	err := a.Store.Update(ctx, fn)
	a.calls++
	if err == nil {
		a.hook(a.calls)
	}
	return err
}

// dieDuring runs fn on a goroutine that ends on the spot (as if the process
// died: deferred unlocks run, no error handling does) when svc's store
// reaches the given point.
func dieDuring(t *testing.T, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
		t.Error("the operation was not interrupted")
	}()
	<-done
}

// crashingRollback starts a rollback of e's session to target that dies
// before (after=false) or after (after=true) it records the rollback.
func (e *wsEnv) crashingRollback(t *testing.T, target *belay.Checkpoint, after bool) {
	t.Helper()
	var svc *core.Service
	if after {
		svc = core.New(core.Options{Store: &afterStore{Store: e.db, hook: func(call int32) {
			if call == 1 { // the files are the head's: no pre-rollback checkpoint, 1 records the rollback
				runtime.Goexit()
			}
		}}, Workspaces: e.ws, WorkspaceRoots: []string{filepath.Dir(e.project)}})
	} else {
		svc = e.withStoreHook(func(call int32) error {
			if call == 1 {
				runtime.Goexit()
			}
			return nil
		})
	}
	dieDuring(t, func() {
		svc.RestoreCheckpoint(alice, belay.RestoreInput{CheckpointID: target.ID, Reason: "crash"})
	})
}

// manyFiles writes n files with the given content.
func manyFiles(t *testing.T, root string, n int, content string) {
	t.Helper()
	files := map[string]string{}
	for i := range n {
		files[filepath.Join("src", "f"+strings.Repeat("0", 3-len(itoa(i)))+itoa(i)+".txt")] = content
	}
	testtree.Write(t, root, files)
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// wantRolledBackOnce checks that one rollback to target was recorded, with
// its event, that the session's state is the target's and its head is head,
// and that the files are want.
func wantRolledBackOnce(t *testing.T, e *wsEnv, target *belay.Checkpoint, head string, want map[string]string) {
	t.Helper()
	rbs, err := e.svc.ListRollbacks(alice, target.SessionID)
	if err != nil || len(rbs) != 1 || rbs[0].TargetID != target.ID || rbs[0].Reason != "crash" || rbs[0].UserID != "alice" {
		t.Fatalf("rollbacks = %+v, %v", rbs, err)
	}
	sess := mustSession(t, e.svc, target.SessionID)
	if sess.HeadCheckpointID != head || string(sess.State) != string(target.AgentState) || sess.Phase != target.Phase {
		t.Errorf("session = head %s state %s phase %q, want head %s and the target's state", sess.HeadCheckpointID, sess.State, sess.Phase, head)
	}
	restored := 0
	for _, ev := range events(t, e.svc) {
		if ev.Type == belay.EventWorkspaceRestored {
			restored++
		}
	}
	if restored != 1 {
		t.Errorf("%d %s events, want 1", restored, belay.EventWorkspaceRestored)
	}
	if got := testtree.Read(t, e.project); !maps.Equal(got, want) {
		t.Errorf("files are not the target's (%d files, want %d)", len(got), len(want))
	}
}

// TestRollbackKilledBeforeItIsRecordedIsFinishedByTheNextSave: the process
// dies after moving the files and before recording the rollback. The next
// save finishes the whole rollback first — rollback record, head, agent
// state, event — so its checkpoint descends from the target and records
// only what changed since.
func TestRollbackKilledBeforeItIsRecordedIsFinishedByTheNextSave(t *testing.T) {
	e := newWSEnv(t)
	manyFiles(t, e.project, 300, "one")
	first := e.save(t, "first", func(in *belay.CreateCheckpointInput) {
		in.AgentState, in.Phase = json.RawMessage(`{"at":1}`), "one"
	})
	atFirst := testtree.Read(t, e.project)
	manyFiles(t, e.project, 300, "two")
	e.save(t, "second", func(in *belay.CreateCheckpointInput) {
		in.AgentState, in.Phase = json.RawMessage(`{"at":2}`), "two"
	})

	e.crashingRollback(t, first, false)
	testtree.Write(t, e.project, map[string]string{"after.txt": "work after the crash"})
	next := e.save(t, "after the crash")
	want := maps.Clone(atFirst)
	want["after.txt"] = "work after the crash"
	wantRolledBackOnce(t, e, first, next.ID, want)
	if next.ParentID != first.ID || !slices.Equal(next.Files.Created, []string{"after.txt"}) || len(next.Files.Modified) != 0 {
		t.Errorf("the save after the crash: parent %s, files %+v", next.ParentID, next.Files)
	}
	if rep, err := e.svc.Validate(alice, belay.ValidateInput{}); err != nil || !rep.OK {
		t.Errorf("validate = %+v, %v", rep, err)
	}
}

// TestRollbackKilledAfterItIsRecordedIsRecordedOnce: the process dies after
// recording the rollback, before dropping its journal; the next command
// finds the journal and records nothing more.
func TestRollbackKilledAfterItIsRecordedIsRecordedOnce(t *testing.T) {
	e := newWSEnv(t)
	manyFiles(t, e.project, 20, "one")
	first := e.save(t, "first")
	atFirst := testtree.Read(t, e.project)
	manyFiles(t, e.project, 20, "two")
	e.save(t, "second")

	e.crashingRollback(t, first, true)
	wantRolledBackOnce(t, e, first, first.ID, atFirst)
	other := e.save(t, "next")
	if rbs, _ := e.svc.ListRollbacks(alice, first.SessionID); len(rbs) != 1 {
		t.Errorf("%d rollbacks after the next save, want 1", len(rbs))
	}
	if other.ParentID != first.ID || len(other.Files.Modified)+len(other.Files.Created)+len(other.Files.Deleted) != 0 {
		t.Errorf("the next save: parent %s, files %+v", other.ParentID, other.Files)
	}
}

// TestValidateReportsAndFinishesAnInterruptedRollback: validate names the
// rollback a crash left unfinished; --repair finishes it, and a rollback
// run next also would.
func TestValidateReportsAndFinishesAnInterruptedRollback(t *testing.T) {
	e := newWSEnv(t)
	manyFiles(t, e.project, 20, "one")
	first := e.save(t, "first", func(in *belay.CreateCheckpointInput) { in.AgentState = json.RawMessage(`{"at":1}`) })
	atFirst := testtree.Read(t, e.project)
	manyFiles(t, e.project, 20, "two")
	second := e.save(t, "second")

	e.crashingRollback(t, first, false)
	rep, err := e.svc.Validate(alice, belay.ValidateInput{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || len(rep.Problems) != 1 || rep.Problems[0].Kind != belay.ProblemWorkspace ||
		!strings.Contains(rep.Problems[0].Message, "rollback to checkpoint #1") {
		t.Fatalf("validate = %+v", rep)
	}
	rep, err = e.svc.Validate(alice, belay.ValidateInput{SessionID: first.SessionID, Repair: true})
	if err != nil || !rep.OK || len(rep.Problems) != 1 || !rep.Problems[0].Repaired {
		t.Fatalf("validate --repair = %+v, %v", rep, err)
	}
	wantRolledBackOnce(t, e, first, first.ID, atFirst)

	// The same crash again; this time a rollback finishes it first.
	e.crashingRollback(t, second, false)
	e.rollback(t, first)
	if rbs, _ := e.svc.ListRollbacks(alice, first.SessionID); len(rbs) != 3 || rbs[1].TargetID != second.ID || rbs[2].TargetID != first.ID {
		t.Errorf("rollbacks = %+v", rbs)
	}
	if got := testtree.Read(t, e.project); !maps.Equal(got, atFirst) {
		t.Error("files are not the first checkpoint's")
	}
}

// TestValidateRepairsTheSnapshotRepository: lock files of a killed git and
// files a crash left empty made every later save fail while validate said
// nothing. Validate now reports them, --repair rebuilds what git can (the
// lost ref from the checkpoint's row), and saving works again.
func TestValidateRepairsTheSnapshotRepository(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "a"})
	first := e.save(t, "first")
	testtree.Write(t, e.project, map[string]string{"a.txt": "a2"})
	second := e.save(t, "second")
	shadows, _ := filepath.Glob(filepath.Join(e.data, "workspaces", "*"))
	if len(shadows) != 1 {
		t.Fatalf("shadow directories: %v", shadows)
	}
	shadow := shadows[0]
	for _, name := range []string{"index.lock", "repo.git/HEAD", "repo.git/refs/belay/" + second.SessionID + "/2"} {
		if err := os.WriteFile(filepath.Join(shadow, filepath.FromSlash(name)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := e.svc.Validate(alice, belay.ValidateInput{})
	if err != nil {
		t.Fatal(err)
	}
	var messages []string
	for _, p := range rep.Problems {
		messages = append(messages, p.Message)
	}
	all := strings.Join(messages, "\n")
	if rep.OK || !strings.Contains(all, "index.lock") || !strings.Contains(all, "HEAD") || !strings.Contains(all, "/2") {
		t.Fatalf("validate = %+v", rep)
	}
	rep, err = e.svc.Validate(wsAs("root", true), belay.ValidateInput{Repair: true})
	if err != nil || !rep.OK {
		t.Fatalf("validate --repair = %+v, %v", rep, err)
	}
	if rep, err := e.svc.Validate(alice, belay.ValidateInput{}); err != nil || !rep.OK || len(rep.Problems) != 0 {
		t.Errorf("validate after repair = %+v, %v", rep, err)
	}
	testtree.Write(t, e.project, map[string]string{"a.txt": "a3"})
	third := e.save(t, "third")
	if third.ParentID != second.ID || !slices.Equal(third.Files.Modified, []string{"a.txt"}) {
		t.Errorf("third = parent %s files %+v", third.ParentID, third.Files)
	}
	e.rollback(t, first)
	if got := testtree.Read(t, e.project)["a.txt"]; got != "a" {
		t.Errorf("a.txt = %q after rolling back to the first checkpoint", got)
	}
}
