package core

import (
	"context"
	"errors"
	"strings"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/workspace"
)

// CollectGarbage reclaims the space snapshots and agent states no longer
// need (admins only): the chunks of large states no checkpoint or session
// refers to, the snapshots of deleted sessions that a failed delete left
// behind, the objects no snapshot reaches in every shadow repository, and
// the shadow repositories of workspaces no session refers to. With DryRun
// it reports what it would free and changes nothing.
func (s *Service) CollectGarbage(ctx context.Context, in belay.GCInput) (*belay.GCReport, error) {
	if _, err := authorizeAdmin(ctx, "collect garbage"); err != nil {
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
		w := belay.GCWorkspace{ProjectPath: sh.Root, BytesBefore: sh.Bytes, Orphaned: sh.Root == "" || !used[sh.Root]}
		var rec *workspace.Reclaimed
		if w.Orphaned {
			// Checked again under the workspace lock: a save that starts a
			// session there meanwhile keeps its snapshots.
			rec, err = ws.RemoveShadow(ctx, sh.ID, in.DryRun, func() (bool, error) {
				roots, err := s.workspaceRoots(ctx)
				return !roots[sh.Root], err
			})
		} else {
			w.DeletedSessions, err = s.dropDeletedSessions(ctx, ws, sh.Root, deleted, in.DryRun)
			if err == nil {
				rec, err = ws.Collect(ctx, sh.ID, in.DryRun)
			}
		}
		switch {
		case errors.Is(err, workspace.ErrInUse):
			w.Orphaned = false
			continue
		case err != nil:
			w.Error = workspaceError(err).Error()
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
	out := map[string]bool{}
	q := store.EventQuery{Scope: store.Everything, Types: []string{belay.EventSessionDeleted}, Limit: MaxEventPage}
	for {
		evs, err := s.store.ListEvents(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			out[e.SessionID] = true
		}
		if len(evs) < q.Limit {
			return out, nil
		}
		q.After = evs[len(evs)-1].Seq
	}
}

// dropDeletedSessions deletes the snapshot refs of deleted sessions left in
// a workspace's shadow repository and returns how many sessions had some.
func (s *Service) dropDeletedSessions(ctx context.Context, ws *workspace.Manager, root string, deleted map[string]bool, dryRun bool) (int, error) {
	refs, err := ws.Refs(ctx, root, "refs/belay")
	var we *workspace.Error
	if errors.As(err, &we) && we.Code == workspace.InvalidWorkspace {
		return 0, nil // the workspace is gone; its session's rows remain
	}
	if err != nil {
		return 0, err
	}
	found := map[string]bool{}
	for ref := range refs {
		id, _, _ := strings.Cut(strings.TrimPrefix(ref, "refs/belay/"), "/")
		if !deleted[id] || found[id] {
			continue
		}
		if _, err := s.store.GetSession(ctx, id); !belay.IsCode(err, belay.CodeSessionNotFound) {
			continue // imported again since
		}
		found[id] = true
		if !dryRun {
			if _, err := ws.DeleteRefs(ctx, root, sessionRefs(id)); err != nil {
				return len(found), err
			}
		}
	}
	return len(found), nil
}
