package core

import (
	"context"
	"path/filepath"
	"slices"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/workspace"
)

// Every permission core grants or refuses is decided in this file.
//
// A session belongs to its owner. The owner and admins read, write and
// decide in it; the owner (or an admin) may grant other users read, write or
// decide. A HITL request's approvers may decide it and read that request,
// nothing more. A token's scopes and projects narrow all of this further. A
// caller who may not read a thing is told it does not exist.

// caller is the identity of one call.
type caller struct{ belay.Actor }

// authorize returns the caller of ctx, refusing a context without identity
// (UNAUTHENTICATED) and a token without scope need (UNAUTHORIZED). Every
// exported method of Service calls it first.
func authorize(ctx context.Context, need belay.Scope) (caller, error) {
	a, ok := belay.ActorFrom(ctx)
	if !ok || a.UserID == "" {
		return caller{}, belay.Errorf(belay.CodeUnauthenticated, "a valid API token is required")
	}
	c := caller{a}
	if err := c.also(need); err != nil {
		return caller{}, err
	}
	return c, nil
}

// also refuses a caller whose token lacks scope need for part of a call
// (UNAUTHORIZED): the answers a checkpoint carries need decide.
func (c caller) also(need belay.Scope) error {
	if !c.Has(need) {
		return belay.Errorf(belay.CodeUnauthorized, "this token may not %s (its scopes: %v)", scopeVerb[need], c.Scopes).
			With("scope", need)
	}
	return nil
}

var scopeVerb = map[belay.Scope]string{
	belay.ScopeRead:   "read",
	belay.ScopeWrite:  "write",
	belay.ScopeDecide: "decide",
	belay.ScopeAdmin:  "administer belay",
}

// admin refuses a caller who is not an admin (with an admin token), and an
// admin's token limited to projects: what only admins may do (tokens,
// webhooks, retention, garbage, the index, imports) concerns every project.
func (c caller) admin(what string) error {
	if !c.Admin {
		return belay.Errorf(belay.CodeUnauthorized, "only an admin may %s", what)
	}
	if len(c.Projects) > 0 {
		return belay.Errorf(belay.CodeUnauthorized, "a token limited to projects may not %s: use an admin token without project limits", what)
	}
	return nil
}

// bounds refuses a token in that would allow a scope the caller's token
// does not: a token never makes one with more rights than its own.
func (c caller) bounds(in belay.CreateTokenInput) error {
	made := belay.Actor{Scopes: in.Scopes}
	for _, sc := range belay.AllScopes[:3] {
		if made.Has(sc) && !c.Has(sc) {
			return belay.Errorf(belay.CodeUnauthorized, "this token may not create a token that may %s (its scopes: %v); name fewer scopes with --scope", scopeVerb[sc], c.Scopes).
				With("scope", sc)
		}
	}
	return nil
}

// scope is what the caller may read, for store queries and event filters.
func (c caller) scope() store.Scope {
	return store.Scope{All: c.Admin, User: c.UserID, Projects: c.Projects}
}

// own is the scope of the sessions a project path stands for when no
// session is named: of those the caller may read, its own and those of admins
// (see store.Scope.OwnOrAdmin). A session of another user who is not an admin,
// even one the caller may write, never receives its saves by project path:
// one could start a session in someone else's project to read what they save.
func (c caller) own() store.Scope {
	sc := c.scope()
	sc.OwnOrAdmin = true
	return sc
}

// rights is what a caller may do in one session. roleDecides says that its
// role there may decide, so that a refusal can blame the token's scopes.
type rights struct {
	read, write, decide, own bool
	roleDecides              bool
}

// rightsIn works out the caller's rights in sess from its role there (owner,
// admin, grantee) and its token's scopes.
func rightsIn(ctx context.Context, r store.Reader, c caller, sess *belay.Session) (rights, error) {
	if !c.InProjects(sess.ProjectPath) {
		return rights{}, nil
	}
	var role rights
	switch {
	case c.Admin || c.UserID == sess.Owner:
		role = rights{read: true, write: true, decide: true, own: true}
	default:
		grants, err := r.SessionGrants(ctx, sess.ID)
		if err != nil {
			return rights{}, err
		}
		for _, g := range grants {
			if g.User == c.UserID {
				role = rights{read: true, write: g.Role == belay.RoleWrite, decide: g.Role == belay.RoleDecide}
			}
		}
	}
	return rights{
		read:   role.read && c.Has(belay.ScopeRead),
		write:  role.write && c.Has(belay.ScopeWrite),
		decide: role.decide && c.Has(belay.ScopeDecide),
		own:    role.own && c.Has(belay.ScopeWrite),

		roleDecides: role.decide,
	}, nil
}

// notFound is the answer for a session the caller may not read: the same as
// for one that does not exist.
func sessionNotFound(id string) error {
	return belay.Errorf(belay.CodeSessionNotFound, "session %s not found", id).With("id", id)
}

func checkpointNotFound(id string) error {
	return belay.Errorf(belay.CodeCheckpointNotFound, "checkpoint %s not found", id).With("id", id)
}

// readSession returns session id when the caller may read it.
func readSession(ctx context.Context, r store.Reader, c caller, id string) (*belay.Session, rights, error) {
	return readSessionWith(ctx, r, c, id, r.GetSession)
}

// readSessionWith is readSession reading the session with get.
func readSessionWith(ctx context.Context, r store.Reader, c caller, id string,
	get func(context.Context, string) (*belay.Session, error)) (*belay.Session, rights, error) {
	sess, err := get(ctx, id)
	if err != nil {
		return nil, rights{}, err
	}
	rt, err := rightsIn(ctx, r, c, sess)
	if err != nil {
		return nil, rights{}, err
	}
	if !rt.read {
		return nil, rights{}, sessionNotFound(id)
	}
	return sess, rt, nil
}

// writeSession returns session id when the caller may write to it.
func writeSession(ctx context.Context, r store.Reader, c caller, id string) (*belay.Session, error) {
	return writableSession(ctx, r, c, id, r.GetSession)
}

// writableSession is writeSession reading the session with get.
func writableSession(ctx context.Context, r store.Reader, c caller, id string,
	get func(context.Context, string) (*belay.Session, error)) (*belay.Session, error) {
	sess, rt, err := readSessionWith(ctx, r, c, id, get)
	if err != nil {
		return nil, err
	}
	return sess, rt.mayWrite(c, sess)
}

func (rt rights) mayWrite(c caller, sess *belay.Session) error {
	if !rt.write {
		return belay.Errorf(belay.CodeUnauthorized, "%s may not write to session %s: only its owner, an admin or a user it was granted to with role write may",
			c.UserID, sess.ID).With("sessionId", sess.ID)
	}
	return nil
}

// mayOwn refuses what only the session's owner or an admin may do.
func (rt rights) mayOwn(c caller, sess *belay.Session, what string) error {
	if !rt.own {
		return belay.Errorf(belay.CodeUnauthorized, "only the session's owner or an admin may %s", what).
			With("sessionId", sess.ID).With("user", c.UserID)
	}
	return nil
}

// readCheckpoint returns checkpoint id and its session when the caller may
// read it: in a session it may read, or as an approver of its request.
func readCheckpoint(ctx context.Context, r store.Reader, c caller, id string) (*belay.Checkpoint, *belay.Session, rights, error) {
	cp, err := r.GetCheckpoint(ctx, id)
	if err != nil {
		return nil, nil, rights{}, err
	}
	sess, err := r.GetSession(ctx, cp.SessionID)
	if err != nil {
		return nil, nil, rights{}, err
	}
	rt, err := rightsIn(ctx, r, c, sess)
	if err != nil {
		return nil, nil, rights{}, err
	}
	if !rt.read && !isApprover(c, cp) {
		return nil, nil, rights{}, checkpointNotFound(id)
	}
	return cp, sess, rt, nil
}

// shownSession is sess as an answer about one of its requests shows it to a
// caller with rights rt there: all of it to one who may read the session; to
// an approver who may not, what its pending list says (id, title, status,
// phase), none of its state, owner or checkpoints.
func shownSession(sess *belay.Session, rt rights) *belay.Session {
	if rt.read {
		return sess
	}
	return &belay.Session{ID: sess.ID, Title: sess.Title, Status: sess.Status, Phase: sess.Phase}
}

// isApprover reports whether the caller is named among cp's approvers and its
// token may decide.
func isApprover(c caller, cp *belay.Checkpoint) bool {
	return cp.HITL != nil && slices.Contains(cp.HITL.Approvers, c.UserID) && c.Has(belay.ScopeDecide) &&
		c.InProjects(cp.ProjectPath)
}

// mayDecide says whether the caller may decide cp: one who may decide in the
// session or a listed approver, and never the requester when self-approval is
// forbidden. One whose role may decide is told that its token may not.
func mayDecide(c caller, rt rights, cp *belay.Checkpoint) error {
	if cp.HITL.ForbidSelfApproval && c.UserID == cp.CreatedBy {
		return belay.Errorf(belay.CodeUnauthorized, "%s requested this decision and may not decide it (self-approval is forbidden)", c.UserID).
			With("checkpointId", cp.ID)
	}
	if rt.decide || isApprover(c, cp) {
		return nil
	}
	listed := slices.Contains(cp.HITL.Approvers, c.UserID) && c.InProjects(cp.ProjectPath)
	if (rt.roleDecides || listed) && !c.Has(belay.ScopeDecide) {
		return c.also(belay.ScopeDecide)
	}
	return belay.Errorf(belay.CodeUnauthorized, "%s may not decide this request: only the session owner, an admin, a user granted decide or a listed approver may", c.UserID).
		With("checkpointId", cp.ID)
}

// checkApprovers refuses approvers that are not users of this belay: a
// request may name only people who exist, and naming one grants nothing else.
func checkApprovers(ctx context.Context, r store.Reader, approvers []string) error {
	for _, name := range approvers {
		if _, err := r.GetUser(ctx, name); belay.IsCode(err, belay.CodeNotFound) {
			return belay.Invalid("hitl.approvers", "approver %q is not a user", name)
		} else if err != nil {
			return err
		}
	}
	return nil
}

// mayUseWorkspace says whether the caller may snapshot, restore or diff the
// workspace at root: admins anywhere, others only under the configured roots.
func (s *Service) mayUseWorkspace(c caller, root string) error {
	// A token limited to projects is checked by the directory the path
	// names, symlinks resolved, as the workspace is opened: a link inside
	// its project leads nowhere else. The token's projects are taken as
	// they were resolved when it was created (limitPaths): its holder who
	// swaps a link in for its project moves nothing.
	if len(c.Projects) > 0 && !workspace.InsideFixedRoots(root, c.Projects) {
		return belay.Errorf(belay.CodeUnauthorized, "%s leads outside the projects this token is limited to", root).
			With("projectPath", root).With("cause", causeTokenLimit)
	}
	if c.Admin || workspace.InsideRoots(root, s.roots) {
		return nil
	}
	return belay.Errorf(belay.CodeUnauthorized, "%s is outside the workspace roots this server allows; only an admin may use it", root).
		With("projectPath", root).With("cause", causeOutsideRoots)
}

// The causes, in an UNAUTHORIZED error's details, of a refused project path:
// a token limited to other projects, or a path outside the workspace roots
// for a user who is not an admin.
const (
	causeTokenLimit   = "TOKEN_LIMIT"
	causeOutsideRoots = "OUTSIDE_ROOTS"
)

// projectDir checks that the project path p names a directory on this
// machine, when the caller may look at it: an admin anywhere, others under
// the workspace roots. To others, a path outside them is a name and nothing
// more: telling whether it exists, or is a file, would let them probe the
// server's files (a snapshot of it is refused by mayUseWorkspace).
func (s *Service) projectDir(c caller, field, p string) error {
	if p == "" || !c.Admin && !workspace.InsideRoots(p, s.roots) {
		return nil
	}
	return belay.ProjectDir(field, p)
}

// projectPath returns the project path p as belay keeps it: clean and, where
// the caller may look at this machine's files (projectDir's rule), with every
// symlink resolved, so one directory reached by two paths (/tmp and
// /private/tmp; a shell's $PWD and the working directory a process reports)
// is one project on every surface. To others a path outside the roots is a
// name and kept as given: resolving it would tell where its links lead. So is
// a path that cannot be resolved (a dangling link on the way).
func (s *Service) projectPath(c caller, p string) string {
	if p == "" {
		return ""
	}
	p = filepath.Clean(p)
	if !filepath.IsAbs(p) {
		return p
	}
	real, err := workspace.RealPath(p)
	if err != nil || !c.Admin && !workspace.RealInsideRoots(real, s.roots) {
		return p
	}
	return real
}

// confined holds the workspace operations of a caller who is not an admin to
// the server's workspace roots, and of a token limited to projects to those
// (as resolved when it was created), each time an operation resolves the
// workspace's path, so a symlink swapped in after mayUseWorkspace cannot lead
// outside them.
func (s *Service) confined(ctx context.Context, c caller) context.Context {
	if len(c.Projects) > 0 {
		ctx = workspace.ConfineFixed(ctx, c.Projects)
	}
	if c.Admin {
		return ctx
	}
	return workspace.Confine(ctx, s.roots)
}

// mayCreateIn refuses a new session outside the token's projects.
func (c caller) mayCreateIn(projectPath string) error {
	if !c.InProjects(projectPath) {
		return belay.Errorf(belay.CodeUnauthorized, "this token is limited to %v and may not work on %q", c.Projects, projectPath).
			With("projectPath", projectPath).With("cause", causeTokenLimit)
	}
	return nil
}

// getSessionCheckpoint returns checkpoint id when the caller may read its
// session: an approver's right to see one request does not reach its
// workspace.
func (s *Service) getSessionCheckpoint(ctx context.Context, c caller, id string) (*belay.Checkpoint, error) {
	if err := belay.ValidateID("id", id); err != nil {
		return nil, err
	}
	cp, _, rt, err := readCheckpoint(ctx, s.store, c, id)
	if err != nil {
		return nil, err
	}
	if !rt.read {
		return nil, checkpointNotFound(id)
	}
	return s.settle(ctx, cp)
}

// actor is the identity of a call that authorize has already let in.
func actor(ctx context.Context) belay.Actor {
	a, _ := belay.ActorFrom(ctx)
	return a
}

// authorizeAdmin lets in only an admin whose token has scope need too
// (write for what changes belay), for what only admins may do.
func authorizeAdmin(ctx context.Context, need belay.Scope, what string) (caller, error) {
	c, err := authorize(ctx, need)
	if err != nil {
		return caller{}, err
	}
	return c, c.admin(what)
}
