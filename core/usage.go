package core

import (
	"context"
	"slices"
	"strings"

	"github.com/belayhq/belay"
)

// DiskUsage reports the space each workspace's snapshots use and, per
// session, its checkpoints and the bytes of their state in the database.
func (s *Service) DiskUsage(ctx context.Context) (*belay.DiskUsageReport, error) {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return nil, err
	}
	rep := &belay.DiskUsageReport{Workspaces: []belay.WorkspaceUsage{}, Sessions: []belay.SessionUsage{}}
	byRoot := map[string]int{}
	err = forEachSession(ctx, s.store, c.scope(), func(sess *belay.Session) error {
		cps, err := sessionCheckpoints(ctx, s.store, sess.ID)
		if err != nil {
			return err
		}
		u := belay.SessionUsage{ID: sess.ID, Title: sess.Title, ProjectPath: sess.ProjectPath, Status: sess.Status, Checkpoints: int64(len(cps))}
		for _, cp := range cps {
			u.StateBytes += int64(len(cp.AgentState) + len(cp.Outputs) + len(cp.Metadata))
		}
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
	for i := range rep.Workspaces {
		w := &rep.Workspaces[i]
		if s.ws == nil {
			w.Error = errNoWorkspaces.Message
			continue
		}
		n, err := s.ws.DiskUsage(ctx, w.ProjectPath)
		if err != nil {
			w.Error = workspaceError(err).Error()
			continue
		}
		w.Bytes = n
		rep.WorkspaceBytes += n
	}
	slices.SortFunc(rep.Workspaces, func(a, b belay.WorkspaceUsage) int { return strings.Compare(a.ProjectPath, b.ProjectPath) })
	return rep, nil
}
