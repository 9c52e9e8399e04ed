package core

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// The session life (seed 004): a running session is held by one process
// through a lease it renews with heartbeats; a lease that lapses without the
// session ending makes it interrupted (once: by the sweeper, or by whoever
// reads it first), and an interrupted session is resumed by taking a new
// lease. Completed, failed and abandoned sessions have ended.

// maxReason bounds an end reason.
const maxReason = belay.MaxEndReason

// EndSession completes, fails or abandons a session (the caller must be able
// to write to it) and releases its lease, appending in.Events in the same
// transaction.
func (s *Service) EndSession(ctx context.Context, in belay.EndSessionInput) (*belay.Session, error) {
	c, err := authorize(ctx, belay.ScopeWrite)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	var sess *belay.Session
	err = s.update(ctx, func(tx store.Tx) error {
		if sess, err = writeSession(ctx, tx, c, in.SessionID); err != nil {
			return err
		}
		if err := s.endSession(ctx, tx, sess, in.Status, in.Reason); err != nil {
			return err
		}
		_, err = s.appendGraphEvents(ctx, tx, sess.ID, in.Events, "")
		return err
	})
	return sess, err
}

// endSession ends sess in tx with status, for reason, releasing its lease.
func (s *Service) endSession(ctx context.Context, tx store.Tx, sess *belay.Session, status belay.SessionStatus, reason string) error {
	if !sess.Status.Open() {
		return belay.Errorf(belay.CodeConflict, "session %s has ended already (%s)", sess.ID, sess.Status).
			With("sessionId", sess.ID).With("status", sess.Status)
	}
	sess.Holder, sess.LeaseExpiresAt, sess.EndReason = "", nil, reason
	sess.UpdatedAt = s.clock.Now()
	if err := s.setStatus(ctx, tx, sess, status, reason); err != nil {
		return err
	}
	return tx.UpdateSession(ctx, sess)
}

// leaseFor is the length of a lease asked for as d (checked by the input's
// Validate): DefaultLease when none is given.
func leaseFor(d time.Duration) time.Duration {
	if d == 0 {
		return belay.DefaultLease
	}
	return d
}

// Heartbeat takes or renews a session's lease for in.Holder, or gives it up
// (in.Release, appending in.Events in the same transaction). Another
// holder's live lease, or a session that was interrupted or ended meanwhile,
// is LEASE_LOST: the caller must resume it, not carry on.
func (s *Service) Heartbeat(ctx context.Context, in belay.LeaseInput) (*belay.Session, error) {
	c, err := authorize(ctx, belay.ScopeWrite)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	d := leaseFor(in.Lease)
	var sess *belay.Session
	err = s.afterLapse(ctx, in.SessionID, func(tx store.Tx) error {
		if sess, err = writeSession(ctx, tx, c, in.SessionID); err != nil {
			return err
		}
		if leaseLapsed(sess, s.clock.Now()) {
			return errLapsed
		}
		if in.Release {
			if err := s.releaseLease(ctx, tx, sess, in.Holder); err != nil {
				return err
			}
			_, err = s.appendGraphEvents(ctx, tx, sess.ID, in.Events, "")
			return err
		}
		if err := s.leaseLost(sess, in.Holder); err != nil {
			return err
		}
		now := s.clock.Now()
		until := now.Add(d)
		sess.Holder, sess.LeaseExpiresAt, sess.UpdatedAt = in.Holder, &until, now
		return tx.UpdateSession(ctx, sess)
	})
	return sess, err
}

// releaseLease gives up holder's lease of sess in tx: a session that waits for
// a person keeps waiting, held by no one; another becomes interrupted. A
// session held by another, interrupted or ended is LEASE_LOST.
func (s *Service) releaseLease(ctx context.Context, tx store.Tx, sess *belay.Session, holder string) error {
	if err := s.leaseLost(sess, holder); err != nil {
		return err
	}
	if sess.Status == belay.SessionAwaitingInput || sess.Status == belay.SessionPaused {
		// A session that waits for a person has no work in flight: its
		// holder steps away and it keeps waiting, no process holding it.
		sess.Holder, sess.LeaseExpiresAt, sess.UpdatedAt = "", nil, s.clock.Now()
		return tx.UpdateSession(ctx, sess)
	}
	sess.Holder = holder
	return s.interrupt(ctx, tx, sess, "released by "+holder)
}

// leaseLost is LEASE_LOST when holder may not hold sess: it was interrupted
// or has ended, or another holder's lease is live.
func (s *Service) leaseLost(sess *belay.Session, holder string) error {
	held := sess.Holder != "" && sess.LeaseExpiresAt != nil && s.clock.Now().Before(*sess.LeaseExpiresAt)
	switch {
	case !sess.Status.Open() || sess.Status == belay.SessionInterrupted:
		return belay.Errorf(belay.CodeLeaseLost, "session %s is %s: resume it to hold it again", sess.ID, sess.Status).
			With("sessionId", sess.ID).With("status", sess.Status)
	case held && sess.Holder != holder:
		return belay.Errorf(belay.CodeLeaseLost, "session %s is held by %s until %s", sess.ID, sess.Holder,
			sess.LeaseExpiresAt.Format(time.RFC3339)).With("sessionId", sess.ID).With("holder", sess.Holder)
	}
	return nil
}

// errLapsed is what a transaction of afterLapse returns when it finds the
// session's lease lapsed.
var errLapsed = errors.New("the lease lapsed")

// afterLapse runs fn in a transaction on session id as the session stands
// once a lapsed lease has made it interrupted: when fn finds the lease
// lapsed (errLapsed), the session is interrupted in a transaction of its own,
// which stays, and fn runs again.
func (s *Service) afterLapse(ctx context.Context, id string, fn func(tx store.Tx) error) error {
	err := s.update(ctx, fn)
	if !errors.Is(err, errLapsed) {
		return err
	}
	if err := s.settleLease(ctx, id); err != nil {
		return err
	}
	return s.update(ctx, fn)
}

// settleLease interrupts session id when its lease has lapsed, in its own
// transaction, so every reader sees the same status the sweeper would set.
func (s *Service) settleLease(ctx context.Context, id string) error {
	sess, err := s.store.GetSession(ctx, id)
	if err != nil || !leaseLapsed(sess, s.clock.Now()) {
		return nil // a missing session is the caller's to report
	}
	return s.update(ctx, func(tx store.Tx) error {
		sess, err := tx.GetSession(ctx, id)
		if err != nil || !leaseLapsed(sess, s.clock.Now()) {
			return err
		}
		return s.interrupt(ctx, tx, sess, "the lease of "+sess.Holder+" lapsed")
	})
}

func leaseLapsed(sess *belay.Session, now time.Time) bool {
	return sess.LeaseExpiresAt != nil && !now.Before(*sess.LeaseExpiresAt) && sess.Status.Open()
}

// interrupt marks a session whose holder went away without ending it.
func (s *Service) interrupt(ctx context.Context, tx store.Tx, sess *belay.Session, reason string) error {
	sess.Holder, sess.LeaseExpiresAt, sess.EndReason, sess.UpdatedAt = "", nil, reason, s.clock.Now()
	if err := s.setStatus(ctx, tx, sess, belay.SessionInterrupted, reason); err != nil {
		return err
	}
	return tx.UpdateSession(ctx, sess)
}

// sweepLeases interrupts every session whose lease lapsed and returns how
// many. The query and the update share a transaction: each fires once.
func (s *Service) sweepLeases(ctx context.Context) (int, error) {
	if due, err := s.store.DueLeases(ctx, s.clock.Now(), 1); err != nil || len(due) == 0 {
		return 0, err
	}
	n := 0
	err := s.update(ctx, func(tx store.Tx) error {
		due, err := tx.DueLeases(ctx, s.clock.Now(), sweepBatch)
		if err != nil {
			return err
		}
		for _, sess := range due {
			if err := s.interrupt(ctx, tx, sess, "the lease of "+sess.Holder+" lapsed"); err != nil {
				return err
			}
		}
		n = len(due)
		return nil
	})
	return n, err
}

// ResumeSession takes the lease of an interrupted session — in.SessionID, or
// the newest interrupted session of in.ProjectPath the caller may write to —
// sets it running, and returns its head, state, next task and open requests.
// An abandoned or ended session is refused; of two processes resuming one
// session at once exactly one gets it (the other LEASE_LOST).
func (s *Service) ResumeSession(ctx context.Context, in belay.ResumeInput) (*belay.ResumeResult, error) {
	c, err := authorize(ctx, belay.ScopeWrite)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	d := leaseFor(in.Lease)
	if in.SessionID == "" {
		if in.SessionID, err = s.latestInterrupted(ctx, c, in.ProjectPath); err != nil {
			return nil, err
		}
	}
	if err := belay.ValidateID("sessionId", in.SessionID); err != nil {
		return nil, err
	}
	var sess *belay.Session
	err = s.afterLapse(ctx, in.SessionID, func(tx store.Tx) error {
		if sess, err = writeSession(ctx, tx, c, in.SessionID); err != nil {
			return err
		}
		now := s.clock.Now()
		switch {
		case leaseLapsed(sess, now):
			return errLapsed
		case sess.Status == belay.SessionAbandoned:
			return belay.Errorf(belay.CodeConflict, "session %s was abandoned and is never resumed", sess.ID).With("sessionId", sess.ID)
		case !sess.Status.Open():
			return belay.Errorf(belay.CodeConflict, "session %s has ended (%s) and cannot be resumed", sess.ID, sess.Status).
				With("sessionId", sess.ID).With("status", sess.Status)
		case sess.Holder != "" && sess.Holder != in.Holder && sess.LeaseExpiresAt != nil && now.Before(*sess.LeaseExpiresAt):
			return belay.Errorf(belay.CodeLeaseLost, "session %s is held by %s", sess.ID, sess.Holder).
				With("sessionId", sess.ID).With("holder", sess.Holder)
		}
		until := now.Add(d)
		sess.Holder, sess.LeaseExpiresAt, sess.UpdatedAt = in.Holder, &until, now
		if sess.Status == belay.SessionInterrupted {
			sess.EndReason = ""
			if err := s.setStatus(ctx, tx, sess, belay.SessionRunning, "resumed by "+in.Holder); err != nil {
				return err
			}
		}
		return tx.UpdateSession(ctx, sess)
	})
	if err != nil {
		return nil, err
	}
	res := &belay.ResumeResult{Session: sess, State: sess.State, Pending: []*belay.Checkpoint{}}
	if sess.HeadCheckpointID != "" {
		if res.Head, err = s.store.GetCheckpoint(ctx, sess.HeadCheckpointID); err != nil && !belay.IsCode(err, belay.CodeCheckpointNotFound) {
			return nil, err
		}
	}
	if sess.Plan != nil {
		res.NextTask = nextTask(sess.Plan)
	}
	pending, more, err := s.store.PendingHITL(ctx, store.PendingQuery{Scope: store.Everything, SessionID: sess.ID, Limit: maxPending, MaxBytes: store.PageBytes})
	if err != nil {
		return nil, err
	}
	res.Pending, res.MorePending = append(res.Pending, pending...), more
	return res, nil
}

// latestInterrupted is the newest interrupted session of projectPath among
// those its numbers count in (see numbersScope); resuming it takes the right
// to write to it.
func (s *Service) latestInterrupted(ctx context.Context, c caller, projectPath string) (string, error) {
	if projectPath == "" {
		return "", belay.Invalid("sessionId", "name the session to resume, or the project whose latest interrupted session to resume")
	}
	if _, err := s.sweepLeases(ctx); err != nil {
		return "", err
	}
	projectPath = s.projectPath(c, projectPath)
	scope, err := s.numbersScope(ctx, c, projectPath)
	if err != nil {
		return "", err
	}
	list, _, _, err := s.store.ListSessions(ctx, store.SessionQuery{Scope: scope, ProjectPath: projectPath,
		Status: belay.SessionInterrupted, Limit: 1})
	if err != nil {
		return "", err
	}
	if len(list) == 0 {
		whose := ""
		if scope.OwnOrAdmin {
			whose = " of yours (or an admin's)"
		}
		return "", belay.Errorf(belay.CodeSessionNotFound, "no interrupted session%s in %s", whose, projectPath).With("projectPath", projectPath)
	}
	return list[0].ID, nil
}

// nextTask is the plan's running task, else its first pending one.
func nextTask(p *belay.Plan) *belay.Task {
	for _, want := range []belay.TaskStatus{belay.TaskRunning, belay.TaskPending} {
		if i := slices.IndexFunc(p.Tasks, func(t belay.Task) bool { return t.Status == want }); i >= 0 {
			t := p.Tasks[i]
			return &t
		}
	}
	return nil
}

// CleanupSessions deletes ended sessions (completed and abandoned unless
// in.Statuses says otherwise) last changed before in.OlderThan ago, keeping
// the in.KeepLast newest of each project, with their snapshots; it reports
// what it freed. Only sessions the caller may delete (its own, or every one
// for an admin) are considered.
func (s *Service) CleanupSessions(ctx context.Context, in belay.CleanupInput) (*belay.CleanupResult, error) {
	c, err := authorize(ctx, belay.ScopeWrite)
	if err != nil {
		return nil, err
	}
	statuses := in.Statuses
	if len(statuses) == 0 {
		statuses = []belay.SessionStatus{belay.SessionCompleted, belay.SessionAbandoned}
	}
	for _, st := range statuses {
		if st.Open() {
			return nil, belay.Invalid("statuses", "only ended sessions (completed, failed, abandoned) are cleaned up, not %q", belay.Clip(string(st), 40))
		}
	}
	if in.OlderThan < 0 || in.KeepLast < 0 {
		return nil, belay.Invalid("olderThan", "olderThan and keepLast must not be negative")
	}
	cutoff := s.clock.Now().Add(-in.OlderThan)
	res := &belay.CleanupResult{Sessions: []string{}, DryRun: in.DryRun}
	kept := map[string]int{}
	var victims []*belay.Session
	err = forEachSession(ctx, s.store, c.scope(), func(sess *belay.Session) error {
		if !slices.Contains(statuses, sess.Status) {
			return nil
		}
		// Newest first: the first KeepLast of each project stay.
		if kept[sess.ProjectPath] < in.KeepLast {
			kept[sess.ProjectPath]++
			return nil
		}
		if sess.UpdatedAt.After(cutoff) || (sess.Owner != c.UserID && !c.Admin) {
			return nil
		}
		victims = append(victims, sess)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sizes := map[string]int64{}
	for _, sess := range victims {
		res.Sessions = append(res.Sessions, sess.ID)
		res.Checkpoints += sess.CheckpointCount
		if sess.ProjectPath != "" && s.ws != nil {
			if _, ok := sizes[sess.ProjectPath]; !ok {
				sizes[sess.ProjectPath], _ = s.ws.DiskUsage(ctx, sess.ProjectPath)
			}
			cps, err := sessionCheckpoints(ctx, s.store, sess.ID)
			if err != nil {
				return nil, err
			}
			for _, cp := range cps {
				if cp.HasSnapshot() {
					res.Refs++
				}
			}
		}
		if in.DryRun {
			continue
		}
		if _, err := s.DeleteSession(ctx, sess.ID); err != nil && !belay.IsCode(err, belay.CodeSessionNotFound) {
			return nil, err
		}
	}
	if !in.DryRun {
		for root, before := range sizes {
			if after, err := s.ws.DiskUsage(ctx, root); err == nil && after < before {
				res.BytesFreed += before - after
			}
		}
	}
	return res, nil
}
