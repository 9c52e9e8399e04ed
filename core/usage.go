package core

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/workspace"
)

// DiskUsage reports the space each workspace's snapshots use and, per
// session, its checkpoints and the bytes of their state in the database. An
// admin also sees the snapshots no session refers to any more (orphaned,
// which `belay gc` removes) and the database's own size, so the report adds
// up to everything belay keeps.
func (s *Service) DiskUsage(ctx context.Context) (*belay.DiskUsageReport, error) {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return nil, err
	}
	rep := &belay.DiskUsageReport{Workspaces: []belay.WorkspaceUsage{}, Sessions: []belay.SessionUsage{}}
	byRoot := map[string]int{}
	err = forEachSession(ctx, s.store, c.scope(), func(sess *belay.Session) error {
		cu, err := s.store.CheckpointUsage(ctx, sess.ID)
		if err != nil {
			return err
		}
		u := belay.SessionUsage{ID: sess.ID, Title: sess.Title, ProjectPath: sess.ProjectPath, Status: sess.Status,
			Checkpoints: cu.Checkpoints, StateBytes: cu.StateBytes}
		rep.Sessions = append(rep.Sessions, u)
		rep.StateBytes += u.StateBytes
		if sess.ProjectPath == "" {
			return nil
		}
		i, ok := byRoot[sess.ProjectPath]
		if !ok {
			i = len(rep.Workspaces)
			byRoot[sess.ProjectPath] = i
			rep.Workspaces = append(rep.Workspaces, belay.WorkspaceUsage{ProjectPath: sess.ProjectPath})
		}
		rep.Workspaces[i].Sessions++
		return nil
	})
	if err != nil {
		return nil, err
	}
	if s.ws == nil {
		for i := range rep.Workspaces {
			rep.Workspaces[i].Error = errNoWorkspaces.Message
		}
	} else if err := s.shadowUsage(ctx, c, rep); err != nil {
		return nil, err
	}
	if sz, ok := s.store.(store.Sizer); ok && c.Admin {
		if rep.DatabaseBytes, err = sz.Size(ctx); err != nil {
			return nil, err
		}
	}
	if c.Admin {
		u, err := s.store.StateChunks(ctx)
		if err != nil {
			return nil, err
		}
		rep.StateChunkBytes = u.Bytes
	}
	slices.SortFunc(rep.Workspaces, func(a, b belay.WorkspaceUsage) int {
		return cmp.Or(cmp.Compare(btoi(a.Orphaned), btoi(b.Orphaned)), strings.Compare(a.ProjectPath, b.ProjectPath))
	})
	return rep, nil
}

// shadowUsage fills in the bytes of rep's workspaces from the shadow
// directories and, for an admin, adds those no session refers to.
func (s *Service) shadowUsage(ctx context.Context, c caller, rep *belay.DiskUsageReport) error {
	shadows, err := s.ws.Shadows(ctx)
	if err != nil {
		return err
	}
	byRoot := map[string]workspace.ShadowInfo{}
	for _, sh := range shadows {
		byRoot[sh.Root] = sh
	}
	seen := map[string]bool{}
	for i := range rep.Workspaces {
		w := &rep.Workspaces[i]
		if s.mayUseWorkspace(c, w.ProjectPath) != nil {
			// Its snapshot store, if any, may be another's: its size is
			// none of this caller's business.
			w.Error = "a workspace you may not use: only an admin sees the size of its snapshots"
			continue
		}
		root := s.ws.Canonical(w.ProjectPath)
		if seen[root] {
			continue // the same directory under another name
		}
		seen[root] = true
		w.Bytes = byRoot[root].Bytes
		rep.WorkspaceBytes += w.Bytes
	}
	if !c.Admin {
		return nil
	}
	// The sessions of other users' workspaces are not orphans.
	used, err := s.workspaceRoots(ctx)
	if err != nil {
		return err
	}
	for _, sh := range shadows {
		if seen[sh.Root] || (sh.Root != "" && len(used[sh.Root]) > 0) {
			continue
		}
		rep.Workspaces = append(rep.Workspaces, belay.WorkspaceUsage{ProjectPath: sh.Root, Bytes: sh.Bytes, Orphaned: true})
		rep.WorkspaceBytes += sh.Bytes
	}
	return nil
}

// workspaceRoots returns the canonical roots of every session's workspace,
// each with the ids of its sessions.
func (s *Service) workspaceRoots(ctx context.Context) (map[string][]string, error) {
	roots := map[string][]string{}
	err := forEachSession(ctx, s.store, store.Everything, func(sess *belay.Session) error {
		if sess.ProjectPath != "" {
			root := s.ws.Canonical(sess.ProjectPath)
			roots[root] = append(roots[root], sess.ID)
		}
		return nil
	})
	return roots, err
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
