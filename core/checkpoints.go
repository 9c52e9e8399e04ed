package core

import (
	"context"
	"errors"
	"slices"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// CreateCheckpoint saves a checkpoint in its session (the project's active
// session when none is named, created on demand) with the next seq, the
// session's head as parent, a checksum, and events (its own, then the graph
// events in.Events carries), all in one transaction — which also records
// in.Answers first, checks in.Holder's lease and releases it, or ends the
// session, when in says so.
// With in.Snapshot it first snapshots the session's workspace (see
// createWithSnapshot).
func (s *Service) CreateCheckpoint(ctx context.Context, in belay.CreateCheckpointInput) (*belay.Checkpoint, error) {
	c, err := authorize(ctx, belay.ScopeWrite)
	if err != nil {
		return nil, err
	}
	cp, err := s.newCheckpoint(ctx, c, &in)
	if err != nil {
		return nil, err
	}
	// A large state is cut and compressed here, not in the transaction,
	// which every other write waits for.
	if p, ok := s.store.(store.StatePreparer); ok {
		ctx = p.PrepareState(ctx, cp.AgentState)
	}
	if in.Snapshot {
		if err := s.createWithSnapshot(ctx, c, in, cp); err != nil {
			return nil, err
		}
		return cp, nil
	}
	// Answers, a release and an end store the whole session; a save alone
	// reads and writes only the columns it needs (see addCheckpoint).
	whole := len(in.Answers) > 0 || in.Release || in.End != ""
	// Encoded before the transaction, which then only hashes it with the
	// session's fields: other writers wait for it.
	sum, err := cp.PrepareChecksum()
	if err != nil {
		return nil, err
	}
	// A save alone acts only through tx and assigns anew all it reports, so
	// it may run again (see store.Batcher); answers may not.
	write := s.batch
	if whole {
		write = s.update
	}
	err = write(ctx, func(tx store.Tx) error {
		sess, started, err := s.sessionFor(ctx, tx, c, in.SessionID, in.ProjectPath, whole)
		if err != nil {
			return err
		}
		if err := checkOpen(sess); err != nil {
			return err
		}
		if in.Holder != "" {
			if err := s.leaseLost(sess, in.Holder); err != nil {
				return err
			}
		}
		if len(in.Answers) > 0 {
			rt, err := rightsIn(ctx, tx, c, sess)
			if err != nil {
				return err
			}
			for _, a := range in.Answers {
				if err := s.answer(ctx, tx, c, sess, rt, a); err != nil {
					return err
				}
			}
			if err := checkOpen(sess); err != nil {
				return err // an answer ended it
			}
		}
		cp.StartedSession = started
		if err := s.addCheckpoint(ctx, tx, sess, cp, sum); err != nil {
			return err
		}
		// Answers stored the session already, a release or an end stores it again.
		if err := tx.AdvanceSession(ctx, sess); err != nil {
			return err
		}
		if _, err := s.appendGraphEvents(ctx, tx, sess.ID, in.Events, cp.ID); err != nil {
			return err
		}
		switch {
		case in.Release:
			return s.releaseLease(ctx, tx, sess, in.Holder)
		case in.End != "":
			return s.endSession(ctx, tx, sess, in.End, in.EndReason)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return cp, nil
}

// newCheckpoint checks in (cleaning its project path) and builds the
// checkpoint it asks for, not saved yet.
func (s *Service) newCheckpoint(ctx context.Context, c caller, in *belay.CreateCheckpointInput) (*belay.Checkpoint, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	if len(in.Answers) > 0 {
		if err := c.also(belay.ScopeDecide); err != nil {
			return nil, err
		}
	}
	in.ProjectPath = s.projectPath(c, in.ProjectPath)
	if err := s.projectDir(c, "projectPath", in.ProjectPath); err != nil {
		return nil, err
	}
	if in.HITL != nil {
		if err := checkApprovers(ctx, s.store, in.HITL.Approvers); err != nil {
			return nil, err
		}
	}
	now := s.clock.Now()
	// Saves are limited per user and project (session when only a session
	// is named): one user's saves, even refused ones, cost another nothing.
	limitKey := in.ProjectPath
	if limitKey == "" {
		limitKey = "session " + in.SessionID
	}
	if err := s.saves.allow(c.UserID, limitKey, now); err != nil {
		return nil, err
	}
	if in.ExpiresAt != nil && !in.ExpiresAt.After(now) {
		return nil, belay.Invalid("expiresAt", "expiresAt must be in the future")
	}
	cp := &belay.Checkpoint{
		ID: newID(), Name: in.Name, Type: in.Type, Trigger: in.Trigger,
		Summary: in.Summary, Description: in.Description, ProjectPath: in.ProjectPath,
		WorkspaceRef: in.WorkspaceRef, AgentState: compactJSON(in.AgentState),
		Outputs: compactJSON(in.Outputs), Metadata: compactJSON(in.Metadata),
		Context: in.Context, Tags: normalizeTags(in.Tags), Phase: in.Phase, Step: in.Step,
		CreatedBy: c.UserID, CreatedAt: now,
	}
	if cp.Type == "" {
		cp.Type = belay.TypeManual
	}
	if cp.Trigger == "" {
		cp.Trigger = belay.TriggerUserRequest
	}
	if len(cp.Context) == 0 {
		cp.Context = nil
	}
	if in.ExpiresAt != nil {
		t := in.ExpiresAt.UTC()
		cp.ExpiresAt = &t
	}
	if in.HITL != nil && in.HITL.Required {
		cp.HITLRequired = true
		cp.HITL = buildHITL(in.HITL, cp, now)
		if cp.Type == belay.TypeManual && in.Type == "" {
			cp.Type = belay.TypeHITL
		}
	}
	// Before the transaction: counting need not hold up other writers.
	countTokens(cp)
	return cp, nil
}

// insertCheckpoint stores cp as the next checkpoint of sess and moves the
// session's head, state, phase and status along with it, storing the whole
// session.
func (s *Service) insertCheckpoint(ctx context.Context, tx store.Tx, sess *belay.Session, cp *belay.Checkpoint) error {
	if err := s.addCheckpoint(ctx, tx, sess, cp, nil); err != nil {
		return err
	}
	return tx.UpdateSession(ctx, sess)
}

// addCheckpoint stores cp as the next checkpoint of sess, with its events,
// and moves sess's head, state, phase and status along with it — in memory
// only: the caller stores sess, all of it (UpdateSession) or what a save
// changes (AdvanceSession), which needs no more of sess than
// store.Reader.GetSessionHead reads. sum is cp's checksum prepared before
// the transaction, or nil.
func (s *Service) addCheckpoint(ctx context.Context, tx store.Tx, sess *belay.Session, cp *belay.Checkpoint, sum *belay.PreparedChecksum) error {
	cp.SessionID = sess.ID
	cp.Seq = sess.LastSeq + 1
	cp.ParentID = sess.HeadCheckpointID
	if cp.ProjectPath == "" {
		cp.ProjectPath = sess.ProjectPath
	}
	derive(cp)
	if sum == nil {
		var err error
		if sum, err = cp.PrepareChecksum(); err != nil {
			return err
		}
	}
	cp.Checksum = sum.Sum(cp)
	if err := tx.InsertCheckpoint(ctx, cp); err != nil {
		return err
	}
	sess.LastSeq, sess.HeadCheckpointID = cp.Seq, cp.ID
	sess.CheckpointCount++
	if cp.AgentState != nil {
		sess.State = cp.AgentState
	}
	if cp.Phase != "" {
		sess.Phase = cp.Phase
	}
	if cp.Step != 0 {
		sess.CurrentStep = cp.Step
	}
	sess.UpdatedAt = cp.CreatedAt
	if err := s.appendEvent(ctx, tx, belay.EventCheckpointCreated, sess.ID, cp.ID, checkpointCreated{
		Seq: cp.Seq, Type: cp.Type, Summary: cp.Summary, Name: cp.Name, HITLRequired: cp.HITLRequired}); err != nil {
		return err
	}
	if cp.HITLRequired {
		if err := s.setStatus(ctx, tx, sess, belay.SessionAwaitingInput, "hitl.required"); err != nil {
			return err
		}
		if err := s.appendEvent(ctx, tx, belay.EventHITLRequired, sess.ID, cp.ID, hitlEventData(cp)); err != nil {
			return err
		}
	}
	return nil
}

// checkpointCreated is the data of a checkpoint.created event. Its keys are
// in sorted order, as json.Marshal writes a map's; a struct spares the map
// and the sorting in the save's transaction.
type checkpointCreated struct {
	HITLRequired bool                 `json:"hitlRequired"`
	Name         string               `json:"name"`
	Seq          int64                `json:"seq"`
	Summary      string               `json:"summary"`
	Type         belay.CheckpointType `json:"type"`
}

// sessionFor returns the named session when the caller may write to it, or
// the caller's active session of projectPath, created when there is none;
// started then names the project's session before it, if any. A named
// session is read whole or, unless whole, as GetSessionHead reads it.
func (s *Service) sessionFor(ctx context.Context, tx store.Tx, c caller, sessionID, projectPath string, whole bool) (sess *belay.Session, started *belay.SessionStart, err error) {
	if sessionID != "" {
		get := tx.GetSessionHead
		if whole {
			get = tx.GetSession
		}
		sess, err = writableSession(ctx, tx, c, sessionID, get)
		return sess, nil, err
	}
	sess, err = s.activeWritable(ctx, tx, c, projectPath)
	if !belay.IsCode(err, belay.CodeSessionNotFound) {
		return sess, nil, err
	}
	if err := c.mayCreateIn(projectPath); err != nil {
		return nil, nil, err
	}
	prev, _, _, err := tx.ListSessions(ctx, store.SessionQuery{Scope: c.own(), ProjectPath: projectPath, Limit: 1})
	if err != nil {
		return nil, nil, err
	}
	if len(prev) == 1 {
		started = &belay.SessionStart{PreviousID: prev[0].ID, PreviousStatus: prev[0].Status}
	}
	sess, err = s.newSession(ctx, tx, c, belay.CreateSessionInput{ProjectPath: projectPath}, newID())
	return sess, started, err
}

// activeWritable returns the newest open session of projectPath that the
// caller may continue (see caller.own) and write to.
func (s *Service) activeWritable(ctx context.Context, r store.Reader, c caller, projectPath string) (*belay.Session, error) {
	sess, err := r.ActiveSession(ctx, projectPath, c.own())
	if err != nil {
		return nil, err
	}
	rt, err := rightsIn(ctx, r, c, sess)
	if err != nil {
		return nil, err
	}
	if !rt.write {
		return nil, belay.Errorf(belay.CodeSessionNotFound, "no active session of yours for %s", projectPath).With("projectPath", projectPath)
	}
	return sess, nil
}

func normalizeTags(tags []string) []string {
	if len(tags) == 0 {
		return nil
	}
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// GetCheckpoint returns a checkpoint the caller may read (its session's
// readers and the request's approvers), after verifying its checksum.
func (s *Service) GetCheckpoint(ctx context.Context, id string) (*belay.Checkpoint, error) {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return nil, err
	}
	return s.getCheckpoint(ctx, c, id)
}

func (s *Service) getCheckpoint(ctx context.Context, c caller, id string) (*belay.Checkpoint, error) {
	if err := belay.ValidateID("id", id); err != nil {
		return nil, err
	}
	cp, _, _, err := readCheckpoint(ctx, s.store, c, id)
	if err != nil {
		return nil, err
	}
	return s.settle(ctx, cp)
}

// GetCheckpointBySeq returns checkpoint number seq of a session the caller may read.
func (s *Service) GetCheckpointBySeq(ctx context.Context, sessionID string, seq int64) (*belay.Checkpoint, error) {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return nil, err
	}
	if err := belay.ValidateID("sessionId", sessionID); err != nil {
		return nil, err
	}
	if seq < 1 {
		return nil, belay.Invalid("seq", "seq must be 1 or more, got %d", seq)
	}
	if _, _, err := readSession(ctx, s.store, c, sessionID); belay.IsCode(err, belay.CodeSessionNotFound) {
		return nil, store.CheckpointSeqNotFound(sessionID, seq)
	} else if err != nil {
		return nil, err
	}
	cp, err := s.store.GetCheckpointBySeq(ctx, sessionID, seq)
	if err != nil {
		return nil, err
	}
	return s.settle(ctx, cp)
}

// settle verifies a checkpoint read from the store and applies its HITL
// timeout or expiry when it is due, so a reader never sees as open a request
// that fell due.
func (s *Service) settle(ctx context.Context, cp *belay.Checkpoint) (*belay.Checkpoint, error) {
	if err := cp.VerifyChecksum(); err != nil {
		return nil, err
	}
	if !due(cp, s.clock.Now()) {
		return cp, nil
	}
	if err := s.settleDue(ctx, cp.ID); err != nil {
		return nil, err
	}
	return s.store.GetCheckpoint(ctx, cp.ID)
}

// corrupted returns err when it is CHECKPOINT_CORRUPTED (a damaged agent
// state, a checksum mismatch), else nil.
func corrupted(err error) *belay.Error {
	var e *belay.Error
	if errors.As(err, &e) && e.Code == belay.CodeCheckpointCorrupt {
		return e
	}
	return nil
}

// ListCheckpoints returns one page of the checkpoints the caller may read
// (seed 000's list); the total counts only those.
func (s *Service) ListCheckpoints(ctx context.Context, in belay.ListCheckpointsInput) (*belay.CheckpointList, error) {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	in.ProjectPath = s.projectPath(c, in.ProjectPath)
	after, err := DecodeCheckpointCursor(&in)
	if err != nil {
		return nil, err
	}
	limit := in.Limit
	if limit == 0 {
		limit = belay.DefaultListLimit
	}
	q := store.CheckpointQuery{
		Scope: c.scope(), SessionID: in.SessionID, ProjectPath: in.ProjectPath, Type: in.Type,
		HITLRequired: in.HITLRequired, HITLDecided: in.HITLDecided,
		CreatedAfter: in.CreatedAfter, CreatedBefore: in.CreatedBefore, Tags: in.Tags,
		OrderByType: in.OrderBy == belay.OrderType, OrderByUpdated: in.OrderBy == belay.OrderUpdatedAt, Desc: in.OrderDir != belay.OrderAsc,
		After: after, Offset: in.Offset, Limit: limit, MaxBytes: store.PageBytes,
	}
	var total int64
	items, more, err := refetch(func() (page []*belay.Checkpoint, more bool, err error) {
		page, total, more, err = s.store.ListCheckpoints(ctx, q)
		return page, more, err
	})
	if err != nil {
		return nil, err
	}
	out := &belay.CheckpointList{Items: items, TotalCount: total}
	if more && len(items) > 0 {
		out.HasMore = true
		last := items[len(items)-1]
		c := cursor{Order: checkpointOrder(&in), At: last.CreatedAt.UnixNano(), ID: last.ID}
		switch {
		case q.OrderByType:
			c.Type = string(last.Type)
		case q.OrderByUpdated:
			c.At = last.UpdatedAt.UnixNano()
		case q.SessionID != "":
			c.At = last.Seq
		}
		out.NextCursor = encodeCursor(c)
	}
	settled := out.Items[:0]
	for _, cp := range out.Items {
		cp, err := s.settle(ctx, cp)
		if e := corrupted(err); e != nil {
			// One damaged checkpoint fails no list.
			out.Corrupted = append(out.Corrupted, e)
			continue
		}
		if err != nil {
			return nil, err
		}
		settled = append(settled, cp)
	}
	out.Items = settled
	if out.Items == nil {
		out.Items = []*belay.Checkpoint{}
	}
	return out, nil
}

// DeleteCheckpoint removes a checkpoint. The session owner or an admin may.
// When it was the session's head, the head moves to its parent.
func (s *Service) DeleteCheckpoint(ctx context.Context, id string) error {
	c, err := authorize(ctx, belay.ScopeWrite)
	if err != nil {
		return err
	}
	if err := belay.ValidateID("id", id); err != nil {
		return err
	}
	return s.update(ctx, func(tx store.Tx) error {
		cp, sess, rt, err := readCheckpoint(ctx, tx, c, id)
		if err != nil {
			return err
		}
		if err := rt.mayOwn(c, sess, "delete its checkpoints"); err != nil {
			return err
		}
		// Deleting a request that waits clears its gate, as a decision
		// would: it takes the right to decide it (an admin may clean up).
		if cp.Pending() && !c.Admin {
			if err := mayDecide(c, rt, cp); err != nil {
				var be *belay.Error
				if !errors.As(err, &be) {
					return err
				}
				return belay.Errorf(belay.CodeUnauthorized, "checkpoint #%d waits for a decision, which deleting it would clear: %s", cp.Seq, be.Message).
					With("checkpointId", cp.ID)
			}
		}
		return s.removeCheckpoint(ctx, tx, sess, cp)
	})
}

// deleteCheckpoint deletes checkpoint id as belay's own upkeep (retention).
func (s *Service) deleteCheckpoint(ctx context.Context, tx store.Tx, id string) error {
	cp, err := tx.GetCheckpoint(ctx, id)
	if err != nil {
		return err
	}
	sess, err := tx.GetSession(ctx, cp.SessionID)
	if err != nil {
		return err
	}
	return s.removeCheckpoint(ctx, tx, sess, cp)
}

// removeCheckpoint deletes cp from sess: its head moves to cp's parent, and a
// session that waited only for cp runs again.
func (s *Service) removeCheckpoint(ctx context.Context, tx store.Tx, sess *belay.Session, cp *belay.Checkpoint) error {
	if err := tx.DeleteCheckpoint(ctx, cp.ID); err != nil {
		return err
	}
	sess.CheckpointCount--
	if sess.HeadCheckpointID == cp.ID {
		sess.HeadCheckpointID = cp.ParentID
	}
	if cp.Pending() && sess.Status == belay.SessionAwaitingInput {
		left, _, err := tx.PendingHITL(ctx, store.PendingQuery{Scope: store.Everything, SessionID: sess.ID, Limit: 1})
		if err != nil {
			return err
		}
		if len(left) == 0 {
			if err := s.setStatus(ctx, tx, sess, belay.SessionRunning, "checkpoint.deleted"); err != nil {
				return err
			}
		}
	}
	sess.UpdatedAt = s.clock.Now()
	if err := s.appendEvent(ctx, tx, belay.EventCheckpointDeleted, sess.ID, cp.ID, map[string]any{"seq": cp.Seq}); err != nil {
		return err
	}
	return tx.UpdateSession(ctx, sess)
}
