package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/workspace"
)

// Validate checks the integrity of one session's checkpoints, or of every
// session's (seed 004's cp-validate): each checkpoint against its checksum,
// each snapshot commit for presence with everything it needs, each snapshot
// without a checkpoint (one that was never deleted) as a missing row, and
// each workspace's snapshot repository for missing objects. Every problem
// comes with seed 004's recovery options.
//
// With Repair (the session owner or an admin; an admin for every session),
// damaged and missing checkpoints are rebuilt from the record their snapshot
// commit carries, each session in one transaction. A decision made on a
// damaged checkpoint is kept; a missing checkpoint comes back undecided.
func (s *Service) Validate(ctx context.Context, in belay.ValidateInput) (*belay.ValidationReport, error) {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	var sessions []*belay.Session
	if in.SessionID != "" {
		sess, rt, err := readSession(ctx, s.store, c, in.SessionID)
		if err != nil {
			return nil, err
		}
		if in.Repair {
			if err := rt.mayOwn(c, sess, "repair its checkpoints"); err != nil {
				return nil, err
			}
		}
		sessions = append(sessions, sess)
	} else {
		if in.Repair {
			if err := c.admin("repair every session; name a session you own"); err != nil {
				return nil, err
			}
		}
		err := forEachSession(ctx, s.store, c.scope(), func(sess *belay.Session) error {
			sessions = append(sessions, sess)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	rep := &belay.ValidationReport{Problems: []belay.ValidationProblem{}}
	bySession := map[string][]*belay.Session{}
	var roots []string
	for _, sess := range sessions {
		if p := sess.ProjectPath; p != "" {
			if bySession[p] == nil {
				roots = append(roots, p)
			}
			bySession[p] = append(bySession[p], sess)
		}
	}
	// Workspaces first: a repaired repository lets the sessions' snapshots
	// be checked, and a damaged one is reported once, not per session.
	// An admin validating every session answers for every ref; anyone else
	// only for the refs of the sessions validated.
	every := in.SessionID == "" && c.Admin && len(c.Projects) == 0
	var wsProblems []belay.ValidationProblem
	damaged, hidden := map[string]bool{}, map[string]bool{}
	for i, root := range roots {
		belay.ReportProgress(ctx, belay.Progress{Phase: "checking snapshot repositories", Done: int64(i), Total: int64(len(roots))})
		if s.mayUseWorkspace(c, root) != nil {
			// Its snapshot repository, if any, may be another's: what it
			// holds is none of this caller's business.
			hidden[root] = true
			continue
		}
		ps, err := s.validateWorkspace(ctx, c, root, in.Repair, every, bySession[root], rep)
		if err != nil {
			return nil, err
		}
		damaged[root] = len(ps) > 0
		wsProblems = append(wsProblems, ps...)
	}
	for i, sess := range sessions {
		belay.ReportProgress(ctx, belay.Progress{Phase: "checking sessions", Done: int64(i), Total: int64(len(sessions))})
		if err := s.validateSession(ctx, sess, in.Repair, damaged[sess.ProjectPath], hidden[sess.ProjectPath], rep); err != nil {
			return nil, err
		}
	}
	rep.Problems = append(rep.Problems, wsProblems...)
	rep.OK = true
	for _, p := range rep.Problems {
		rep.OK = rep.OK && p.Repaired
	}
	return rep, nil
}

// validateWorkspace checks the snapshot repository of a workspace the caller
// may use and returns its problems: lock files git left when it was killed, a
// rollback a crash interrupted, files a crash left empty (HEAD, settings,
// refs, the private index) and missing objects. With repair it first
// rebuilds what git can (a lost ref from the commit its checkpoint row
// names), finishes an interrupted rollback, and reports each problem it
// fixed as repaired and what it could not fix as it is. A damaged ref is
// shown and repaired only when it is a snapshot ref of one of sessions, or
// with every (an admin validating everything) whatever it is: the refs of
// others sharing the workspace name their sessions, and their rows, which
// the caller does not read, are what rebuilds them.
func (s *Service) validateWorkspace(ctx context.Context, c caller, root string, repair, every bool, sessions []*belay.Session, rep *belay.ValidationReport) ([]belay.ValidationProblem, error) {
	if s.ws == nil {
		return nil, nil
	}
	ctx = s.confined(ctx, c)
	ids := make([]string, len(sessions))
	for i, sess := range sessions {
		ids[i] = sess.ID
	}
	var mine func(ref string) bool
	if !every {
		mine = func(ref string) bool {
			id, _, ok := snapshotRefOf(ref)
			return ok && slices.Contains(ids, id)
		}
	}
	var before, after, lost []workspace.Problem
	err := func() error {
		if !repair {
			var err error
			after, err = s.ws.Check(ctx, root)
			return err
		}
		known, _, err := knownSnapshots(ctx, s.store, ids)
		if err != nil {
			return err
		}
		unlock, err := s.ws.Lock(ctx, root)
		if err != nil {
			return err
		}
		defer unlock()
		if before, err = s.ws.CheckLocked(ctx, root); err != nil {
			return err
		}
		if lost, err = s.ws.RepairLocked(ctx, root, known, mine); err != nil {
			return err
		}
		if err := s.finishInterruptedRollback(ctx, s.ws, root); err != nil {
			return err
		}
		after, err = s.ws.CheckLocked(ctx, root)
		return err
	}()
	var we *workspace.Error
	if errors.As(err, &we) && (we.Code == workspace.NotFound || we.Code == workspace.InvalidWorkspace) {
		return nil, nil // never snapshotted, or gone (reported with its sessions)
	}
	if err != nil {
		return nil, WorkspaceError(err)
	}
	rep.Workspaces++
	if mine != nil {
		others := func(p workspace.Problem) bool { return p.Kind == workspace.BrokenRef && !mine(p.Name) }
		before, after = slices.DeleteFunc(before, others), slices.DeleteFunc(after, others)
	}
	left := map[string]bool{}
	for _, p := range after {
		left[string(p.Kind)+" "+p.Name] = true
	}
	var out []belay.ValidationProblem
	for _, p := range before {
		if !left[string(p.Kind)+" "+p.Name] {
			vp := s.workspaceProblem(ctx, root, p)
			vp.Repaired, vp.Recovery = true, nil
			vp.Message += "; repaired"
			out = append(out, vp)
		}
	}
	for _, p := range append(lost, after...) {
		out = append(out, s.workspaceProblem(ctx, root, p))
	}
	return out, nil
}

// knownSnapshots maps the snapshot refs of the sessions ids to the commits
// their checkpoint rows name, for rebuilding lost refs; rows that fail their
// checksum are left out. held holds the snapshot ref of every row naming a
// commit, failing rows included: refs a checkpoint needs.
func knownSnapshots(ctx context.Context, r store.Reader, ids []string) (known map[string]string, held map[string]bool, err error) {
	known, held = map[string]string{}, map[string]bool{}
	for _, id := range ids {
		cps, err := sessionCheckpoints(ctx, r, id)
		if err != nil {
			return nil, nil, err
		}
		for _, cp := range cps {
			if cp.WorkspaceRef == "" {
				continue
			}
			ref := checkpointRef(id, cp.Seq)
			held[ref] = true
			if cp.VerifyChecksum() == nil {
				known[ref] = cp.WorkspaceRef
			}
		}
	}
	return known, held, nil
}

// workspaceProblem describes a problem of the snapshot repository of root
// with the ways out.
func (s *Service) workspaceProblem(ctx context.Context, root string, p workspace.Problem) belay.ValidationProblem {
	vp := belay.ValidationProblem{Kind: belay.ProblemWorkspace, ProjectPath: root, Message: p.Message,
		Recovery: []belay.RecoveryOption{{Action: belay.RecoverRepair,
			Description: "rebuild what git can rebuild and say what it could not"}}}
	switch p.Kind {
	case workspace.MissingObjects:
		vp.Recovery = []belay.RecoveryOption{{Action: belay.RecoverContinue,
			Description: "go on: checkpoints whose snapshots need the missing objects cannot be restored"}}
	case workspace.UnfinishedRestore:
		var rec rollbackRecord
		if json.Unmarshal(p.Record, &rec) == nil && rec.RollbackID != "" {
			vp.SessionID = rec.SessionID
			vp.Message = fmt.Sprintf("the rollback to checkpoint #%d of session %s was interrupted and is not finished", rec.TargetSeq, rec.SessionID)
			rbs, err := s.store.ListRollbacks(ctx, rec.SessionID)
			if err == nil && slices.ContainsFunc(rbs, func(rb *belay.Rollback) bool { return rb.ID == rec.RollbackID }) {
				vp.Message = fmt.Sprintf("the rollback to checkpoint #%d of session %s was interrupted after it was recorded: its journal is left behind", rec.TargetSeq, rec.SessionID)
			}
		}
		vp.Recovery = append(vp.Recovery, belay.RecoveryOption{Action: belay.RecoverFinish,
			Description: "the next save or rollback of this workspace finishes it too"})
	}
	return vp
}

// found is a problem of one session, with what repairing it needs.
type found struct {
	problem  belay.ValidationProblem
	existing *belay.Checkpoint // the damaged row, nil for a missing one
	commit   string            // the snapshot to rebuild from, "" when none
}

// validateSession checks a session's checkpoints and their snapshots. When
// the workspace's repository is damaged (reported with the workspace) and
// its refs cannot be listed, or the caller may not use the workspace
// (hiddenWorkspace), only the checksums are checked.
func (s *Service) validateSession(ctx context.Context, sess *belay.Session, repair, damagedWorkspace, hiddenWorkspace bool, rep *belay.ValidationReport) error {
	cps, err := sessionCheckpoints(ctx, s.store, sess.ID)
	if err != nil {
		return err
	}
	rep.Sessions++
	rep.Checkpoints += len(cps)
	root := sess.ProjectPath
	if hiddenWorkspace {
		root = ""
	}
	var refs map[string]string
	if root != "" && s.ws != nil {
		if refs, err = s.ws.Refs(ctx, root, sessionRefs(sess.ID)); err != nil {
			if !hasSnapshots(cps) || damagedWorkspace {
				root, refs = "", nil // nothing to check there, or reported with the workspace
			} else {
				rep.Problems = append(rep.Problems, belay.ValidationProblem{
					Kind: belay.ProblemWorkspace, SessionID: sess.ID, ProjectPath: root, Message: WorkspaceError(err).Error(),
					Recovery: []belay.RecoveryOption{{Action: belay.RecoverDeleteSession, SessionID: sess.ID,
						Description: "the session's snapshots cannot be reached: delete the session, or bring its workspace back"}},
				})
				return nil
			}
		}
	}
	var problems, refLost []found
	message := func(commit string) (string, error) { return s.ws.CommitMessage(ctx, root, commit) }
	valid := map[int64]bool{}
	bySeq := map[int64]*belay.Checkpoint{}
	byID := map[string]bool{}
	for _, cp := range cps {
		bySeq[cp.Seq], byID[cp.ID] = cp, true
		p := belay.ValidationProblem{SessionID: sess.ID, CheckpointID: cp.ID, Seq: cp.Seq, ProjectPath: root}
		if err := cp.VerifyChecksum(); err != nil {
			p.Kind, p.Message = belay.ProblemChecksum, fmt.Sprintf("checkpoint #%d does not match its checksum", cp.Seq)
			if cp.StateErr != nil {
				p.Message = fmt.Sprintf("the agent state of checkpoint #%d cannot be read back: %v", cp.Seq, cp.StateErr.Details["reason"])
			}
			problems = append(problems, found{problem: p, existing: cp, commit: refs[checkpointRef(sess.ID, cp.Seq)]})
			continue
		}
		if cp.HasSnapshot() && refs != nil {
			ok, err := s.ws.HasCommit(ctx, root, cp.WorkspaceRef)
			if err != nil {
				return WorkspaceError(err)
			}
			if !ok {
				gone, err := s.deletedSince(ctx, cp.ID)
				if err != nil {
					return err
				}
				if gone {
					continue
				}
				p.Kind = belay.ProblemMissingCommit
				p.Message = fmt.Sprintf("the snapshot of checkpoint #%d (commit %.12s) is missing or incomplete", cp.Seq, cp.WorkspaceRef)
				f := found{problem: p, existing: cp}
				// The row may point at the wrong commit while its ref holds
				// the right one; rebuild checks the ref's record.
				if ref := refs[checkpointRef(sess.ID, cp.Seq)]; ref != cp.WorkspaceRef {
					f.commit = ref
				}
				problems = append(problems, f)
				continue
			}
			if ref := checkpointRef(sess.ID, cp.Seq); refs[ref] == "" && takenFor(message, ref, cp.WorkspaceRef) {
				gone, err := s.deletedSince(ctx, cp.ID)
				if err != nil {
					return err
				}
				if gone {
					continue
				}
				p.Kind = belay.ProblemMissingRef
				p.Message = fmt.Sprintf("the ref of checkpoint #%d's snapshot is gone, though its commit %.12s is there: a repair, or gc, makes the ref again", cp.Seq, cp.WorkspaceRef)
				refLost = append(refLost, found{problem: p, existing: cp, commit: cp.WorkspaceRef})
			}
		}
		valid[cp.Seq] = true
	}
	missing, err := s.missingRows(ctx, sess, root, refs, bySeq, byID)
	if err != nil {
		return err
	}
	problems = append(problems, missing...)
	for i := range problems {
		f := &problems[i]
		f.problem.Recovery = recovery(sess.ID, f.problem.Seq, lastValidBefore(valid, f.problem.Seq), f.commit != "")
	}
	if repair {
		if err := s.repair(ctx, sess, root, problems); err != nil {
			return err
		}
	}
	if err := s.restoreRefs(ctx, root, refLost, repair); err != nil {
		return err
	}
	for _, f := range append(problems, refLost...) {
		rep.Problems = append(rep.Problems, f.problem)
	}
	return nil
}

// deletedSince reports whether checkpoint id, read by validateSession, has
// been deleted since. A delete (retention, a person, cleanup) removes the row
// first and its snapshot's ref and commit after, so a snapshot or ref found
// missing may be of a checkpoint no longer there: no finding.
func (s *Service) deletedSince(ctx context.Context, id string) (bool, error) {
	_, err := s.store.GetCheckpoint(ctx, id)
	if belay.IsCode(err, belay.CodeCheckpointNotFound) {
		return true, nil
	}
	if err != nil && corrupted(err) == nil {
		return false, err
	}
	return false, nil
}

// restoreRefs offers a repair for checkpoints whose snapshot ref is lost
// and, with repair, makes their refs again.
func (s *Service) restoreRefs(ctx context.Context, root string, lost []found, repair bool) error {
	want := map[string]string{}
	for i := range lost {
		p := &lost[i].problem
		p.Recovery = []belay.RecoveryOption{{Action: belay.RecoverRepair, SessionID: p.SessionID,
			Description: fmt.Sprintf("make the ref of checkpoint #%d's snapshot again", p.Seq)}}
		want[checkpointRef(p.SessionID, p.Seq)] = lost[i].commit
	}
	if !repair || len(want) == 0 {
		return nil
	}
	made, err := s.ws.RestoreRefs(ctx, root, want)
	if err != nil {
		return WorkspaceError(err)
	}
	for i := range lost {
		p := &lost[i].problem
		if slices.Contains(made, checkpointRef(p.SessionID, p.Seq)) {
			p.Repaired, p.Recovery = true, nil
			p.Message += "; its ref was made again"
		}
	}
	return nil
}

func hasSnapshots(cps []*belay.Checkpoint) bool {
	for _, cp := range cps {
		if cp.HasSnapshot() {
			return true
		}
	}
	return false
}

// missingRows finds the snapshot refs of sess that have no checkpoint
// although their checkpoint was saved and never deleted. A ref above the
// session's last seq is left over from a save that failed, and a ref whose
// seq another checkpoint holds from one that lost a race: neither is a
// checkpoint.
func (s *Service) missingRows(ctx context.Context, sess *belay.Session, root string, refs map[string]string,
	bySeq map[int64]*belay.Checkpoint, byID map[string]bool) ([]found, error) {
	var candidates []int64
	for ref := range refs {
		id, seq, ok := snapshotRefOf(ref)
		if ok && id == sess.ID && seq <= sess.LastSeq && bySeq[seq] == nil {
			candidates = append(candidates, seq)
		}
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	deleted, err := s.deletedCheckpoints(ctx, sess.ID)
	if err != nil {
		return nil, err
	}
	var out []found
	for _, seq := range candidates {
		commit := refs[checkpointRef(sess.ID, seq)]
		p := belay.ValidationProblem{Kind: belay.ProblemMissingRow, SessionID: sess.ID, Seq: seq, ProjectPath: root}
		msg, err := s.ws.CommitMessage(ctx, root, commit)
		if err != nil {
			return nil, WorkspaceError(err)
		}
		rec, err := parseRecord(msg)
		if err != nil {
			p.Message = fmt.Sprintf("snapshot #%d (commit %.12s) has no checkpoint and cannot rebuild one: %v", seq, commit, err)
			out = append(out, found{problem: p})
			continue
		}
		if deleted[rec.Checkpoint.ID] || byID[rec.Checkpoint.ID] {
			continue
		}
		p.CheckpointID = rec.Checkpoint.ID
		p.Message = fmt.Sprintf("checkpoint #%d is missing from the database; its snapshot (commit %.12s) holds it", seq, commit)
		out = append(out, found{problem: p, commit: commit})
	}
	return out, nil
}

// deletedCheckpoints returns the ids of a session's deleted checkpoints,
// from the event log.
func (s *Service) deletedCheckpoints(ctx context.Context, sessionID string) (map[string]bool, error) {
	q := store.EventQuery{Scope: store.Everything, SessionID: sessionID, Types: []string{belay.EventCheckpointDeleted}}
	return s.loggedIDs(ctx, q, func(e *belay.Event) string { return e.CheckpointID })
}

func lastValidBefore(valid map[int64]bool, seq int64) int64 {
	best := int64(0)
	for v := range valid {
		if v < seq && v > best {
			best = v
		}
	}
	return best
}

// recovery is seed 004's options for a damaged checkpoint: roll back to the
// last valid one, rebuild it from git, or go on without it.
func recovery(sessionID string, seq, lastValid int64, rebuildable bool) []belay.RecoveryOption {
	var out []belay.RecoveryOption
	if lastValid > 0 {
		out = append(out, belay.RecoveryOption{Action: belay.RecoverRollback, SessionID: sessionID, Seq: lastValid,
			Description: fmt.Sprintf("roll back to #%d, the last valid checkpoint before it", lastValid)})
	}
	if rebuildable {
		out = append(out, belay.RecoveryOption{Action: belay.RecoverRepair, SessionID: sessionID,
			Description: fmt.Sprintf("rebuild checkpoint #%d from its snapshot commit", seq)})
	}
	return append(out, belay.RecoveryOption{Action: belay.RecoverContinue, SessionID: sessionID, Seq: seq,
		Description: fmt.Sprintf("go on without it: checkpoint #%d stays unavailable", seq)})
}

// repair rebuilds the rebuildable problems of sess in one transaction and
// marks them repaired.
func (s *Service) repair(ctx context.Context, sess *belay.Session, root string, problems []found) error {
	var rebuilt []*belay.Checkpoint
	var fixed []int
	for i, f := range problems {
		if f.commit == "" {
			if f.existing != nil && f.existing.StateErr != nil {
				problems[i].problem.Message += "; nothing can rebuild it: its state is stored nowhere else (the checkpoint has no snapshot commit)"
			}
			continue
		}
		cp, err := s.rebuild(ctx, sess, root, f.commit, f.problem.Seq, f.existing)
		if err != nil {
			problems[i].problem.Message += "; rebuilding it failed: " + err.Error()
			continue
		}
		rebuilt = append(rebuilt, cp)
		fixed = append(fixed, i)
	}
	if len(rebuilt) == 0 {
		return nil
	}
	err := s.update(ctx, func(tx store.Tx) error {
		for _, cp := range rebuilt {
			// A row whose state cannot be read back is there all the same.
			switch _, err := tx.GetCheckpoint(ctx, cp.ID); {
			case err == nil || belay.IsCode(err, belay.CodeCheckpointCorrupt):
				if err := tx.DeleteCheckpoint(ctx, cp.ID); err != nil {
					return err
				}
			case !belay.IsCode(err, belay.CodeCheckpointNotFound):
				return err
			}
			derive(cp) // records from before these fields lack them
			if err := tx.InsertCheckpoint(ctx, cp); err != nil {
				return err
			}
			if err := s.appendEvent(ctx, tx, belay.EventCheckpointRepaired, sess.ID, cp.ID,
				map[string]any{"seq": cp.Seq, "workspaceRef": cp.WorkspaceRef}); err != nil {
				return err
			}
		}
		// Read after the inserts: storing a rebuilt state stores again the
		// chunks the session's state shares with it.
		cur, err := tx.GetSession(ctx, sess.ID)
		if err != nil {
			return err
		}
		// The count may have gone wrong with the rows: count again.
		if _, cur.CheckpointCount, _, err = tx.ListCheckpoints(ctx, store.CheckpointQuery{Scope: store.Everything, SessionID: cur.ID, Limit: 1}); err != nil {
			return err
		}
		cur.UpdatedAt = s.clock.Now()
		return tx.UpdateSession(ctx, cur)
	})
	if err != nil {
		return err
	}
	for _, i := range fixed {
		problems[i].problem.Repaired = true
		problems[i].problem.Message += "; rebuilt from its snapshot commit"
	}
	return nil
}

// rebuild reads checkpoint seq of sess back from its snapshot commit.
func (s *Service) rebuild(ctx context.Context, sess *belay.Session, root, commit string, seq int64, existing *belay.Checkpoint) (*belay.Checkpoint, error) {
	msg, err := s.ws.CommitMessage(ctx, root, commit)
	if err != nil {
		return nil, WorkspaceError(err)
	}
	rec, err := parseRecord(msg)
	if err != nil {
		return nil, belay.Errorf(belay.CodeCheckpointCorrupt, "%v", err)
	}
	cp := rec.Checkpoint
	switch {
	case cp.SessionID != sess.ID || cp.Seq != seq:
		return nil, belay.Errorf(belay.CodeCheckpointCorrupt, "the snapshot's record is of checkpoint #%d of session %s", cp.Seq, cp.SessionID)
	case existing != nil && existing.ID != cp.ID:
		return nil, belay.Errorf(belay.CodeCheckpointCorrupt, "the snapshot at #%d belongs to checkpoint %s, not %s", seq, cp.ID, existing.ID)
	}
	cp.WorkspaceRef = commit
	// The parent's snapshot went when its checkpoint was deleted and gc ran
	// (snapshot commits are roots): the changes since it are not known.
	parentGone := false
	if rec.ParentCommit != "" {
		ok, err := s.ws.HasCommit(ctx, root, rec.ParentCommit)
		if err != nil {
			return nil, WorkspaceError(err)
		}
		parentGone = !ok
	}
	if rec.ParentCommit == "" || parentGone {
		if cp.Files == nil {
			cp.Files = &belay.FileChanges{Created: []string{}, Modified: []string{}, Deleted: []string{}}
		}
	} else {
		d, err := s.ws.Diff(ctx, root, rec.ParentCommit, commit)
		if err != nil {
			return nil, WorkspaceError(err)
		}
		cp.Files = changesFromDiff(d)
	}
	if existing != nil {
		cp.Decision, cp.TimeoutFired = existing.Decision, existing.TimeoutFired
	}
	if cp.Checksum, err = cp.ComputeChecksum(); err != nil {
		return nil, err
	}
	return cp, nil
}

// changesFromDiff turns a diff between a snapshot and its parent into the
// file changes the snapshot recorded: a rename is a deletion and a creation.
func changesFromDiff(d *workspace.Diff) *belay.FileChanges {
	fc := &belay.FileChanges{Created: []string{}, Modified: []string{}, Deleted: []string{}}
	for _, f := range d.Files {
		switch f.Status {
		case belay.FileAdded:
			fc.Created = append(fc.Created, f.Path)
		case belay.FileDeleted:
			fc.Deleted = append(fc.Deleted, f.Path)
		case belay.FileRenamed:
			fc.Deleted = append(fc.Deleted, f.OldPath)
			fc.Created = append(fc.Created, f.Path)
		default:
			fc.Modified = append(fc.Modified, f.Path)
		}
	}
	fc.Created, fc.Modified, fc.Deleted = jsonNames(fc.Created), jsonNames(fc.Modified), jsonNames(fc.Deleted)
	slices.Sort(fc.Created)
	slices.Sort(fc.Modified)
	slices.Sort(fc.Deleted)
	return fc
}
