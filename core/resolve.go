package core

import (
	"context"
	"slices"
	"strings"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// maxCandidates bounds the candidates an ambiguous reference lists.
const maxCandidates = 10

// ResolveCheckpoint finds the checkpoint a person names (see
// belay.CheckpointRef): a number ("3" or "#3") in the given session or the
// project's current one, a full id, a unique id prefix of at least
// belay.MinIDPrefix characters, or a checkpoint name (the newest of that name).
// Only checkpoints the caller may read are found.
func (s *Service) ResolveCheckpoint(ctx context.Context, in belay.CheckpointRef) (*belay.Checkpoint, error) {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return nil, err
	}
	if in.SessionID != "" {
		if err := belay.ValidateID("sessionId", in.SessionID); err != nil {
			return nil, err
		}
	}
	if in.Step != 0 {
		return s.resolveStep(ctx, c, in)
	}
	ref := strings.TrimSpace(in.Ref)
	if ref == "" || len(ref) > belay.MaxNameLen {
		return nil, belay.Invalid("ref", "name a checkpoint by number, id, id prefix or name (1-%d characters)", belay.MaxNameLen)
	}
	if belay.IsUUID(ref) {
		return s.getCheckpoint(ctx, c, strings.ToLower(ref))
	}
	if seq, ok := belay.SeqRef(ref); ok {
		if seq < 1 {
			return nil, belay.Invalid("ref", "checkpoint numbers start at 1, got %d", seq)
		}
		sess, err := s.refSession(ctx, c, in)
		if err != nil {
			return nil, err
		}
		cp, err := s.store.GetCheckpointBySeq(ctx, sess.ID, seq)
		if err != nil {
			return nil, err
		}
		return s.settle(ctx, cp)
	}
	if belay.IsIDPrefix(ref) {
		// A name the session's checkpoint was given (one like "beef")
		// comes first: it was chosen to be typed, and an id prefix can
		// always be made longer.
		if sess, err := s.refSession(ctx, c, in); err == nil {
			if cp, err := s.named(ctx, c, sess, ref); cp != nil || err != nil {
				return cp, err
			}
		}
		ids, err := s.store.FindCheckpointIDs(ctx, strings.ToLower(ref), c.scope(), maxCandidates)
		if err != nil {
			return nil, err
		}
		switch {
		case len(ids) == 1:
			return s.getCheckpoint(ctx, c, ids[0])
		case len(ids) > 1:
			return nil, ambiguous(ref, ids)
		}
	}
	sess, err := s.refSession(ctx, c, in)
	if err != nil {
		return nil, err
	}
	cp, err := s.named(ctx, c, sess, ref)
	if cp == nil && err == nil {
		return nil, belay.Errorf(belay.CodeCheckpointNotFound, "no checkpoint is numbered, named or has an id beginning %q in session %s", ref, sess.ID).
			With("ref", ref).With("sessionId", sess.ID)
	}
	return cp, err
}

// named returns the newest checkpoint of sess named name, nil when none is.
func (s *Service) named(ctx context.Context, c caller, sess *belay.Session, name string) (*belay.Checkpoint, error) {
	list, _, _, err := s.store.ListCheckpoints(ctx, store.CheckpointQuery{Scope: c.scope(), SessionID: sess.ID, Name: name, Desc: true, Limit: 1})
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return s.settle(ctx, list[0])
}

// resolveStep finds the newest checkpoint of step in.Step in the session.
func (s *Service) resolveStep(ctx context.Context, c caller, in belay.CheckpointRef) (*belay.Checkpoint, error) {
	if in.Ref != "" || in.Step < 0 {
		return nil, belay.Invalid("step", "name a checkpoint by a step (1 or more) or by ref, not both")
	}
	sess, err := s.refSession(ctx, c, in)
	if err != nil {
		return nil, err
	}
	list, _, _, err := s.store.ListCheckpoints(ctx, store.CheckpointQuery{Scope: c.scope(), SessionID: sess.ID, Step: in.Step, Desc: true, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, belay.Errorf(belay.CodeCheckpointNotFound, "no checkpoint of step %d in session %s", in.Step, sess.ID).
			With("step", in.Step).With("sessionId", sess.ID)
	}
	return s.settle(ctx, list[0])
}

// ambiguous is the error for an id prefix that matches more than one id.
func ambiguous(ref string, ids []string) error {
	more := ""
	if len(ids) >= maxCandidates {
		more = ", …"
	}
	return belay.Invalid("ref", "%q is ambiguous: matches %s%s; give more characters", ref, strings.Join(ids, ", "), more).
		With("candidates", ids)
}

// ResolveSession finds the session a person names (see
// belay.SessionService): its id, or a unique prefix of it of at least
// belay.MinIDPrefix characters. Only sessions the caller may read are found.
func (s *Service) ResolveSession(ctx context.Context, ref string) (*belay.Session, error) {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return nil, err
	}
	ref = strings.ToLower(strings.TrimSpace(ref))
	if belay.IsUUID(ref) {
		sess, _, err := readSession(ctx, s.store, c, ref)
		return sess, err
	}
	switch {
	case len(ref) < belay.MinIDPrefix:
		return nil, belay.Invalid("ref", "name a session by its id or a unique prefix of it (at least %d characters), got %q",
			belay.MinIDPrefix, belay.Clip(ref, 50))
	case !belay.IsIDPrefix(ref):
		return nil, belay.Invalid("ref", "%q is no session id or prefix of one: those are hex digits and dashes", belay.Clip(ref, 50))
	}
	// Sessions are few next to checkpoints: a scan of those the caller may
	// read finds the prefix.
	var ids []string
	err = forEachSession(ctx, s.store, c.scope(), func(sess *belay.Session) error {
		if strings.HasPrefix(sess.ID, ref) {
			ids = append(ids, sess.ID)
			if len(ids) == maxCandidates {
				return errEnough
			}
		}
		return nil
	})
	if err != nil && err != errEnough {
		return nil, err
	}
	switch len(ids) {
	case 0:
		return nil, belay.Errorf(belay.CodeSessionNotFound, "no session has an id beginning %q", ref).With("ref", ref)
	case 1:
		sess, _, err := readSession(ctx, s.store, c, ids[0])
		return sess, err
	}
	slices.Sort(ids)
	return nil, ambiguous(ref, ids)
}

// refSession is the session a checkpoint number or name refers to.
func (s *Service) refSession(ctx context.Context, c caller, in belay.CheckpointRef) (*belay.Session, error) {
	if in.SessionID != "" {
		sess, _, err := readSession(ctx, s.store, c, in.SessionID)
		return sess, err
	}
	if in.ProjectPath == "" {
		return nil, belay.Invalid("sessionId", "a checkpoint number or name needs its session: give sessionId or projectPath")
	}
	return s.currentSession(ctx, c, in.ProjectPath)
}

// CurrentSession returns the project's current session among those the
// caller may continue (see caller.own; for an admin with none there, among
// all, see numbersScope): its newest open session, unless a session made after that
// one completed or failed since the open one last moved (then that ended
// session, so "checkpoint 3" after a rejection failed the session still means
// its checkpoint, not one of an older session left open; an abandoned one is
// closed for good); with none open, its newest session.
func (s *Service) CurrentSession(ctx context.Context, projectPath string) (*belay.Session, error) {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return nil, err
	}
	return s.currentSession(ctx, c, projectPath)
}

func (s *Service) currentSession(ctx context.Context, c caller, projectPath string) (*belay.Session, error) {
	if err := belay.ValidateProjectPath("projectPath", projectPath); err != nil {
		return nil, err
	}
	projectPath = s.projectPath(c, projectPath)
	scope, err := s.numbersScope(ctx, c, projectPath)
	if err != nil {
		return nil, err
	}
	return s.currentIn(ctx, scope, projectPath)
}

// numbersScope is the scope of the sessions a project's numbers and resume
// look at for the caller: those its saves by path could continue (see
// caller.own), or, for an admin who has none there, every session of the
// project, such as an agent's run with a token of its own user. Another
// user who is not an admin never sets a non-admin's numbers, grant or not:
// "rollback 1" would restore what that user chose.
func (s *Service) numbersScope(ctx context.Context, c caller, projectPath string) (store.Scope, error) {
	if !c.Admin {
		return c.own(), nil
	}
	mine, _, _, err := s.store.ListSessions(ctx, store.SessionQuery{Scope: c.own(), ProjectPath: projectPath, Limit: 1})
	if err != nil || len(mine) > 0 {
		return c.own(), err
	}
	return c.scope(), nil
}

// currentIn is currentSession among the sessions of scope.
func (s *Service) currentIn(ctx context.Context, scope store.Scope, projectPath string) (*belay.Session, error) {
	open, err := s.store.ActiveSession(ctx, projectPath, scope)
	if err != nil && !belay.IsCode(err, belay.CodeSessionNotFound) {
		return nil, err
	}
	list, _, _, err := s.store.ListSessions(ctx, store.SessionQuery{Scope: scope, ProjectPath: projectPath, Limit: 1})
	if err != nil {
		return nil, err
	}
	switch {
	case len(list) == 0 && scope.OwnOrAdmin:
		return nil, belay.Errorf(belay.CodeSessionNotFound, "no session of yours (or an admin's) in %s", projectPath).With("projectPath", projectPath)
	case len(list) == 0:
		return nil, belay.Errorf(belay.CodeSessionNotFound, "no session in %s", projectPath).With("projectPath", projectPath)
	case open != nil && (list[0].Status.Open() || list[0].Status == belay.SessionAbandoned || !list[0].UpdatedAt.After(open.UpdatedAt)):
		return open, nil
	}
	return list[0], nil
}
