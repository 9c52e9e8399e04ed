package core

import (
	"context"
	"path/filepath"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// RetentionInterval is how often the sweeper applies retention policies.
const RetentionInterval = time.Minute

// SetRetention sets (or, with neither KeepLast nor MaxAge, removes) a
// project's retention policy and returns it as stored, under the project's
// path with its links resolved. Only an admin may.
func (s *Service) SetRetention(ctx context.Context, p belay.RetentionPolicy) (*belay.RetentionPolicy, error) {
	c, err := authorizeAdmin(ctx, belay.ScopeWrite, "set retention policies")
	if err != nil {
		return nil, err
	}
	if err := belay.ValidateProjectPath("projectPath", p.ProjectPath); err != nil {
		return nil, err
	}
	if p.KeepLast < 0 || p.MaxAge < 0 {
		return nil, belay.Invalid("keepLast", "keepLast and maxAge must not be negative")
	}
	if p.MaxAge > 0 && p.MaxAge < time.Hour {
		return nil, belay.Invalid("maxAge", "maxAge must be at least an hour, got %s", p.MaxAge)
	}
	given := filepath.Clean(p.ProjectPath)
	p.ProjectPath = s.projectPath(c, p.ProjectPath)
	err = s.update(ctx, func(tx store.Tx) error {
		if p.KeepLast == 0 && p.MaxAge == 0 {
			// A policy set before belay resolved links is kept under the
			// path as given: removing it names that path.
			if given != p.ProjectPath {
				if err := tx.DeleteRetention(ctx, given); err != nil {
					return err
				}
			}
			return tx.DeleteRetention(ctx, p.ProjectPath)
		}
		return tx.PutRetention(ctx, p)
	})
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// ListRetention lists the retention policies. Only an admin may.
func (s *Service) ListRetention(ctx context.Context) ([]belay.RetentionPolicy, error) {
	if _, err := authorizeAdmin(ctx, belay.ScopeRead, "read retention policies"); err != nil {
		return nil, err
	}
	list, err := s.store.ListRetention(ctx)
	if list == nil && err == nil {
		list = []belay.RetentionPolicy{}
	}
	return list, err
}

// ApplyRetention deletes, per policy, the checkpoints it lets go, with their
// snapshot refs (one repack per workspace), and returns how many it
// deleted. It is belay's own upkeep and needs no identity.
func (s *Service) ApplyRetention(ctx context.Context) (int, error) {
	policies, err := s.store.ListRetention(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, p := range policies {
		n, err := s.applyPolicy(ctx, p)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func (s *Service) applyPolicy(ctx context.Context, p belay.RetentionPolicy) (int, error) {
	var refs []string
	deleted := 0
	err := forEachSession(ctx, s.store, store.Scope{All: true, Projects: []string{p.ProjectPath}}, func(sess *belay.Session) error {
		if sess.ProjectPath != p.ProjectPath {
			return nil // a project below this one has a policy of its own, or none
		}
		cps, err := sessionCheckpoints(ctx, s.store, sess.ID)
		if err != nil {
			return err
		}
		rollbacks, err := s.store.ListRollbacks(ctx, sess.ID)
		if err != nil {
			return err
		}
		for _, cp := range expired(p, sess, cps, rollbacks, s.clock.Now()) {
			if err := s.update(ctx, func(tx store.Tx) error { return s.deleteCheckpoint(ctx, tx, cp.ID) }); err != nil {
				if belay.IsCode(err, belay.CodeCheckpointNotFound) {
					continue // deleted meanwhile
				}
				return err
			}
			deleted++
			if cp.WorkspaceRef != "" {
				refs = append(refs, checkpointRef(sess.ID, cp.Seq))
			}
		}
		return nil
	})
	if err != nil || len(refs) == 0 || s.ws == nil {
		return deleted, err
	}
	_, err = s.ws.DeleteRefList(ctx, p.ProjectPath, refs)
	return deleted, WorkspaceError(err)
}

// expired returns the checkpoints of one session that policy p lets go, in
// seq order (cps is in seq order).
func expired(p belay.RetentionPolicy, sess *belay.Session, cps []*belay.Checkpoint, rollbacks []*belay.Rollback, now time.Time) []*belay.Checkpoint {
	keep := map[string]bool{sess.HeadCheckpointID: true}
	for _, rb := range rollbacks {
		keep[rb.TargetID], keep[rb.FromCheckpointID] = true, true
	}
	children := map[string]int{}
	for _, cp := range cps {
		children[cp.ParentID]++
	}
	var out []*belay.Checkpoint
	for i, cp := range cps {
		switch {
		case keep[cp.ID], children[cp.ID] > 1, cp.HITLRequired, cp.Type == belay.TypeHITL, cp.Type == belay.TypePhase:
			continue
		case p.KeepLast > 0 && i >= len(cps)-p.KeepLast:
			continue
		case p.MaxAge > 0 && now.Sub(cp.CreatedAt) < p.MaxAge:
			continue
		}
		out = append(out, cp)
	}
	return out
}
