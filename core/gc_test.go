package core_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testtree"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/workspace"
)

// TestDeleteSessionLeavesNothingBehind: deleting a workspace's only session
// gives back all of its snapshots' space, and du then lists nothing.
func TestDeleteSessionLeavesNothingBehind(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": strings.Repeat("a", 100<<10)})
	cp := e.save(t, "first")
	before, err := e.svc.DiskUsage(admin)
	if err != nil || len(before.Workspaces) != 1 || before.WorkspaceBytes == 0 || before.DatabaseBytes == 0 {
		t.Fatalf("du before = %+v, %v", before, err)
	}
	res, err := e.svc.DeleteSession(alice, cp.SessionID)
	if err != nil || !res.SnapshotsPruned || res.FreedBytes != before.WorkspaceBytes {
		t.Fatalf("delete = %+v, %v (workspace bytes before: %d)", res, err, before.WorkspaceBytes)
	}
	after, err := e.svc.DiskUsage(admin)
	if err != nil || len(after.Workspaces) != 0 || after.WorkspaceBytes != 0 {
		t.Errorf("du after = %+v, %v", after, err)
	}
}

// TestCollectGarbage: du shows snapshots no session refers to, and gc
// removes them, with the snapshots a failed delete left and the objects no
// snapshot reaches; a dry run changes nothing.
func TestCollectGarbage(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "kept\n"})
	kept := e.save(t, "kept")

	// A second project whose session vanished behind belay's back.
	orphan := filepath.Join(filepath.Dir(e.project), filepath.Base(e.project)+"-orphan")
	testtree.Write(t, orphan, map[string]string{"o.txt": strings.Repeat("o", 64<<10)})
	t.Cleanup(func() { os.RemoveAll(orphan) })
	ocp, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{ProjectPath: orphan, Summary: "orphan", Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.db.Update(localCtx, func(tx store.Tx) error { return tx.DeleteSession(localCtx, ocp.SessionID) }); err != nil {
		t.Fatal(err)
	}

	du, err := e.svc.DiskUsage(admin)
	if err != nil {
		t.Fatal(err)
	}
	var orphaned *belay.WorkspaceUsage
	for i, w := range du.Workspaces {
		if w.Orphaned {
			orphaned = &du.Workspaces[i]
		}
	}
	if len(du.Workspaces) != 2 || orphaned == nil || orphaned.ProjectPath != orphan || orphaned.Bytes < 1000 ||
		du.WorkspaceBytes != du.Workspaces[0].Bytes+du.Workspaces[1].Bytes {
		t.Fatalf("du = %+v", du)
	}
	if mine, err := e.svc.DiskUsage(alice); err != nil || len(mine.Workspaces) != 1 || mine.DatabaseBytes != 0 {
		t.Errorf("du as alice (no admin) = %+v, %v", mine, err)
	}

	_, err = e.svc.CollectGarbage(alice, belay.GCInput{})
	testutil.WantCode(t, err, belay.CodeUnauthorized)

	dry, err := e.svc.CollectGarbage(admin, belay.GCInput{DryRun: true})
	if err != nil || !dry.DryRun || dry.FreedBytes < orphaned.Bytes {
		t.Fatalf("dry run = %+v, %v", dry, err)
	}
	if again, _ := e.svc.DiskUsage(admin); len(again.Workspaces) != 2 {
		t.Errorf("the dry run removed something: %+v", again)
	}

	rep, err := e.svc.CollectGarbage(admin, belay.GCInput{})
	if err != nil || rep.FreedBytes < orphaned.Bytes || len(rep.Workspaces) != 2 {
		t.Fatalf("gc = %+v, %v", rep, err)
	}
	for _, w := range rep.Workspaces {
		if w.ProjectPath == orphan && (!w.Orphaned || !w.Removed || w.BytesFreed != orphaned.Bytes) {
			t.Errorf("gc of the orphan = %+v", w)
		}
		if w.ProjectPath == e.project && (w.Orphaned || w.Removed || w.Error != "") {
			t.Errorf("gc of the kept workspace = %+v", w)
		}
	}
	du, err = e.svc.DiskUsage(admin)
	if err != nil || len(du.Workspaces) != 1 || du.Workspaces[0].ProjectPath != e.project {
		t.Errorf("du after gc = %+v, %v", du, err)
	}
	if ok, err := e.ws.HasCommit(localCtx, e.project, kept.WorkspaceRef); !ok || err != nil {
		t.Errorf("gc lost a kept snapshot: %v, %v", ok, err)
	}
	if v, err := e.svc.Validate(admin, belay.ValidateInput{}); err != nil || !v.OK {
		t.Errorf("validate after gc = %+v, %v", v, err)
	}
}

// TestCollectGarbageDropsSnapshotsADeleteLeft: a session deleted while its
// snapshots could not be dropped has them dropped by gc.
func TestCollectGarbageDropsSnapshotsADeleteLeft(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "a\n"})
	e.save(t, "kept")
	other, err := e.svc.CreateSession(alice, belay.CreateSessionInput{ProjectPath: e.project})
	if err != nil {
		t.Fatal(err)
	}
	testtree.Write(t, e.project, map[string]string{"b.txt": "b\n"})
	gone := e.save(t, "gone", func(in *belay.CreateCheckpointInput) { in.SessionID, in.ProjectPath = other.ID, "" })
	// The delete's clean-up fails: the session's ref is locked by something
	// that is not a stale lock file (a directory cannot be removed as one).
	entries, _ := os.ReadDir(filepath.Join(e.data, "workspaces"))
	lock := filepath.Join(e.data, "workspaces", entries[0].Name(), "repo.git", "refs", "belay", other.ID, "1.lock")
	if err := os.MkdirAll(filepath.Join(lock, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	res, err := e.svc.DeleteSession(alice, other.ID)
	if err != nil || res.SnapshotsPruned || !strings.Contains(res.Warning, "belay gc") {
		t.Fatalf("delete with a locked ref = %+v, %v", res, err)
	}
	os.RemoveAll(lock)
	rep, err := e.svc.CollectGarbage(admin, belay.GCInput{})
	if err != nil || len(rep.Workspaces) != 1 || rep.Workspaces[0].Error != "" {
		t.Fatalf("gc = %+v, %v", rep, err)
	}
	if ok, _ := e.ws.HasCommit(localCtx, e.project, gone.WorkspaceRef); ok {
		t.Error("the deleted session's snapshot survived gc")
	}
	if refs, _ := e.ws.Refs(localCtx, e.project, "refs/belay/"+other.ID); len(refs) != 0 {
		t.Errorf("refs of the deleted session: %v", refs)
	}
}

func TestArchiveSuffixIsTheWorkspaceExclude(t *testing.T) {
	if belay.ArchiveSuffix != workspace.ArchiveSuffix {
		t.Errorf("belay.ArchiveSuffix %q, workspace excludes %q", belay.ArchiveSuffix, workspace.ArchiveSuffix)
	}
}

// TestCollectGarbageFreesDeletedCheckpoints: a deleted checkpoint's snapshot
// stays until gc, which drops it and gives back what only it held; the dry
// run counts it too, without changing anything.
func TestCollectGarbageFreesDeletedCheckpoints(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "a\n"})
	first := e.save(t, "first")
	noise := make([]byte, 256<<10)
	chacha := rand.NewChaCha8([32]byte{1})
	chacha.Read(noise)
	testtree.Write(t, e.project, map[string]string{"big.bin": string(noise)})
	big := e.save(t, "big")
	if err := os.Remove(filepath.Join(e.project, "big.bin")); err != nil {
		t.Fatal(err)
	}
	last := e.save(t, "without it")
	if err := e.svc.DeleteCheckpoint(alice, big.ID); err != nil {
		t.Fatal(err)
	}

	dry, err := e.svc.CollectGarbage(admin, belay.GCInput{DryRun: true})
	if err != nil || len(dry.Workspaces) != 1 || dry.Workspaces[0].DeletedCheckpoints != 1 || dry.FreedBytes < 200<<10 {
		t.Fatalf("dry run = %+v, %v", dry, err)
	}
	if ok, _ := e.ws.HasCommit(localCtx, e.project, big.WorkspaceRef); !ok {
		t.Fatal("the dry run dropped the snapshot")
	}
	rep, err := e.svc.CollectGarbage(admin, belay.GCInput{})
	if err != nil || len(rep.Workspaces) != 1 || rep.Workspaces[0].DeletedCheckpoints != 1 || rep.FreedBytes < 200<<10 {
		t.Fatalf("gc = %+v, %v", rep, err)
	}
	if est, got := dry.FreedBytes, rep.FreedBytes; est > 2*got || 2*est < got {
		t.Errorf("the dry run estimated %d bytes, gc freed %d", est, got)
	}
	if ok, _ := e.ws.HasCommit(localCtx, e.project, big.WorkspaceRef); ok {
		t.Error("the deleted checkpoint's snapshot survived gc")
	}
	for _, cp := range []*belay.Checkpoint{first, last} {
		if ok, err := e.ws.HasCommit(localCtx, e.project, cp.WorkspaceRef); !ok || err != nil {
			t.Errorf("gc lost #%d's snapshot: %v", cp.Seq, err)
		}
	}
	if v, err := e.svc.Validate(admin, belay.ValidateInput{}); err != nil || !v.OK {
		t.Errorf("validate after gc = %+v, %v", v, err)
	}
	if again, err := e.svc.CollectGarbage(admin, belay.GCInput{}); err != nil || again.Workspaces[0].DeletedCheckpoints != 0 {
		t.Errorf("gc again = %+v, %v", again, err)
	}
}

// TestRepairAfterGCTookTheParentSnapshot: a lost checkpoint is rebuilt from
// its snapshot even once gc has dropped the snapshot of its parent, a
// checkpoint deleted since; what changed since that parent is then unknown.
func TestRepairAfterGCTookTheParentSnapshot(t *testing.T) {
	e := newWSEnv(t)
	parent, lost := e.chainWithoutItsMiddle(t)
	if err := e.db.Update(localCtx, func(tx store.Tx) error { return tx.DeleteCheckpoint(localCtx, lost.ID) }); err != nil {
		t.Fatal(err)
	}
	if rep, err := e.svc.CollectGarbage(admin, belay.GCInput{}); err != nil || rep.Workspaces[0].DeletedCheckpoints != 1 {
		t.Fatalf("gc = %+v, %v", rep, err)
	}
	if ok, _ := e.ws.HasCommit(localCtx, e.project, parent.WorkspaceRef); ok {
		t.Fatal("gc kept the deleted parent's snapshot")
	}
	rep, err := e.svc.Validate(alice, belay.ValidateInput{SessionID: lost.SessionID, Repair: true})
	if err != nil || !rep.OK || len(rep.Problems) != 1 || !rep.Problems[0].Repaired {
		t.Fatalf("repair = %+v, %v", rep, err)
	}
	got, err := e.svc.GetCheckpoint(alice, lost.ID)
	if err != nil || got.Summary != "f = 3" || got.WorkspaceRef != lost.WorkspaceRef || got.Files == nil {
		t.Errorf("#3 rebuilt = %+v, %v", got, err)
	}
}

// chainWithoutItsMiddle saves three snapshots of file f ("1", "2", "3")
// and deletes the middle one, which it returns with the last.
func (e *wsEnv) chainWithoutItsMiddle(t *testing.T) (middle, last *belay.Checkpoint) {
	t.Helper()
	var cps []*belay.Checkpoint
	for _, v := range []string{"1", "2", "3"} {
		testtree.Write(t, e.project, map[string]string{"f": v})
		cps = append(cps, e.save(t, "f = "+v))
	}
	if err := e.svc.DeleteCheckpoint(alice, cps[1].ID); err != nil {
		t.Fatal(err)
	}
	return cps[1], cps[2]
}

// TestLostRefIsFoundRepairedAndKeptByGC: a snapshot whose ref is gone while
// its checkpoint row and its commit are there is reported by validate and
// its ref made again by a repair; gc, which keeps what refs reach, makes it
// again too instead of deleting the snapshot.
func TestLostRefIsFoundRepairedAndKeptByGC(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "1\n"})
	one := e.save(t, "one")
	noise := make([]byte, 256<<10)
	rand.NewChaCha8([32]byte{2}).Read(noise)
	testtree.Write(t, e.project, map[string]string{"a.txt": "2\n", "big.bin": string(noise)})
	two := e.save(t, "two")
	if err := os.Remove(filepath.Join(e.project, "big.bin")); err != nil {
		t.Fatal(err)
	}
	e.save(t, "three")
	// A checkpoint naming a commit itself has no ref of its own to lose.
	named, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: two.SessionID, Summary: "named", WorkspaceRef: one.WorkspaceRef})
	if err != nil {
		t.Fatal(err)
	}
	ref := fmt.Sprintf("refs/belay/%s/%d", two.SessionID, two.Seq)
	repos, err := filepath.Glob(filepath.Join(e.data, "workspaces", "*", "repo.git"))
	if err != nil || len(repos) != 1 {
		t.Fatalf("shadow repositories %v, %v", repos, err)
	}
	loseRef := func() {
		t.Helper()
		testtree.Git(t, e.project, "--git-dir="+repos[0], "update-ref", "-d", ref)
	}
	hasRef := func() bool {
		refs, err := e.ws.Refs(localCtx, e.project, "refs/belay/"+two.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		if refs[fmt.Sprintf("refs/belay/%s/%d", named.SessionID, named.Seq)] != "" {
			t.Fatal("a ref was made for the checkpoint that named a commit")
		}
		return refs[ref] == two.WorkspaceRef
	}

	loseRef()
	rep, err := e.svc.Validate(alice, belay.ValidateInput{SessionID: two.SessionID})
	if err != nil || rep.OK || len(rep.Problems) != 1 || rep.Problems[0].Kind != belay.ProblemMissingRef || rep.Problems[0].Seq != 2 {
		t.Fatalf("validate = %+v, %v", rep, err)
	}
	// The dry run counts what the run keeps as kept.
	if dry, err := e.svc.CollectGarbage(admin, belay.GCInput{DryRun: true}); err != nil || dry.FreedBytes > 100<<10 {
		t.Fatalf("dry run = %+v, %v; want the lost snapshot counted as kept", dry, err)
	}
	if _, err := e.svc.CollectGarbage(admin, belay.GCInput{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := e.ws.HasCommit(localCtx, e.project, two.WorkspaceRef); !ok || err != nil || !hasRef() {
		t.Fatalf("after gc the snapshot of #2 is there: %v, %v; its ref: %v", ok, err, hasRef())
	}

	loseRef()
	rep, err = e.svc.Validate(alice, belay.ValidateInput{SessionID: two.SessionID, Repair: true})
	if err != nil || !rep.OK || len(rep.Problems) != 1 || !rep.Problems[0].Repaired || !hasRef() {
		t.Fatalf("repair = %+v, %v; ref there: %v", rep, err, hasRef())
	}
	if rep, err := e.svc.Validate(alice, belay.ValidateInput{SessionID: two.SessionID}); err != nil || !rep.OK || len(rep.Problems) != 0 {
		t.Errorf("validate after the repair = %+v, %v", rep, err)
	}
}

// lockProbeStore counts the checkpoint rows read while the workspace of
// project is locked: while a save there would wait.
type lockProbeStore struct {
	store.Store
	ws      *workspace.Manager
	project string
	locked  atomic.Int64
}

// probe adds rows to the count when the workspace lock cannot be had. A
// free lock is had at once; the second only bounds the wait when gc holds it.
func (p *lockProbeStore) probe(rows int) error {
	ctx, cancel := context.WithTimeout(localCtx, time.Second)
	defer cancel()
	unlock, err := p.ws.Lock(ctx, p.project)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		p.locked.Add(int64(rows))
	case err != nil:
		return err
	default:
		unlock()
	}
	return nil
}

func (p *lockProbeStore) ListCheckpoints(ctx context.Context, q store.CheckpointQuery) ([]*belay.Checkpoint, int64, bool, error) {
	page, total, more, err := p.Store.ListCheckpoints(ctx, q)
	if err == nil {
		err = p.probe(len(page))
	}
	return page, total, more, err
}

func (p *lockProbeStore) GetCheckpointBySeq(ctx context.Context, sessionID string, seq int64) (*belay.Checkpoint, error) {
	cp, err := p.Store.GetCheckpointBySeq(ctx, sessionID, seq)
	if err == nil {
		err = p.probe(1)
	}
	return cp, err
}

// TestCollectGarbageReadsNoCheckpointUnderTheWorkspaceLock: gc reads the
// checkpoints of a workspace's sessions before it takes the workspace lock,
// so saves there do not wait while it does; it still makes a lost ref
// again and drops a deleted checkpoint's snapshot.
func TestCollectGarbageReadsNoCheckpointUnderTheWorkspaceLock(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "1\n"})
	one := e.save(t, "one")
	testtree.Write(t, e.project, map[string]string{"a.txt": "2\n"})
	two := e.save(t, "two")
	testtree.Write(t, e.project, map[string]string{"a.txt": "3\n"})
	e.save(t, "three")
	if err := e.svc.DeleteCheckpoint(alice, two.ID); err != nil {
		t.Fatal(err)
	}
	ref := fmt.Sprintf("refs/belay/%s/%d", one.SessionID, one.Seq)
	repos, err := filepath.Glob(filepath.Join(e.data, "workspaces", "*", "repo.git"))
	if err != nil || len(repos) != 1 {
		t.Fatalf("shadow repositories %v, %v", repos, err)
	}
	testtree.Git(t, e.project, "--git-dir="+repos[0], "update-ref", "-d", ref)

	probe := &lockProbeStore{Store: e.db, ws: e.ws, project: e.project}
	rep, err := e.over(probe).CollectGarbage(admin, belay.GCInput{})
	if err != nil || len(rep.Workspaces) != 1 || rep.Workspaces[0].Error != "" || rep.Workspaces[0].DeletedCheckpoints != 1 {
		t.Fatalf("gc = %+v, %v", rep, err)
	}
	if n := probe.locked.Load(); n != 0 {
		t.Errorf("gc read %d checkpoint rows while saves to the workspace waited", n)
	}
	if refs, err := e.ws.Refs(localCtx, e.project, ref); err != nil || refs[ref] != one.WorkspaceRef {
		t.Errorf("the lost ref of #1 after gc: %v, %v", refs, err)
	}
	if ok, _ := e.ws.HasCommit(localCtx, e.project, two.WorkspaceRef); ok {
		t.Error("the deleted checkpoint's snapshot survived gc")
	}
}

// meanwhileStore runs meanwhile once, after the first list of checkpoints:
// in gc, between its read of a workspace's checkpoints and its lock.
type meanwhileStore struct {
	store.Store
	meanwhile func()
}

func (m *meanwhileStore) ListCheckpoints(ctx context.Context, q store.CheckpointQuery) ([]*belay.Checkpoint, int64, bool, error) {
	page, total, more, err := m.Store.ListCheckpoints(ctx, q)
	if f := m.meanwhile; f != nil {
		m.meanwhile = nil
		f()
	}
	return page, total, more, err
}

// TestCollectGarbageKeepsWhatChangedSinceItsRead: a checkpoint saved
// between gc's read of the checkpoints and its workspace lock keeps its
// snapshot, and checkpoints deleted then, one of them with its ref lost,
// keep theirs until the next gc, which drops them.
func TestCollectGarbageKeepsWhatChangedSinceItsRead(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "1\n"})
	one := e.save(t, "one")
	testtree.Write(t, e.project, map[string]string{"a.txt": "2\n"})
	two := e.save(t, "two")
	testtree.Write(t, e.project, map[string]string{"a.txt": "2b\n"})
	twoB := e.save(t, "two b")
	repos, err := filepath.Glob(filepath.Join(e.data, "workspaces", "*", "repo.git"))
	if err != nil || len(repos) != 1 {
		t.Fatalf("shadow repositories %v, %v", repos, err)
	}
	testtree.Git(t, e.project, "--git-dir="+repos[0], "update-ref", "-d", fmt.Sprintf("refs/belay/%s/%d", two.SessionID, two.Seq))
	var three *belay.Checkpoint
	st := &meanwhileStore{Store: e.db, meanwhile: func() {
		for _, cp := range []*belay.Checkpoint{two, twoB} {
			if err := e.svc.DeleteCheckpoint(alice, cp.ID); err != nil {
				t.Fatal(err)
			}
		}
		testtree.Write(t, e.project, map[string]string{"a.txt": "3\n"})
		three = e.save(t, "three")
	}}
	if rep, err := e.over(st).CollectGarbage(admin, belay.GCInput{}); err != nil || len(rep.Workspaces) != 1 || rep.Workspaces[0].Error != "" {
		t.Fatalf("gc = %+v, %v", rep, err)
	}
	for _, cp := range []*belay.Checkpoint{one, two, twoB, three} {
		if ok, err := e.ws.HasCommit(localCtx, e.project, cp.WorkspaceRef); !ok || err != nil {
			t.Errorf("gc dropped %q's snapshot: %v", cp.Summary, err)
		}
	}
	if v, err := e.svc.Validate(admin, belay.ValidateInput{}); err != nil || !v.OK {
		t.Errorf("validate after gc = %+v, %v", v, err)
	}
	if rep, err := e.svc.CollectGarbage(admin, belay.GCInput{}); err != nil || len(rep.Workspaces) != 1 || rep.Workspaces[0].DeletedCheckpoints != 2 {
		t.Fatalf("gc again = %+v, %v", rep, err)
	}
	for _, cp := range []*belay.Checkpoint{two, twoB} {
		if ok, _ := e.ws.HasCommit(localCtx, e.project, cp.WorkspaceRef); ok {
			t.Errorf("the deleted checkpoint %q's snapshot survived the next gc", cp.Summary)
		}
	}
	for _, cp := range []*belay.Checkpoint{one, three} {
		if ok, err := e.ws.HasCommit(localCtx, e.project, cp.WorkspaceRef); !ok || err != nil {
			t.Errorf("the next gc dropped %q's snapshot: %v", cp.Summary, err)
		}
	}
}
