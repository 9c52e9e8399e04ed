package core_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testtree"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/workspace"
)

func TestRollbackRestoresFilesAndStateAndCanBeUndone(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "a", "b.txt": "b", "dir/c.txt": "c", ".gitignore": "*.log\n", "-dash ünï.txt": "d"})
	first := e.save(t, "first", func(in *belay.CreateCheckpointInput) {
		in.AgentState, in.Phase, in.Step = json.RawMessage(`{"step":1}`), "plan", 1
	})
	atFirst := testtree.Read(t, e.project)

	// Break things: modify, delete, create, and add an ignored file.
	testtree.Write(t, e.project, map[string]string{"a.txt": "broken", "new/deep/n.txt": "n", "debug.log": "ignored"})
	wsRemove(t, e.project, "b.txt", "-dash ünï.txt")
	second := e.save(t, "second", func(in *belay.CreateCheckpointInput) {
		in.AgentState, in.Phase, in.Step = json.RawMessage(`{"step":2}`), "build", 2
	})
	testtree.Write(t, e.project, map[string]string{"after.txt": "unsaved work"})
	broken := testtree.Read(t, e.project)

	dry, err := e.svc.RestoreCheckpoint(alice, belay.RestoreInput{CheckpointID: first.ID, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !dry.DryRun || dry.StateOnly || !slices.Equal(dry.RestoredFiles, []string{"-dash ünï.txt", "a.txt", "b.txt"}) ||
		!slices.Equal(dry.RemovedFiles, []string{"after.txt", "new/deep/n.txt"}) || dry.SafetyCheckpoint != nil {
		t.Errorf("dry run = restore %v remove %v", dry.RestoredFiles, dry.RemovedFiles)
	}
	if !maps.Equal(testtree.Read(t, e.project), broken) || mustSession(t, e.svc, first.SessionID).LastSeq != 2 {
		t.Fatal("a dry run changed something")
	}

	res, err := e.svc.RestoreCheckpoint(alice, belay.RestoreInput{CheckpointID: first.ID, Reason: "wrong direction"})
	if err != nil || res.StateOnly {
		t.Fatalf("rollback = %+v, %v", res, err)
	}
	want := maps.Clone(atFirst)
	want["debug.log"] = "ignored" // ignored: never touched
	if got := testtree.Read(t, e.project); !maps.Equal(got, want) {
		t.Errorf("after rollback:\n got %v\nwant %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(e.project, "new")); !os.IsNotExist(err) {
		t.Errorf("directories emptied by the rollback stay: %v", err)
	}
	if !slices.Equal(res.RestoredFiles, dry.RestoredFiles) || !slices.Equal(res.RemovedFiles, dry.RemovedFiles) {
		t.Errorf("rollback = restore %v remove %v; dry run said %v %v", res.RestoredFiles, res.RemovedFiles, dry.RestoredFiles, dry.RemovedFiles)
	}
	safety := res.SafetyCheckpoint
	if safety == nil || safety.Name != core.SafetyCheckpointName || safety.Type != belay.TypeAuto || safety.Seq != 3 ||
		safety.ParentID != second.ID || string(safety.AgentState) != `{"step":2}` || !slices.Equal(safety.Files.Created, []string{"after.txt"}) {
		t.Errorf("safety checkpoint = %+v", safety)
	}
	sess := res.Session
	if sess.HeadCheckpointID != first.ID || string(sess.State) != `{"step":1}` || sess.Phase != "plan" || sess.CurrentStep != 1 {
		t.Errorf("session after rollback = %+v", sess)
	}
	if stored := mustSession(t, e.svc, sess.ID); stored.HeadCheckpointID != first.ID || stored.LastSeq != 3 {
		t.Errorf("stored session = %+v", stored)
	}
	rbs, err := e.svc.ListRollbacks(alice, sess.ID)
	if err != nil || len(rbs) != 1 || rbs[0].TargetID != first.ID || rbs[0].FromCheckpointID != safety.ID ||
		rbs[0].Reason != "wrong direction" || rbs[0].UserID != "alice" || len(rbs[0].RestoredFiles) != 3 {
		t.Errorf("rollbacks = %+v, %v", rbs, err)
	}
	evs := events(t, e.svc)
	last := evs[len(evs)-1]
	if last.Type != belay.EventWorkspaceRestored || last.CheckpointID != first.ID || !strings.Contains(string(last.Data), safety.ID) {
		t.Errorf("last event = %+v", last)
	}

	// The timeline branches: the next checkpoint descends from the target.
	testtree.Write(t, e.project, map[string]string{"a.txt": "another way"})
	branch := e.save(t, "another way")
	if branch.ParentID != first.ID || !slices.Equal(branch.Files.Modified, []string{"a.txt"}) || branch.Seq != 4 {
		t.Errorf("checkpoint after rollback = parent %s files %+v", branch.ParentID, branch.Files)
	}

	// Rolling back to the safety checkpoint undoes the rollback.
	e.rollback(t, safety)
	want = maps.Clone(broken)
	want["debug.log"] = "ignored"
	if got := testtree.Read(t, e.project); !maps.Equal(got, want) {
		t.Errorf("after undo:\n got %v\nwant %v", got, want)
	}
	if s := mustSession(t, e.svc, sess.ID); string(s.State) != `{"step":2}` || s.Phase != "build" || s.HeadCheckpointID != safety.ID {
		t.Errorf("session after undo = %+v", s)
	}
	report, err := e.svc.Validate(alice, belay.ValidateInput{})
	if err != nil || !report.OK {
		t.Errorf("validate = %+v, %v", report, err)
	}
}

func TestRollbackWithoutSnapshotRestoresStateOnlyAndReopensSession(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "a"})
	plain, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{ProjectPath: e.project, Summary: "plan",
		AgentState: json.RawMessage(`{"plan":true}`), Phase: "plan", Step: 1})
	if err != nil {
		t.Fatal(err)
	}
	// A rejected HITL request fails the session.
	ask, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: plain.SessionID, Summary: "ok?",
		AgentState: json.RawMessage(`{"plan":false}`), Phase: "review", HITL: &belay.HITLInput{Required: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Decide(alice, belay.DecideInput{CheckpointID: ask.ID, Action: belay.ActionReject, SelectedOption: "reject"}); err != nil {
		t.Fatal(err)
	}
	if s := mustSession(t, e.svc, plain.SessionID); s.Status != belay.SessionFailed {
		t.Fatalf("status = %s, want failed", s.Status)
	}
	testtree.Write(t, e.project, map[string]string{"a.txt": "changed"})

	_, err = e.svc.RestoreCheckpoint(wsAs("mallory", false), belay.RestoreInput{CheckpointID: plain.ID})
	testutil.WantCode(t, err, belay.CodeCheckpointNotFound)
	res := e.rollback(t, plain)
	if got := testtree.Read(t, e.project)["a.txt"]; got != "changed" {
		t.Errorf("a state-only rollback touched files: a.txt = %q", got)
	}
	if res.Session.Status != belay.SessionRunning || string(res.Session.State) != `{"plan":true}` || res.Session.Phase != "plan" ||
		res.SafetyCheckpoint == nil || string(res.SafetyCheckpoint.AgentState) != `{"plan":false}` || len(res.RestoredFiles) != 0 {
		t.Errorf("result = %+v", res)
	}
	_, err = e.svc.RestoreCheckpoint(alice, belay.RestoreInput{CheckpointID: "01a1fdb8-0000-7000-8000-000000000000"})
	testutil.WantCode(t, err, belay.CodeCheckpointNotFound)
	_, err = e.svc.RestoreCheckpoint(alice, belay.RestoreInput{CheckpointID: plain.ID, Reason: strings.Repeat("r", belay.MaxReason+1)})
	testutil.WantCode(t, err, belay.CodeValidation, "reason")
}

func TestRollbackFailureLeavesWorkspaceAsItWas(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{".gitignore": "*.log\n", "d": "was a file", "keep.txt": "k"})
	first := e.save(t, "first")
	// d becomes a directory holding an ignored file: the rollback cannot put
	// the file d back without deleting what it must never touch.
	wsRemove(t, e.project, "d")
	testtree.Write(t, e.project, map[string]string{"d/f.txt": "f", "d/x.log": "ignored", "keep.txt": "changed"})
	before := testtree.Read(t, e.project)

	_, err := e.svc.RestoreCheckpoint(alice, belay.RestoreInput{CheckpointID: first.ID})
	be := testutil.WantCode(t, err, belay.CodeRestoreFailed)
	if !strings.Contains(be.Message, "d") {
		t.Errorf("message = %q", be.Message)
	}
	if got := testtree.Read(t, e.project); !maps.Equal(got, before) {
		t.Errorf("after a failed rollback:\n got %v\nwant %v", got, before)
	}
	sess := mustSession(t, e.svc, first.SessionID)
	if rbs, _ := e.svc.ListRollbacks(alice, sess.ID); len(rbs) != 0 {
		t.Errorf("a failed rollback was recorded: %+v", rbs)
	}
	if sess.HeadCheckpointID == first.ID {
		t.Error("the session moved to the target of a failed rollback")
	}
}

func TestRollbackNotRecordedIsUndone(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "a"})
	first := e.save(t, "first")
	testtree.Write(t, e.project, map[string]string{"a.txt": "changed", "new.txt": "n"})
	before := testtree.Read(t, e.project)
	// Write 1 saves the pre-rollback checkpoint, write 2 records the rollback.
	flaky := e.withFlakyStore(2)
	_, err := flaky.RestoreCheckpoint(alice, belay.RestoreInput{CheckpointID: first.ID})
	testutil.WantCode(t, err, belay.CodeRestoreFailed)
	if got := testtree.Read(t, e.project); !maps.Equal(got, before) {
		t.Errorf("workspace after an unrecorded rollback:\n got %v\nwant %v", got, before)
	}
	if s := mustSession(t, e.svc, first.SessionID); s.HeadCheckpointID == first.ID {
		t.Error("the session moved to the target")
	}
}

// TestWorkspaceOutsideRootsNeedsAdmin: a user who is not an admin may not
// snapshot, diff or roll back a directory outside the server's workspace
// roots, or any token holder could read or revert any directory.
func TestWorkspaceOutsideRootsNeedsAdmin(t *testing.T) {
	e := newWSEnv(t)
	cp := e.save(t, "first")
	outside := t.TempDir()
	svc := core.New(core.Options{Store: e.db, Workspaces: e.ws, WorkspaceRoots: []string{outside}})
	bob := wsAs("bob", false)
	_, err := svc.CreateCheckpoint(bob, belay.CreateCheckpointInput{ProjectPath: e.project, Summary: "steal", Snapshot: true})
	if !belay.IsCode(err, belay.CodeUnauthorized) {
		t.Errorf("snapshot outside the roots: err = %v, want UNAUTHORIZED", err)
	}
	if _, err := svc.DiffCheckpoint(alice, belay.DiffInput{CheckpointID: cp.ID}); !belay.IsCode(err, belay.CodeUnauthorized) {
		t.Errorf("diff outside the roots: err = %v, want UNAUTHORIZED", err)
	}
	if _, err := svc.RestoreCheckpoint(alice, belay.RestoreInput{CheckpointID: cp.ID}); !belay.IsCode(err, belay.CodeUnauthorized) {
		t.Errorf("rollback outside the roots: err = %v, want UNAUTHORIZED", err)
	}
	if _, err := svc.DiffCheckpoint(wsAs("root", true), belay.DiffInput{CheckpointID: cp.ID}); err != nil {
		t.Errorf("an admin's diff: %v", err)
	}
}

// TestWorkspaceSymlinkOutOfRootsNeedsAdmin: a path under a workspace root
// that is a symlink to a directory outside it is outside: a user who is not
// an admin may not snapshot, diff or roll back through it.
func TestWorkspaceSymlinkOutOfRootsNeedsAdmin(t *testing.T) {
	e := newWSEnv(t)
	outside, err := os.MkdirTemp("", "belay-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	testtree.Write(t, outside, map[string]string{"victim.txt": "precious"})
	link := filepath.Join(filepath.Dir(e.project), "escape")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}

	_, err = e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{ProjectPath: link, Summary: "steal", Snapshot: true})
	testutil.WantCode(t, err, belay.CodeUnauthorized)

	// Alice's session on the link gets a snapshot from an admin; she may
	// still neither diff nor roll it back.
	plain, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{ProjectPath: link, Summary: "no snapshot"})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := e.svc.CreateCheckpoint(wsAs("root", true), belay.CreateCheckpointInput{SessionID: plain.SessionID, Summary: "by an admin", Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	testtree.Write(t, outside, map[string]string{"victim.txt": "edited", "new.txt": "new"})
	before := testtree.Read(t, outside)
	_, err = e.svc.DiffCheckpoint(alice, belay.DiffInput{CheckpointID: snap.ID})
	testutil.WantCode(t, err, belay.CodeUnauthorized)
	_, err = e.svc.RestoreCheckpoint(alice, belay.RestoreInput{CheckpointID: snap.ID})
	testutil.WantCode(t, err, belay.CodeUnauthorized)
	_, err = e.svc.RestoreCheckpoint(alice, belay.RestoreInput{CheckpointID: snap.ID, DryRun: true})
	testutil.WantCode(t, err, belay.CodeUnauthorized)
	if got := testtree.Read(t, outside); !maps.Equal(got, before) {
		t.Errorf("files outside the roots changed:\n got %v\nwant %v", got, before)
	}

	// A link that stays inside the roots is fine.
	inside := filepath.Join(filepath.Dir(e.project), "inside")
	if err := os.Symlink(e.project, inside); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{ProjectPath: inside, Summary: "ok", Snapshot: true}); err != nil {
		t.Errorf("snapshot through a link inside the roots: %v", err)
	}
}

// TestOutsideRootsSaysNothingOfThePath: a caller who is not an admin learns
// nothing of a path outside the workspace roots from a save with a snapshot:
// a directory, a file and a path that does not exist are all refused alike,
// before anything looks at them.
func TestOutsideRootsSaysNothingOfThePath(t *testing.T) {
	e := newWSEnv(t)
	// Not t.TempDir(): the roots are the parent of the test's directories.
	outside, err := os.MkdirTemp("", "belay-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	file := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{outside, file, filepath.Join(outside, "missing"), filepath.Join(outside, "missing", "deeper")} {
		_, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{ProjectPath: p, Summary: "probe", Snapshot: true})
		testutil.WantCode(t, err, belay.CodeUnauthorized)
	}
}

// TestExportBranchOutsideRootsIsRefused: a session's owner who is not an
// admin may not write a branch into a repository outside the workspace roots,
// even of a session an admin snapshotted there.
func TestExportBranchOutsideRootsIsRefused(t *testing.T) {
	e := newWSEnv(t)
	outside, err := os.MkdirTemp("", "belay-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	testtree.Write(t, outside, map[string]string{"a.txt": "a"})
	plain, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{ProjectPath: outside, Summary: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.CreateCheckpoint(wsAs("root", true), belay.CreateCheckpointInput{SessionID: plain.SessionID, Summary: "by an admin", Snapshot: true}); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.ExportBranch(alice, belay.ExportBranchInput{SessionID: plain.SessionID})
	testutil.WantCode(t, err, belay.CodeUnauthorized)
}

// TestRollbackRestoresADeletedProject: a rollback of a project whose
// directory was deleted whole makes the directory again and restores its
// files; outside the workspace roots, only for an admin.
func TestRollbackRestoresADeletedProject(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "a", "dir/b.txt": "b"})
	cp := e.save(t, "one")
	if err := os.RemoveAll(e.project); err != nil {
		t.Fatal(err)
	}
	res := e.rollback(t, cp)
	if got := testtree.Read(t, e.project); !maps.Equal(got, map[string]string{"a.txt": "a", "dir/b.txt": "b"}) {
		t.Errorf("files after the rollback = %v", got)
	}
	if len(res.RestoredFiles) != 2 {
		t.Errorf("restored %v, want both files", res.RestoredFiles)
	}
}

// TestRollbackKeepsAFileTheTargetDidNotStore: a file the target checkpoint's
// snapshot left out (too large then) existed at that checkpoint, with
// content belay never had: a rollback leaves it as it is, rather than
// removing a file that was there, and says so.
func TestRollbackKeepsAFileTheTargetDidNotStore(t *testing.T) {
	e := newWSEnv(t)
	var err error
	if e.ws, err = workspace.New(workspace.Options{DataDir: e.data, MaxFileSize: 1 << 10}); err != nil {
		t.Fatal(err)
	}
	e.svc = core.New(core.Options{Store: e.db, Workspaces: e.ws, WorkspaceRoots: []string{filepath.Dir(e.project)}})
	testtree.Write(t, e.project, map[string]string{"a.txt": "a", "big.bin": strings.Repeat("x", 4<<10)})
	cp := e.save(t, "big skipped")
	if sk := cp.SkippedFiles(); len(sk) != 1 || sk[0].Path != "big.bin" {
		t.Fatalf("skipped = %v, want big.bin", sk)
	}
	testtree.Write(t, e.project, map[string]string{"a.txt": "changed", "big.bin": "small now"})

	dry, err := e.svc.RestoreCheckpoint(alice, belay.RestoreInput{CheckpointID: cp.ID, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(dry.RemovedFiles, "big.bin") || !slices.Equal(dry.KeptFiles, []string{"big.bin"}) {
		t.Errorf("dry run: removed %v, kept %v; want big.bin kept", dry.RemovedFiles, dry.KeptFiles)
	}
	res := e.rollback(t, cp)
	if got := testtree.Read(t, e.project); !maps.Equal(got, map[string]string{"a.txt": "a", "big.bin": "small now"}) {
		t.Errorf("files after the rollback = %v, want a.txt restored and big.bin left as it is", got)
	}
	if slices.Contains(res.RemovedFiles, "big.bin") || !slices.Equal(res.KeptFiles, []string{"big.bin"}) {
		t.Errorf("removed %v, kept %v; want big.bin kept", res.RemovedFiles, res.KeptFiles)
	}
	// Undoing the rollback puts back what was there before it.
	e.rollback(t, res.SafetyCheckpoint)
	if got := testtree.Read(t, e.project); !maps.Equal(got, map[string]string{"a.txt": "changed", "big.bin": "small now"}) {
		t.Errorf("files after the undo = %v", got)
	}
}
