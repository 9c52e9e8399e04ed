package core_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/store"
)

// link makes a symlink named name in a new directory, leading to target,
// and returns its path.
func link(tb testing.TB, target string) string {
	tb.Helper()
	l := filepath.Join(tb.TempDir(), "link")
	if err := os.Symlink(target, l); err != nil {
		tb.Fatal(err)
	}
	return l
}

// TestOneDirectoryByTwoPathsIsOneProject: a project reached through a
// symlink (macOS's /tmp, a shell's $PWD beside the working directory a
// process reports) is the directory it leads to, on every call that takes a
// project path.
func TestOneDirectoryByTwoPathsIsOneProject(t *testing.T) {
	ctx := localCtx
	svc := newService(t, nil)
	real := t.TempDir()
	via := link(t, real)

	first := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: via, Summary: "through the link"})
	second := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: real, Summary: "by its own path"})
	if second.SessionID != first.SessionID {
		t.Fatalf("saves by the link and by the directory went to sessions %s and %s; want one", first.SessionID, second.SessionID)
	}
	if first.ProjectPath != real {
		t.Errorf("projectPath = %q, want the directory the link leads to, %q", first.ProjectPath, real)
	}
	for name, p := range map[string]string{"link": via, "directory": real} {
		if sess, err := svc.ActiveSession(ctx, p); err != nil || sess.ID != first.SessionID {
			t.Errorf("ActiveSession by the %s = %+v, %v", name, sess, err)
		}
		if sess, err := svc.CurrentSession(ctx, p); err != nil || sess.ID != first.SessionID {
			t.Errorf("CurrentSession by the %s = %+v, %v", name, sess, err)
		}
		if list, err := svc.ListSessions(ctx, belay.ListSessionsInput{ProjectPath: p}); err != nil || list.TotalCount != 1 {
			t.Errorf("ListSessions by the %s = %+v, %v; want the one session", name, list, err)
		}
		if list, err := svc.ListCheckpoints(ctx, belay.ListCheckpointsInput{ProjectPath: p}); err != nil || list.TotalCount != 2 {
			t.Errorf("ListCheckpoints by the %s = %+v, %v; want both checkpoints", name, list, err)
		}
		if res, err := svc.SearchCheckpoints(ctx, belay.SearchInput{Query: "path", ProjectPath: p}); err != nil || len(res.Results) == 0 {
			t.Errorf("SearchCheckpoints by the %s = %+v, %v; want hits", name, res, err)
		}
	}
	sess, err := svc.CreateSession(ctx, belay.CreateSessionInput{ProjectPath: via})
	if err != nil {
		t.Fatal(err)
	}
	if sess.ProjectPath != real {
		t.Errorf("a session created by the link has projectPath %q, want %q", sess.ProjectPath, real)
	}
	if p, err := svc.SetRetention(ctx, belay.RetentionPolicy{ProjectPath: via, KeepLast: 5}); err != nil || p.ProjectPath != real || p.KeepLast != 5 {
		t.Errorf("SetRetention by the link = %+v, %v; want the policy as stored, of %s", p, err, real)
	}
	if ps, err := svc.ListRetention(ctx); err != nil || len(ps) != 1 || ps[0].ProjectPath != real {
		t.Errorf("retention policies = %+v, %v; want one for %s", ps, err, real)
	}
}

// TestAPathIsResolvedOnlyWhereTheCallerMayLook: for a user who is not an
// admin, belay resolves links only under the workspace roots, and only to
// a directory there; elsewhere a project path is a name, kept as given, so
// the stored path never tells where a link outside the roots leads.
func TestAPathIsResolvedOnlyWhereTheCallerMayLook(t *testing.T) {
	e := newWSEnv(t)
	inside := filepath.Join(filepath.Dir(e.project), "alias")
	if err := os.Symlink(e.project, inside); err != nil {
		t.Fatal(err)
	}
	if cp := e.save(t, "by the alias", func(in *belay.CreateCheckpointInput) { in.ProjectPath, in.Snapshot = inside, false }); cp.ProjectPath != e.project {
		t.Errorf("a link under the roots to a project there: projectPath = %q, want %q", cp.ProjectPath, e.project)
	}
	// The test's other directories share the roots' parent.
	outside, err := os.MkdirTemp("", "belay-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	elsewhere := filepath.Join(outside, "link")
	if err := os.Symlink(outside, elsewhere); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]string{
		"a link under the roots leading out": filepath.Join(filepath.Dir(e.project), "out"),
		"a link outside the roots":           elsewhere,
	} {
		if name == "a link under the roots leading out" {
			if err := os.Symlink(outside, p); err != nil {
				t.Fatal(err)
			}
		}
		cp, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{ProjectPath: p, Summary: "state only"})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cp.ProjectPath != p {
			t.Errorf("%s: projectPath = %q, want it as given, %q", name, cp.ProjectPath, p)
		}
	}
}

// TestATokenLimitedToALinkWorksInItsDirectory: a token limited to a project
// path that is a link may work on the directory it leads to, by either path,
// under the workspace roots.
func TestATokenLimitedToALinkWorksInItsDirectory(t *testing.T) {
	e := newWSEnv(t)
	svc, real := e.svc, e.project
	via := link(t, real)
	tk, err := svc.CreateToken(localCtx, belay.CreateTokenInput{User: "agent", Projects: []string{via}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := svc.Authenticate(context.Background(), tk.Secret)
	if err != nil {
		t.Fatal(err)
	}
	ctx := belay.WithActor(context.Background(), a)
	for _, p := range []string{via, real} {
		if _, err := svc.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: p, Summary: "limited"}); err != nil {
			t.Errorf("save by %s: %v", p, err)
		}
	}
	list, err := svc.ListSessions(ctx, belay.ListSessionsInput{})
	if err != nil || list.TotalCount != 1 {
		t.Errorf("the token's sessions = %+v, %v; want its one session", list, err)
	}
	if _, err := svc.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: t.TempDir(), Summary: "elsewhere"}); !belay.IsCode(err, belay.CodeUnauthorized) {
		t.Errorf("a save outside the token's project: err = %v, want UNAUTHORIZED", err)
	}
}

// limitedAgent is a token of user's limited to a new project under e's
// workspace roots, acting as ctx; swap replaces that project's directory by
// a link to e.project, as its holder could.
type limitedAgent struct {
	ctx     context.Context
	project string
}

func newLimitedAgent(t *testing.T, e *wsEnv, user string) *limitedAgent {
	t.Helper()
	l := &limitedAgent{project: filepath.Join(filepath.Dir(e.project), "agent-proj")}
	if err := os.Mkdir(l.project, 0o700); err != nil {
		t.Fatal(err)
	}
	tk, err := e.svc.CreateToken(localCtx, belay.CreateTokenInput{User: user, Projects: []string{l.project},
		Scopes: []belay.Scope{belay.ScopeRead, belay.ScopeWrite}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.svc.Authenticate(context.Background(), tk.Secret)
	if err != nil {
		t.Fatal(err)
	}
	l.ctx = belay.WithActor(context.Background(), a)
	return l
}

func (l *limitedAgent) swap(t *testing.T, e *wsEnv) {
	t.Helper()
	if err := os.Remove(l.project); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.project, l.project); err != nil {
		t.Fatal(err)
	}
}

// TestATokenLimitFollowsNoLinkSwappedInLater: a token's limit is resolved
// when it is created; its holder who replaces the limited project by a link
// to another project reaches nothing there.
func TestATokenLimitFollowsNoLinkSwappedInLater(t *testing.T) {
	e := newWSEnv(t)
	private := e.save(t, "alice's own", func(in *belay.CreateCheckpointInput) { in.Snapshot = false })
	agent := newLimitedAgent(t, e, "alice")
	agent.swap(t, e)
	if _, err := e.svc.GetCheckpoint(agent.ctx, private.ID); !belay.IsCode(err, belay.CodeCheckpointNotFound) {
		t.Errorf("the limited token reads a checkpoint of the project its link leads to: err = %v", err)
	}
	for _, p := range []string{agent.project, e.project} {
		if _, err := e.svc.CreateCheckpoint(agent.ctx, belay.CreateCheckpointInput{ProjectPath: p, Summary: "in"}); !belay.IsCode(err, belay.CodeUnauthorized) {
			t.Errorf("a save by %s through the swapped-in link: err = %v, want UNAUTHORIZED", p, err)
		}
	}
}

// TestATokensWorkspaceFollowsNoLinkSwappedInLater: a session a limited token
// began in its project, whose directory its holder then replaced by a link
// to another project, snapshots nothing there.
func TestATokensWorkspaceFollowsNoLinkSwappedInLater(t *testing.T) {
	e := newWSEnv(t)
	agent := newLimitedAgent(t, e, "bob")
	first, err := e.svc.CreateCheckpoint(agent.ctx, belay.CreateCheckpointInput{ProjectPath: agent.project, Summary: "mine", Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	agent.swap(t, e)
	_, err = e.svc.CreateCheckpoint(agent.ctx, belay.CreateCheckpointInput{SessionID: first.SessionID, Summary: "alice's files", Snapshot: true})
	if !belay.IsCode(err, belay.CodeUnauthorized) {
		t.Errorf("a snapshot of the project a link swapped in leads to: err = %v, want UNAUTHORIZED", err)
	}
}

// TestALegacyPolicyUnderALinkIsRemovable: a retention policy stored before
// belay resolved links, under a link's path, is removed by naming that path.
func TestALegacyPolicyUnderALinkIsRemovable(t *testing.T) {
	svc := newService(t, nil)
	via := link(t, t.TempDir())
	err := core.StoreOf(svc).Update(localCtx, func(tx store.Tx) error {
		return tx.PutRetention(localCtx, belay.RetentionPolicy{ProjectPath: via, KeepLast: 3})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetRetention(localCtx, belay.RetentionPolicy{ProjectPath: via}); err != nil {
		t.Fatal(err)
	}
	if ps, err := svc.ListRetention(localCtx); err != nil || len(ps) != 0 {
		t.Errorf("policies after removing the link's = %+v, %v; want none", ps, err)
	}
}

// TestNoOneLearnsOfSnapshotsOutsideTheRoots: a user who is not an admin,
// with a session of a project outside the workspace roots (a name to that
// user), learns nothing of the snapshots an admin keeps there: not their
// size from the disk usage report, and deleting the session prunes nothing.
func TestNoOneLearnsOfSnapshotsOutsideTheRoots(t *testing.T) {
	e := newWSEnv(t)
	outside, err := os.MkdirTemp("", "belay-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	if err := os.WriteFile(filepath.Join(outside, "a.txt"), []byte("admin's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	admins, err := e.svc.CreateCheckpoint(admin, belay.CreateCheckpointInput{ProjectPath: outside, Summary: "admin's", Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	mine, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{ProjectPath: outside, Summary: "a name to alice"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := e.svc.DiskUsage(alice)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range rep.Workspaces {
		if w.ProjectPath == outside && (w.Bytes != 0 || w.Error == "") {
			t.Errorf("alice's usage of %s = %+v; want no size, and why", outside, w)
		}
	}
	res, err := e.svc.DeleteSession(alice, mine.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if res.SnapshotsPruned || res.FreedBytes != 0 {
		t.Errorf("alice's delete = %+v; want nothing pruned there", res)
	}
	if _, err := e.svc.DiffCheckpoint(admin, belay.DiffInput{CheckpointID: admins.ID, To: "current"}); err != nil {
		t.Errorf("the admin's snapshot after alice's delete: %v", err)
	}
}

// TestValidateLooksIntoNoWorkspaceTheCallerMayNotUse: validating a session
// of a project outside the workspace roots tells its owner, who is not an
// admin, nothing of the snapshot repository an admin keeps there.
func TestValidateLooksIntoNoWorkspaceTheCallerMayNotUse(t *testing.T) {
	e := newWSEnv(t)
	outside, err := os.MkdirTemp("", "belay-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	mine, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{ProjectPath: outside, Summary: "a name to alice"})
	if err != nil {
		t.Fatal(err)
	}
	before, err := e.svc.Validate(alice, belay.ValidateInput{SessionID: mine.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.CreateCheckpoint(admin, belay.CreateCheckpointInput{ProjectPath: outside, Summary: "admin's", Snapshot: true}); err != nil {
		t.Fatal(err)
	}
	after, err := e.svc.Validate(alice, belay.ValidateInput{SessionID: mine.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	if after.Workspaces != before.Workspaces || len(after.Problems) != len(before.Problems) {
		t.Errorf("alice's validation before the admin's snapshot %+v, after %+v: want the same", before, after)
	}
}
