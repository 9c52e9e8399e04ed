package core_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testtree"
	"github.com/belayhq/belay/internal/testutil"
)

func TestSnapshotCheckpointRecordsChangesSinceParentSnapshot(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "a", "b.txt": "b", ".gitignore": "*.log\n", "x.log": "ignored"})
	first := e.save(t, "first", func(in *belay.CreateCheckpointInput) { in.Name = "init" })
	if first.WorkspaceRef == "" || first.Files == nil {
		t.Fatalf("first checkpoint has no snapshot: %+v", first)
	}
	if want := []string{".gitignore", "a.txt", "b.txt"}; !slices.Equal(first.Files.Created, want) {
		t.Errorf("created = %v, want %v (ignored files are not snapshotted)", first.Files.Created, want)
	}

	// A checkpoint without a snapshot in between: the next snapshot's changes
	// are relative to the nearest ancestor that has one.
	if _, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: first.SessionID, Summary: "no snapshot"}); err != nil {
		t.Fatal(err)
	}
	testtree.Write(t, e.project, map[string]string{"a.txt": "a2", "c.txt": "c"})
	wsRemove(t, e.project, "b.txt")
	third := e.save(t, "third", func(in *belay.CreateCheckpointInput) { in.Summary = "third\nwith newline" })
	got := *third.Files
	want := belay.FileChanges{Created: []string{"c.txt"}, Modified: []string{"a.txt"}, Deleted: []string{"b.txt"}}
	if !slices.Equal(got.Created, want.Created) || !slices.Equal(got.Modified, want.Modified) || !slices.Equal(got.Deleted, want.Deleted) {
		t.Errorf("files = %+v, want %+v", got, want)
	}
	if third.Seq != 3 || third.SessionID != first.SessionID {
		t.Errorf("third = #%d in %s", third.Seq, third.SessionID)
	}
	if err := third.VerifyChecksum(); err != nil {
		t.Errorf("checksum: %v", err)
	}

	refs, err := e.ws.Refs(localCtx, e.project, "refs/belay/"+first.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	wantRefs := map[string]string{
		"refs/belay/" + first.SessionID + "/1": first.WorkspaceRef,
		"refs/belay/" + first.SessionID + "/3": third.WorkspaceRef,
	}
	if fmt.Sprint(refs) != fmt.Sprint(wantRefs) {
		t.Errorf("refs = %v, want %v", refs, wantRefs)
	}
	msg, err := e.ws.CommitMessage(localCtx, e.project, third.WorkspaceRef)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"checkpoint: step-3 - third with newline\n\n",
		"Session: " + third.SessionID + "\n",
		"Checkpoint: " + third.ID + "\n",
		"Files changed:\n- a.txt\n- b.txt\n- c.txt\n",
		"\nBelay-Session: " + third.SessionID + "\nBelay-Seq: 3\nBelay-Record: ",
	} {
		if !strings.Contains(msg, line) {
			t.Errorf("commit message lacks %q:\n%s", line, msg)
		}
	}
	if !strings.HasPrefix(msg, "checkpoint: step-3 - ") {
		t.Errorf("commit message starts %q", msg[:40])
	}

	// The stored row is what the service returned.
	stored, err := e.svc.GetCheckpoint(alice, third.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.WorkspaceRef != third.WorkspaceRef || stored.Checksum != third.Checksum {
		t.Errorf("stored %+v, returned %+v", stored, third)
	}
}

func TestSnapshotReportsSkippedFilesAndHonoursPaths(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "a", "b.txt": "b"})
	// A sparse file above the size cap costs no disk.
	big, err := os.Create(filepath.Join(e.project, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(60 << 20); err != nil {
		t.Fatal(err)
	}
	big.Close()
	cp := e.save(t, "with a big file", func(in *belay.CreateCheckpointInput) { in.Metadata = json.RawMessage(`{"mine": 1}`) })
	skipped := cp.SkippedFiles()
	if len(skipped) != 1 || skipped[0].Path != "big.bin" || !strings.Contains(skipped[0].Reason, "larger than") {
		t.Fatalf("skipped = %+v", skipped)
	}
	var meta map[string]any
	if err := json.Unmarshal(cp.Metadata, &meta); err != nil || meta["mine"] != 1.0 || meta["skippedCount"] != 1.0 {
		t.Errorf("metadata = %s, want the caller's keys kept", cp.Metadata)
	}
	if slices.Contains(cp.Files.Created, "big.bin") {
		t.Errorf("skipped file listed as created: %v", cp.Files.Created)
	}

	// With paths, only those are looked at.
	testtree.Write(t, e.project, map[string]string{"a.txt": "a2", "b.txt": "b2"})
	cp = e.save(t, "touched a", func(in *belay.CreateCheckpointInput) { in.Paths = []string{"a.txt"} })
	if !slices.Equal(cp.Files.Modified, []string{"a.txt"}) {
		t.Errorf("modified = %v, want only a.txt", cp.Files.Modified)
	}
	cp = e.save(t, "full scan")
	if !slices.Equal(cp.Files.Modified, []string{"b.txt"}) {
		t.Errorf("modified = %v, want b.txt, missed by the paths snapshot", cp.Files.Modified)
	}
}

func TestSnapshotRejectsBadWorkspacesAndInput(t *testing.T) {
	e := newWSEnv(t)
	inData := filepath.Join(e.data, "project")
	if err := os.Mkdir(inData, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(e.project, "file")
	testtree.Write(t, e.project, map[string]string{"file": "x"})
	bare, err := e.svc.CreateSession(alice, belay.CreateSessionInput{Title: "no project"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		in    belay.CreateCheckpointInput
		code  belay.Code
		field string
	}{
		{"inside data dir", belay.CreateCheckpointInput{ProjectPath: inData}, belay.CodeValidation, "projectPath"},
		{"missing dir", belay.CreateCheckpointInput{ProjectPath: filepath.Join(e.project, "nope")}, belay.CodeValidation, "projectPath"},
		{"not a dir", belay.CreateCheckpointInput{ProjectPath: file}, belay.CodeValidation, "projectPath"},
		{"path escapes", belay.CreateCheckpointInput{ProjectPath: e.project, Paths: []string{"../x"}}, belay.CodeValidation, "paths[0]"},
		{"absolute path", belay.CreateCheckpointInput{ProjectPath: e.project, Paths: []string{"/etc/passwd"}}, belay.CodeValidation, "paths[0]"},
		{"ref and snapshot", belay.CreateCheckpointInput{ProjectPath: e.project, WorkspaceRef: "4b825dc6"}, belay.CodeValidation, "workspaceRef"},
		{"session without project", belay.CreateCheckpointInput{SessionID: bare.ID}, belay.CodeValidation, "projectPath"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.Summary, c.in.Snapshot = "x", true
			_, err := e.svc.CreateCheckpoint(alice, c.in)
			testutil.WantCode(t, err, c.code, c.field)
		})
	}
	if _, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{ProjectPath: e.project, Summary: "x", Paths: []string{"a"}}); err == nil {
		t.Error("paths without snapshot accepted")
	}
	list, err := e.svc.ListSessions(alice, belay.ListSessionsInput{})
	if err != nil || list.TotalCount != 1 {
		t.Errorf("sessions = %v, %v; want only the one created on purpose", list, err)
	}

	// Without a workspace manager (no git) a snapshot is a clear internal error.
	noGit := core.New(core.Options{Store: e.db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	_, err = noGit.CreateCheckpoint(alice, belay.CreateCheckpointInput{ProjectPath: e.project, Summary: "x", Snapshot: true})
	if be := testutil.WantCode(t, err, belay.CodeInternal); !strings.Contains(be.Message, "git") {
		t.Errorf("message %q does not mention git", be.Message)
	}
	if _, err := noGit.CreateCheckpoint(alice, belay.CreateCheckpointInput{ProjectPath: e.project, Summary: "x"}); err != nil {
		t.Errorf("checkpoint without snapshot and without git: %v", err)
	}
}

func TestConcurrentSnapshotSavesAreSerialised(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "a"})
	first := e.save(t, "first")
	const n = 6
	var wg sync.WaitGroup
	cps := make([]*belay.Checkpoint, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			testtree.Write(t, e.project, map[string]string{fmt.Sprintf("f%d.txt", i): "x"})
			cps[i], errs[i] = e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: first.SessionID, Summary: "concurrent", Snapshot: true})
		}()
	}
	wg.Wait()
	seqs := []int64{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("save %d: %v", i, errs[i])
		}
		seqs = append(seqs, cps[i].Seq)
	}
	slices.Sort(seqs)
	if !slices.Equal(seqs, []int64{2, 3, 4, 5, 6, 7}) {
		t.Fatalf("seqs = %v", seqs)
	}
	// Each snapshot's parent is the one before it: the chain has no gaps.
	bySeq := map[int64]*belay.Checkpoint{1: first}
	for _, cp := range cps {
		bySeq[cp.Seq] = cp
	}
	for seq := int64(2); seq <= n+1; seq++ {
		if bySeq[seq].ParentID != bySeq[seq-1].ID {
			t.Errorf("#%d descends from %s, want #%d", seq, bySeq[seq].ParentID, seq-1)
		}
	}
	report, err := e.svc.Validate(alice, belay.ValidateInput{SessionID: first.SessionID})
	if err != nil || !report.OK {
		t.Errorf("validate after concurrent saves: %+v, %v", report, err)
	}
}

func TestSnapshotSaveConflictsWhenSessionMovesMeanwhile(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "a"})
	first := e.save(t, "first")
	// A save without snapshot (which takes no workspace lock) lands while
	// the snapshot is taken.
	racy := e.withStoreHook(func(call int32) error {
		if call == 1 {
			_, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: first.SessionID, Summary: "meanwhile"})
			return err
		}
		return nil
	})
	testtree.Write(t, e.project, map[string]string{"a.txt": "a2"})
	_, err := racy.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: first.SessionID, Summary: "racing", Snapshot: true})
	testutil.WantCode(t, err, belay.CodeConflict)
	// The snapshot the lost save left behind is no checkpoint.
	if rep, err := e.svc.Validate(alice, belay.ValidateInput{}); err != nil || !rep.OK {
		t.Errorf("validate = %+v, %v", rep, err)
	}
	again := e.save(t, "again")
	if again.Seq != 3 || !slices.Equal(again.Files.Modified, []string{"a.txt"}) {
		t.Errorf("save after the conflict = #%d %+v", again.Seq, again.Files)
	}
}

func TestDiffCheckpoint(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "one\n", "b.txt": "b\n"})
	first := e.save(t, "first")
	plain, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: first.SessionID, Summary: "no snapshot"})
	if err != nil {
		t.Fatal(err)
	}
	testtree.Write(t, e.project, map[string]string{"a.txt": "one\ntwo\n", "c.txt": "c\n"})
	wsRemove(t, e.project, "b.txt")

	d, err := e.svc.DiffCheckpoint(alice, belay.DiffInput{CheckpointID: first.ID})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, f := range d.Files {
		got = append(got, f.Status+" "+f.Path)
	}
	if want := []string{"modified a.txt", "deleted b.txt", "added c.txt"}; !slices.Equal(got, want) {
		t.Errorf("files = %v, want %v", got, want)
	}
	if d.Additions != 2 || d.Deletions != 1 || !strings.Contains(d.Patch, "+two") || d.To != nil {
		t.Errorf("diff = %+v", d)
	}

	second := e.save(t, "second")
	d, err = e.svc.DiffCheckpoint(alice, belay.DiffInput{CheckpointID: first.ID, To: second.ID})
	if err != nil || len(d.Files) != 3 || d.To.ID != second.ID {
		t.Errorf("diff 1..3 = %+v, %v", d, err)
	}
	d, err = e.svc.DiffCheckpoint(alice, belay.DiffInput{CheckpointID: second.ID, To: belay.DiffCurrent})
	if err != nil || len(d.Files) != 0 {
		t.Errorf("diff 3..current = %+v, %v", d, err)
	}
	_, err = e.svc.DiffCheckpoint(alice, belay.DiffInput{CheckpointID: plain.ID})
	testutil.WantCode(t, err, belay.CodeValidation, "checkpointId")
	_, err = e.svc.DiffCheckpoint(alice, belay.DiffInput{CheckpointID: first.ID, To: "yesterday"})
	testutil.WantCode(t, err, belay.CodeValidation, "to")
}

func TestDiskUsageAndDeleteSession(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "a"})
	cp := e.save(t, "first", func(in *belay.CreateCheckpointInput) { in.AgentState = json.RawMessage(`{"k":"v"}`) })
	e.save(t, "second")

	rep, err := e.svc.DiskUsage(alice)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Workspaces) != 1 || rep.Workspaces[0].ProjectPath != e.project || rep.Workspaces[0].Bytes == 0 || rep.Workspaces[0].Sessions != 1 {
		t.Errorf("workspaces = %+v", rep.Workspaces)
	}
	if len(rep.Sessions) != 1 || rep.Sessions[0].Checkpoints != 2 || rep.Sessions[0].StateBytes < int64(len(`{"k":"v"}`)) {
		t.Errorf("sessions = %+v", rep.Sessions)
	}

	// Who may not read a session is told it does not exist.
	_, err = e.svc.DeleteSession(wsAs("mallory", false), cp.SessionID)
	testutil.WantCode(t, err, belay.CodeSessionNotFound)
	res, err := e.svc.DeleteSession(alice, cp.SessionID)
	if err != nil || !res.SnapshotsPruned || res.Checkpoints != 2 {
		t.Fatalf("delete = %+v, %v", res, err)
	}
	if _, err := e.svc.GetSession(alice, cp.SessionID); !belay.IsCode(err, belay.CodeSessionNotFound) {
		t.Errorf("session still there: %v", err)
	}
	if _, err := e.svc.GetCheckpoint(alice, cp.ID); !belay.IsCode(err, belay.CodeCheckpointNotFound) {
		t.Errorf("checkpoint still there: %v", err)
	}
	refs, err := e.ws.Refs(localCtx, e.project, "refs/belay/")
	if err != nil || len(refs) != 0 {
		t.Errorf("refs after delete = %v, %v", refs, err)
	}
	if ok, _ := e.ws.HasCommit(localCtx, e.project, cp.WorkspaceRef); ok {
		t.Error("the deleted session's snapshot commit was not pruned")
	}
	evs := events(t, e.svc)
	if last := evs[len(evs)-1]; last.Type != belay.EventSessionDeleted || last.SessionID != cp.SessionID {
		t.Errorf("last event = %+v", last)
	}
}
