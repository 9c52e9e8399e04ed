package core_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testclock"
	"github.com/belayhq/belay/internal/testutil"
)

func asUser(user string) context.Context {
	return belay.WithActor(context.Background(), belay.Actor{UserID: user})
}

// shortestUnique returns the shortest prefix (at least belay.MinIDPrefix
// characters) of id that none of others begins with.
func shortestUnique(id string, others ...string) string {
	for n := belay.MinIDPrefix; n < len(id); n++ {
		unique := true
		for _, o := range others {
			if o != id && strings.HasPrefix(o, id[:n]) {
				unique = false
			}
		}
		if unique {
			return id[:n]
		}
	}
	return id
}

func TestResolveSession(t *testing.T) {
	svc := newService(t, nil)
	alice := asUser("alice")
	var ids []string
	for range 3 {
		sess, err := svc.CreateSession(alice, belay.CreateSessionInput{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sess.ID)
	}
	for _, id := range ids {
		for _, ref := range []string{id, strings.ToUpper(id), shortestUnique(id, ids...), " " + shortestUnique(id, ids...) + " "} {
			sess, err := svc.ResolveSession(alice, ref)
			if err != nil || sess.ID != id {
				t.Errorf("ResolveSession(%q) = %v, %v; want %s", ref, sess, err, id)
			}
		}
	}

	// Sessions made together share their first characters: the time.
	common := ids[0][:belay.MinIDPrefix]
	_, err := svc.ResolveSession(alice, common)
	testutil.WantCode(t, err, belay.CodeValidation, "ref")
	if !strings.Contains(err.Error(), "is ambiguous: matches ") || !strings.Contains(err.Error(), ids[0]) || !strings.Contains(err.Error(), ids[2]) {
		t.Errorf("ambiguous prefix: %v", err)
	}

	for _, ref := range []string{"", "abc", "zzzz", "01a2-not-hex!", strings.Repeat("a", 37)} {
		_, err := svc.ResolveSession(alice, ref)
		testutil.WantCode(t, err, belay.CodeValidation, "ref")
		// The message says what is wrong with it: too short, or no id.
		if short := len(ref) < belay.MinIDPrefix; short != strings.Contains(err.Error(), "at least") || !short && !strings.Contains(err.Error(), "hex digits") {
			t.Errorf("ResolveSession(%q): %v", ref, err)
		}
	}
	_, err = svc.ResolveSession(alice, "ffffffff")
	testutil.WantCode(t, err, belay.CodeSessionNotFound, "")

	// Another user finds none of alice's sessions, by prefix or by id.
	for _, ref := range []string{shortestUnique(ids[0], ids...), ids[0]} {
		_, err := svc.ResolveSession(asUser("mallory"), ref)
		testutil.WantCode(t, err, belay.CodeSessionNotFound, "")
	}
	_, err = svc.ResolveSession(context.Background(), ids[0])
	testutil.WantCode(t, err, belay.CodeUnauthenticated, "")
}

func TestUpdateSessionTitle(t *testing.T) {
	svc := newService(t, nil)
	alice := asUser("alice")
	sess, err := svc.CreateSession(alice, belay.CreateSessionInput{Title: "first"})
	if err != nil {
		t.Fatal(err)
	}
	title := "refactor billing"
	got, err := svc.UpdateSession(alice, sess.ID, belay.UpdateSessionInput{Title: &title})
	if err != nil || got.Title != title || got.UpdatedAt.Before(sess.UpdatedAt) {
		t.Fatalf("UpdateSession = %+v, %v", got, err)
	}
	if stored := mustSession(t, svc, sess.ID); stored.Title != title || stored.Status != belay.SessionRunning {
		t.Errorf("stored session = %+v", stored)
	}
	evs := events(t, svc)
	last := evs[len(evs)-1]
	if last.Type != belay.EventSessionUpdated || last.SessionID != sess.ID || string(last.Data) != `{"title":"refactor billing"}` {
		t.Errorf("last event = %+v", last)
	}
	// The same title again changes nothing and records nothing.
	if _, err := svc.UpdateSession(alice, sess.ID, belay.UpdateSessionInput{Title: &title}); err != nil {
		t.Fatal(err)
	}
	if n := len(events(t, svc)); n != len(evs) {
		t.Errorf("an unchanged title appended %d events", n-len(evs))
	}

	if _, err := createToken(localCtx, svc, "bob", false); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.GrantSession(alice, belay.GrantInput{SessionID: sess.ID, User: "bob", Role: belay.RoleRead}); err != nil {
		t.Fatal(err)
	}
	other := "mine now"
	_, err = svc.UpdateSession(asUser("bob"), sess.ID, belay.UpdateSessionInput{Title: &other})
	testutil.WantCode(t, err, belay.CodeUnauthorized, "")
	_, err = svc.UpdateSession(asUser("mallory"), sess.ID, belay.UpdateSessionInput{Title: &other})
	testutil.WantCode(t, err, belay.CodeSessionNotFound, "")
	_, err = svc.UpdateSession(alice, sess.ID, belay.UpdateSessionInput{})
	testutil.WantCode(t, err, belay.CodeValidation, "title")
	long := strings.Repeat("x", belay.MaxSummary+1)
	_, err = svc.UpdateSession(alice, sess.ID, belay.UpdateSessionInput{Title: &long})
	testutil.WantCode(t, err, belay.CodeValidation, "title")
	_, err = svc.UpdateSession(alice, "nope", belay.UpdateSessionInput{Title: &other})
	testutil.WantCode(t, err, belay.CodeValidation, "id")
	if s := mustSession(t, svc, sess.ID); s.Title != title {
		t.Errorf("refused updates changed the title to %q", s.Title)
	}
}

// TestCheckpointSaysItStartedASession: a checkpoint saved to a project whose
// session ended starts a new session, and says which one it follows.
func TestCheckpointSaysItStartedASession(t *testing.T) {
	svc := newService(t, nil)
	project := t.TempDir()
	first := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "one"})
	if first.StartedSession != nil {
		t.Errorf("first checkpoint of a project: StartedSession = %+v; no session came before", first.StartedSession)
	}
	if next := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "two"}); next.StartedSession != nil {
		t.Errorf("checkpoint in the open session: StartedSession = %+v", next.StartedSession)
	}

	ask := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "ok?", HITL: &belay.HITLInput{Required: true}})
	if _, err := svc.Decide(localCtx, belay.DecideInput{CheckpointID: ask.ID, Action: belay.ActionReject, SelectedOption: "reject"}); err != nil {
		t.Fatal(err)
	}
	after := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "after the failure"})
	want := belay.SessionStart{PreviousID: first.SessionID, PreviousStatus: belay.SessionFailed}
	if after.StartedSession == nil || *after.StartedSession != want || after.SessionID == first.SessionID || after.Seq != 1 {
		t.Errorf("checkpoint after the session failed: #%d in %s, StartedSession %+v; want #1 in a new session, %+v",
			after.Seq, after.SessionID, after.StartedSession, want)
	}
	if stored, err := svc.GetCheckpoint(localCtx, after.ID); err != nil || stored.StartedSession != nil {
		t.Errorf("stored checkpoint: %+v, %v; StartedSession is not stored", stored, err)
	}
	// Naming the session never starts one.
	named := mustCreate(t, svc, belay.CreateCheckpointInput{SessionID: after.SessionID, Summary: "named"})
	if named.StartedSession != nil {
		t.Errorf("checkpoint in a named session: StartedSession = %+v", named.StartedSession)
	}
}

func TestSnapshotSaveSaysItStartedASession(t *testing.T) {
	e := newWSEnv(t)
	first := e.save(t, "one")
	ask, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: first.SessionID, Summary: "ok?",
		HITL: &belay.HITLInput{Required: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Decide(alice, belay.DecideInput{CheckpointID: ask.ID, Action: belay.ActionReject, SelectedOption: "reject"}); err != nil {
		t.Fatal(err)
	}
	after := e.save(t, "after the failure")
	want := belay.SessionStart{PreviousID: first.SessionID, PreviousStatus: belay.SessionFailed}
	if after.StartedSession == nil || *after.StartedSession != want || after.Seq != 1 {
		t.Errorf("snapshot after the session failed: #%d, StartedSession %+v; want #1, %+v", after.Seq, after.StartedSession, want)
	}
}

// A checkpoint number names a checkpoint of the project's current session:
// the newest open one, unless a session made after it ended since. A session
// that just failed on a rejection stays current until another one moves.
func TestCurrentSessionAfterASessionEnds(t *testing.T) {
	svc := newService(t, testclock.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), time.Second))
	project := t.TempDir()
	current := func(want *belay.Session, why string) {
		t.Helper()
		sess, err := svc.CurrentSession(localCtx, project)
		if err != nil || sess.ID != want.ID {
			t.Fatalf("%s: CurrentSession = %v, %v; want %s", why, sess, err, want.ID)
		}
		cp, err := svc.ResolveCheckpoint(localCtx, belay.CheckpointRef{ProjectPath: project, Ref: "1"})
		if err != nil || cp.SessionID != want.ID {
			t.Fatalf("%s: checkpoint 1 = %v, %v; want session %s's", why, cp, err, want.ID)
		}
	}
	older, err := svc.CreateSession(localCtx, belay.CreateSessionInput{ProjectPath: project})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, svc, belay.CreateCheckpointInput{SessionID: older.ID, Summary: "step"})
	newer, err := svc.CreateSession(localCtx, belay.CreateSessionInput{ProjectPath: project})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, svc, belay.CreateCheckpointInput{SessionID: newer.ID, Summary: "step"})
	current(newer, "both open")
	mustCreate(t, svc, belay.CreateCheckpointInput{SessionID: older.ID, Summary: "step"})
	current(newer, "both open, the older saved last")

	if _, err := svc.EndSession(localCtx, belay.EndSessionInput{SessionID: newer.ID, Status: belay.SessionFailed}); err != nil {
		t.Fatal(err)
	}
	current(newer, "the newer failed")
	mustCreate(t, svc, belay.CreateCheckpointInput{SessionID: older.ID, Summary: "step"})
	current(older, "the older saved after the newer failed")

	// An abandoned session is closed for good: it never becomes current
	// over an open one.
	newest, err := svc.CreateSession(localCtx, belay.CreateSessionInput{ProjectPath: project})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, svc, belay.CreateCheckpointInput{SessionID: newest.ID, Summary: "step"})
	if _, err := svc.EndSession(localCtx, belay.EndSessionInput{SessionID: newest.ID, Status: belay.SessionAbandoned}); err != nil {
		t.Fatal(err)
	}
	current(older, "the newest abandoned")
}

// TestANameWinsOverAnIDPrefix: a checkpoint named like an id prefix (its
// ids' own first characters, say) is found by its name in its session; an
// id prefix still finds checkpoints no name matches.
func TestANameWinsOverAnIDPrefix(t *testing.T) {
	svc := newService(t, nil)
	project := t.TempDir()
	first := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "first"})
	name := first.ID[:belay.MinIDPrefix]
	named := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "named", Name: name})
	cp, err := svc.ResolveCheckpoint(localCtx, belay.CheckpointRef{ProjectPath: project, Ref: name})
	if err != nil || cp.ID != named.ID {
		t.Errorf("ResolveCheckpoint(%q) = %v, %v; want the checkpoint named so", name, cp, err)
	}
	// Outside the session, the same characters are an id prefix.
	_, err = svc.ResolveCheckpoint(localCtx, belay.CheckpointRef{Ref: name})
	testutil.WantCode(t, err, belay.CodeValidation, "ref")
	prefix := shortestUnique(first.ID, first.ID, named.ID)
	if cp, err := svc.ResolveCheckpoint(localCtx, belay.CheckpointRef{ProjectPath: project, Ref: prefix}); err != nil || cp.ID != first.ID {
		t.Errorf("ResolveCheckpoint(%q) = %v, %v; want the checkpoint with that id", prefix, cp, err)
	}
}
