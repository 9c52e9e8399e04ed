package core_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testtree"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/workspace"
)

// admin imports: an archive brings files a rollback writes.
var admin = wsAs("root", true)

type tarEntry struct {
	hdr  tar.Header
	data []byte
}

func wsUntar(tb testing.TB, archive []byte) []tarEntry {
	tb.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		tb.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var out []tarEntry
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			tb.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, tarEntry{hdr: *hdr, data: data})
	}
}

func wsRetar(tb testing.TB, entries []tarEntry) []byte {
	tb.Helper()
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		e.hdr.Size = int64(len(e.data))
		if e.hdr.Typeflag != tar.TypeReg {
			e.hdr.Size = 0
		}
		if err := tw.WriteHeader(&e.hdr); err != nil {
			tb.Fatal(err)
		}
		if _, err := tw.Write(e.data); err != nil && e.hdr.Typeflag == tar.TypeReg {
			tb.Fatal(err)
		}
	}
	tw.Close()
	gz.Close()
	return b.Bytes()
}

func (e *wsEnv) export(tb testing.TB, sessionID string) []byte {
	tb.Helper()
	var b bytes.Buffer
	if err := e.svc.ExportSession(alice, sessionID, &b); err != nil {
		tb.Fatalf("export: %v", err)
	}
	return b.Bytes()
}

func TestExportImportReproducesSessionElsewhere(t *testing.T) {
	src := newWSEnv(t)
	testtree.Write(t, src.project, map[string]string{"a.txt": "a", "sub/b.txt": "b"})
	one := src.save(t, "one", func(in *belay.CreateCheckpointInput) { in.Name = "Init Step!" })
	testtree.Write(t, src.project, map[string]string{"a.txt": "a2", "c.txt": "c"})
	src.save(t, "two")
	// Unsaved work, so the rollback saves a pre-rollback checkpoint.
	testtree.Write(t, src.project, map[string]string{"c.txt": "c unsaved"})
	src.rollback(t, one)
	testtree.Write(t, src.project, map[string]string{"d.txt": "d"})
	last := src.save(t, "after the rollback")
	archive := src.export(t, one.SessionID)

	names := []string{}
	for _, e := range wsUntar(t, archive) {
		names = append(names, e.hdr.Name)
	}
	want := []string{"manifest.json", "cp-01-init-step.json", "cp-02.json", "cp-03-pre-rollback.json", "cp-04.json", "rollback-history.json", "workspace.bundle"}
	if !slices.Equal(names, want) {
		t.Errorf("archive holds %v, want %v", names, want)
	}

	// Another machine: another data dir, and the project at another path.
	dst := newWSEnv(t)
	testtree.Write(t, dst.project, map[string]string{"a.txt": "local edit"})
	res, err := dst.svc.ImportSession(admin, belay.ImportInput{ProjectPath: dst.project}, bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	if res.Checkpoints != 4 || res.Rollbacks != 1 || res.Snapshots != 4 || res.Session.ProjectPath != dst.project || res.Session.Owner != "root" {
		t.Errorf("import = %+v", res)
	}
	imported, err := dst.svc.GetCheckpoint(admin, last.ID)
	if err != nil {
		t.Fatal(err)
	}
	if imported.ProjectPath != dst.project || imported.Checksum == last.Checksum || imported.WorkspaceRef != last.WorkspaceRef {
		t.Errorf("imported checkpoint = %+v", imported)
	}
	if rbs, _ := dst.svc.ListRollbacks(admin, one.SessionID); len(rbs) != 1 || rbs[0].TargetID != one.ID {
		t.Errorf("rollbacks = %+v", rbs)
	}
	if rep, err := dst.svc.Validate(admin, belay.ValidateInput{}); err != nil || !rep.OK {
		t.Errorf("validate after import = %+v, %v", rep, err)
	}
	if _, err := dst.svc.RestoreCheckpoint(admin, belay.RestoreInput{CheckpointID: last.ID}); err != nil {
		t.Fatal(err)
	}
	if got, want := testtree.Read(t, dst.project), testtree.Read(t, src.project); !maps.Equal(got, want) {
		t.Errorf("imported rollback gives %v, want %v", got, want)
	}

	_, err = dst.svc.ImportSession(admin, belay.ImportInput{ProjectPath: dst.project}, bytes.NewReader(archive))
	testutil.WantCode(t, err, belay.CodeConflict)
	_, err = newWSEnv(t).svc.ImportSession(alice, belay.ImportInput{}, bytes.NewReader(archive))
	testutil.WantCode(t, err, belay.CodeUnauthorized)
}

// TestExportImportAfterADelete: a session whose checkpoint in the middle was
// deleted exports and imports again, the next checkpoint naming its deleted
// parent as at home; an archive naming a checkpoint the importer has in
// another session is refused.
func TestExportImportAfterADelete(t *testing.T) {
	src := newWSEnv(t)
	two, three := src.chainWithoutItsMiddle(t)
	archive := src.export(t, three.SessionID)

	dst := newWSEnv(t)
	res, err := dst.svc.ImportSession(admin, belay.ImportInput{ProjectPath: dst.project}, bytes.NewReader(archive))
	if err != nil || res.Checkpoints != 2 {
		t.Fatalf("import after a delete = %+v, %v", res, err)
	}
	if _, err := dst.svc.RestoreCheckpoint(admin, belay.RestoreInput{CheckpointID: three.ID}); err != nil {
		t.Fatal(err)
	}
	if got := testtree.Read(t, dst.project)["f"]; got != "3" {
		t.Errorf("f = %q after rolling back to the imported #3", got)
	}

	// The deleted parent's id, taken by a checkpoint of the importer's.
	hostile := newWSEnv(t)
	if err := hostile.db.Update(localCtx, func(tx store.Tx) error {
		sess := &belay.Session{ID: two.SessionID[:len(two.SessionID)-4] + "beef", ProjectPath: hostile.project, Owner: "bob", Status: belay.SessionRunning,
			CreatedAt: two.CreatedAt, UpdatedAt: two.CreatedAt, LastSeq: 1, CheckpointCount: 1}
		if err := tx.InsertSession(localCtx, sess); err != nil {
			return err
		}
		cp := &belay.Checkpoint{ID: two.ID, SessionID: sess.ID, Seq: 1, Summary: "bob's", Type: belay.TypeManual, Trigger: belay.TriggerUserRequest,
			ProjectPath: hostile.project, CreatedBy: "bob", CreatedAt: two.CreatedAt, UpdatedAt: two.CreatedAt}
		cp.Checksum, _ = cp.ComputeChecksum()
		return tx.InsertCheckpoint(localCtx, cp)
	}); err != nil {
		t.Fatal(err)
	}
	_, err = hostile.svc.ImportSession(admin, belay.ImportInput{ProjectPath: hostile.project}, bytes.NewReader(archive))
	testutil.WantCode(t, err, belay.CodeValidation, "archive")
}

func TestImportRejectsHostileArchives(t *testing.T) {
	src := newWSEnv(t)
	testtree.Write(t, src.project, map[string]string{"a.txt": "a"})
	one := src.save(t, "one")
	good := wsUntar(t, src.export(t, one.SessionID))
	// A second session on the same workspace, to smuggle its ref in.
	other, err := src.svc.CreateSession(alice, belay.CreateSessionInput{ProjectPath: src.project})
	if err != nil {
		t.Fatal(err)
	}
	src.save(t, "other", func(in *belay.CreateCheckpointInput) { in.ProjectPath, in.SessionID = "", other.ID })
	smuggled := filepath.Join(t.TempDir(), "two.bundle")
	err = src.ws.WriteBundle(localCtx, src.project, []string{"refs/belay/" + one.SessionID + "/1", "refs/belay/" + other.ID + "/1"}, smuggled)
	if err != nil {
		t.Fatal(err)
	}
	twoRefs, err := os.ReadFile(smuggled)
	if err != nil {
		t.Fatal(err)
	}

	with := func(change func([]tarEntry) []tarEntry) []byte {
		return wsRetar(t, change(slices.Clone(good)))
	}
	edit := func(name string, f func([]byte) []byte) func([]tarEntry) []tarEntry {
		return func(es []tarEntry) []tarEntry {
			for i := range es {
				if es[i].hdr.Name == name {
					es[i].data = f(slices.Clone(es[i].data))
				}
			}
			return es
		}
	}
	add := func(hdr tar.Header, data string) func([]tarEntry) []tarEntry {
		return func(es []tarEntry) []tarEntry { return append(es, tarEntry{hdr: hdr, data: []byte(data)}) }
	}
	reg := func(name string) tar.Header { return tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg} }
	huge := func() []byte {
		// A header that claims more than the limit, with the data cut short.
		var b bytes.Buffer
		gz := gzip.NewWriter(&b)
		tw := tar.NewWriter(gz)
		tw.WriteHeader(&tar.Header{Name: "manifest.json", Mode: 0o644, Typeflag: tar.TypeReg, Size: 1 << 40})
		tw.Write(make([]byte, 1024))
		gz.Close()
		return b.Bytes()
	}

	cases := []struct {
		name    string
		archive []byte
		code    belay.Code
	}{
		{"not gzip", []byte("plain text"), belay.CodeValidation},
		{"path traversal", with(add(reg("../evil.json"), "{}")), belay.CodeValidation},
		{"absolute path", with(add(reg("/etc/cron.d/evil"), "x")), belay.CodeValidation},
		{"nested path", with(add(reg("dir/cp-09.json"), "{}")), belay.CodeValidation},
		{"symlink", with(add(tar.Header{Name: "cp-09.json", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, "")), belay.CodeValidation},
		{"hard link", with(add(tar.Header{Name: "cp-09.json", Typeflag: tar.TypeLink, Linkname: "manifest.json"}, "")), belay.CodeValidation},
		{"unexpected name", with(add(reg("notes.txt"), "hi")), belay.CodeValidation},
		{"unlisted checkpoint", with(add(reg("cp-09-extra.json"), "{}")), belay.CodeValidation},
		{"duplicate entry", with(add(reg("manifest.json"), "{}")), belay.CodeValidation},
		{"oversize entry", huge(), belay.CodeTooLarge},
		{"tampered checkpoint", with(edit("cp-01.json", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"summary":"one"`), []byte(`"summary":"evil"`), 1)
		})), belay.CodeCheckpointCorrupt},
		{"smuggled ref", with(edit("workspace.bundle", func([]byte) []byte { return twoRefs })), belay.CodeValidation},
		{"no bundle", with(func(es []tarEntry) []tarEntry { return es[:len(es)-1] }), belay.CodeValidation},
		{"missing manifest", with(func(es []tarEntry) []tarEntry { return es[1:] }), belay.CodeValidation},
		{"session mismatch", with(edit("manifest.json", func(b []byte) []byte {
			var m map[string]any
			json.Unmarshal(b, &m)
			m["session_id"] = "01a1fdb8-0000-7000-8000-000000000000"
			out, _ := json.Marshal(m)
			return out
		})), belay.CodeValidation},
	}
	dst := newWSEnv(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := dst.svc.ImportSession(admin, belay.ImportInput{ProjectPath: dst.project}, bytes.NewReader(c.archive))
			testutil.WantCode(t, err, c.code)
		})
	}
	// Nothing was half imported: no session, no snapshot refs.
	if list, _ := dst.svc.ListSessions(admin, belay.ListSessionsInput{}); list.TotalCount != 0 {
		t.Errorf("sessions after hostile imports: %d", list.TotalCount)
	}
	if refs, err := dst.ws.Refs(localCtx, dst.project, "refs/"); err != nil || len(refs) != 0 {
		t.Errorf("refs after hostile imports: %v, %v", refs, err)
	}
	if _, err := dst.svc.ImportSession(admin, belay.ImportInput{ProjectPath: dst.project}, bytes.NewReader(wsRetar(t, good))); err != nil {
		t.Errorf("the untouched archive does not import: %v", err)
	}
}

func TestImportIsAllOrNothing(t *testing.T) {
	src := newWSEnv(t)
	testtree.Write(t, src.project, map[string]string{"a.txt": "a"})
	one := src.save(t, "one")
	src.save(t, "two")
	archive := src.export(t, one.SessionID)

	dst := newWSEnv(t)
	ctx := localCtx
	// A checkpoint id that exists here already makes the import a conflict.
	clash, err := dst.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{ProjectPath: dst.project, Summary: "local"})
	if err != nil {
		t.Fatal(err)
	}
	wsTamper(t, dst.db, clash.ID, func(cp *belay.Checkpoint) { cp.ID = one.ID })
	_, err = dst.svc.ImportSession(admin, belay.ImportInput{ProjectPath: dst.project}, bytes.NewReader(archive))
	testutil.WantCode(t, err, belay.CodeConflict)
	if _, err := dst.svc.GetSession(admin, one.SessionID); !belay.IsCode(err, belay.CodeSessionNotFound) {
		t.Errorf("session half imported: %v", err)
	}
	if refs, _ := dst.ws.Refs(ctx, dst.project, "refs/belay/"+one.SessionID); len(refs) != 0 {
		t.Errorf("refs half imported: %v", refs)
	}
	if err := dst.db.Update(ctx, func(tx store.Tx) error { return tx.DeleteCheckpoint(ctx, one.ID) }); err != nil {
		t.Fatal(err)
	}

	// The snapshots are fetched before the rows are written: when writing
	// fails, they are dropped again.
	flaky := dst.withFlakyStore(1)
	_, err = flaky.ImportSession(admin, belay.ImportInput{ProjectPath: dst.project}, bytes.NewReader(archive))
	if belay.ErrorCode(err) != belay.CodeInternal {
		t.Fatalf("import on a failing store: %v", err)
	}
	if refs, _ := dst.ws.Refs(ctx, dst.project, "refs/belay/"+one.SessionID); len(refs) != 0 {
		t.Errorf("refs of a failed import stay: %v", refs)
	}

	res, err := dst.svc.ImportSession(admin, belay.ImportInput{ProjectPath: dst.project}, bytes.NewReader(archive))
	if err != nil || res.Checkpoints != 2 {
		t.Fatalf("import = %+v, %v", res, err)
	}
	got, _ := dst.svc.GetCheckpoint(admin, one.ID)
	one.ProjectPath, got.Checksum, one.Checksum = dst.project, "", ""
	if !reflect.DeepEqual(got, one) {
		t.Errorf("imported\n %+v\nwant %+v", got, one)
	}
}

func TestExportBranchWritesUserRepositoryBranchOnly(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "a"})
	testtree.Git(t, e.project, "init", "-q", "-b", "main")
	testtree.Git(t, e.project, "add", "-A")
	testtree.Git(t, e.project, "commit", "-q", "-m", "initial")
	one := e.save(t, "one")
	testtree.Write(t, e.project, map[string]string{"a.txt": "a2", "b.txt": "b"})
	e.save(t, "two")
	head := testtree.Git(t, e.project, "rev-parse", "HEAD")
	index, _ := os.ReadFile(filepath.Join(e.project, ".git", "index"))
	status := testtree.Git(t, e.project, "status", "--porcelain")

	_, err := e.svc.ExportBranch(wsAs("mallory", false), belay.ExportBranchInput{SessionID: one.SessionID})
	testutil.WantCode(t, err, belay.CodeSessionNotFound)
	res, err := e.svc.ExportBranch(alice, belay.ExportBranchInput{SessionID: one.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	if res.Branch != "belay/"+one.SessionID || res.Commits != 2 {
		t.Errorf("export = %+v", res)
	}
	log := testtree.Git(t, e.project, "log", "--format=%s", res.Branch)
	if want := "checkpoint: step-2 - two\ncheckpoint: step-1 - one\ninitial\n"; log != want {
		t.Errorf("branch log:\n%s\nwant:\n%s", log, want)
	}
	index2, _ := os.ReadFile(filepath.Join(e.project, ".git", "index"))
	if testtree.Git(t, e.project, "rev-parse", "HEAD") != head || !bytes.Equal(index, index2) || testtree.Git(t, e.project, "status", "--porcelain") != status {
		t.Error("exporting a branch moved HEAD, the index or the work tree")
	}
	_, err = e.svc.ExportBranch(alice, belay.ExportBranchInput{SessionID: one.SessionID, Branch: "main"})
	testutil.WantCode(t, err, belay.CodeValidation, "branch")
	_, err = e.svc.ExportBranch(alice, belay.ExportBranchInput{SessionID: one.SessionID, Branch: "-x"})
	testutil.WantCode(t, err, belay.CodeValidation, "branch")

	plain := newWSEnv(t)
	testtree.Write(t, plain.project, map[string]string{"a.txt": "a"})
	cp := plain.save(t, "one")
	_, err = plain.svc.ExportBranch(alice, belay.ExportBranchInput{SessionID: cp.SessionID})
	if be := testutil.WantCode(t, err, belay.CodeValidation); !strings.Contains(be.Message, "git repository") {
		t.Errorf("message = %q", be.Message)
	}
}

// TestExportBranchRefusesAmbiguousNames: HEAD and refs/heads/main would be
// written as refs/heads/HEAD and refs/heads/refs/heads/main, ambiguous with
// the refs they name; they are VALIDATION_ERRORs and nothing is written.
func TestExportBranchRefusesAmbiguousNames(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "a"})
	testtree.Git(t, e.project, "init", "-q", "-b", "main")
	testtree.Git(t, e.project, "add", "-A")
	testtree.Git(t, e.project, "commit", "-q", "-m", "initial")
	one := e.save(t, "one")
	refs := testtree.Git(t, e.project, "for-each-ref")
	for _, branch := range []string{"HEAD", "refs/heads/main", "a..b", "x.lock"} {
		_, err := e.svc.ExportBranch(alice, belay.ExportBranchInput{SessionID: one.SessionID, Branch: branch})
		testutil.WantCode(t, err, belay.CodeValidation, "branch")
	}
	if got := testtree.Git(t, e.project, "for-each-ref"); got != refs {
		t.Errorf("refs changed:\n%s\nwant\n%s", got, refs)
	}
}

// gcInImport runs a garbage collection when the import's first write
// transaction starts: after the archive's snapshots were fetched, before the
// session that refers to them is stored.
type gcInImport struct {
	store.Store
	gc   func()
	once sync.Once
}

func (g *gcInImport) Update(ctx context.Context, fn func(store.Tx) error) error {
	g.once.Do(func() {
		done := make(chan struct{})
		go func() { g.gc(); close(done) }()
		// The collection either finishes or waits for the workspace lock
		// the import holds; give it the time to do either.
		select {
		case <-done:
		case <-time.After(500 * time.Millisecond):
		}
	})
	return g.Store.Update(ctx, fn)
}

// TestGarbageCollectionDuringImportKeepsItsSnapshots: a `belay gc` that runs
// while an import stores its session must not take the imported snapshots
// for an orphan's.
func TestGarbageCollectionDuringImportKeepsItsSnapshots(t *testing.T) {
	src := newWSEnv(t)
	testtree.Write(t, src.project, map[string]string{"a.txt": "a"})
	one := src.save(t, "one")
	archive := src.export(t, one.SessionID)

	dst := newWSEnv(t)
	var gcDone sync.WaitGroup
	hooked := &gcInImport{Store: dst.db}
	svc := core.New(core.Options{Store: hooked, Workspaces: dst.ws, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	hooked.gc = func() {
		gcDone.Add(1)
		defer gcDone.Done()
		if _, err := svc.CollectGarbage(admin, belay.GCInput{}); err != nil {
			t.Errorf("gc during the import: %v", err)
		}
	}
	if _, err := svc.ImportSession(admin, belay.ImportInput{ProjectPath: dst.project}, bytes.NewReader(archive)); err != nil {
		t.Fatal(err)
	}
	gcDone.Wait()
	if rep, err := svc.Validate(admin, belay.ValidateInput{}); err != nil || !rep.OK {
		t.Fatalf("validate after an import a gc ran into = %+v, %v", rep, err)
	}
	if _, err := svc.RestoreCheckpoint(admin, belay.RestoreInput{CheckpointID: one.ID}); err != nil {
		t.Errorf("rolling back to the imported checkpoint: %v", err)
	}
}

// TestExportOutsideTheRootsIsForAdmins: the snapshots of a session whose
// workspace is outside the server's workspace roots (say, since the roots
// changed) are files a user who is not an admin may not read there: exporting
// it is refused to its owner, as a diff is, and allowed to an admin.
func TestExportOutsideTheRootsIsForAdmins(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"secret.txt": "s\n"})
	cp := e.save(t, "one")
	moved := core.New(core.Options{Store: e.db, Workspaces: e.ws, WorkspaceRoots: []string{t.TempDir()},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	_, err := moved.DiffCheckpoint(alice, belay.DiffInput{CheckpointID: cp.ID})
	testutil.WantCode(t, err, belay.CodeUnauthorized)
	err = moved.ExportSession(alice, cp.SessionID, io.Discard)
	testutil.WantCode(t, err, belay.CodeUnauthorized)
	if err := moved.ExportSession(wsAs("root", true), cp.SessionID, io.Discard); err != nil {
		t.Errorf("an admin's export: %v", err)
	}
	if err := e.svc.ExportSession(alice, cp.SessionID, io.Discard); err != nil {
		t.Errorf("the owner's export within the roots: %v", err)
	}
}

// TestANamedCommitIsNoSnapshot: a checkpoint naming, as its workspaceRef, a
// commit belay took for another checkpoint — another user's, say — gets no
// diff, rollback or branch of it: only a checkpoint's own snapshot, under
// its ref, is ever resolved.
func TestANamedCommitIsNoSnapshot(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"secret.txt": "bob's\n"})
	bobs := e.save(t, "bob's secret", func(in *belay.CreateCheckpointInput) {})
	if err := os.Remove(filepath.Join(e.project, "secret.txt")); err != nil {
		t.Fatal(err)
	}
	e.save(t, "removed")
	for _, ref := range []string{bobs.WorkspaceRef, bobs.WorkspaceRef[:4]} {
		named, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: bobs.SessionID, Summary: "steal", WorkspaceRef: ref})
		if err != nil {
			t.Fatal(err)
		}
		if d, err := e.svc.DiffCheckpoint(alice, belay.DiffInput{CheckpointID: named.ID}); err == nil {
			t.Errorf("diff of a checkpoint naming %s = %d files", ref, len(d.Files))
		}
		// A rollback to it rolls back the agent state alone, as to any
		// checkpoint without a snapshot.
		for _, dry := range []bool{true, false} {
			res, err := e.svc.RestoreCheckpoint(alice, belay.RestoreInput{CheckpointID: named.ID, DryRun: dry})
			if err != nil || len(res.RestoredFiles)+len(res.RemovedFiles) > 0 || !res.StateOnly {
				t.Errorf("rollback (dry run %v) to a checkpoint naming %s = %+v, %v; want the state alone", dry, ref, res, err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(e.project, "secret.txt")); err == nil {
		t.Error("the named commit's file came back")
	}
}

// TestExportBranchLeavesOutNamedCommits: export-branch writes only the
// snapshots belay took for the session's checkpoints; a checkpoint that
// named a commit itself as its workspaceRef (a commit of the user's
// repository, or another checkpoint's snapshot) adds nothing to the branch,
// and a session with only such checkpoints has no snapshots to export.
func TestExportBranchLeavesOutNamedCommits(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "a"})
	testtree.Git(t, e.project, "init", "-q", "-b", "main")
	testtree.Git(t, e.project, "add", "-A")
	testtree.Git(t, e.project, "commit", "-q", "-m", "initial")
	head := strings.TrimSpace(testtree.Git(t, e.project, "rev-parse", "HEAD"))
	one := e.save(t, "one")
	testtree.Write(t, e.project, map[string]string{"a.txt": "a2"})
	e.save(t, "two")
	for _, ref := range []string{head, one.WorkspaceRef} {
		if _, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: one.SessionID, Summary: "named " + ref[:7],
			WorkspaceRef: ref}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := e.svc.ExportBranch(alice, belay.ExportBranchInput{SessionID: one.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commits != 2 {
		t.Errorf("export = %+v, want the 2 snapshots", res)
	}
	log := testtree.Git(t, e.project, "log", "--format=%s", res.Branch)
	if want := "checkpoint: step-2 - two\ncheckpoint: step-1 - one\ninitial\n"; log != want {
		t.Errorf("branch log:\n%s\nwant:\n%s", log, want)
	}

	sess, err := e.svc.CreateSession(alice, belay.CreateSessionInput{ProjectPath: e.project})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "named", WorkspaceRef: head}); err != nil {
		t.Fatal(err)
	}
	refs := testtree.Git(t, e.project, "for-each-ref")
	_, err = e.svc.ExportBranch(alice, belay.ExportBranchInput{SessionID: sess.ID})
	if be := testutil.WantCode(t, err, belay.CodeValidation, "sessionId"); !strings.Contains(be.Message, "no snapshots") {
		t.Errorf("message = %q", be.Message)
	}
	if got := testtree.Git(t, e.project, "for-each-ref"); got != refs {
		t.Errorf("refs changed:\n%s\nwant\n%s", got, refs)
	}
}

// TestExportCarriesANamedCommitAsALabel: a checkpoint that named a commit
// itself — another checkpoint's snapshot, or a commit of the project's own
// git belay never held (as seed 000's agents send) — is a label. Validation
// finds nothing wrong with it, and the session exports (the commit is not
// carried) and imports, the checkpoint a label there too.
func TestExportCarriesANamedCommitAsALabel(t *testing.T) {
	for name, named := range map[string]func(*belay.Checkpoint) string{
		"another checkpoint's snapshot": func(one *belay.Checkpoint) string { return one.WorkspaceRef },
		"a commit belay never had":      func(*belay.Checkpoint) string { return "0123456789abcdef0123456789abcdef01234567" },
	} {
		t.Run(name, func(t *testing.T) {
			e := newWSEnv(t)
			testtree.Write(t, e.project, map[string]string{"a.txt": "a\n"})
			one := e.save(t, "one")
			ref := named(one)
			label, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: one.SessionID, Summary: "named", WorkspaceRef: ref})
			if err != nil {
				t.Fatal(err)
			}
			if v, err := e.svc.Validate(alice, belay.ValidateInput{SessionID: one.SessionID}); err != nil || !v.OK {
				t.Errorf("validate = %+v, %v; want nothing wrong", v, err)
			}
			var b bytes.Buffer
			if err := e.svc.ExportSession(alice, one.SessionID, &b); err != nil {
				t.Fatalf("export: %v", err)
			}
			other := newWSEnv(t)
			if _, err := other.svc.ImportSession(admin, belay.ImportInput{ProjectPath: other.project}, &b); err != nil {
				t.Fatalf("import: %v", err)
			}
			if _, err := other.svc.DiffCheckpoint(admin, belay.DiffInput{CheckpointID: one.ID}); err != nil {
				t.Errorf("diff of the imported snapshot: %v", err)
			}
			if got, err := other.svc.GetCheckpoint(admin, label.ID); err != nil || got.WorkspaceRef != ref {
				t.Errorf("the imported label = %+v, %v", got, err)
			}
			if _, err := other.svc.DiffCheckpoint(admin, belay.DiffInput{CheckpointID: label.ID}); err == nil {
				t.Error("the imported label diffs")
			}
		})
	}
}

// TestALabelIsNoParentOfTheNextSnapshot: the snapshot after a label is
// compared with the snapshot before it, not with what the label names —
// another session's snapshot (its files would show in this one's changes)
// or a commit belay never had (every file would count as created).
func TestALabelIsNoParentOfTheNextSnapshot(t *testing.T) {
	for name, label := range map[string]func(other *belay.Checkpoint) string{
		"another session's snapshot": func(other *belay.Checkpoint) string { return other.WorkspaceRef[:4] },
		"a commit belay never had":   func(*belay.Checkpoint) string { return "0123456789abcdef0123456789abcdef01234567" },
	} {
		t.Run(name, func(t *testing.T) {
			e := newWSEnv(t)
			testtree.Write(t, e.project, map[string]string{"theirs.txt": "x\n", "a.txt": "a\n"})
			theirs, err := e.svc.CreateCheckpoint(wsAs("bob", false), belay.CreateCheckpointInput{ProjectPath: e.project, Summary: "bob's", Snapshot: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(e.project, "theirs.txt")); err != nil {
				t.Fatal(err)
			}
			one := e.save(t, "one")
			if _, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: one.SessionID, Summary: "label", WorkspaceRef: label(theirs)}); err != nil {
				t.Fatal(err)
			}
			testtree.Write(t, e.project, map[string]string{"a.txt": "changed\n"})
			two := e.save(t, "two", func(in *belay.CreateCheckpointInput) { in.ProjectPath, in.SessionID = "", one.SessionID })
			if f := two.Files; f == nil || !slices.Equal(f.Modified, []string{"a.txt"}) || len(f.Created)+len(f.Deleted) > 0 {
				t.Errorf("the snapshot after the label changed %+v, want a.txt modified alone", f)
			}
		})
	}
}

// TestASessionOfLabelsAloneExportsAndImports: a session whose checkpoints
// name commits of the project's own git, with no snapshot of belay's, has
// no bundle to carry and imports.
func TestASessionOfLabelsAloneExportsAndImports(t *testing.T) {
	e := newWSEnv(t)
	cp, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{ProjectPath: e.project, Summary: "at HEAD", WorkspaceRef: "0123456789abcdef0123456789abcdef01234567"})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := e.svc.ExportSession(alice, cp.SessionID, &b); err != nil {
		t.Fatalf("export: %v", err)
	}
	other := newWSEnv(t)
	if _, err := other.svc.ImportSession(admin, belay.ImportInput{ProjectPath: other.project}, &b); err != nil {
		t.Fatalf("import: %v", err)
	}
}

// TestASnapshotAfterAStateOnlyRollbackListsWhatChanged: after a rollback
// to a checkpoint with no snapshot behind it (the agent state alone moved
// back; the files stayed), the next snapshot lists what changed since the
// session's last snapshot, not every file as created.
func TestASnapshotAfterAStateOnlyRollbackListsWhatChanged(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	first := e.save(t, "state only", func(in *belay.CreateCheckpointInput) { in.Snapshot = false })
	e.save(t, "files", func(in *belay.CreateCheckpointInput) { in.ProjectPath, in.SessionID = "", first.SessionID })
	if res, err := e.svc.RestoreCheckpoint(alice, belay.RestoreInput{CheckpointID: first.ID}); err != nil || !res.StateOnly {
		t.Fatalf("rollback to the state-only checkpoint = %+v, %v", res, err)
	}
	testtree.Write(t, e.project, map[string]string{"a.txt": "changed\n"})
	next := e.save(t, "after", func(in *belay.CreateCheckpointInput) { in.ProjectPath, in.SessionID = "", first.SessionID })
	if f := next.Files; f == nil || !slices.Equal(f.Modified, []string{"a.txt"}) || len(f.Created)+len(f.Deleted) > 0 {
		t.Errorf("the snapshot after the rollback changed %+v, want a.txt modified alone", f)
	}
}

// TestALeftoverRefIsNoParent: a snapshot ref a failed save left behind, at
// a seq a later checkpoint took without a snapshot, is no checkpoint's
// snapshot: the snapshot after a state-only rollback is measured from the
// session's last checkpoint snapshot, not from it.
func TestALeftoverRefIsNoParent(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	first := e.save(t, "state only", func(in *belay.CreateCheckpointInput) { in.Snapshot = false })
	e.save(t, "files", func(in *belay.CreateCheckpointInput) { in.ProjectPath, in.SessionID = "", first.SessionID })
	// A save that snapshotted as #3 and then failed.
	testtree.Write(t, e.project, map[string]string{"a.txt": "stray\n"})
	if _, err := e.ws.Snapshot(localCtx, workspace.SnapshotRequest{Root: e.project, Ref: "refs/belay/" + first.SessionID + "/3", Message: "failed save\n"}); err != nil {
		t.Fatal(err)
	}
	testtree.Write(t, e.project, map[string]string{"a.txt": "a\n"})
	e.save(t, "state only again", func(in *belay.CreateCheckpointInput) {
		in.ProjectPath, in.SessionID, in.Snapshot = "", first.SessionID, false
	})
	if _, err := e.svc.RestoreCheckpoint(alice, belay.RestoreInput{CheckpointID: first.ID}); err != nil {
		t.Fatal(err)
	}
	next := e.save(t, "after", func(in *belay.CreateCheckpointInput) { in.ProjectPath, in.SessionID = "", first.SessionID })
	if f := next.Files; f == nil || len(f.Created)+len(f.Modified)+len(f.Deleted) > 0 {
		t.Errorf("the snapshot after the rollback changed %+v, want nothing: the files are #2's", f)
	}
}
