package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/archive"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/workspace"
)

// MaxImports bounds the imports running at once: each may hold up to
// archive.MaxRecordsBytes of records in memory and write a bundle to disk.
const MaxImports = 2

// ExportSession writes a session to w as an archive (see package archive):
// its checkpoints, rollback history and workspace.bundle, a git bundle of the
// session's snapshot refs. A damaged checkpoint stops the export (run
// Validate first). Nothing is written to w before the archive's contents are
// gathered.
func (s *Service) ExportSession(ctx context.Context, sessionID string, w io.Writer) error {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return err
	}
	if err := belay.ValidateID("sessionId", sessionID); err != nil {
		return err
	}
	sess, rt, err := readSession(ctx, s.store, c, sessionID)
	if err != nil {
		return err
	}
	if err := rt.mayOwn(c, sess, "export it"); err != nil {
		return err
	}
	cps, err := sessionCheckpoints(ctx, s.store, sess.ID)
	if err != nil {
		return err
	}
	rollbacks, err := s.store.ListRollbacks(ctx, sess.ID)
	if err != nil {
		return err
	}
	for _, cp := range cps {
		if err := cp.VerifyChecksum(); err != nil {
			return err
		}
	}
	tmp, err := os.MkdirTemp("", "belay-export-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var bundle string
	if hasSnapshots(cps) {
		// The snapshots are the workspace's files: who may not diff them
		// there may not carry them away either.
		if err := s.mayUseWorkspace(c, sess.ProjectPath); err != nil {
			return err
		}
		ctx = s.confined(ctx, c)
		belay.ReportProgress(ctx, belay.Progress{Phase: "bundling snapshots"})
		bundle = filepath.Join(tmp, archive.BundleFile)
		wrote, err := s.bundleSession(ctx, sess, cps, bundle)
		if err != nil {
			return err
		}
		if !wrote {
			bundle = ""
		}
	}
	return archive.Write(progressWriter(ctx, w, "exporting"), &archive.Contents{Session: sess, Checkpoints: cps, Rollbacks: rollbacks, ExportedAt: s.clock.Now()}, bundle)
}

// bundleSession writes the snapshots belay took for the session's
// checkpoints, under their refs, to a git bundle at path, and reports
// whether there were any. A commit a checkpoint named itself (see
// ownSnapshot) is a label, not carried; a snapshot whose ref is lost fails
// the export (validate --repair makes the ref again).
func (s *Service) bundleSession(ctx context.Context, sess *belay.Session, cps []*belay.Checkpoint, path string) (bool, error) {
	ws, err := s.workspaces()
	if err != nil {
		return false, err
	}
	root, err := workspaceRoot(sess)
	if err != nil {
		return false, err
	}
	have, err := ws.Refs(ctx, root, sessionRefs(sess.ID))
	if err != nil {
		return false, WorkspaceError(err)
	}
	message := func(commit string) (string, error) { return ws.CommitMessage(ctx, root, commit) }
	var refs []string
	for _, cp := range cps {
		if !cp.HasSnapshot() {
			continue // a label: the commit it names is no snapshot of belay's
		}
		switch ref := checkpointRef(sess.ID, cp.Seq); {
		case have[ref] == cp.WorkspaceRef:
			refs = append(refs, ref)
		case have[ref] == "" && !takenFor(message, ref, cp.WorkspaceRef):
		default:
			return false, belay.Errorf(belay.CodeCheckpointCorrupt, "the snapshot of checkpoint #%d is missing", cp.Seq).
				With("checkpointId", cp.ID)
		}
	}
	if len(refs) == 0 {
		return false, nil
	}
	return true, WorkspaceError(ws.WriteBundle(ctx, root, refs, path))
}

// ExportBranch writes the session's snapshots as branch in.Branch (default
// belay/<session id>) of the workspace's own git repository: one commit per
// checkpoint with a snapshot, in seq order, on top of the user's HEAD. The
// session owner or an admin may.
func (s *Service) ExportBranch(ctx context.Context, in belay.ExportBranchInput) (*belay.ExportBranchResult, error) {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	ws, err := s.workspaces()
	if err != nil {
		return nil, err
	}
	sess, rt, err := readSession(ctx, s.store, c, in.SessionID)
	if err != nil {
		return nil, err
	}
	if err := rt.mayOwn(c, sess, "export it to a branch"); err != nil {
		return nil, err
	}
	root, err := workspaceRoot(sess)
	if err != nil {
		return nil, err
	}
	if err := s.mayUseWorkspace(c, root); err != nil {
		return nil, err
	}
	ctx = s.confined(ctx, c)
	if err := belay.ProjectDir("projectPath", root); err != nil {
		return nil, err
	}
	cps, err := sessionCheckpoints(ctx, s.store, sess.ID)
	if err != nil {
		return nil, err
	}
	have, err := ws.Refs(ctx, root, sessionRefs(sess.ID))
	if err != nil {
		return nil, WorkspaceError(err)
	}
	var commits []string
	for _, cp := range cps {
		if err := cp.VerifyChecksum(); err != nil {
			return nil, err
		}
		// Only the snapshots belay took for the checkpoints (see
		// ownSnapshot), not commits they named.
		if underItsRef(have, cp) {
			commits = append(commits, cp.WorkspaceRef)
		}
	}
	if len(commits) == 0 {
		return nil, belay.Invalid("sessionId", "session %s has no snapshots to export", sess.ID)
	}
	branch := in.Branch
	if branch == "" {
		branch = "belay/" + sess.ID
	}
	if err := ws.ExportBranch(ctx, root, branch, commits); err != nil {
		var we *workspace.Error
		if errors.As(err, &we) && we.Code == workspace.InvalidWorkspace {
			return nil, belay.Invalid("branch", "%s", we.Error())
		}
		return nil, WorkspaceError(err)
	}
	return &belay.ExportBranchResult{Branch: branch, ProjectPath: root, Commits: len(commits)}, nil
}

// ImportSession reads an archive written by ExportSession and creates its
// session here, with its checkpoints, rollback history and snapshots, so it
// can be rolled back here. Only an admin may: an archive brings files a
// rollback writes into the workspace. With in.ProjectPath the session moves
// to that workspace (checksums are recomputed).
//
// The archive is untrusted: archive.Read checks it within its limits; the
// bundle's header must list only snapshot refs of one session before the
// bundle is written to a temporary file, and exactly the checkpoints'
// snapshots before git fetches it. At most MaxImports run at once;
// one more is RATE_LIMITED. A session that exists already is a CONFLICT.
// Nothing is half imported: the rows are written in one transaction,
// snapshots fetched before a failed write are dropped again, and the
// temporary files are removed.
func (s *Service) ImportSession(ctx context.Context, in belay.ImportInput, r io.Reader) (*belay.ImportResult, error) {
	c, err := authorize(ctx, belay.ScopeWrite)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	if err := c.admin("import a session"); err != nil {
		return nil, err
	}
	if err := s.projectDir(c, "projectPath", in.ProjectPath); err != nil {
		return nil, err
	}
	release, err := s.importSlot()
	if err != nil {
		return nil, err
	}
	defer release()
	tmp, err := os.MkdirTemp("", "belay-import-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	var bundle extractedBundle
	arc, err := archive.Read(progressReader(ctx, r, "reading the archive"), archive.ReadOptions{Bundle: func(r io.Reader) error {
		return bundle.extract(r, filepath.Join(tmp, archive.BundleFile))
	}})
	if err != nil {
		return nil, err
	}
	if err := bundle.check(arc.Checkpoints); err != nil {
		return nil, err
	}
	sess := arc.Session
	sess.Access = nil // what the exporter could do, if an archive says so: never this caller's
	if err := remapProject(sess, arc.Checkpoints, s.projectPath(c, in.ProjectPath)); err != nil {
		return nil, err
	}
	if _, err := s.store.GetSession(ctx, sess.ID); err == nil {
		return nil, belay.Errorf(belay.CodeConflict, "session %s exists already; delete it first to import it again", sess.ID).With("sessionId", sess.ID)
	} else if !belay.IsCode(err, belay.CodeSessionNotFound) {
		return nil, err
	}
	for _, cp := range arc.Checkpoints {
		if _, err := s.store.GetCheckpoint(ctx, cp.ID); err == nil {
			return nil, belay.Errorf(belay.CodeConflict, "checkpoint %s exists already", cp.ID).With("checkpointId", cp.ID)
		} else if !belay.IsCode(err, belay.CodeCheckpointNotFound) {
			return nil, err
		}
	}
	// Checkpoints deleted before the export stay named, as they were in
	// the session's own database; none may be a checkpoint here.
	for _, id := range arc.Deleted {
		switch _, err := s.store.GetCheckpoint(ctx, id); {
		case err == nil || corrupted(err) != nil:
			return nil, belay.Invalid("archive", "the archive names checkpoint %s, which is not in it but is another session's here", id).With("checkpointId", id)
		case !belay.IsCode(err, belay.CodeCheckpointNotFound):
			return nil, err
		}
	}
	res := &belay.ImportResult{Session: sess, Checkpoints: len(arc.Checkpoints), Rollbacks: len(arc.Rollbacks)}
	// The workspace lock is held from the fetch of the snapshots until the
	// session that refers to them is stored: a garbage collection in
	// between would take them for an orphan's.
	unlock := func() {}
	if bundle.path != "" {
		ws, err := s.workspaces()
		if err != nil {
			return nil, err
		}
		release, err := ws.Lock(ctx, sess.ProjectPath)
		if err != nil {
			return nil, WorkspaceError(err)
		}
		unlock = sync.OnceFunc(release)
		defer unlock()
		refs, err := ws.ReadBundleLocked(ctx, sess.ProjectPath, bundle.path)
		var we *workspace.Error
		if errors.As(err, &we) && we.Code == workspace.InvalidBundle {
			return nil, belay.Invalid("archive", "%s: %s", archive.BundleFile, we.Msg)
		}
		if err != nil {
			return nil, WorkspaceError(err)
		}
		res.Snapshots = len(refs)
	}
	sess.Owner = c.UserID
	sess.CheckpointCount = int64(len(arc.Checkpoints))
	err = s.update(ctx, func(tx store.Tx) error {
		if err := tx.InsertSession(ctx, sess); err != nil {
			if _, gerr := tx.GetSession(ctx, sess.ID); gerr == nil {
				return belay.Errorf(belay.CodeConflict, "session %s exists already", sess.ID).With("sessionId", sess.ID)
			}
			return err
		}
		for _, cp := range arc.Checkpoints {
			derive(cp) // archives from before these fields lack them
			if err := tx.InsertCheckpoint(ctx, cp); err != nil {
				return err
			}
		}
		for _, rb := range arc.Rollbacks {
			if err := tx.InsertRollback(ctx, rb); err != nil {
				return err
			}
		}
		return s.appendEvent(ctx, tx, belay.EventSessionCreated, sess.ID, "", map[string]any{
			"projectPath": sess.ProjectPath, "title": sess.Title, "owner": sess.Owner,
			"imported": true, "checkpoints": len(arc.Checkpoints)})
	})
	unlock()
	if err != nil {
		if bundle.path != "" {
			if _, gerr := s.store.GetSession(ctx, sess.ID); belay.IsCode(gerr, belay.CodeSessionNotFound) {
				if _, derr := s.ws.DeleteRefs(context.WithoutCancel(ctx), sess.ProjectPath, sessionRefs(sess.ID)); derr != nil {
					s.log.Error("drop snapshots of a failed import", "sessionId", sess.ID, "error", derr)
				}
			}
		}
		return nil, err
	}
	return res, nil
}

// remapProject moves an imported session to root (when given and different)
// and checks that its workspace exists here.
func remapProject(sess *belay.Session, cps []*belay.Checkpoint, root string) error {
	old := sess.ProjectPath
	if root != "" && root != old {
		sess.ProjectPath = root
		for _, cp := range cps {
			if cp.ProjectPath != old {
				continue
			}
			cp.ProjectPath = root
			sum, err := cp.ComputeChecksum()
			if err != nil {
				return err
			}
			cp.Checksum = sum
		}
	}
	if sess.ProjectPath == "" {
		if hasSnapshots(cps) {
			return belay.Invalid("projectPath", "the session has snapshots but no project path; pass one")
		}
		return nil
	}
	if fi, err := os.Stat(sess.ProjectPath); err != nil || !fi.IsDir() {
		return belay.Invalid("projectPath", "the session's project %q is not a directory here; pass the project's path on this machine", sess.ProjectPath)
	}
	return nil
}

// importSlot takes one of the MaxImports slots, or says RATE_LIMITED when
// all are taken: a busy server answers at once rather than queueing
// archives. Call the returned release when done.
func (s *Service) importSlot() (func(), error) {
	select {
	case s.imports <- struct{}{}:
		return func() { <-s.imports }, nil
	default:
		return nil, belay.Errorf(belay.CodeRateLimited, "%d imports are running already; try again when one has finished", MaxImports).
			With("retryAfter", 10)
	}
}

// extractedBundle is the git bundle of an archive being imported.
type extractedBundle struct {
	path string
	refs map[string]string
}

// snapshotRef matches checkpointRef's refs.
var snapshotRef = regexp.MustCompile(`^refs/belay/[0-9a-f-]{36}/[1-9][0-9]{0,18}$`)

// extract reads the bundle's header from r and, when it lists only snapshot
// refs of one session, writes the whole bundle to path.
func (b *extractedBundle) extract(r io.Reader, path string) error {
	refs, whole, err := workspace.ReadBundleHeader(r)
	var we *workspace.Error
	if errors.As(err, &we) && we.Code == workspace.InvalidBundle {
		return archive.Invalid("%s: %s", archive.BundleFile, we.Msg)
	}
	if err != nil {
		return err
	}
	session := ""
	for ref := range refs {
		if !snapshotRef.MatchString(ref) || session != "" && ref[:48] != session {
			return archive.Invalid("%s holds other refs than the checkpoints' snapshots", archive.BundleFile)
		}
		session = ref[:48]
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, whole)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("extract %s: %w", archive.BundleFile, err)
	}
	b.path, b.refs = path, refs
	return nil
}

// check makes sure the bundle holds the checkpoints' snapshot refs only,
// each pointing at its checkpoint's commit. A checkpoint whose ref it lacks
// named its commit itself: a label, never resolved (see ownSnapshot).
func (b *extractedBundle) check(cps []*belay.Checkpoint) error {
	want := map[string]string{}
	for _, cp := range cps {
		if cp.HasSnapshot() {
			want[checkpointRef(cp.SessionID, cp.Seq)] = cp.WorkspaceRef
		}
	}
	for ref, commit := range b.refs {
		if want[ref] != commit {
			return archive.Invalid("%s holds other refs than the checkpoints' snapshots", archive.BundleFile)
		}
	}
	return nil
}

// progressWriter counts the bytes written to w as progress of phase, when
// ctx asks for progress.
func progressWriter(ctx context.Context, w io.Writer, phase string) io.Writer {
	fn := belay.ProgressFunc(ctx)
	if fn == nil {
		return w
	}
	return &countingWriter{w: w, report: func(n int64) { fn(belay.Progress{Phase: phase, Bytes: n}) }}
}

// progressReader counts the bytes read from r as progress of phase, when
// ctx asks for progress.
func progressReader(ctx context.Context, r io.Reader, phase string) io.Reader {
	fn := belay.ProgressFunc(ctx)
	if fn == nil {
		return r
	}
	return &countingReader{r: r, report: func(n int64) { fn(belay.Progress{Phase: phase, Bytes: n}) }}
}

type countingWriter struct {
	w      io.Writer
	n      int64
	report func(int64)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.report(c.n)
	return n, err
}

type countingReader struct {
	r      io.Reader
	n      int64
	report func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.report(c.n)
	return n, err
}
