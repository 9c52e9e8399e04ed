package core

import (
	"context"
	"errors"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/workspace"
)

// DiffCheckpoint compares checkpoint in.CheckpointID's snapshot with another
// checkpoint's, or with the workspace as it is now.
func (s *Service) DiffCheckpoint(ctx context.Context, in belay.DiffInput) (*belay.DiffResult, error) {
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
	from, err := s.getSessionCheckpoint(ctx, c, in.CheckpointID)
	if err != nil {
		return nil, err
	}
	if err := hasSnapshot("checkpointId", from); err != nil {
		return nil, err
	}
	if err := s.mayUseWorkspace(c, from.ProjectPath); err != nil {
		return nil, err
	}
	ctx = s.confined(ctx, c)
	res := &belay.DiffResult{From: from}
	toRef := ""
	if in.To != "" && in.To != belay.DiffCurrent {
		if res.To, err = s.getSessionCheckpoint(ctx, c, in.To); err != nil {
			return nil, err
		}
		if err := hasSnapshot("to", res.To); err != nil {
			return nil, err
		}
		if res.To.ProjectPath != from.ProjectPath {
			return nil, belay.Invalid("to", "checkpoints %s and %s are of different workspaces (%s and %s)",
				from.ID, res.To.ID, from.ProjectPath, res.To.ProjectPath)
		}
		toRef = res.To.WorkspaceRef
	}
	for _, cp := range []*belay.Checkpoint{from, res.To} {
		if cp == nil {
			continue
		}
		switch state, err := ws.CheckCommit(ctx, from.ProjectPath, cp.WorkspaceRef); {
		case err != nil:
			return nil, WorkspaceError(err)
		case state == workspace.CommitAbsent:
			return nil, belay.Errorf(belay.CodeNotFound,
				"checkpoint #%d's snapshot is not in this belay instance's data directory: %s; diff through that instance (if this is it, the snapshot was lost: validation reports it)",
				cp.Seq, snapshotsStay).With("checkpointId", cp.ID).With("cause", "SNAPSHOT_NOT_HERE")
		case state == workspace.CommitIncomplete:
			return nil, belay.Errorf(belay.CodeCheckpointCorrupt, "checkpoint #%d's snapshot is missing objects: %s",
				cp.Seq, snapshotIncomplete).With("checkpointId", cp.ID).With("cause", "SNAPSHOT_INCOMPLETE")
		}
		if err := ownSnapshot(ctx, ws, from.ProjectPath, cp); err != nil {
			return nil, err
		}
	}
	d, err := ws.Diff(ctx, from.ProjectPath, from.WorkspaceRef, toRef)
	if err != nil {
		return nil, WorkspaceError(err)
	}
	res.Files = make([]belay.FileDiff, len(d.Files))
	for i, f := range d.Files {
		res.Files[i] = belay.FileDiff{Path: f.Path, OldPath: f.OldPath, Status: f.Status,
			Additions: f.Additions, Deletions: f.Deletions, Binary: f.Binary}
	}
	res.Additions, res.Deletions, res.Patch = d.Additions, d.Deletions, d.Patch
	return res, nil
}

// snapshotsStay is why an instance may not hold a checkpoint's snapshot.
const snapshotsStay = "snapshots stay with the instance that took them, on the machine where the project is"

// snapshotIncomplete is why a snapshot this instance holds lacks objects.
const snapshotIncomplete = "snapshots of older belay versions read objects from the project's own git repository, which loses them when its .git is deleted or pruned by git gc; validation lists the checkpoints affected"

// ownSnapshot refuses a checkpoint whose commit is not the snapshot belay
// keeps for it under its ref (refs/belay/<session>/<seq>). One that named a
// commit itself (CreateCheckpointInput.WorkspaceRef) names what belay never
// took for it, maybe another user's snapshot in the shared shadow
// repository: nothing resolves it. A lost ref is made again by validate
// --repair.
func ownSnapshot(ctx context.Context, ws *workspace.Manager, root string, cp *belay.Checkpoint) error {
	refs, err := ws.Refs(ctx, root, checkpointRef(cp.SessionID, cp.Seq))
	var we *workspace.Error
	if err != nil && !(errors.As(err, &we) && we.Code == workspace.NotFound) {
		return WorkspaceError(err)
	}
	if !underItsRef(refs, cp) {
		return belay.Errorf(belay.CodeNotFound,
			"checkpoint #%d names commit %.12s, which is no snapshot belay took for it (if it was, validate --repair makes its lost ref again)",
			cp.Seq, cp.WorkspaceRef).With("checkpointId", cp.ID).With("cause", "NOT_ITS_SNAPSHOT")
	}
	return nil
}

// hasSnapshot refuses, as a VALIDATION_ERROR on field, a checkpoint with no
// snapshot of belay's: none at all, or a label (see Checkpoint.HasSnapshot).
func hasSnapshot(field string, cp *belay.Checkpoint) error {
	switch {
	case cp.WorkspaceRef != "" && !cp.HasSnapshot():
		return belay.Invalid(field, "checkpoint #%d (%s) has no workspace snapshot: the commit %.12s it names was named by its caller, a label belay took no snapshot for",
			cp.Seq, cp.ID, cp.WorkspaceRef).With("checkpointId", cp.ID)
	case !cp.HasSnapshot():
		return belay.Invalid(field, "checkpoint #%d (%s) has no workspace snapshot", cp.Seq, cp.ID).With("checkpointId", cp.ID)
	}
	return nil
}
