package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testclock"
	"github.com/belayhq/belay/internal/testtree"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store/sqlite"
)

// needsNoIdentity are the methods of belay.Service that answer a caller
// without identity, as their doc comments promise.
var needsNoIdentity = map[string]bool{"Health": true}

// serviceMethods lists every method of belay.Service, so a method added to
// the interface is checked here without anyone remembering to.
func serviceMethods() []reflect.Method {
	typ := reflect.TypeFor[belay.Service]()
	out := make([]reflect.Method, typ.NumMethod())
	for i := range out {
		out[i] = typ.Method(i)
	}
	return out
}

// callMethod calls method name of svc with ctx and args and returns the error
// it returns; a panic is returned as an error too.
func callMethod(svc belay.Service, name string, ctx context.Context, args []reflect.Value) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panicked: %v", p)
		}
	}()
	out := reflect.ValueOf(svc).MethodByName(name).Call(append([]reflect.Value{reflect.ValueOf(ctx)}, args...))
	last := out[len(out)-1]
	if last.IsNil() {
		return nil
	}
	return last.Interface().(error)
}

// zeroArgs are zero values for every parameter of m after the context.
func zeroArgs(m reflect.Method) []reflect.Value {
	var args []reflect.Value
	for i := 1; i < m.Type.NumIn(); i++ {
		args = append(args, reflect.Zero(m.Type.In(i)))
	}
	return args
}

func errCode(err error) belay.Code {
	var be *belay.Error
	if errors.As(err, &be) {
		return be.Code
	}
	return ""
}

// TestEveryMethodNeedsAnIdentity calls every method of belay.Service without
// an identity and with zero-value arguments: each must refuse with
// UNAUTHENTICATED before it looks at its arguments, so authorization is the
// first thing every method does.
func TestEveryMethodNeedsAnIdentity(t *testing.T) {
	svc := newService(t, nil)
	anonymous := map[string]context.Context{
		"no actor":         context.Background(),
		"actor without id": belay.WithActor(context.Background(), belay.Actor{Scopes: []belay.Scope{belay.ScopeAdmin}, Admin: true}),
	}
	for _, m := range serviceMethods() {
		t.Run(m.Name, func(t *testing.T) {
			for name, ctx := range anonymous {
				err := callMethod(svc, m.Name, ctx, zeroArgs(m))
				switch {
				case needsNoIdentity[m.Name] && err != nil:
					t.Errorf("%s: %v; it needs no identity", name, err)
				case !needsNoIdentity[m.Name] && errCode(err) != belay.CodeUnauthenticated:
					t.Errorf("%s: error %v, want UNAUTHENTICATED", name, err)
				}
			}
		})
	}
}

// errStop ends a Follow call once it has started.
var errStop = errors.New("stop")

// needOwner marks a call that needs the session owner's rights, which a
// token without scope write does not carry.
const needOwner belay.Scope = "owner"

// authzCall is one call of a belay.Service method on the fixture of
// TestReadOnlyTokenOnlyReads and what it needs: ScopeRead, another scope, or
// needOwner.
type authzCall struct {
	method string
	args   []any
	need   belay.Scope
}

// TestReadOnlyTokenOnlyReads calls every method of belay.Service as the owner
// of a session holding a token with scope read only, with arguments naming
// the owner's own session, checkpoints, users and tokens. Every call that
// writes, decides, administers or acts as the owner is refused (UNAUTHORIZED,
// or not found for what the caller may not read) and changes nothing; every
// read succeeds. A method that needs a scope beyond read also refuses
// zero-value arguments before it validates them.
func TestReadOnlyTokenOnlyReads(t *testing.T) {
	e := newWSEnv(t)
	if err := os.WriteFile(filepath.Join(e.project, "main.go"), []byte("package main\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"alice", "bob"} {
		if _, err := createToken(localCtx, e.svc, user, false); err != nil {
			t.Fatal(err)
		}
	}
	cp := e.save(t, "first")
	sessionID := cp.SessionID
	request, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: sessionID, Summary: "may I?",
		HITL: &belay.HITLInput{Required: true, Approvers: []string{"bob"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.GrantSession(alice, belay.GrantInput{SessionID: sessionID, User: "bob", Role: belay.RoleRead}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.SetPlan(alice, belay.SetPlanInput{SessionID: sessionID, Tasks: []belay.Task{{ID: "a", Title: "A"}}}); err != nil {
		t.Fatal(err)
	}
	other, err := e.svc.CreateToken(localCtx, belay.CreateTokenInput{User: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	hook, err := e.svc.AddWebhook(localCtx, "https://example.com/hook", nil)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := e.svc.CreateToken(localCtx, belay.CreateTokenInput{User: "alice", Scopes: []belay.Scope{belay.ScopeRead}})
	if err != nil {
		t.Fatal(err)
	}
	actor, err := e.svc.Authenticate(localCtx, tk.Secret)
	if err != nil {
		t.Fatal(err)
	}
	readOnly := belay.WithActor(context.Background(), actor)
	stop := func(int64, []belay.Event) error { return errStop }

	calls := []authzCall{
		{"CreateSession", []any{belay.CreateSessionInput{ProjectPath: e.project}}, belay.ScopeWrite},
		{"GetSession", []any{sessionID}, belay.ScopeRead},
		{"ActiveSession", []any{e.project}, belay.ScopeRead},
		{"CurrentSession", []any{e.project}, belay.ScopeRead},
		{"ListSessions", []any{belay.ListSessionsInput{}}, belay.ScopeRead},
		{"GrantSession", []any{belay.GrantInput{SessionID: sessionID, User: "bob", Role: belay.RoleWrite}}, belay.ScopeWrite},
		{"RevokeGrant", []any{sessionID, "bob"}, belay.ScopeWrite},
		{"ListGrants", []any{sessionID}, belay.ScopeRead},
		{"CreateCheckpoint", []any{belay.CreateCheckpointInput{SessionID: sessionID, Summary: "more"}}, belay.ScopeWrite},
		{"CreateCheckpoint", []any{belay.CreateCheckpointInput{ProjectPath: e.project, Summary: "more"}}, belay.ScopeWrite},
		{"GetCheckpoint", []any{cp.ID}, belay.ScopeRead},
		{"GetCheckpointBySeq", []any{sessionID, int64(1)}, belay.ScopeRead},
		{"ResolveCheckpoint", []any{belay.CheckpointRef{Ref: "1", SessionID: sessionID}}, belay.ScopeRead},
		{"ListCheckpoints", []any{belay.ListCheckpointsInput{}}, belay.ScopeRead},
		{"DeleteCheckpoint", []any{cp.ID}, belay.ScopeWrite},
		{"Decide", []any{belay.DecideInput{CheckpointID: request.ID, Action: belay.ActionApprove}}, belay.ScopeDecide},
		{"PendingHITL", []any{""}, belay.ScopeRead},
		{"WaitDecision", []any{request.ID, time.Duration(0)}, belay.ScopeRead},
		{"RestoreCheckpoint", []any{belay.RestoreInput{CheckpointID: cp.ID}}, belay.ScopeWrite},
		{"RestoreCheckpoint", []any{belay.RestoreInput{CheckpointID: cp.ID, DryRun: true}}, belay.ScopeWrite},
		{"DiffCheckpoint", []any{belay.DiffInput{CheckpointID: cp.ID}}, belay.ScopeRead},
		{"ListRollbacks", []any{sessionID}, belay.ScopeRead},
		{"Validate", []any{belay.ValidateInput{SessionID: sessionID}}, belay.ScopeRead},
		{"Validate", []any{belay.ValidateInput{}}, belay.ScopeRead},
		{"Validate", []any{belay.ValidateInput{SessionID: sessionID, Repair: true}}, needOwner},
		{"ExportSession", []any{sessionID, io.Discard}, needOwner},
		{"ImportSession", []any{belay.ImportInput{}, strings.NewReader("")}, belay.ScopeWrite},
		{"ExportBranch", []any{belay.ExportBranchInput{SessionID: sessionID}}, needOwner},
		{"DiskUsage", nil, belay.ScopeRead},
		{"DeleteSession", []any{sessionID}, belay.ScopeWrite},
		{"Follow", []any{belay.EventFilter{SessionID: sessionID}, time.Duration(0), stop}, belay.ScopeRead},
		{"AppendEvents", []any{belay.AppendEventsInput{SessionID: sessionID, Events: []belay.EventRecord{{Type: belay.EventGraphNodeStart}}}}, belay.ScopeWrite},
		{"CreateToken", []any{belay.CreateTokenInput{User: "alice"}}, belay.ScopeAdmin},
		{"ListTokens", nil, belay.ScopeAdmin},
		{"RevokeToken", []any{other.ID}, belay.ScopeAdmin},
		{"AddWebhook", []any{"https://example.com/other", []string(nil)}, belay.ScopeAdmin},
		{"ListWebhooks", nil, belay.ScopeAdmin},
		{"RemoveWebhook", []any{hook.ID}, belay.ScopeAdmin},
		{"ListDeliveries", []any{"", 0}, belay.ScopeAdmin},
		{"ResolveSession", []any{sessionID}, belay.ScopeRead},
		{"UpdateSession", []any{sessionID, belay.UpdateSessionInput{Title: new(string)}}, belay.ScopeWrite},
		{"EndSession", []any{belay.EndSessionInput{SessionID: sessionID, Status: belay.SessionCompleted}}, belay.ScopeWrite},
		{"Heartbeat", []any{belay.LeaseInput{SessionID: sessionID, Holder: "h"}}, belay.ScopeWrite},
		{"ResumeSession", []any{belay.ResumeInput{SessionID: sessionID, Holder: "h"}}, belay.ScopeWrite},
		{"CleanupSessions", []any{belay.CleanupInput{}}, belay.ScopeWrite},
		{"SetRetention", []any{belay.RetentionPolicy{ProjectPath: e.project, KeepLast: 1}}, belay.ScopeAdmin},
		{"ListRetention", nil, belay.ScopeAdmin},
		{"SetPlan", []any{belay.SetPlanInput{SessionID: sessionID, Tasks: []belay.Task{{ID: "b", Title: "B"}}}}, belay.ScopeWrite},
		{"UpdateTask", []any{belay.TaskUpdate{SessionID: sessionID, TaskID: "a", Status: belay.TaskRunning}}, belay.ScopeWrite},
		{"AddCost", []any{belay.CostInput{SessionID: sessionID, Micros: 1}}, belay.ScopeWrite},
		{"AdjustPlan", []any{sessionID, belay.PlanAdjustment{}}, belay.ScopeWrite},
		{"TaskContext", []any{sessionID}, belay.ScopeRead},
		{"SearchCheckpoints", []any{belay.SearchInput{Query: "more"}}, belay.ScopeRead},
		{"Reindex", []any{belay.ReindexInput{}}, belay.ScopeAdmin},
		{"IndexStatus", nil, belay.ScopeAdmin},
		{"CollectGarbage", []any{belay.GCInput{DryRun: true}}, belay.ScopeAdmin},
	}
	covered := map[string]bool{}
	for _, c := range calls {
		covered[c.method] = true
	}
	before := authzState(t, e.svc, sessionID)
	for _, m := range serviceMethods() {
		if needsNoIdentity[m.Name] {
			continue
		}
		if !covered[m.Name] {
			t.Errorf("%s has no call in this test: add one saying whether a read-only token may make it", m.Name)
		}
		t.Run(m.Name, func(t *testing.T) {
			for _, c := range calls {
				if c.method != m.Name {
					continue
				}
				args := make([]reflect.Value, len(c.args))
				for i, a := range c.args {
					args[i] = reflect.ValueOf(a)
				}
				err := callMethod(e.svc, m.Name, readOnly, args)
				if c.need == belay.ScopeRead && err != nil && err != errStop {
					t.Errorf("%+v: %v; a read-only token may read", c.args, err)
				}
				if c.need != belay.ScopeRead && !refused(err) {
					t.Errorf("%+v: error %v, want UNAUTHORIZED or not found", c.args, err)
				}
				// A method that needs a scope beyond read refuses before it
				// looks at its arguments.
				if c.need != belay.ScopeRead && c.need != needOwner {
					if zero := callMethod(e.svc, m.Name, readOnly, zeroArgs(m)); errCode(zero) != belay.CodeUnauthorized {
						t.Errorf("zero arguments: error %v, want UNAUTHORIZED", zero)
					}
				}
			}
		})
	}
	if after := authzState(t, e.svc, sessionID); after != before {
		t.Errorf("a read-only token changed something:\nbefore %s\nafter  %s", before, after)
	}
}

// refused reports whether err is the answer to a caller who may not do
// something: UNAUTHORIZED, or not found for a thing it may not read.
func refused(err error) bool {
	switch errCode(err) {
	case belay.CodeUnauthorized, belay.CodeNotFound, belay.CodeSessionNotFound, belay.CodeCheckpointNotFound:
		return true
	}
	return false
}

// authzState is everything a call could change, as an administrator reads it.
func authzState(t *testing.T, svc *core.Service, sessionID string) string {
	t.Helper()
	var parts []any
	add := func(v any, err error) {
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, v)
	}
	add(core.StoreOf(svc).LastEventSeq(localCtx))
	add(svc.GetSession(localCtx, sessionID))
	add(svc.ListSessions(localCtx, belay.ListSessionsInput{}))
	add(svc.ListCheckpoints(localCtx, belay.ListCheckpointsInput{Limit: 100}))
	add(svc.ListGrants(localCtx, sessionID))
	add(svc.ListRollbacks(localCtx, sessionID))
	add(svc.ListWebhooks(localCtx))
	tokens, err := svc.ListTokens(localCtx)
	for _, tk := range tokens {
		tk.LastUsedAt = nil // reading with a token records its use
	}
	add(tokens, err)
	b, err := json.Marshal(parts)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// bubbleService is a service over a fresh SQLite file for a synctest
// bubble, with a token (so a user) for each of users. Its streams end before
// the bubble does; so does its tailer, idle a while.
func bubbleService(t *testing.T, users ...string) *core.Service {
	t.Helper()
	db, err := sqlite.Open(localCtx, filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		time.Sleep(time.Second)
		db.Close()
	})
	svc := core.New(core.Options{Store: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for _, user := range users {
		if _, err := createToken(localCtx, svc, user, false); err != nil {
			t.Fatal(err)
		}
	}
	return svc
}

// TestLiveStreamSeesGrantsMadeWhileIdle: the event tailer keeps who may read
// each session; a grant or a revocation made while no stream was open (the
// tailer asleep) still decides, as soon as streams open again, who receives
// the session's events.
func TestLiveStreamSeesGrantsMadeWhileIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := bubbleService(t, "bob", "carol")
		alice, bob, carol := hitlAs("alice"), hitlAs("bob"), hitlAs("carol")
		sess, err := svc.CreateSession(alice, belay.CreateSessionInput{Title: "shared"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.GrantSession(alice, belay.GrantInput{SessionID: sess.ID, User: "carol", Role: belay.RoleRead}); err != nil {
			t.Fatal(err)
		}
		save := func() {
			t.Helper()
			if _, err := svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "news"}); err != nil {
				t.Fatal(err)
			}
		}
		// follow streams the session's live events as the caller of ctx
		// until the returned stop is called, which returns how many arrived.
		follow := func(ctx context.Context) func() int {
			ctx, cancel := context.WithCancel(ctx)
			got := 0
			done := make(chan struct{})
			go func() {
				defer close(done)
				err := svc.Follow(ctx, belay.EventFilter{After: belay.FromNow}, 0, func(_ int64, batch []belay.Event) error {
					for _, e := range batch {
						if e.SessionID == sess.ID {
							got++
						}
					}
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}()
			synctest.Wait()
			return func() int {
				synctest.Wait()
				cancel()
				<-done
				return got
			}
		}

		// The tailer learns who may read the session, then sleeps.
		stop := follow(alice)
		save()
		if n := stop(); n != 1 {
			t.Fatalf("the owner received %d events, want 1", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()

		if _, err := svc.GrantSession(alice, belay.GrantInput{SessionID: sess.ID, User: "bob", Role: belay.RoleRead}); err != nil {
			t.Fatal(err)
		}
		if err := svc.RevokeGrant(alice, sess.ID, "carol"); err != nil {
			t.Fatal(err)
		}
		stopBob, stopCarol := follow(bob), follow(carol)
		save()
		if n := stopBob(); n != 1 {
			t.Errorf("bob, granted read while no stream was open, received %d events, want 1", n)
		}
		if n := stopCarol(); n != 0 {
			t.Errorf("carol, revoked while no stream was open, received %d events, want 0", n)
		}
	})
}

// TestStateOnlyRollbackNeedsNoWorkspaceRoot: the workspace roots guard the
// files of a workspace; rolling back a checkpoint without a snapshot touches
// none, so its session's owner may do it on a server without roots, while a
// snapshot outside them stays an admin's.
func TestStateOnlyRollbackNeedsNoWorkspaceRoot(t *testing.T) {
	e := newWSEnv(t)
	snap := e.save(t, "files")
	svc := core.New(core.Options{Store: e.db, Workspaces: e.ws, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for _, project := range []string{"", e.project} {
		sess, err := svc.CreateSession(alice, belay.CreateSessionInput{ProjectPath: project})
		if err != nil {
			t.Fatal(err)
		}
		cp, err := svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "state",
			AgentState: json.RawMessage(`{"step":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		for _, dry := range []bool{true, false} {
			if _, err := svc.RestoreCheckpoint(alice, belay.RestoreInput{CheckpointID: cp.ID, DryRun: dry}); err != nil {
				t.Errorf("project %q, dry run %v: the owner's state-only rollback: %v", project, dry, err)
			}
		}
	}
	if _, err := svc.RestoreCheckpoint(alice, belay.RestoreInput{CheckpointID: snap.ID}); !belay.IsCode(err, belay.CodeUnauthorized) {
		t.Errorf("rollback of a snapshot outside the roots: err = %v, want UNAUTHORIZED", err)
	}
}

// TestRevokedTokenEndsItsStreams: a stream opened with a token ends,
// UNAUTHENTICATED, once the token is revoked, and delivers nothing saved
// after the revocation.
func TestRevokedTokenEndsItsStreams(t *testing.T) {
	e := newHITLEnv(t)
	secret, err := createToken(hitlAdminCtx, e.svc, "bob", false)
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.svc.Authenticate(localCtx, secret)
	if err != nil {
		t.Fatal(err)
	}
	bob := belay.WithActor(localCtx, a)
	project := t.TempDir()
	got := make(chan string, 10)
	done := make(chan error, 1)
	opened := make(chan struct{})
	go func() {
		first := true
		done <- e.svc.Follow(bob, belay.EventFilter{After: belay.FromNow}, time.Hour, func(_ int64, batch []belay.Event) error {
			if first {
				first = false
				close(opened)
			}
			for _, ev := range batch {
				if ev.Type == belay.EventCheckpointCreated {
					got <- ev.CheckpointID
				}
			}
			return nil
		})
	}()
	save := func(summary string) *belay.Checkpoint {
		t.Helper()
		cp, err := e.svc.CreateCheckpoint(bob, belay.CreateCheckpointInput{ProjectPath: project, Summary: summary})
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}
	<-opened
	before := save("before")
	select {
	case id := <-got:
		if id != before.ID {
			t.Fatalf("received %s, want %s", id, before.ID)
		}
	case err := <-done:
		t.Fatalf("the stream ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the stream received nothing")
	}
	tokens, err := e.svc.ListTokens(hitlAdminCtx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.RevokeToken(hitlAdminCtx, tokens[0].ID); err != nil {
		t.Fatal(err)
	}
	// Saved with the token's identity by another way in: bob may still write.
	after, err := e.svc.CreateCheckpoint(belay.WithActor(localCtx, belay.Actor{UserID: "bob"}), belay.CreateCheckpointInput{ProjectPath: project, Summary: "after"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		testutil.WantCode(t, err, belay.CodeUnauthenticated)
	case <-time.After(10 * time.Second):
		t.Fatal("the stream of a revoked token goes on")
	}
	select {
	case id := <-got:
		t.Errorf("the revoked token's stream delivered %s (after: %s)", id, after.ID)
	default:
	}
}

// TestDeletingARequestNeedsTheRightToDecideIt: deleting a checkpoint whose
// request waits for a decision clears the gate, as a decision would: a
// token that may write but not decide (an agent's) may not, nor may the
// requester when self-approval is forbidden. Once decided, it may.
func TestDeletingARequestNeedsTheRightToDecideIt(t *testing.T) {
	svc := newService(t, nil)
	agent := belay.WithActor(context.Background(), belay.Actor{UserID: "alice", Scopes: []belay.Scope{belay.ScopeRead, belay.ScopeWrite}})
	ask := func(forbidSelf bool) *belay.Checkpoint {
		t.Helper()
		cp, err := svc.CreateCheckpoint(agent, belay.CreateCheckpointInput{ProjectPath: t.TempDir(), Summary: "deploy",
			HITL: &belay.HITLInput{Required: true, Title: "Deploy?", ForbidSelfApproval: forbidSelf}})
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}
	gate := ask(false)
	// alice owns the session: her token, not her role, keeps her from deciding.
	if be := testutil.WantCode(t, svc.DeleteCheckpoint(agent, gate.ID), belay.CodeUnauthorized); !strings.Contains(be.Message, "this token may not decide") {
		t.Errorf("the owner's agent deleting a waiting request: %q, want it to blame the token", be.Message)
	}
	if pending, err := svc.PendingHITL(asUser("alice"), gate.SessionID); err != nil || len(pending) != 1 {
		t.Fatalf("pending after a refused delete = %+v, %v", pending, err)
	}
	if s := mustSession(t, svc, gate.SessionID); s.Status != belay.SessionAwaitingInput {
		t.Errorf("session after a refused delete is %s", s.Status)
	}
	selfGate := ask(true)
	testutil.WantCode(t, svc.DeleteCheckpoint(asUser("alice"), selfGate.ID), belay.CodeUnauthorized)
	if err := svc.DeleteCheckpoint(localCtx, selfGate.ID); err != nil {
		t.Errorf("an admin deleting a request: %v", err)
	}
	// The owner with every scope may; and a decided request is no gate.
	if err := svc.DeleteCheckpoint(asUser("alice"), gate.ID); err != nil {
		t.Errorf("the owner deleting her request: %v", err)
	}
	decided := ask(false)
	if _, err := svc.Decide(asUser("alice"), belay.DecideInput{CheckpointID: decided.ID, SelectedOption: "approve"}); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteCheckpoint(agent, decided.ID); err != nil {
		t.Errorf("the agent deleting a decided request: %v", err)
	}
}

// TestAdminScopeOnlyForAdmins: a token of a user who is no admin cannot
// carry the admin scope (it would grant nothing and read nothing); asking
// for the user to be made one gives it.
func TestAdminScopeOnlyForAdmins(t *testing.T) {
	svc := newService(t, nil)
	_, err := svc.CreateToken(localCtx, belay.CreateTokenInput{User: "bob", Scopes: []belay.Scope{belay.ScopeAdmin}})
	testutil.WantCode(t, err, belay.CodeValidation, "scopes")
	if list, err := svc.ListTokens(localCtx); err != nil || len(list) != 0 {
		t.Errorf("tokens after the refusal: %v, %v", list, err)
	}
	tk, err := svc.CreateToken(localCtx, belay.CreateTokenInput{User: "bob", Admin: true, Scopes: []belay.Scope{belay.ScopeAdmin}})
	if err != nil || !tk.Admin {
		t.Errorf("an admin token for a new admin: %+v, %v", tk, err)
	}
}

// TestProjectLimitFollowsSymlinks: a token limited to one project cannot
// snapshot, diff or roll back another through a symlink inside its own.
func TestProjectLimitFollowsSymlinks(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"secret.txt": "alice's\n"})
	mine := e.save(t, "mine")
	other := filepath.Join(filepath.Dir(e.project), "other")
	if err := os.MkdirAll(other, 0o700); err != nil {
		t.Fatal(err)
	}
	// A session of a project inside the limit, whose directory is then
	// replaced by a link to another project: its path is still textually
	// inside the limit; its files are not.
	link := filepath.Join(other, "link")
	if err := os.MkdirAll(link, 0o700); err != nil {
		t.Fatal(err)
	}
	cp, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{ProjectPath: link, Summary: "by alice herself", Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.project, link); err != nil {
		t.Fatal(err)
	}
	limited := belay.WithActor(context.Background(), belay.Actor{UserID: "alice", Projects: []string{other}})
	_, err = e.svc.CreateCheckpoint(limited, belay.CreateCheckpointInput{ProjectPath: link, Summary: "through the link", Snapshot: true})
	testutil.WantCode(t, err, belay.CodeUnauthorized)
	_, err = e.svc.RestoreCheckpoint(limited, belay.RestoreInput{CheckpointID: cp.ID})
	testutil.WantCode(t, err, belay.CodeUnauthorized)
	_, err = e.svc.DiffCheckpoint(limited, belay.DiffInput{CheckpointID: cp.ID, To: "current"})
	testutil.WantCode(t, err, belay.CodeUnauthorized)
	// Within its project the token works, a state-only save included.
	ownLimit := belay.WithActor(context.Background(), belay.Actor{UserID: "alice", Projects: []string{e.project}})
	if _, err := e.svc.DiffCheckpoint(ownLimit, belay.DiffInput{CheckpointID: mine.ID, To: "current"}); err != nil {
		t.Errorf("diff within the token's project: %v", err)
	}
	if _, err := e.svc.CreateCheckpoint(limited, belay.CreateCheckpointInput{ProjectPath: other, Summary: "state only"}); err != nil {
		t.Errorf("a save in the token's project: %v", err)
	}
}

// TestApproversAreToldOfTheirRequests: an approver who may not read the
// session receives its request's HITL events, live and from the log, when
// its token may decide; nothing else of the session, and nothing without
// the decide scope.
func TestApproversAreToldOfTheirRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := bubbleService(t, "carol", "dave")
		carol, dave := hitlAs("carol"), hitlAs("dave")
		carolReads := belay.WithActor(context.Background(), belay.Actor{UserID: "carol", Scopes: []belay.Scope{belay.ScopeRead}})
		follow := func(ctx context.Context, after int64) func() []string {
			ctx, cancel := context.WithCancel(ctx)
			var got []string
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = svc.Follow(ctx, belay.EventFilter{After: after}, 0, func(_ int64, batch []belay.Event) error {
					for _, e := range batch {
						got = append(got, e.Type)
					}
					return nil
				})
			}()
			synctest.Wait()
			return func() []string {
				synctest.Wait()
				cancel()
				<-done
				return got
			}
		}
		stopCarol, stopReads, stopDave := follow(carol, belay.FromNow), follow(carolReads, belay.FromNow), follow(dave, belay.FromNow)
		cp, err := svc.CreateCheckpoint(hitlAs("alice"), belay.CreateCheckpointInput{ProjectPath: "/w/p", Summary: "deploy",
			HITL: &belay.HITLInput{Required: true, Title: "Deploy?", Approvers: []string{"carol"}}})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if _, err := svc.Decide(carol, belay.DecideInput{CheckpointID: cp.ID, SelectedOption: "approve"}); err != nil {
			t.Fatal(err)
		}
		want := []string{belay.EventHITLRequired, belay.EventHITLDecided}
		if got := stopCarol(); !slices.Equal(got, want) {
			t.Errorf("the approver received %v live, want %v", got, want)
		}
		if got := stopReads(); len(got) != 0 {
			t.Errorf("the approver's read-only token received %v", got)
		}
		if got := stopDave(); len(got) != 0 {
			t.Errorf("a stranger received %v", got)
		}
		if got := follow(carol, 0)(); !slices.Equal(got, want) {
			t.Errorf("the approver read %v from the log, want %v", got, want)
		}
	})
}

// An approver who may not read the session follows it by its id too, and is
// told only of its requests; anyone else is told the session is not found.
func TestApproversFollowTheSessionOfTheirRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := bubbleService(t, "carol", "dave")
		cp, err := svc.CreateCheckpoint(hitlAs("alice"), belay.CreateCheckpointInput{ProjectPath: "/w/p", Summary: "deploy",
			HITL: &belay.HITLInput{Required: true, Title: "Deploy?", Approvers: []string{"carol"}}})
		if err != nil {
			t.Fatal(err)
		}
		carolReads := belay.WithActor(context.Background(), belay.Actor{UserID: "carol", Scopes: []belay.Scope{belay.ScopeRead}})
		follow := func(ctx context.Context) ([]string, error) {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			var got []string
			err := svc.Follow(ctx, belay.EventFilter{SessionID: cp.SessionID}, 0, func(_ int64, batch []belay.Event) error {
				for _, e := range batch {
					got = append(got, e.Type)
				}
				if len(got) > 0 {
					cancel()
				}
				return nil
			})
			return got, err
		}
		got, err := follow(hitlAs("carol"))
		if err != nil || !slices.Equal(got, []string{belay.EventHITLRequired}) {
			t.Errorf("the approver followed the session: %v, %v; want its request", got, err)
		}
		for name, ctx := range map[string]context.Context{"a stranger": hitlAs("dave"), "the approver's read-only token": carolReads} {
			if got, err := follow(ctx); !belay.IsCode(err, belay.CodeSessionNotFound) {
				t.Errorf("%s followed the session: %v, %v; want SESSION_NOT_FOUND", name, got, err)
			}
		}
	})
}

// TestSavesByPathNeverGoToAnotherUsersSession: a save naming only its
// project never continues the session of another user who is not an admin,
// even one the caller may write (as an admin, or a grantee) begun first in
// the project: that user would read what the caller saves. The project's
// active session is the caller's own then, and so is its current session
// (before it has one, an admin's numbers count in the project's sessions).
func TestSavesByPathNeverGoToAnotherUsersSession(t *testing.T) {
	svc := newService(t, testclock.New(start, 0))
	for _, user := range []string{"bob", "alice"} {
		if _, err := createToken(localCtx, svc, user, false); err != nil {
			t.Fatal(err)
		}
	}
	project := t.TempDir()
	bobs := mustCreateAs(t, svc, hitlAs("bob"), project, "bob first")
	if _, err := svc.GrantSession(hitlAs("bob"), belay.GrantInput{SessionID: bobs.SessionID, User: "alice", Role: belay.RoleWrite}); err != nil {
		t.Fatal(err)
	}
	// An admin with no session there counts its numbers in bob's (its
	// agent's, say); a grantee never does: bob would choose what its
	// "rollback 1" restores.
	if sess, err := svc.CurrentSession(localCtx, project); err != nil || sess.ID != bobs.SessionID {
		t.Errorf("the admin's current session before its save = %+v, %v; want bob's", sess, err)
	}
	if sess, err := svc.CurrentSession(hitlAs("alice"), project); !belay.IsCode(err, belay.CodeSessionNotFound) {
		t.Errorf("the grantee's current session before its save = %+v, %v; want none", sess, err)
	}
	for _, who := range []struct {
		name string
		ctx  context.Context
	}{{"an admin", localCtx}, {"a grantee", hitlAs("alice")}} {
		cp := mustCreateAs(t, svc, who.ctx, project, "mine")
		if cp.SessionID == bobs.SessionID {
			t.Errorf("%s's save by path went to bob's session", who.name)
		}
		for name, find := range map[string]func(context.Context, string) (*belay.Session, error){
			"active": svc.ActiveSession, "current": svc.CurrentSession} {
			if sess, err := find(who.ctx, project); err != nil || sess.ID != cp.SessionID {
				t.Errorf("%s's %s session = %+v, %v; want its own %s", who.name, name, sess, err, cp.SessionID)
			}
		}
	}
	if sess, err := svc.CurrentSession(hitlAs("bob"), project); err != nil || sess.ID != bobs.SessionID {
		t.Errorf("bob's current session = %+v, %v", sess, err)
	}
	if bob, err := svc.GetSession(hitlAs("bob"), bobs.SessionID); err != nil || bob.CheckpointCount != 1 {
		t.Errorf("bob's session = %+v, %v; want its one checkpoint", bob, err)
	}
}

// TestGetSessionSaysWhatTheCallerMayDo: a session read by its id carries
// the reader's access to it, for a UI to offer only that.
func TestGetSessionSaysWhatTheCallerMayDo(t *testing.T) {
	e := newWSEnv(t)
	cp := e.save(t, "one")
	for _, user := range []string{"rita", "dora"} {
		if _, err := createToken(localCtx, e.svc, user, false); err != nil {
			t.Fatal(err)
		}
	}
	for user, role := range map[string]belay.Role{"rita": belay.RoleRead, "dora": belay.RoleDecide} {
		if _, err := e.svc.GrantSession(alice, belay.GrantInput{SessionID: cp.SessionID, User: user, Role: role}); err != nil {
			t.Fatal(err)
		}
	}
	readOnly := belay.WithActor(context.Background(), belay.Actor{UserID: "alice", Scopes: []belay.Scope{belay.ScopeRead}})
	for name, tc := range map[string]struct {
		ctx  context.Context
		want belay.Access
	}{
		"owner":               {alice, belay.Access{Write: true, Decide: true, Own: true, Workspace: true}},
		"reader":              {wsAs("rita", false), belay.Access{Workspace: true}},
		"decider":             {wsAs("dora", false), belay.Access{Decide: true, Workspace: true}},
		"owner's read token":  {readOnly, belay.Access{Workspace: true}},
		"admin outside roots": {wsAs("root", true), belay.Access{Write: true, Decide: true, Own: true, Workspace: true}},
	} {
		sess, err := e.svc.GetSession(tc.ctx, cp.SessionID)
		if err != nil || sess.Access == nil || *sess.Access != tc.want {
			t.Errorf("%s: access %+v, %v; want %+v", name, sess.Access, err, tc.want)
		}
	}
}

// TestUserNamesAreOneWordOfText: a new user's name holds no space, control
// character (a terminal escape) or invalid UTF-8.
func TestUserNamesAreOneWordOfText(t *testing.T) {
	svc := newService(t, testclock.New(start, 0))
	for _, name := range []string{"ev\x1b[31mil", "a b", "tab\tbed", "bad\xff", "", core.SystemUser} {
		_, err := svc.CreateToken(localCtx, belay.CreateTokenInput{User: name})
		testutil.WantCode(t, err, belay.CodeValidation, "user")
	}
	if _, err := svc.CreateToken(localCtx, belay.CreateTokenInput{User: "zoë"}); err != nil {
		t.Errorf("a name of letters: %v", err)
	}
}

// TestAnAdminTokenAdministersNoMoreThanItHolds: an admin's token limited
// to a project administers nothing (tokens, webhooks, retention, garbage,
// the index, imports are every project's), and one limited in scopes
// creates no token with more and changes nothing without write.
func TestAnAdminTokenAdministersNoMoreThanItHolds(t *testing.T) {
	svc := newService(t, nil)
	own, err := svc.CreateToken(localCtx, belay.CreateTokenInput{User: "admin", Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	hook, err := svc.AddWebhook(localCtx, "https://example.com/hook", nil)
	if err != nil {
		t.Fatal(err)
	}
	project := t.TempDir()
	limited := belay.WithActor(context.Background(), belay.Actor{UserID: "admin", Admin: true, Projects: []string{project}})
	readAdmin := belay.WithActor(context.Background(), belay.Actor{UserID: "admin", Admin: true, Scopes: []belay.Scope{belay.ScopeRead, belay.ScopeAdmin}})
	refusals := map[string]func(context.Context) error{
		"create a token": func(ctx context.Context) error {
			_, err := svc.CreateToken(ctx, belay.CreateTokenInput{User: "admin"})
			return err
		},
		"revoke a token": func(ctx context.Context) error { return svc.RevokeToken(ctx, own.ID) },
		"add a webhook": func(ctx context.Context) error {
			_, err := svc.AddWebhook(ctx, "https://example.com/other", nil)
			return err
		},
		"remove a webhook": func(ctx context.Context) error { return svc.RemoveWebhook(ctx, hook.ID) },
		"set a retention policy": func(ctx context.Context) error {
			_, err := svc.SetRetention(ctx, belay.RetentionPolicy{ProjectPath: project, KeepLast: 1})
			return err
		},
		"collect garbage": func(ctx context.Context) error {
			_, err := svc.CollectGarbage(ctx, belay.GCInput{})
			return err
		},
		"rebuild the index": func(ctx context.Context) error {
			_, err := svc.Reindex(ctx, belay.ReindexInput{})
			return err
		},
	}
	reads := map[string]func(context.Context) error{
		"list tokens": func(ctx context.Context) error {
			_, err := svc.ListTokens(ctx)
			return err
		},
		"list webhooks": func(ctx context.Context) error {
			_, err := svc.ListWebhooks(ctx)
			return err
		},
		"read retention policies": func(ctx context.Context) error {
			_, err := svc.ListRetention(ctx)
			return err
		},
		"see the index": func(ctx context.Context) error {
			_, err := svc.IndexStatus(ctx)
			return err
		},
		"read the delivery log": func(ctx context.Context) error {
			_, err := svc.ListDeliveries(ctx, "", 0)
			return err
		},
	}
	for what, call := range refusals {
		for token, ctx := range map[string]context.Context{"limited to a project": limited, "of read and admin": readAdmin} {
			if err := call(ctx); !belay.IsCode(err, belay.CodeUnauthorized) {
				t.Errorf("%s with an admin token %s: %v; want UNAUTHORIZED", what, token, err)
			}
		}
	}
	for what, call := range reads {
		if err := call(limited); !belay.IsCode(err, belay.CodeUnauthorized) {
			t.Errorf("%s with an admin token limited to a project: %v; want UNAUTHORIZED", what, err)
		}
		if err := call(readAdmin); err != nil {
			t.Errorf("%s with a read and admin token: %v", what, err)
		}
	}
	// Within its scopes a scoped admin token creates tokens.
	tk, err := svc.CreateToken(readAdmin, belay.CreateTokenInput{User: "admin", Scopes: []belay.Scope{belay.ScopeRead}})
	if err != nil || !slices.Equal(tk.Scopes, []belay.Scope{belay.ScopeRead}) {
		t.Errorf("a read token made by a read and admin token: %+v, %v", tk, err)
	}
	_, err = svc.CreateToken(readAdmin, belay.CreateTokenInput{User: "bob", Scopes: []belay.Scope{belay.ScopeDecide}})
	testutil.WantCode(t, err, belay.CodeUnauthorized)
	if list, err := svc.ListTokens(localCtx); err != nil || len(list) != 2 {
		t.Errorf("tokens after the refusals: %d, %v; want own and the read one", len(list), err)
	}
	if hooks, err := svc.ListWebhooks(localCtx); err != nil || len(hooks) != 1 {
		t.Errorf("webhooks after the refusals: %d, %v", len(hooks), err)
	}
}

// TestApproversLearnOnlyASummaryOfTheSession: an approver who may not read
// the session gets, from its decision and from waiting for one, what its
// pending list says of the session (id, title, status, phase), none of its
// state, owner or checkpoints; the owner gets all of it.
func TestApproversLearnOnlyASummaryOfTheSession(t *testing.T) {
	svc := newService(t, nil)
	if _, err := createToken(localCtx, svc, "carol", false); err != nil {
		t.Fatal(err)
	}
	alice, carol := hitlAs("alice"), hitlAs("carol")
	sess, err := svc.CreateSession(alice, belay.CreateSessionInput{Title: "deploys", ProjectPath: "/w/p"})
	if err != nil {
		t.Fatal(err)
	}
	ask := func() *belay.Checkpoint {
		t.Helper()
		cp, err := svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "deploy", Phase: "ship",
			HITL: &belay.HITLInput{Required: true, Title: "Deploy?", Approvers: []string{"carol"}, OnReject: belay.OnRejectContinue}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "later",
			AgentState: json.RawMessage(`{"apiKey":"later and private"}`)}); err != nil {
			t.Fatal(err)
		}
		return cp
	}
	summary := func(what string, got *belay.Session) {
		t.Helper()
		if got == nil {
			t.Fatalf("%s: the approver got no session", what)
		}
		want := belay.Session{ID: sess.ID, Title: "deploys", Status: belay.SessionRunning, Phase: "ship"}
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("%s: the approver got session %+v; want only its id, title, status and phase", what, got)
		}
	}
	first := ask()
	res, err := svc.Decide(carol, belay.DecideInput{CheckpointID: first.ID, SelectedOption: "approve"})
	if err != nil {
		t.Fatal(err)
	}
	summary("decide", res.Session)
	wr, err := svc.WaitDecision(carol, first.ID, 0)
	if err != nil || !wr.Decided {
		t.Fatalf("wait: %+v, %v", wr, err)
	}
	summary("wait", wr.Session)
	second := ask()
	res, err = svc.Decide(alice, belay.DecideInput{CheckpointID: second.ID, SelectedOption: "approve"})
	if err != nil || res.Session.Owner != "alice" || !strings.Contains(string(res.Session.State), "later and private") {
		t.Errorf("the owner's decision: session %+v, %v; want all of it", res.Session, err)
	}
}

// TestRevokedTokenEndsItsWait: a long poll for a decision that began before
// its token was revoked answers nothing of the decision made after.
func TestRevokedTokenEndsItsWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := bubbleService(t)
		secret, err := createToken(localCtx, svc, "bob", false)
		if err != nil {
			t.Fatal(err)
		}
		a, err := svc.Authenticate(localCtx, secret)
		if err != nil {
			t.Fatal(err)
		}
		bob := belay.WithActor(localCtx, a)
		cp, err := svc.CreateCheckpoint(bob, belay.CreateCheckpointInput{ProjectPath: "/w/p", Summary: "ask",
			HITL: &belay.HITLInput{Required: true, Title: "Go on?"}})
		if err != nil {
			t.Fatal(err)
		}
		var res *belay.WaitResult
		done := make(chan error, 1)
		go func() {
			var err error
			res, err = svc.WaitDecision(bob, cp.ID, time.Minute)
			done <- err
		}()
		time.Sleep(time.Second) // the wait listens for the decision
		if err := svc.RevokeToken(localCtx, a.TokenID); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Decide(localCtx, belay.DecideInput{CheckpointID: cp.ID, SelectedOption: "approve"}); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !belay.IsCode(err, belay.CodeUnauthenticated) {
			t.Errorf("the revoked token's wait: %+v, %v; want UNAUTHENTICATED", res, err)
		}
	})
}
