package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/workspace"
)

// SafetyCheckpointName names the automatic checkpoint a rollback takes of the
// state it replaces.
const SafetyCheckpointName = "pre-rollback"

// RestoreCheckpoint rolls a session back to one of its checkpoints (the
// session owner or an admin may). It first saves the current state as an
// automatic checkpoint named "pre-rollback" — rolling back to that one undoes
// the rollback; when the files and the agent state are still those of the
// session's head checkpoint, that checkpoint holds them and none is saved —
// then moves the workspace to the checkpoint's snapshot
// (touching only the files that differ; ignored files and files no snapshot
// holds stay as they are, and a rollback that would write over one is
// refused, cause WOULD_OVERWRITE) and the session's agent state, phase and step to
// the checkpoint's. The checkpoint becomes the session's head, so the next
// checkpoint descends from it and the timeline branches. A failed or paused
// session runs again. A checkpoint without a snapshot restores state only.
//
// Any failure is RESTORE_FAILED with the workspace as it was. With DryRun
// nothing changes and the files that would change are listed.
func (s *Service) RestoreCheckpoint(ctx context.Context, in belay.RestoreInput) (*belay.RestoreResult, error) {
	c, err := authorize(ctx, belay.ScopeWrite)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	target, err := s.getSessionCheckpoint(ctx, c, in.CheckpointID)
	if err != nil {
		return nil, err
	}
	sess, err := writeSession(ctx, s.store, c, target.SessionID)
	if err != nil {
		return nil, err
	}
	if target.HasSnapshot() {
		if err := s.mayUseWorkspace(c, target.ProjectPath); err != nil {
			return nil, err
		}
	}
	ctx = s.confined(ctx, c)
	switch {
	case in.DryRun:
		return s.previewRestore(ctx, sess, target)
	case !target.HasSnapshot():
		return s.restoreState(ctx, sess, target, in.Reason)
	}
	if err := s.recreateRoot(c, sess.ProjectPath); err != nil {
		return nil, s.restoreFailed(ctx, err, target)
	}
	return s.restoreWorkspace(ctx, sess, target, in.Reason)
}

// recreateRoot makes the workspace directory root again when it was deleted
// whole, so that a rollback restores the project into it. A caller who is no
// admin has it made only under the workspace root that holds it, through an
// os.Root, so a symlink swapped in on the way cannot lead outside; a root
// elsewhere is left missing, and the restore says so.
func (s *Service) recreateRoot(c caller, root string) error {
	if _, err := os.Lstat(root); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if c.Admin {
		return os.MkdirAll(root, 0o755)
	}
	for _, r := range s.roots {
		rel, err := filepath.Rel(r, root)
		if err != nil || !filepath.IsLocal(rel) {
			continue
		}
		within, err := os.OpenRoot(r)
		if err != nil {
			return err
		}
		defer within.Close()
		return within.MkdirAll(rel, 0o755)
	}
	return nil
}

// previewRestore lists what restoring target would change: the difference
// between its snapshot and the workspace as it is now.
func (s *Service) previewRestore(ctx context.Context, sess *belay.Session, target *belay.Checkpoint) (*belay.RestoreResult, error) {
	res := &belay.RestoreResult{Session: sess, Checkpoint: target, RestoredFiles: []string{}, RemovedFiles: []string{}, DryRun: true}
	if !target.HasSnapshot() {
		res.StateOnly = true
		return res, nil
	}
	ws, root, err := s.restoreTarget(ctx, sess, target)
	if err != nil {
		return nil, err
	}
	d, err := ws.Diff(ctx, root, target.WorkspaceRef, "")
	if err != nil {
		return nil, s.restoreFailed(ctx, err, target)
	}
	// From the target to the work tree: what was created since is removed,
	// unless the target's snapshot left it out; what was modified or
	// deleted since is restored.
	// What the target has and the work tree's snapshot lacks, a rollback
	// writes: it refuses when a file no snapshot holds is there.
	var written []string
	for _, f := range d.Files {
		switch f.Status {
		case belay.FileDeleted:
			written = append(written, f.Path)
		case belay.FileRenamed:
			written = append(written, f.OldPath)
		}
	}
	if err := ws.RefuseOverwrite(ctx, root, written); err != nil {
		return nil, s.restoreFailed(ctx, err, target)
	}
	fc := changesFromDiff(d)
	skipped := skippedPaths(target)
	for _, p := range fc.Created {
		if slices.Contains(skipped, p) {
			res.KeptFiles = append(res.KeptFiles, p)
		} else {
			res.RemovedFiles = append(res.RemovedFiles, p)
		}
	}
	res.RestoredFiles = slices.Sorted(slices.Values(append(fc.Modified, fc.Deleted...)))
	return res, nil
}

// skippedPaths lists the files cp's snapshot left out, which a rollback to
// it keeps as they are.
func skippedPaths(cp *belay.Checkpoint) []string {
	var paths []string
	for _, sk := range cp.SkippedFiles() {
		paths = append(paths, sk.Path)
	}
	return paths
}

// restoreState rolls back a checkpoint without a snapshot: state only, with
// the safety checkpoint (state only too) in the same transaction.
func (s *Service) restoreState(ctx context.Context, sess *belay.Session, target *belay.Checkpoint, reason string) (*belay.RestoreResult, error) {
	res := &belay.RestoreResult{Checkpoint: target, RestoredFiles: []string{}, RemovedFiles: []string{}, StateOnly: true}
	err := s.update(ctx, func(tx store.Tx) error {
		cur, err := tx.GetSession(ctx, sess.ID)
		if err != nil {
			return err
		}
		head, err := s.unchangedHead(ctx, tx, cur)
		if err != nil {
			return err
		}
		// A head with a snapshot is no undo point: rolling back to it would
		// move the files, which this rollback left as they are.
		if head != nil && head.HasSnapshot() {
			head = nil
		}
		if res.SafetyCheckpoint = head; head == nil {
			res.SafetyCheckpoint = s.safetyCheckpoint(ctx, cur, target, reason)
			if err := s.insertCheckpoint(ctx, tx, cur, res.SafetyCheckpoint); err != nil {
				return err
			}
		}
		res.Session = cur
		res.Rollback, err = s.finishRestore(ctx, tx, cur, target, res, s.newRollbackRecord(ctx, cur, target, res.SafetyCheckpoint, reason))
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// restoreTarget returns the workspace manager and root a rollback of sess to
// target works on, or RESTORE_FAILED.
func (s *Service) restoreTarget(ctx context.Context, sess *belay.Session, target *belay.Checkpoint) (*workspace.Manager, string, error) {
	ws, err := s.workspaces()
	if err != nil {
		return nil, "", s.restoreFailed(ctx, err, target)
	}
	root, err := workspaceRoot(sess)
	if err != nil {
		return nil, "", s.restoreFailed(ctx, err, target)
	}
	// Before anything is written (a safety snapshot here would be a
	// checkpoint whose files live on the wrong machine): is the snapshot
	// the target's own, in this instance's data directory at all, and whole?
	switch state, err := ws.CheckCommit(ctx, root, target.WorkspaceRef); {
	case err != nil:
		return nil, "", s.restoreFailed(ctx, err, target)
	case state == workspace.CommitAbsent:
		return nil, "", belay.Errorf(belay.CodeRestoreFailed,
			"checkpoint #%d's snapshot is not in this belay instance's data directory, so nothing was changed: %s; roll back through that instance (if this is it, the snapshot was lost: validation reports it)",
			target.Seq, snapshotsStay).With("checkpointId", target.ID).With("cause", "SNAPSHOT_NOT_HERE")
	case state == workspace.CommitIncomplete:
		return nil, "", belay.Errorf(belay.CodeRestoreFailed,
			"checkpoint #%d's snapshot is missing objects, so nothing was changed: %s",
			target.Seq, snapshotIncomplete).With("checkpointId", target.ID).With("cause", "SNAPSHOT_INCOMPLETE")
	}
	if err := ownSnapshot(ctx, ws, root, target); err != nil {
		var be *belay.Error
		if errors.As(err, &be) && be.Code == belay.CodeNotFound {
			return nil, "", belay.Errorf(belay.CodeRestoreFailed, "%s, so nothing was changed", be.Message).
				With("checkpointId", target.ID).With("cause", be.Details["cause"])
		}
		return nil, "", s.restoreFailed(ctx, err, target)
	}
	return ws, root, nil
}

// restoreWorkspace rolls back files and state under the workspace lock:
// finish a rollback a crash interrupted, snapshot the current state as the
// safety checkpoint, move the work tree to the target's snapshot, then
// record the rollback. The move is journaled with the rollback's identity
// until the rollback is recorded, so a process that dies in between leaves
// the next command a rollback to finish (finishInterruptedRollback), never a
// workspace moved and unrecorded. When recording fails the work tree is moved
// back.
func (s *Service) restoreWorkspace(ctx context.Context, sess *belay.Session, target *belay.Checkpoint, reason string) (*belay.RestoreResult, error) {
	ws, root, err := s.restoreTarget(ctx, sess, target)
	if err != nil {
		return nil, err
	}
	unlock, err := ws.Lock(ctx, root)
	if err != nil {
		return nil, s.restoreFailed(ctx, err, target)
	}
	defer unlock()
	if err := s.finishInterruptedRollback(ctx, ws, root); err != nil {
		return nil, s.restoreFailed(ctx, err, target)
	}
	cur, err := s.store.GetSession(ctx, sess.ID)
	if err != nil {
		return nil, err
	}
	head, err := s.unchangedHead(ctx, s.store, cur)
	if err != nil {
		return nil, err
	}
	purpose := forRollback
	if head != nil && head.HasSnapshot() {
		purpose = forRollbackFromHead
	}
	res := &belay.RestoreResult{Checkpoint: target, SafetyCheckpoint: s.safetyCheckpoint(ctx, cur, target, reason)}
	switch err := s.saveSnapshotLocked(ctx, ws, root, cur, res.SafetyCheckpoint, snapshotOpts{}, purpose); {
	case errors.Is(err, errUnchanged):
		res.SafetyCheckpoint = head
	case err != nil:
		return nil, s.restoreFailed(ctx, err, target)
	}
	rec := s.newRollbackRecord(ctx, cur, target, res.SafetyCheckpoint, reason)
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, s.restoreFailed(ctx, err, target)
	}
	belay.ReportProgress(ctx, belay.Progress{Phase: "restoring files"})
	moved, err := ws.BeginRestoreLocked(ctx, root, res.SafetyCheckpoint.WorkspaceRef, target.WorkspaceRef, data, skippedPaths(target))
	if err != nil {
		return nil, s.restoreFailed(ctx, err, target)
	}
	res.RestoredFiles, res.RemovedFiles = splitChanges(moved.Changes)
	res.KeptFiles = moved.Kept
	err = s.update(ctx, func(tx store.Tx) error {
		cur, err := tx.GetSession(ctx, sess.ID)
		if err != nil {
			return err
		}
		res.Session = cur
		res.Rollback, err = s.finishRestore(ctx, tx, cur, target, res, rec)
		return err
	})
	if err != nil {
		// Put the work tree back, even when ctx is done: a rollback that is
		// not recorded must not have happened.
		if backErr := ws.UndoRestoreLocked(context.WithoutCancel(ctx), root); backErr != nil {
			s.log.Error("rollback not recorded and not undone", "checkpointId", target.ID, "error", err, "undoError", backErr)
			return nil, belay.Errorf(belay.CodeRestoreFailed,
				"the workspace was rolled back to checkpoint #%d but recording it failed, and moving the workspace back failed too; roll back to checkpoint #%d to undo it",
				target.Seq, res.SafetyCheckpoint.Seq).With("checkpointId", target.ID).With("safetyCheckpointId", res.SafetyCheckpoint.ID)
		}
		return nil, s.restoreFailed(ctx, err, target)
	}
	if err := ws.CommitRestoreLocked(context.WithoutCancel(ctx), root); err != nil {
		// The rollback is done and recorded; the next command finds the
		// journal, sees the rollback recorded and drops it.
		s.log.Warn("rollback recorded, its journal not dropped", "checkpointId", target.ID, "error", err)
	}
	return res, nil
}

// unchangedHead returns sess's head checkpoint when the session's agent
// state, phase and step are still what they were there, nil otherwise: a
// rollback then takes no new safety checkpoint unless the files changed.
func (s *Service) unchangedHead(ctx context.Context, r store.Reader, sess *belay.Session) (*belay.Checkpoint, error) {
	if sess.HeadCheckpointID == "" {
		return nil, nil
	}
	head, err := r.GetCheckpoint(ctx, sess.HeadCheckpointID)
	if belay.IsCode(err, belay.CodeCheckpointNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	at := *sess
	if err := s.positionAt(ctx, r, &at, head); err != nil {
		return nil, err
	}
	if !bytes.Equal(at.State, sess.State) || at.Phase != sess.Phase || at.CurrentStep != sess.CurrentStep {
		return nil, nil
	}
	return head, nil
}

// splitChanges sorts a restore's changes into restored and removed files.
func splitChanges(changes []workspace.Change) (restored, removed []string) {
	restored, removed = []string{}, []string{}
	for _, c := range changes {
		if c.Action == workspace.ActionRemove {
			removed = append(removed, c.Path)
		} else {
			restored = append(restored, c.Path)
		}
	}
	return restored, removed
}

// rollbackRecord is a rollback's identity. The journal of the rollback's
// restore carries it (workspace.BeginRestoreLocked), so a command that finds
// the rollback interrupted records it as the rollback would have, once.
type rollbackRecord struct {
	RollbackID string `json:"rollbackId"`
	SessionID  string `json:"sessionId"`
	TargetID   string `json:"targetId"`
	TargetSeq  int64  `json:"targetSeq"`
	SafetyID   string `json:"safetyCheckpointId"`
	Reason     string `json:"reason,omitempty"`
	UserID     string `json:"userId"`
}

func (s *Service) newRollbackRecord(ctx context.Context, sess *belay.Session, target, safety *belay.Checkpoint, reason string) rollbackRecord {
	return rollbackRecord{RollbackID: newID(), SessionID: sess.ID, TargetID: target.ID, TargetSeq: target.Seq,
		SafetyID: safety.ID, Reason: reason, UserID: actor(ctx).UserID}
}

// errRollbackGone: the session or a checkpoint of an interrupted rollback
// was deleted since, so it cannot be recorded.
var errRollbackGone = errors.New("the rollback's session or checkpoints are gone")

// finishInterruptedRollback finishes, under the workspace lock, a rollback
// of the workspace at root whose process died after starting to move the
// files: the workspace finishes moving them, then the rollback is recorded
// as it would have been — rollback row, session head, agent state, phase,
// step, event — unless it already was (the process died after recording
// it). A rollback whose session or checkpoints were deleted since is undone
// instead. A restore that could not be finished was rolled back by the
// workspace and left nothing to record.
func (s *Service) finishInterruptedRollback(ctx context.Context, ws *workspace.Manager, root string) error {
	p, err := ws.PendingRestoreLocked(ctx, root)
	if err != nil || p == nil {
		return WorkspaceError(err)
	}
	var rec rollbackRecord
	if err := json.Unmarshal(p.Record, &rec); err != nil || rec.RollbackID == "" {
		return WorkspaceError(ws.UndoRestoreLocked(ctx, root))
	}
	res := &belay.RestoreResult{}
	res.RestoredFiles, res.RemovedFiles = splitChanges(p.Changes)
	err = s.update(ctx, func(tx store.Tx) error {
		rbs, err := tx.ListRollbacks(ctx, rec.SessionID)
		if err != nil {
			return err
		}
		for _, rb := range rbs {
			if rb.ID == rec.RollbackID {
				return nil
			}
		}
		sess, err := tx.GetSession(ctx, rec.SessionID)
		if err == nil {
			res.Checkpoint, err = tx.GetCheckpoint(ctx, rec.TargetID)
		}
		if err == nil {
			res.SafetyCheckpoint, err = tx.GetCheckpoint(ctx, rec.SafetyID)
		}
		if belay.IsCode(err, belay.CodeSessionNotFound) || belay.IsCode(err, belay.CodeCheckpointNotFound) {
			return errRollbackGone
		}
		if err != nil {
			return err
		}
		_, err = s.finishRestore(ctx, tx, sess, res.Checkpoint, res, rec)
		return err
	})
	if errors.Is(err, errRollbackGone) {
		s.log.Info("undid an interrupted rollback whose session or checkpoints are gone", "rollbackId", rec.RollbackID)
		return WorkspaceError(ws.UndoRestoreLocked(ctx, root))
	}
	if err != nil {
		return err
	}
	s.log.Info("finished an interrupted rollback", "rollbackId", rec.RollbackID, "sessionId", rec.SessionID, "checkpointId", rec.TargetID)
	if len(p.Left) > 0 {
		s.log.Warn("finishing an interrupted rollback left the files changed since it was interrupted as they are", "rollbackId", rec.RollbackID, "paths", p.Left)
	}
	return WorkspaceError(ws.CommitRestoreLocked(ctx, root))
}

// safetyCheckpoint is the automatic checkpoint of sess's current state taken
// before a rollback to target.
func (s *Service) safetyCheckpoint(ctx context.Context, sess *belay.Session, target *belay.Checkpoint, reason string) *belay.Checkpoint {
	meta, _ := json.Marshal(struct { // a struct of strings always encodes
		RollbackTo    string `json:"rollbackTo"`
		RollbackToSeq int64  `json:"rollbackToSeq"`
		Reason        string `json:"reason,omitempty"`
	}{target.ID, target.Seq, reason})
	return &belay.Checkpoint{
		ID: newID(), Name: SafetyCheckpointName, Type: belay.TypeAuto, Trigger: belay.TriggerUserRequest,
		Summary:    fmt.Sprintf("State before rolling back to #%d", target.Seq),
		AgentState: sess.State, Phase: sess.Phase, Step: sess.CurrentStep, Metadata: meta,
		CreatedBy: actor(ctx).UserID, CreatedAt: s.clock.Now(),
	}
}

// finishRestore moves sess to target's position, records the rollback rec
// and appends workspace.restored.
func (s *Service) finishRestore(ctx context.Context, tx store.Tx, sess *belay.Session, target *belay.Checkpoint, res *belay.RestoreResult, rec rollbackRecord) (*belay.Rollback, error) {
	if err := s.positionAt(ctx, tx, sess, target); err != nil {
		return nil, err
	}
	// A rollback starts a new branch of the timeline: a session that failed,
	// paused or completed goes on from the target (an abandoned one never
	// does).
	if sess.Status == belay.SessionFailed || sess.Status == belay.SessionPaused || sess.Status == belay.SessionCompleted {
		if err := s.setStatus(ctx, tx, sess, belay.SessionRunning, belay.EventWorkspaceRestored); err != nil {
			return nil, err
		}
	}
	now := s.clock.Now()
	sess.UpdatedAt = now
	rb := &belay.Rollback{ID: rec.RollbackID, SessionID: sess.ID, FromCheckpointID: res.SafetyCheckpoint.ID, TargetID: target.ID,
		Reason: rec.Reason, UserID: rec.UserID, RestoredFiles: res.RestoredFiles, CreatedAt: now}
	if err := tx.InsertRollback(ctx, rb); err != nil {
		return nil, err
	}
	if err := s.appendEvent(ctx, tx, belay.EventWorkspaceRestored, sess.ID, target.ID, map[string]any{
		"rollbackId": rb.ID, "seq": target.Seq, "safetyCheckpointId": res.SafetyCheckpoint.ID,
		"safetySeq": res.SafetyCheckpoint.Seq, "restoredFiles": len(res.RestoredFiles),
		"removedFiles": len(res.RemovedFiles), "reason": rec.Reason}); err != nil {
		return nil, err
	}
	return rb, tx.UpdateSession(ctx, sess)
}

// positionAt sets sess's head to target and its agent state, phase and step
// to what they were at target: a checkpoint that left one unset kept its
// parent's, as when it was saved.
func (s *Service) positionAt(ctx context.Context, r store.Reader, sess *belay.Session, target *belay.Checkpoint) error {
	sess.HeadCheckpointID = target.ID
	sess.State, sess.Phase, sess.CurrentStep = nil, "", 0
	seen := map[string]bool{}
	for cp := target; cp != nil && !seen[cp.ID]; {
		seen[cp.ID] = true
		if sess.State == nil {
			sess.State = cp.AgentState
		}
		if sess.Phase == "" {
			sess.Phase = cp.Phase
		}
		if sess.CurrentStep == 0 {
			sess.CurrentStep = cp.Step
		}
		if sess.State != nil && sess.Phase != "" && sess.CurrentStep != 0 || cp.ParentID == "" {
			return nil
		}
		parent, err := r.GetCheckpoint(ctx, cp.ParentID)
		if belay.IsCode(err, belay.CodeCheckpointNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		cp = parent
	}
	return nil
}

// restoreFailed turns a failure of a rollback into RESTORE_FAILED. A
// conflict and a cancelled request keep their own error; an error without a
// code is logged rather than shown.
func (s *Service) restoreFailed(ctx context.Context, err error, target *belay.Checkpoint) error {
	var be *belay.Error
	mapped := WorkspaceError(err)
	switch {
	case ctx.Err() != nil:
		return err
	case errors.As(mapped, &be) && (be.Code == belay.CodeConflict || be.Code == belay.CodeRestoreFailed):
		return mapped
	}
	msg := "see the log for the cause"
	cause := belay.CodeInternal
	if errors.As(mapped, &be) {
		msg, cause = be.Message, be.Code
	} else {
		s.log.Error("rollback failed", "checkpointId", target.ID, "error", err)
	}
	return belay.Errorf(belay.CodeRestoreFailed, "rolling back to checkpoint #%d failed, the workspace is as it was: %s", target.Seq, msg).
		With("checkpointId", target.ID).With("cause", cause)
}

// ListRollbacks returns a session's rollbacks, oldest first.
func (s *Service) ListRollbacks(ctx context.Context, sessionID string) ([]*belay.Rollback, error) {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return nil, err
	}
	if err := belay.ValidateID("sessionId", sessionID); err != nil {
		return nil, err
	}
	if _, _, err := readSession(ctx, s.store, c, sessionID); err != nil {
		return nil, err
	}
	list, err := s.store.ListRollbacks(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if list == nil {
		list = []*belay.Rollback{}
	}
	return list, nil
}
