package core

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"syscall"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/workspace"
)

// errNoWorkspaces is returned for a workspace operation when the service has
// no workspace manager (no usable git on this machine).
var errNoWorkspaces = belay.Errorf(belay.CodeInternal,
	"workspace snapshots are not available: belay needs git 2.30 or newer on PATH")

func (s *Service) workspaces() (*workspace.Manager, error) {
	if s.ws == nil {
		return nil, errNoWorkspaces
	}
	return s.ws, nil
}

// WorkspaceError maps an error of the workspace package to a belay error:
// a bad workspace is the caller's mistake, missing objects are corruption,
// a missing git binary is internal but said plainly. The service maps its
// own; a program using the workspace package beside it maps with this. A
// storage fault of the shadow repository (a full disk or quota, a read-only
// file system, an I/O error, from belay or from git) is STORAGE_UNAVAILABLE,
// as the database's are, unless the workspace package gave it a code of its
// own (a restore that failed writing the work tree is RESTORE_FAILED).
func WorkspaceError(err error) error {
	var be *belay.Error
	var we *workspace.Error
	if err == nil || errors.As(err, &be) {
		return err
	}
	if !errors.As(err, &we) {
		if msg := shadowFault(err); msg != "" {
			return store.Fault(msg, err)
		}
		return err
	}
	switch we.Code {
	case workspace.InvalidWorkspace:
		return belay.Invalid("projectPath", "%s", we.Error())
	case workspace.GitMissing:
		return belay.Errorf(belay.CodeInternal, "git is not available: %s", we.Error())
	case workspace.Corrupted, workspace.NotFound:
		return belay.Errorf(belay.CodeCheckpointCorrupt, "%s", we.Error())
	case workspace.RestoreFailed:
		return belay.Errorf(belay.CodeRestoreFailed, "%s", we.Error())
	case workspace.UnsafePath:
		return belay.Errorf(belay.CodeRestoreFailed, "%s", we.Error()).With("cause", "UNSAFE_PATH").With("paths", we.Paths)
	case workspace.WouldOverwrite:
		return belay.Errorf(belay.CodeRestoreFailed, "%s", we.Error()).With("cause", "WOULD_OVERWRITE").With("paths", we.Paths)
	case workspace.Forbidden:
		return belay.Errorf(belay.CodeUnauthorized, "%s", we.Error())
	}
	return err
}

// shadowFault says what storage fault err is, for the person reading it
// (never a path), or "" when it is none.
func shadowFault(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EFBIG):
		return "the disk of belay's data directory is full"
	case errors.Is(err, syscall.EROFS):
		return "belay's data directory cannot be written: read-only file system"
	case errors.Is(err, syscall.EIO):
		return "storage I/O error in belay's data directory"
	}
	return ""
}

// checkpointRef is the private ref of a checkpoint's snapshot.
func checkpointRef(sessionID string, seq int64) string {
	return "refs/belay/" + sessionID + "/" + strconv.FormatInt(seq, 10)
}

// sessionRefs is the ref hierarchy of a session's snapshots.
func sessionRefs(sessionID string) string { return "refs/belay/" + sessionID + "/" }

// snapshotRefOf parses a checkpoint's snapshot ref (see checkpointRef).
func snapshotRefOf(ref string) (sessionID string, seq int64, ok bool) {
	rest, ok := strings.CutPrefix(ref, "refs/belay/")
	if !ok {
		return "", 0, false
	}
	sessionID, n, ok := strings.Cut(rest, "/")
	if !ok || belay.ValidateID("sessionId", sessionID) != nil {
		return "", 0, false
	}
	seq, err := strconv.ParseInt(n, 10, 64)
	return sessionID, seq, err == nil && seq > 0
}

// workspaceRoot is the workspace a session snapshots: its project path.
func workspaceRoot(sess *belay.Session) (string, error) {
	if sess.ProjectPath == "" {
		return "", belay.Invalid("projectPath", "session %s has no project path, so it has no workspace to snapshot", sess.ID).
			With("sessionId", sess.ID)
	}
	return sess.ProjectPath, nil
}

// createWithSnapshot saves cp as the next checkpoint of its session together
// with a snapshot of the session's workspace. The workspace lock is held from
// reading the session to inserting the checkpoint, so concurrent snapshot
// saves of one workspace are serialised; a save that does not snapshot and
// moves the session meanwhile makes this one fail with CONFLICT.
func (s *Service) createWithSnapshot(ctx context.Context, c caller, in belay.CreateCheckpointInput, cp *belay.Checkpoint) error {
	ws, err := s.workspaces()
	if err != nil {
		return err
	}
	root := in.ProjectPath
	if in.SessionID != "" {
		sess, err := writeSession(ctx, s.store, c, in.SessionID)
		if err != nil {
			return err
		}
		if root, err = workspaceRoot(sess); err != nil {
			return err
		}
		if in.ProjectPath != "" && in.ProjectPath != root {
			return belay.Invalid("projectPath", "session %s works on %s, not %s; a snapshot is of the session's workspace", sess.ID, root, in.ProjectPath)
		}
	}
	if err := s.mayUseWorkspace(c, root); err != nil {
		return err
	}
	ctx = s.confined(ctx, c)
	unlock, err := ws.Lock(ctx, root)
	if err != nil {
		return WorkspaceError(err)
	}
	defer unlock()
	// A rollback a crash interrupted comes first: the session's head and
	// the files this snapshot compares with are the rollback's.
	if err := s.finishInterruptedRollback(ctx, ws, root); err != nil {
		return err
	}
	// Read again under the lock: this is the state the snapshot builds on.
	var sess *belay.Session
	if in.SessionID != "" {
		sess, err = writeSession(ctx, s.store, c, in.SessionID)
	} else if sess, err = s.activeWritable(ctx, s.store, c, root); belay.IsCode(err, belay.CodeSessionNotFound) {
		err = s.update(ctx, func(tx store.Tx) error {
			var err error
			sess, cp.StartedSession, err = s.sessionFor(ctx, tx, c, "", root, true)
			return err
		})
	}
	if err != nil {
		return err
	}
	if err := checkOpen(sess); err != nil {
		return err
	}
	return s.saveSnapshotLocked(ctx, ws, root, sess, cp, snapshotOpts{paths: in.Paths, maxFileSize: in.MaxFileSize}, forSave)
}

func checkOpen(sess *belay.Session) error {
	if !sess.Status.Open() {
		return belay.Errorf(belay.CodeConflict, "session %s is %s and takes no more checkpoints", sess.ID, sess.Status).
			With("sessionId", sess.ID).With("status", sess.Status)
	}
	return nil
}

// snapshotFor says what a snapshot checkpoint is saved for.
type snapshotFor int

const (
	// forSave: a checkpoint asked for; the session must be open.
	forSave snapshotFor = iota
	// forRollback: the safety checkpoint of a rollback, in a session of any
	// status.
	forRollback
	// forRollbackFromHead: as forRollback, when the session's state is its
	// head checkpoint's: if the files are the head's too, nothing is saved
	// and errUnchanged returned.
	forRollbackFromHead
)

// errUnchanged: the workspace and the session's state are those of its head
// checkpoint, which already holds them.
var errUnchanged = errors.New("nothing changed since the head checkpoint")

// snapshotOpts are the caller's choices for one snapshot.
type snapshotOpts struct {
	paths       []string
	maxFileSize int64
}

// saveSnapshotLocked snapshots root for cp as the next checkpoint of sess (as
// read under the workspace lock, which the caller holds) and inserts it. It
// fails with CONFLICT when the session moved on since it was read.
func (s *Service) saveSnapshotLocked(ctx context.Context, ws *workspace.Manager, root string, sess *belay.Session,
	cp *belay.Checkpoint, opts snapshotOpts, purpose snapshotFor) error {
	parent, err := s.snapshotParent(ctx, sess.HeadCheckpointID)
	if err != nil {
		return err
	}
	if parent == "" {
		// No snapshot behind the head (a rollback moved the agent state
		// alone back to before the first): what changed is what changed
		// since the session's last snapshot.
		parent = s.lastSnapshot(ctx, ws, root, sess)
	}
	cp.SessionID, cp.Seq, cp.ParentID = sess.ID, sess.LastSeq+1, sess.HeadCheckpointID
	if cp.ProjectPath == "" {
		cp.ProjectPath = sess.ProjectPath
	}
	if err := snapshotRecord(ctx, ws, root, parent, cp, opts, purpose == forRollbackFromHead); err != nil {
		return err
	}
	return s.update(ctx, func(tx store.Tx) error {
		cur, err := tx.GetSession(ctx, sess.ID)
		if err != nil {
			return err
		}
		if cur.LastSeq != sess.LastSeq || cur.HeadCheckpointID != sess.HeadCheckpointID {
			return belay.Errorf(belay.CodeConflict, "session %s took checkpoint #%d while the workspace was being snapshotted; save again", sess.ID, cur.LastSeq).
				With("sessionId", sess.ID)
		}
		if purpose == forSave {
			if err := checkOpen(cur); err != nil {
				return err
			}
		}
		return s.insertCheckpoint(ctx, tx, cur, cp)
	})
}

// snapshotParent returns the snapshot commit of the nearest checkpoint with
// one, starting at id and following parents: the state a new snapshot's file
// changes are relative to. "" when there is none.
func (s *Service) snapshotParent(ctx context.Context, id string) (string, error) {
	seen := map[string]bool{}
	for id != "" && !seen[id] {
		seen[id] = true
		cp, err := s.store.GetCheckpoint(ctx, id)
		if belay.IsCode(err, belay.CodeCheckpointNotFound) {
			return "", nil // a deleted ancestor ends the chain
		}
		if err != nil {
			return "", err
		}
		if cp.HasSnapshot() {
			return cp.WorkspaceRef, nil // a label names no snapshot of belay's
		}
		id = cp.ParentID
	}
	return "", nil
}

// lastSnapshot returns the snapshot of sess's newest checkpoint that has
// one under its own ref (see ownSnapshot: a ref a failed save left behind
// is no checkpoint's), or "" when there is none or it cannot be told: it
// only says what a new snapshot's changes are measured from.
func (s *Service) lastSnapshot(ctx context.Context, ws *workspace.Manager, root string, sess *belay.Session) string {
	if sess.LastSeq == 0 {
		return ""
	}
	refs, err := ws.Refs(ctx, root, sessionRefs(sess.ID))
	if err != nil {
		return ""
	}
	cps, err := sessionCheckpoints(ctx, s.store, sess.ID)
	if err != nil {
		return ""
	}
	var commit string
	newest := int64(0)
	for _, cp := range cps {
		if cp.Seq > newest && underItsRef(refs, cp) {
			newest, commit = cp.Seq, cp.WorkspaceRef
		}
	}
	return commit
}

// underItsRef says whether cp's snapshot is the one belay keeps for it under
// its own ref in refs (its session's snapshot refs): a label, or a commit
// another ref holds, is not.
func underItsRef(refs map[string]string, cp *belay.Checkpoint) bool {
	return cp.HasSnapshot() && refs[checkpointRef(cp.SessionID, cp.Seq)] == cp.WorkspaceRef
}

// snapshotRecord snapshots root to cp's ref with a commit message that lists
// the changed files and carries cp's record (built once the tree is known,
// before the commit). It sets cp.WorkspaceRef, cp.Files and the
// "skippedFiles" metadata. With unlessSame, a snapshot with no change from
// parent (and no file left out) is not committed: errUnchanged.
func snapshotRecord(ctx context.Context, ws *workspace.Manager, root, parent string, cp *belay.Checkpoint, opts snapshotOpts, unlessSame bool) error {
	base := cp.Metadata
	for {
		req := workspace.SnapshotRequest{Root: root, Ref: checkpointRef(cp.SessionID, cp.Seq), Parent: parent,
			Paths: opts.paths, MaxFileSize: opts.maxFileSize, Progress: snapshotProgress(ctx),
			MessageFunc: func(snap *workspace.Snapshot) (string, error) {
				if unlessSame && parent != "" && len(snap.Created)+len(snap.Modified)+len(snap.Deleted)+len(snap.Skipped) == 0 {
					return "", errUnchanged
				}
				meta, err := withSkipped(base, snap.Skipped)
				if err != nil {
					return "", err
				}
				cp.Metadata = meta
				return commitMessage(cp, parent, snapshotChanges(snap))
			}}
		snap, err := ws.SnapshotLocked(ctx, req)
		var we *workspace.Error
		if parent != "" && errors.As(err, &we) && we.Code == workspace.NotFound {
			// The parent snapshot is gone (see validate): start afresh.
			parent = ""
			continue
		}
		if err != nil {
			return WorkspaceError(err)
		}
		cp.WorkspaceRef, cp.Files = snap.Commit, snapshotChanges(snap)
		return nil
	}
}

// snapshotProgress passes a snapshot's progress on to the caller's progress
// function (belay.WithProgress), if any.
func snapshotProgress(ctx context.Context) func(workspace.Progress) {
	fn := belay.ProgressFunc(ctx)
	if fn == nil {
		return nil
	}
	return func(p workspace.Progress) {
		phase := "snapshot: hashing files"
		switch p.Phase {
		case "scanning":
			phase = "snapshot: looking for changed files"
		case "copying":
			phase = "snapshot: copying in the objects borrowed from the project's git"
		}
		fn(belay.Progress{Phase: phase, Done: p.Files, Total: p.TotalFiles, Bytes: p.Bytes, TotalBytes: p.TotalBytes})
	}
}

// snapshotChanges returns a snapshot's file changes, never nil.
func snapshotChanges(snap *workspace.Snapshot) *belay.FileChanges {
	return &belay.FileChanges{Created: jsonNames(snap.Created), Modified: jsonNames(snap.Modified), Deleted: jsonNames(snap.Deleted)}
}

// jsonNames copies file names as JSON can hold them: a byte that is not
// UTF-8 (a name git takes, JSON cannot) becomes U+FFFD. Stored as it was, it
// would come back as U+FFFD anyway, and the checkpoint would no longer match
// the checksum made of it. The snapshot itself keeps the name's bytes.
func jsonNames(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strings.ToValidUTF8(n, "\uFFFD")
	}
	return out
}

// maxSkippedListed bounds the skipped files listed in a checkpoint's metadata.
const maxSkippedListed = 1000

// withSkipped returns metadata with the skipped files listed, or as it is
// when there are none.
func withSkipped(meta json.RawMessage, skipped []workspace.Skipped) (json.RawMessage, error) {
	if len(skipped) == 0 {
		return meta, nil
	}
	m := map[string]json.RawMessage{}
	if meta != nil {
		if err := json.Unmarshal(meta, &m); err != nil {
			return nil, belay.Invalid("metadata", "metadata must be a JSON object")
		}
	}
	list := make([]belay.SkippedFile, 0, min(len(skipped), maxSkippedListed))
	for _, sk := range skipped[:min(len(skipped), maxSkippedListed)] {
		list = append(list, belay.SkippedFile{Path: sk.Path, Reason: sk.Reason})
	}
	var err error
	if m[belay.MetadataSkippedFiles], err = json.Marshal(list); err != nil {
		return nil, err
	}
	m[belay.MetadataSkippedCount] = json.RawMessage(strconv.Itoa(len(skipped)))
	return json.Marshal(m)
}
