package core

import (
	"context"
	"errors"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/workspace"
)

// CollectGarbage reclaims the space snapshots and agent states no longer
// need (admins only): the chunks of large states no checkpoint or session
// refers to, the snapshots of deleted sessions that a failed delete left
// behind and of deleted checkpoints, the objects no snapshot reaches in every
// shadow repository, and the shadow repositories of workspaces no session
// refers to. With DryRun it reports what it would free and changes nothing.
func (s *Service) CollectGarbage(ctx context.Context, in belay.GCInput) (*belay.GCReport, error) {
	if _, err := authorizeAdmin(ctx, belay.ScopeWrite, "collect garbage"); err != nil {
		return nil, err
	}
	var chunks store.ChunkUsage
	err := s.update(ctx, func(tx store.Tx) error {
		var err error
		chunks, err = tx.SweepStateChunks(ctx, in.DryRun)
		return err
	})
	if err != nil {
		return nil, err
	}
	rep := &belay.GCReport{Workspaces: []belay.GCWorkspace{}, DryRun: in.DryRun,
		StateChunks: chunks.Chunks, StateBytes: chunks.Bytes, FreedBytes: chunks.Bytes}
	ws := s.ws
	if ws == nil {
		return rep, nil // a service without snapshots
	}
	shadows, err := ws.Shadows(ctx)
	if err != nil {
		return nil, err
	}
	used, err := s.workspaceRoots(ctx)
	if err != nil {
		return nil, err
	}
	deleted, err := s.deletedSessions(ctx)
	if err != nil {
		return nil, err
	}
	for _, sh := range shadows {
		w := belay.GCWorkspace{ProjectPath: sh.Root, BytesBefore: sh.Bytes, Orphaned: sh.Root == "" || len(used[sh.Root]) == 0}
		var rec *workspace.Reclaimed
		if w.Orphaned {
			// Checked again under the workspace lock: a save that starts a
			// session there meanwhile keeps its snapshots.
			rec, err = ws.RemoveShadow(ctx, sh.ID, in.DryRun, func() (bool, error) {
				roots, err := s.workspaceRoots(ctx)
				return len(roots[sh.Root]) == 0, err
			})
		} else {
			rec, err = s.collect(ctx, sh.ID, in.DryRun, deleted, used[sh.Root], &w)
		}
		switch {
		case errors.Is(err, workspace.ErrInUse):
			w.Orphaned = false
			continue
		case err != nil:
			w.Error = WorkspaceError(err).Error()
		default:
			w.Removed = rec.Removed
			w.BytesFreed = max(sh.Bytes-rec.After, 0)
		}
		rep.FreedBytes += w.BytesFreed
		rep.Workspaces = append(rep.Workspaces, w)
	}
	return rep, nil
}

// deletedSessions returns the ids of every deleted session, from the event log.
func (s *Service) deletedSessions(ctx context.Context) (map[string]bool, error) {
	q := store.EventQuery{Scope: store.Everything, Types: []string{belay.EventSessionDeleted}}
	return s.loggedIDs(ctx, q, func(e *belay.Event) string { return e.SessionID })
}

// loggedIDs returns the id each event q matches names (as id picks it),
// reading the whole event log page by page.
func (s *Service) loggedIDs(ctx context.Context, q store.EventQuery, id func(*belay.Event) string) (map[string]bool, error) {
	out := map[string]bool{}
	q.Limit = MaxEventPage
	for {
		evs, err := s.store.ListEvents(ctx, q)
		if err != nil {
			return nil, err
		}
		for i := range evs {
			out[id(&evs[i])] = true
		}
		if len(evs) < q.Limit {
			return out, nil
		}
		q.After = evs[len(evs)-1].Seq
	}
}

// collect reclaims the space of the shadow directory id, of a workspace
// whose sessions are ids, as refPlan says. The checkpoints of those sessions
// are read before Collect takes the workspace lock, so saves there do not
// wait while every checkpoint is read; under the lock only the refs no
// checkpoint held are looked up. What changes between the read and the lock
// is harmless: a checkpoint saved meanwhile made its snapshot and ref under
// the lock and is looked up there, and the ref of one deleted meanwhile,
// kept or made again, keeps its snapshot only until the next gc, which finds
// the deletion in the event log.
func (s *Service) collect(ctx context.Context, id string, dryRun bool, deleted map[string]bool, ids []string, w *belay.GCWorkspace) (*workspace.Reclaimed, error) {
	known, held, err := knownSnapshots(ctx, s.store, ids)
	if err != nil {
		return nil, err
	}
	return s.ws.Collect(ctx, id, dryRun, s.refPlan(ctx, deleted, known, held, w))
}

// refPlan returns what Collect asks, under the workspace lock, of a shadow
// repository: the refs no checkpoint needs, and the refs to make again,
// those of checkpoints whose snapshot commit is there without its ref (a
// ref file lost), so that the snapshot stays; known and held are the
// workspace's checkpoints' snapshot refs (see knownSnapshots), and a held
// ref stays. The refs no checkpoint needs are the refs of deleted sessions,
// and those of a session here that hold no checkpoint's snapshot: one above
// the session's last seq (a save that failed after its snapshot), one whose
// seq another checkpoint without a snapshot holds (a save that lost a race),
// and one of a checkpoint the event log says was deleted. A ref whose
// checkpoint is missing without a deletion stays: validate --repair rebuilds
// the checkpoint from it. It counts them in w. A session this database never
// had keeps its refs: another database may share the data directory.
func (s *Service) refPlan(ctx context.Context, deleted map[string]bool, known map[string]string, held map[string]bool, w *belay.GCWorkspace) func(map[string]string, func(string) (string, error)) ([]string, map[string]string, error) {
	return func(refs map[string]string, message func(string) (string, error)) ([]string, map[string]string, error) {
		restore := map[string]string{}
		for ref, commit := range known {
			if refs[ref] == "" && takenFor(message, ref, commit) {
				restore[ref] = commit
			}
		}
		var drop []string
		sessions := map[string]*belay.Session{} // nil: not here
		gone := map[string]map[string]bool{}    // a session's deleted checkpoints
		for ref, commit := range refs {
			id, seq, ok := snapshotRefOf(ref)
			if !ok || held[ref] {
				continue
			}
			sess, seen := sessions[id]
			if !seen {
				var err error
				sess, err = s.store.GetSession(ctx, id)
				if err != nil && !belay.IsCode(err, belay.CodeSessionNotFound) {
					return nil, nil, err
				}
				sessions[id] = sess
				if sess == nil && deleted[id] {
					w.DeletedSessions++
				}
			}
			if sess == nil {
				if deleted[id] {
					drop = append(drop, ref)
				}
				continue
			}
			unneeded, err := s.refUnneeded(ctx, message, sess, seq, commit, gone)
			if err != nil {
				return nil, nil, err
			}
			if unneeded {
				drop = append(drop, ref)
				w.DeletedCheckpoints++
			}
		}
		return drop, restore, nil
	}
}

// takenFor says whether commit is the snapshot belay took for the
// checkpoint of snapshot ref: its record names that session and seq. A
// commit a caller named for its checkpoint (CreateCheckpointInput's
// WorkspaceRef) is not, and no ref of belay's is made for it. message reads
// a commit's message; a commit whose message cannot be read counts as taken.
func takenFor(message func(string) (string, error), ref, commit string) bool {
	msg, err := message(commit)
	if err != nil {
		return true // unreadable now: keeping the snapshot is the safe side
	}
	rec, err := parseRecord(msg)
	if err != nil {
		return false
	}
	id, seq, ok := snapshotRefOf(ref)
	return ok && rec.Checkpoint.SessionID == id && rec.Checkpoint.Seq == seq
}

// refUnneeded says whether the snapshot ref of sess's seq, at commit, holds
// no checkpoint's snapshot (see refPlan); message reads a commit's
// message. gone caches each session's deleted checkpoints.
func (s *Service) refUnneeded(ctx context.Context, message func(string) (string, error), sess *belay.Session, seq int64, commit string, gone map[string]map[string]bool) (bool, error) {
	if seq > sess.LastSeq {
		return true, nil
	}
	cp, err := s.store.GetCheckpointBySeq(ctx, sess.ID, seq)
	switch {
	case err == nil:
		return cp.WorkspaceRef == "", nil
	case corrupted(err) != nil:
		return false, nil // validation reports it; its snapshot may tell what it was
	case !belay.IsCode(err, belay.CodeCheckpointNotFound):
		return false, err
	}
	msg, err := message(commit)
	if err != nil {
		return false, nil // unreadable: validation reports it
	}
	rec, err := parseRecord(msg)
	if err != nil {
		return false, nil
	}
	if gone[sess.ID] == nil {
		if gone[sess.ID], err = s.deletedCheckpoints(ctx, sess.ID); err != nil {
			return false, err
		}
	}
	return gone[sess.ID][rec.Checkpoint.ID], nil
}
