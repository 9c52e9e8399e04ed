package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testclock"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/sqlite"
)

// hitlEnv is a core service over a SQLite file that a test can close and
// reopen, as a restarted server would.
type hitlEnv struct {
	path  string
	clock *testclock.Clock
	db    *sqlite.DB
	svc   *core.Service
}

func newHITLEnv(tb testing.TB) *hitlEnv {
	tb.Helper()
	e := &hitlEnv{path: filepath.Join(tb.TempDir(), "belay.db"), clock: testclock.New(time.Date(2025, 1, 15, 11, 0, 0, 0, time.UTC), 0)}
	e.open(tb)
	tb.Cleanup(func() { e.db.Close() })
	return e
}

func (e *hitlEnv) open(tb testing.TB) {
	tb.Helper()
	db, err := sqlite.Open(localCtx, e.path)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	e.db = db
	e.svc = core.New(core.Options{Store: db, Clock: e.clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// restart closes the store and opens it again with a new service.
func (e *hitlEnv) restart(tb testing.TB) {
	tb.Helper()
	if err := e.db.Close(); err != nil {
		tb.Fatalf("close store: %v", err)
	}
	e.open(tb)
}

// hitlAs is a context acting as a user who is not an admin.
func hitlAs(user string) context.Context {
	return belay.WithActor(context.Background(), belay.Actor{UserID: user})
}

var hitlAdminCtx = belay.WithActor(context.Background(), belay.Actor{UserID: "root", Admin: true})

// hitlOptions offers one option per action; "ok" is the default.
var hitlOptions = []belay.HITLOption{
	{ID: "ok", Label: "Approve", Action: belay.ActionApprove, IsDefault: true},
	{ID: "change", Label: "Change", Action: belay.ActionModify},
	{ID: "no", Label: "Reject", Action: belay.ActionReject},
	{ID: "again", Label: "Retry", Action: belay.ActionRetry},
	{ID: "pass", Label: "Skip", Action: belay.ActionSkip},
	{ID: "up", Label: "Escalate", Action: belay.ActionEscalate},
}

// hitlOptionFor returns the option id of hitlOptions with action a.
func hitlOptionFor(a belay.Action) string {
	for _, o := range hitlOptions {
		if o.Action == a {
			return o.ID
		}
	}
	panic("no option for " + a)
}

func (e *hitlEnv) session(tb testing.TB, owner string) *belay.Session {
	tb.Helper()
	sess, err := e.svc.CreateSession(hitlAs(owner), belay.CreateSessionInput{Title: "session of " + owner})
	if err != nil {
		tb.Fatalf("CreateSession: %v", err)
	}
	return sess
}

// request creates a HITL checkpoint in sessionID as creator. h.Required is
// set and h.Options default to hitlOptions.
func (e *hitlEnv) request(tb testing.TB, sessionID, creator string, h belay.HITLInput) *belay.Checkpoint {
	tb.Helper()
	h.Required = true
	if h.Options == nil {
		h.Options = hitlOptions
	}
	e.member(tb, sessionID, creator, h.Approvers...)
	cp, err := e.svc.CreateCheckpoint(hitlAs(creator), belay.CreateCheckpointInput{SessionID: sessionID, Summary: "may I go on?", HITL: &h})
	if err != nil {
		tb.Fatalf("CreateCheckpoint: %v", err)
	}
	return cp
}

// member makes writer a user who may write to sessionID (unless it owns it)
// and each of users a user: a request may name only users as approvers.
func (e *hitlEnv) member(tb testing.TB, sessionID, writer string, users ...string) {
	tb.Helper()
	for _, u := range append([]string{writer}, users...) {
		if _, err := createToken(localCtx, e.svc, u, false); err != nil {
			tb.Fatalf("create user %s: %v", u, err)
		}
	}
	sess, err := e.svc.GetSession(localCtx, sessionID)
	if err != nil {
		tb.Fatalf("GetSession: %v", err)
	}
	if sess.Owner != writer {
		if _, err := e.svc.GrantSession(localCtx, belay.GrantInput{SessionID: sessionID, User: writer, Role: belay.RoleWrite}); err != nil {
			tb.Fatalf("grant %s write: %v", writer, err)
		}
	}
}

func (e *hitlEnv) status(tb testing.TB, sessionID string) belay.SessionStatus {
	tb.Helper()
	sess, err := e.svc.GetSession(localCtx, sessionID)
	if err != nil {
		tb.Fatalf("GetSession: %v", err)
	}
	return sess.Status
}

// stored reads a checkpoint straight from the store, without settling a due timeout.
func (e *hitlEnv) stored(tb testing.TB, id string) *belay.Checkpoint {
	tb.Helper()
	cp, err := core.StoreOf(e.svc).GetCheckpoint(localCtx, id)
	if err != nil {
		tb.Fatalf("store GetCheckpoint: %v", err)
	}
	return cp
}

// hitlCount counts the events of type typ about checkpoint id.
func hitlCount(tb testing.TB, st store.Reader, id, typ string) int {
	tb.Helper()
	evs, err := st.ListEvents(localCtx, store.EventQuery{Scope: store.Everything, Types: []string{typ}, Limit: 100000})
	if err != nil {
		tb.Fatalf("ListEvents: %v", err)
	}
	n := 0
	for _, ev := range evs {
		if ev.CheckpointID == id {
			n++
		}
	}
	return n
}

func TestHITLDecideErrorCodes(t *testing.T) {
	e := newHITLEnv(t)
	sess := e.session(t, "alice")
	decide := func(ctx context.Context, id string, a belay.Action, opt string, mods string) error {
		in := belay.DecideInput{CheckpointID: id, Action: a, SelectedOption: opt}
		if mods != "" {
			in.Modifications = json.RawMessage(mods)
		}
		_, err := e.svc.Decide(ctx, in)
		return err
	}
	alice := hitlAs("alice")

	t.Run("CHECKPOINT_NOT_FOUND", func(t *testing.T) {
		testutil.WantCode(t, decide(alice, "01940000-0000-7000-8000-000000000000", belay.ActionApprove, "ok", ""), belay.CodeCheckpointNotFound)
	})
	t.Run("CHECKPOINT_NOT_FOUND after delete", func(t *testing.T) {
		cp := e.request(t, sess.ID, "agent", belay.HITLInput{})
		if err := e.svc.DeleteCheckpoint(alice, cp.ID); err != nil {
			t.Fatal(err)
		}
		testutil.WantCode(t, decide(alice, cp.ID, belay.ActionApprove, "ok", ""), belay.CodeCheckpointNotFound)
	})
	t.Run("CHECKPOINT_EXPIRED", func(t *testing.T) {
		expires := e.clock.Now().Add(time.Hour)
		cp, err := e.svc.CreateCheckpoint(hitlAs("agent"), belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "short-lived",
			ExpiresAt: &expires, HITL: &belay.HITLInput{Required: true, OnReject: belay.OnRejectContinue}})
		if err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Hour)
		testutil.WantCode(t, decide(alice, cp.ID, belay.ActionApprove, "approve", ""), belay.CodeCheckpointExpired)
		if got := e.stored(t, cp.ID); got.Decision == nil || got.Decision.Action != belay.ActionReject || !got.Decision.AutoTriggered {
			t.Errorf("expired checkpoint's decision = %+v, want its expiry's rejection, not the late approval", got.Decision)
		}
	})
	t.Run("HITL_NOT_REQUIRED", func(t *testing.T) {
		cp, err := e.svc.CreateCheckpoint(hitlAs("agent"), belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "plain",
			HITL: &belay.HITLInput{Required: false, Title: "not really"}})
		if err != nil {
			t.Fatal(err)
		}
		testutil.WantCode(t, decide(alice, cp.ID, belay.ActionApprove, "approve", ""), belay.CodeHITLNotRequired)
	})
	t.Run("HITL_ALREADY_DECIDED", func(t *testing.T) {
		cp := e.request(t, sess.ID, "agent", belay.HITLInput{})
		if err := decide(alice, cp.ID, belay.ActionApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		err := decide(alice, cp.ID, belay.ActionReject, "no", "")
		testutil.WantCode(t, err, belay.CodeHITLAlreadyDecided)
		if got := e.stored(t, cp.ID).Decision; got.Action != belay.ActionApprove {
			t.Errorf("second decide changed the decision to %s", got.Action)
		}
	})
	t.Run("INVALID_OPTION unknown", func(t *testing.T) {
		cp := e.request(t, sess.ID, "agent", belay.HITLInput{})
		testutil.WantCode(t, decide(alice, cp.ID, belay.ActionApprove, "nope", ""), belay.CodeInvalidOption)
	})
	t.Run("INVALID_OPTION action differs", func(t *testing.T) {
		cp := e.request(t, sess.ID, "agent", belay.HITLInput{})
		testutil.WantCode(t, decide(alice, cp.ID, belay.ActionApprove, "no", ""), belay.CodeInvalidOption)
		if got := e.stored(t, cp.ID); got.Decision != nil {
			t.Errorf("mismatched action was recorded: %+v", got.Decision)
		}
	})
	t.Run("UNAUTHORIZED", func(t *testing.T) {
		// mallory may read the session, not decide in it.
		cp := e.request(t, sess.ID, "agent", belay.HITLInput{})
		e.member(t, sess.ID, "agent", "mallory")
		if _, err := e.svc.GrantSession(localCtx, belay.GrantInput{SessionID: sess.ID, User: "mallory", Role: belay.RoleRead}); err != nil {
			t.Fatal(err)
		}
		testutil.WantCode(t, decide(hitlAs("mallory"), cp.ID, belay.ActionApprove, "ok", ""), belay.CodeUnauthorized)
	})
	t.Run("VALIDATION_ERROR modifications without modify", func(t *testing.T) {
		cp := e.request(t, sess.ID, "agent", belay.HITLInput{})
		err := decide(alice, cp.ID, belay.ActionApprove, "ok", `{"x":1}`)
		testutil.WantCode(t, err, belay.CodeValidation)
		var be *belay.Error
		if errors.As(err, &be) && be.Details["field"] != "modifications" {
			t.Errorf("details.field = %v, want modifications", be.Details["field"])
		}
	})
}

func TestHITLDecisionRecordsEverything(t *testing.T) {
	e := newHITLEnv(t)
	sess := e.session(t, "alice")
	cp := e.request(t, sess.ID, "agent", belay.HITLInput{})
	e.clock.Advance(90*time.Second + 250*time.Millisecond)
	res, err := e.svc.Decide(hitlAs("alice"), belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionModify,
		SelectedOption: "change", Feedback: "use postgres", Modifications: json.RawMessage(`{ "db" : "postgres" }`)})
	if err != nil {
		t.Fatal(err)
	}
	d := res.Decision
	if d.ID == "" || d.UserID != "alice" || d.Action != belay.ActionModify || d.SelectedOption != "change" ||
		d.Feedback != "use postgres" || string(d.Modifications) != `{"db":"postgres"}` || d.AutoTriggered {
		t.Errorf("decision = %+v", d)
	}
	if !d.DecidedAt.Equal(e.clock.Now()) || d.ResponseTime != 90250 {
		t.Errorf("decidedAt %v responseTime %d, want %v and 90250", d.DecidedAt, d.ResponseTime, e.clock.Now())
	}
	if res.Checkpoint.ID != cp.ID || res.Checkpoint.Decision == nil || res.Checkpoint.Decision.ID != d.ID {
		t.Errorf("result checkpoint = %+v", res.Checkpoint)
	}
	if res.Session.ID != sess.ID || res.Session.Status != belay.SessionRunning {
		t.Errorf("result session = %s %s, want %s running", res.Session.ID, res.Session.Status, sess.ID)
	}
	got := e.stored(t, cp.ID).Decision
	if got == nil || got.ID != d.ID || string(got.Modifications) != `{"db":"postgres"}` || !got.DecidedAt.Equal(d.DecidedAt) {
		t.Errorf("stored decision = %+v, want %+v", got, d)
	}
	if n := hitlCount(t, core.StoreOf(e.svc), cp.ID, belay.EventHITLDecided); n != 1 {
		t.Errorf("%d hitl.decided events, want 1", n)
	}
}

func TestHITLIdempotencyKey(t *testing.T) {
	e := newHITLEnv(t)
	sess := e.session(t, "alice")
	cp := e.request(t, sess.ID, "agent", belay.HITLInput{Approvers: []string{"bob"}})
	in := belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionApprove, SelectedOption: "ok", IdempotencyKey: "k-1"}
	first, err := e.svc.Decide(hitlAs("alice"), in)
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	again, err := e.svc.Decide(hitlAs("alice"), in)
	if err != nil {
		t.Fatalf("retry with the same key: %v", err)
	}
	if again.Decision.ID != first.Decision.ID || !again.Decision.DecidedAt.Equal(first.Decision.DecidedAt) {
		t.Errorf("retry returned decision %+v, want %+v", again.Decision, first.Decision)
	}
	for name, tc := range map[string]struct {
		ctx context.Context
		key string
	}{
		"another key":                {hitlAs("alice"), "k-2"},
		"no key":                     {hitlAs("alice"), ""},
		"same key from another user": {hitlAs("bob"), "k-1"},
	} {
		in := in
		in.IdempotencyKey = tc.key
		_, err := e.svc.Decide(tc.ctx, in)
		if belay.ErrorCode(err) != belay.CodeHITLAlreadyDecided {
			t.Errorf("%s: error = %v, want HITL_ALREADY_DECIDED", name, err)
		}
	}
	// The same key with another request is no retry: its caller must not
	// believe it was applied.
	for name, edit := range map[string]func(*belay.DecideInput){
		"another option":  func(in *belay.DecideInput) { in.Action, in.SelectedOption = belay.ActionReject, "no" },
		"feedback added":  func(in *belay.DecideInput) { in.Feedback = "NO" },
		"by option alone": func(in *belay.DecideInput) { in.Action = "" },
		"the same":        func(in *belay.DecideInput) {},
	} {
		in := in
		edit(&in)
		_, err := e.svc.Decide(hitlAs("alice"), in)
		retry := name == "by option alone" || name == "the same"
		if retry && err != nil {
			t.Errorf("%s: %v, want the decision it made", name, err)
		}
		if !retry && belay.ErrorCode(err) != belay.CodeHITLAlreadyDecided {
			t.Errorf("%s: error = %v, want HITL_ALREADY_DECIDED", name, err)
		}
	}
	if n := hitlCount(t, core.StoreOf(e.svc), cp.ID, belay.EventHITLDecided); n != 1 {
		t.Errorf("%d hitl.decided events, want 1", n)
	}
}

func TestHITLSessionFlow(t *testing.T) {
	cases := []struct {
		action   belay.Action
		onReject string
		want     belay.SessionStatus
	}{
		{belay.ActionApprove, "", belay.SessionRunning},
		{belay.ActionModify, "", belay.SessionRunning},
		{belay.ActionRetry, "", belay.SessionRunning},
		{belay.ActionSkip, "", belay.SessionRunning},
		{belay.ActionReject, "", belay.SessionFailed},
		{belay.ActionReject, belay.OnRejectFail, belay.SessionFailed},
		{belay.ActionReject, belay.OnRejectContinue, belay.SessionRunning},
		{belay.ActionEscalate, "", belay.SessionAwaitingInput},
	}
	e := newHITLEnv(t)
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s onReject=%q", tc.action, tc.onReject), func(t *testing.T) {
			sess := e.session(t, "alice")
			if got := e.status(t, sess.ID); got != belay.SessionRunning {
				t.Fatalf("new session is %s", got)
			}
			cp := e.request(t, sess.ID, "agent", belay.HITLInput{OnReject: tc.onReject})
			if got := e.status(t, sess.ID); got != belay.SessionAwaitingInput {
				t.Fatalf("after a HITL checkpoint the session is %s, want awaiting_input", got)
			}
			res, err := e.svc.Decide(hitlAs("alice"), belay.DecideInput{CheckpointID: cp.ID, Action: tc.action, SelectedOption: hitlOptionFor(tc.action)})
			if err != nil {
				t.Fatal(err)
			}
			if res.Session.Status != tc.want {
				t.Errorf("result session status = %s, want %s", res.Session.Status, tc.want)
			}
			if got := e.status(t, sess.ID); got != tc.want {
				t.Errorf("stored session status = %s, want %s", got, tc.want)
			}
		})
	}

	t.Run("approve with another request open stays awaiting_input", func(t *testing.T) {
		sess := e.session(t, "alice")
		first := e.request(t, sess.ID, "agent", belay.HITLInput{})
		second := e.request(t, sess.ID, "agent", belay.HITLInput{})
		if _, err := e.svc.Decide(hitlAs("alice"), belay.DecideInput{CheckpointID: first.ID, Action: belay.ActionApprove, SelectedOption: "ok"}); err != nil {
			t.Fatal(err)
		}
		if got := e.status(t, sess.ID); got != belay.SessionAwaitingInput {
			t.Errorf("status with a request still open = %s, want awaiting_input", got)
		}
		if _, err := e.svc.Decide(hitlAs("alice"), belay.DecideInput{CheckpointID: second.ID, Action: belay.ActionApprove, SelectedOption: "ok"}); err != nil {
			t.Fatal(err)
		}
		if got := e.status(t, sess.ID); got != belay.SessionRunning {
			t.Errorf("status after the last request = %s, want running", got)
		}
	})
}

func TestHITLTimeoutDefaultAppliedOnce(t *testing.T) {
	cases := []struct {
		action     belay.Action
		option     string // the option the automatic decision selects
		wantStatus belay.SessionStatus
	}{
		{belay.ActionApprove, "ok", belay.SessionRunning},
		{belay.ActionReject, "no", belay.SessionFailed},
	}
	// Each way of noticing the expiry: the sweeper, or any read of the request.
	settle := map[string]func(e *hitlEnv, cp *belay.Checkpoint) error{
		"Sweep": func(e *hitlEnv, _ *belay.Checkpoint) error { _, err := e.svc.Sweep(localCtx); return err },
		"GetCheckpoint": func(e *hitlEnv, cp *belay.Checkpoint) error {
			got, err := e.svc.GetCheckpoint(localCtx, cp.ID)
			if err == nil && got.Decision == nil {
				err = fmt.Errorf("GetCheckpoint after expiry shows no decision")
			}
			return err
		},
		"PendingHITL": func(e *hitlEnv, cp *belay.Checkpoint) error {
			list, err := e.svc.PendingHITL(hitlAs("alice"), "")
			for _, p := range list {
				if p.Checkpoint.ID == cp.ID {
					return fmt.Errorf("PendingHITL after expiry still lists the request")
				}
			}
			return err
		},
		"Decide": func(e *hitlEnv, cp *belay.Checkpoint) error {
			_, err := e.svc.Decide(hitlAs("alice"), belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionSkip, SelectedOption: "pass"})
			if belay.ErrorCode(err) != belay.CodeHITLAlreadyDecided {
				return fmt.Errorf("Decide after expiry: %v, want HITL_ALREADY_DECIDED", err)
			}
			return nil
		},
	}
	for _, tc := range cases {
		for how, fn := range settle {
			t.Run(string(tc.action)+" via "+how, func(t *testing.T) {
				e := newHITLEnv(t)
				sess := e.session(t, "alice")
				cp := e.request(t, sess.ID, "agent", belay.HITLInput{Timeout: &belay.TimeoutInput{Duration: 60, DefaultAction: tc.action}})
				e.clock.Advance(59 * time.Second)
				if n, err := e.svc.Sweep(localCtx); err != nil || n != 0 {
					t.Fatalf("Sweep before expiry = %d, %v; want 0", n, err)
				}
				e.clock.Advance(time.Second)
				if err := fn(e, cp); err != nil {
					t.Fatal(err)
				}
				// Every later look must find the same single decision.
				for range 3 {
					if n, err := e.svc.Sweep(localCtx); err != nil || n != 0 {
						t.Fatalf("Sweep after the timeout fired = %d, %v; want 0", n, err)
					}
					if _, err := e.svc.GetCheckpoint(localCtx, cp.ID); err != nil {
						t.Fatal(err)
					}
				}
				d := e.stored(t, cp.ID).Decision
				if d == nil || !d.AutoTriggered || d.UserID != core.SystemUser || d.Action != tc.action || d.SelectedOption != tc.option ||
					d.ResponseTime != 60000 {
					t.Fatalf("decision = %+v, want automatic %s by system after 60000 ms", d, tc.action)
				}
				if got := e.status(t, sess.ID); got != tc.wantStatus {
					t.Errorf("session = %s, want %s", got, tc.wantStatus)
				}
				for _, typ := range []string{belay.EventHITLTimedOut, belay.EventHITLDecided} {
					if n := hitlCount(t, core.StoreOf(e.svc), cp.ID, typ); n != 1 {
						t.Errorf("%d %s events, want 1", n, typ)
					}
				}
			})
		}
	}
}

func TestHITLTimeoutPauseLeavesRequestOpen(t *testing.T) {
	e := newHITLEnv(t)
	sess := e.session(t, "alice")
	cp := e.request(t, sess.ID, "agent", belay.HITLInput{Timeout: &belay.TimeoutInput{Duration: 120, DefaultAction: belay.ActionPause}})
	e.clock.Advance(2 * time.Minute)
	got, err := e.svc.GetCheckpoint(localCtx, cp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Decision != nil || !got.TimeoutFired {
		t.Fatalf("after a pause timeout: decision %+v, timeoutFired %v; want none and true", got.Decision, got.TimeoutFired)
	}
	if s := e.status(t, sess.ID); s != belay.SessionPaused {
		t.Fatalf("session = %s, want paused", s)
	}
	if n, err := e.svc.Sweep(localCtx); err != nil || n != 0 {
		t.Fatalf("Sweep after the pause = %d, %v; want 0", n, err)
	}
	list, err := e.svc.PendingHITL(hitlAs("alice"), sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Checkpoint.ID != cp.ID || list[0].TimeRemaining != nil || list[0].Session.Status != belay.SessionPaused {
		t.Fatalf("pending after a pause = %+v, want the request with no time remaining", list)
	}
	e.clock.Advance(time.Hour)
	res, err := e.svc.Decide(hitlAs("alice"), belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionApprove, SelectedOption: "ok", Feedback: "back from lunch"})
	if err != nil {
		t.Fatalf("a human deciding after the pause: %v", err)
	}
	if res.Session.Status != belay.SessionRunning || res.Decision.AutoTriggered || res.Decision.UserID != "alice" {
		t.Errorf("after deciding a paused request: session %s, decision %+v", res.Session.Status, res.Decision)
	}
	if n := hitlCount(t, core.StoreOf(e.svc), cp.ID, belay.EventHITLTimedOut); n != 1 {
		t.Errorf("%d hitl.timed_out events, want 1", n)
	}
}

// TestHITLDecideRacesTimeout lets a human decision and the timeout of the same
// request land at the same moment, many times: exactly one decision wins and
// the request's events and session agree with it.
func TestHITLDecideRacesTimeout(t *testing.T) {
	e := newHITLEnv(t)
	human, auto := 0, 0
	for i := range 60 {
		defaultAction := belay.ActionApprove
		if i%3 == 1 {
			defaultAction = belay.ActionReject
		}
		sess := e.session(t, "alice")
		cp := e.request(t, sess.ID, "agent", belay.HITLInput{Timeout: &belay.TimeoutInput{Duration: 60, DefaultAction: defaultAction}})
		expiry := cp.HITL.Timeout.ExpiresAt
		e.clock.Set(expiry.Add(-time.Millisecond))

		var wg sync.WaitGroup
		var res *belay.DecideResult
		var decideErr error
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			for range i % 4 { // vary who gets there first
				runtime.Gosched()
			}
			res, decideErr = e.svc.Decide(hitlAs("alice"), belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionSkip, SelectedOption: "pass"})
		})
		wg.Go(func() {
			<-start
			e.clock.Set(expiry)
			if _, err := e.svc.Sweep(localCtx); err != nil {
				t.Errorf("Sweep: %v", err)
			}
		})
		wg.Go(func() {
			<-start
			if _, err := e.svc.GetCheckpoint(localCtx, cp.ID); err != nil {
				t.Errorf("GetCheckpoint: %v", err)
			}
		})
		close(start)
		wg.Wait()
		if _, err := e.svc.Sweep(localCtx); err != nil {
			t.Fatal(err)
		}

		stored := e.stored(t, cp.ID).Decision
		if stored == nil {
			t.Fatalf("round %d: no decision after the race", i)
		}
		st := core.StoreOf(e.svc)
		if n := hitlCount(t, st, cp.ID, belay.EventHITLDecided); n != 1 {
			t.Fatalf("round %d: %d hitl.decided events, want 1", i, n)
		}
		timedOut := hitlCount(t, st, cp.ID, belay.EventHITLTimedOut)
		switch {
		case decideErr == nil:
			human++
			if stored.ID != res.Decision.ID || stored.UserID != "alice" || stored.AutoTriggered || timedOut != 0 {
				t.Fatalf("round %d: human won but stored %+v, %d hitl.timed_out", i, stored, timedOut)
			}
			if s := e.status(t, sess.ID); s != belay.SessionRunning {
				t.Fatalf("round %d: session %s after skip, want running", i, s)
			}
		case belay.IsCode(decideErr, belay.CodeHITLAlreadyDecided):
			auto++
			if !stored.AutoTriggered || stored.UserID != core.SystemUser || stored.Action != defaultAction || timedOut != 1 {
				t.Fatalf("round %d: timeout won but stored %+v, %d hitl.timed_out", i, stored, timedOut)
			}
		default:
			t.Fatalf("round %d: Decide: %v", i, decideErr)
		}
	}
	t.Logf("human decision won %d times, timeout %d times", human, auto)
}

// TestHITLPauseTimeoutRacesDecide: a pause never decides, so the human always
// wins and the session ends up running, whichever lands first.
func TestHITLPauseTimeoutRacesDecide(t *testing.T) {
	e := newHITLEnv(t)
	for i := range 30 {
		sess := e.session(t, "alice")
		cp := e.request(t, sess.ID, "agent", belay.HITLInput{Timeout: &belay.TimeoutInput{Duration: 60, DefaultAction: belay.ActionPause}})
		expiry := cp.HITL.Timeout.ExpiresAt
		e.clock.Set(expiry.Add(-time.Millisecond))
		var wg sync.WaitGroup
		var decideErr error
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			_, decideErr = e.svc.Decide(hitlAs("alice"), belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionApprove, SelectedOption: "ok"})
		})
		wg.Go(func() {
			<-start
			e.clock.Set(expiry)
			if _, err := e.svc.Sweep(localCtx); err != nil {
				t.Errorf("Sweep: %v", err)
			}
		})
		close(start)
		wg.Wait()
		if decideErr != nil {
			t.Fatalf("round %d: Decide: %v", i, decideErr)
		}
		if s := e.status(t, sess.ID); s != belay.SessionRunning {
			t.Fatalf("round %d: session %s, want running", i, s)
		}
		if n := hitlCount(t, core.StoreOf(e.svc), cp.ID, belay.EventHITLTimedOut); n > 1 {
			t.Fatalf("round %d: %d hitl.timed_out events", i, n)
		}
	}
}

func TestHITLRestartKeepsPendingAndFiresExpiredOnce(t *testing.T) {
	e := newHITLEnv(t)
	sess := e.session(t, "alice")
	short := e.request(t, sess.ID, "agent", belay.HITLInput{Timeout: &belay.TimeoutInput{Duration: 60, DefaultAction: belay.ActionApprove}})
	long := e.request(t, sess.ID, "agent", belay.HITLInput{Timeout: &belay.TimeoutInput{Duration: 3600, DefaultAction: belay.ActionReject}})
	never := e.request(t, sess.ID, "agent", belay.HITLInput{})

	e.restart(t)
	for _, cp := range []*belay.Checkpoint{short, long, never} {
		if got := e.stored(t, cp.ID); got.Decision != nil || got.TimeoutFired {
			t.Fatalf("request %s changed across a restart: %+v", cp.ID, got)
		}
	}
	list, err := e.svc.PendingHITL(hitlAs("alice"), sess.ID)
	if err != nil || len(list) != 3 {
		t.Fatalf("pending after restart = %d items, %v; want 3", len(list), err)
	}

	// Down while the short timeout passes; then two processes start on the
	// same database and both sweep.
	if err := e.db.Close(); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Minute)
	e.open(t)
	other, err := sqlite.Open(localCtx, e.path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	svc2 := core.New(core.Options{Store: other, Clock: e.clock})
	var wg sync.WaitGroup
	fired := make([]int, 2)
	for i, svc := range []*core.Service{e.svc, svc2} {
		wg.Go(func() {
			n, err := svc.Sweep(localCtx)
			if err != nil {
				t.Errorf("Sweep: %v", err)
			}
			fired[i] = n
		})
	}
	wg.Wait()
	if fired[0]+fired[1] != 1 {
		t.Errorf("sweeps after restart applied %v timeouts, want 1 in all", fired)
	}
	if d := e.stored(t, short.ID).Decision; d == nil || !d.AutoTriggered || d.Action != belay.ActionApprove {
		t.Errorf("expired request after restart: decision %+v, want automatic approve", d)
	}
	for _, cp := range []*belay.Checkpoint{long, never} {
		if got := e.stored(t, cp.ID); got.Decision != nil || got.TimeoutFired {
			t.Errorf("request %s should still be pending: %+v", cp.ID, got)
		}
	}
	if n := hitlCount(t, core.StoreOf(e.svc), short.ID, belay.EventHITLTimedOut); n != 1 {
		t.Errorf("%d hitl.timed_out events, want 1", n)
	}
	if s := e.status(t, sess.ID); s != belay.SessionAwaitingInput {
		t.Errorf("session = %s, want awaiting_input (two requests still open)", s)
	}
}

// TestHITLIdleSweepWakesNobody: a sweep that applies nothing must not wake
// event readers, or RunSweeper, which listens to the same wake-ups, would
// sweep again at once, forever.
func TestHITLIdleSweepWakesNobody(t *testing.T) {
	e := newHITLEnv(t)
	sess := e.session(t, "alice")
	e.request(t, sess.ID, "agent", belay.HITLInput{Timeout: &belay.TimeoutInput{Duration: 60, DefaultAction: belay.ActionApprove}})
	wake, cancel := e.svc.Wake()
	defer cancel()
	if n, err := e.svc.Sweep(localCtx); err != nil || n != 0 {
		t.Fatalf("Sweep = %d, %v; want 0", n, err)
	}
	select {
	case <-wake:
		t.Fatal("a sweep that applied nothing woke the event readers (and would wake RunSweeper into a busy loop)")
	default:
	}
	e.clock.Advance(time.Minute)
	if n, err := e.svc.Sweep(localCtx); err != nil || n != 1 {
		t.Fatalf("Sweep after expiry = %d, %v; want 1", n, err)
	}
	select {
	case <-wake:
	default:
		t.Fatal("a sweep that applied a timeout woke no one")
	}
}

// TestHITLRunSweeperFiresOnTime runs the sweeper in a synctest bubble: the
// service's clock is the bubble's fake wall clock, so minutes of timeouts pass
// at once and the sweeper's timers are checked to the second.
func TestHITLRunSweeperFiresOnTime(t *testing.T) {
	if t.Run("IdleSweepWakesNobody", TestHITLIdleSweepWakesNobody); t.Failed() {
		t.Skip("RunSweeper would spin, and a spinning bubble never lets its fake time advance")
	}
	synctest.Test(t, func(t *testing.T) {
		db, err := sqlite.Open(localCtx, filepath.Join(t.TempDir(), "belay.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		svc := core.New(core.Options{Store: db, Clock: belay.SystemClock{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		ctx, stop := context.WithCancel(localCtx)
		done := make(chan struct{})
		go func() {
			svc.RunSweeper(ctx)
			close(done)
		}()
		defer func() { // before db.Close, also when a check fails
			stop()
			<-done
		}()

		sess, err := svc.CreateSession(hitlAs("alice"), belay.CreateSessionInput{Title: "bubble"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := createToken(localCtx, svc, "agent", false); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.GrantSession(localCtx, belay.GrantInput{SessionID: sess.ID, User: "agent", Role: belay.RoleWrite}); err != nil {
			t.Fatal(err)
		}
		mk := func(seconds int, a belay.Action) *belay.Checkpoint {
			cp, err := svc.CreateCheckpoint(hitlAs("agent"), belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "wait",
				HITL: &belay.HITLInput{Required: true, Timeout: &belay.TimeoutInput{Duration: seconds, DefaultAction: a}}})
			if err != nil {
				t.Fatal(err)
			}
			return cp
		}
		read := func(id string) *belay.Checkpoint {
			cp, err := db.GetCheckpoint(localCtx, id)
			if err != nil {
				t.Fatal(err)
			}
			return cp
		}
		approve := mk(60, belay.ActionApprove)
		pause := mk(120, belay.ActionPause)

		time.Sleep(59 * time.Second)
		synctest.Wait()
		if cp := read(approve.ID); cp.Decision != nil || cp.TimeoutFired {
			t.Fatalf("fired a second early: %+v", cp.Decision)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		cp := read(approve.ID)
		if cp.Decision == nil || !cp.Decision.AutoTriggered || cp.Decision.Action != belay.ActionApprove {
			t.Fatalf("60 s timeout not applied at 60 s: %+v", cp.Decision)
		}
		if !cp.Decision.DecidedAt.Equal(approve.HITL.Timeout.ExpiresAt) {
			t.Errorf("decided at %v, want exactly the expiry %v", cp.Decision.DecidedAt, approve.HITL.Timeout.ExpiresAt)
		}

		time.Sleep(time.Minute)
		synctest.Wait()
		if cp := read(pause.ID); !cp.TimeoutFired || cp.Decision != nil {
			t.Fatalf("pause timeout: fired %v decision %+v", cp.TimeoutFired, cp.Decision)
		}
		if s, _ := svc.GetSession(localCtx, sess.ID); s.Status != belay.SessionPaused {
			t.Errorf("session = %s, want paused", s.Status)
		}

		late := mk(60, belay.ActionReject)
		time.Sleep(time.Minute)
		synctest.Wait()
		if cp := read(late.ID); cp.Decision == nil || cp.Decision.Action != belay.ActionReject {
			t.Errorf("request created while the sweeper slept: %+v", cp.Decision)
		}
		for _, id := range []string{approve.ID, pause.ID, late.ID} {
			if n := hitlCount(t, db, id, belay.EventHITLTimedOut); n != 1 {
				t.Errorf("%s: %d hitl.timed_out events, want 1", id, n)
			}
		}
	})
}

// sweeperErrors counts the records the HITL sweeper logs.
type sweeperErrors struct{ n atomic.Int64 }

func (h *sweeperErrors) Enabled(context.Context, slog.Level) bool { return true }
func (h *sweeperErrors) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *sweeperErrors) WithGroup(string) slog.Handler            { return h }
func (h *sweeperErrors) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "hitl sweeper" {
		h.n.Add(1)
	}
	return nil
}

// TestHITLRunSweeperBacksOffWhileSweepsFail: a request falls due while
// every write fails (a full disk). The sweeper tries again, each failure
// logged once, backing off to once a SweepInterval rather than every
// millisecond (the deadline stays past, and it slept 1 ms: 30,001 errors in
// 30 s of the bubble's time); once writes work again it settles the request
// within an interval.
func TestHITLRunSweeperBacksOffWhileSweepsFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, err := sqlite.Open(localCtx, filepath.Join(t.TempDir(), "belay.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		fs := &faultyStore{Store: db}
		logged := &sweeperErrors{}
		svc := core.New(core.Options{Store: fs, Clock: belay.SystemClock{}, Logger: slog.New(logged)})
		sess, err := svc.CreateSession(hitlAdminCtx, belay.CreateSessionInput{Title: "full disk"})
		if err != nil {
			t.Fatal(err)
		}
		cp, err := svc.CreateCheckpoint(hitlAdminCtx, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "wait",
			HITL: &belay.HITLInput{Required: true, Timeout: &belay.TimeoutInput{Duration: 60, DefaultAction: belay.ActionApprove}}})
		if err != nil {
			t.Fatal(err)
		}
		fs.fail.Store(true)
		ctx, stop := context.WithCancel(localCtx)
		done := make(chan struct{})
		go func() {
			svc.RunSweeper(ctx)
			close(done)
		}()
		defer func() { // before db.Close, also when a check fails
			stop()
			<-done
		}()

		const failing = 30 * time.Second
		time.Sleep(60*time.Second + failing)
		synctest.Wait()
		// Doubling from a millisecond reaches the interval in about ten
		// attempts; then one a second.
		n := logged.n.Load()
		t.Logf("%d sweeper errors logged in %v of failing writes", n, failing)
		if n < int64(failing/core.SweepInterval) || n > int64(failing/core.SweepInterval)+12 {
			t.Errorf("%d sweeper errors logged in %v of failing writes, want one per attempt, at most one a %v after backing off", n, failing, core.SweepInterval)
		}
		fs.fail.Store(false)
		time.Sleep(core.SweepInterval)
		synctest.Wait()
		got, err := db.GetCheckpoint(localCtx, cp.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Decision == nil || !got.Decision.AutoTriggered {
			t.Errorf("the timeout was not applied within %v of writes working again: %+v", core.SweepInterval, got.Decision)
		}
	})
}

func TestHITLPendingListsWhatCallerMayDecide(t *testing.T) {
	e := newHITLEnv(t)
	sess := e.session(t, "alice")
	other := e.session(t, "carol")
	timed := e.request(t, sess.ID, "agent", belay.HITLInput{Timeout: &belay.TimeoutInput{Duration: 600, DefaultAction: belay.ActionApprove}})
	plain := e.request(t, sess.ID, "agent", belay.HITLInput{Approvers: []string{"bob"}})
	carols := e.request(t, other.ID, "agent", belay.HITLInput{})
	e.clock.Advance(100 * time.Second)

	ids := func(ctx context.Context, session string) []string {
		t.Helper()
		list, err := e.svc.PendingHITL(ctx, session)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, p := range list {
			out = append(out, p.Checkpoint.ID)
		}
		return out
	}
	for name, tc := range map[string]struct {
		ctx     context.Context
		session string
		want    []string
	}{
		"owner":               {hitlAs("alice"), "", []string{timed.ID, plain.ID}},
		"owner, one session":  {hitlAs("alice"), sess.ID, []string{timed.ID, plain.ID}},
		"approver":            {hitlAs("bob"), "", []string{plain.ID}},
		"stranger":            {hitlAs("mallory"), "", []string{}},
		"admin":               {hitlAdminCtx, "", []string{timed.ID, plain.ID, carols.ID}},
		"admin, one session":  {hitlAdminCtx, other.ID, []string{carols.ID}},
		"other session owner": {hitlAs("carol"), "", []string{carols.ID}},
	} {
		if got := ids(tc.ctx, tc.session); !slices.Equal(got, tc.want) {
			t.Errorf("%s: pending = %v, want %v", name, got, tc.want)
		}
	}

	list, err := e.svc.PendingHITL(hitlAs("alice"), sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	p := list[0]
	if p.TimeRemaining == nil || *p.TimeRemaining != 500 {
		t.Errorf("timeRemaining = %v, want 500", p.TimeRemaining)
	}
	if p.Session.ID != sess.ID || p.Session.Title != sess.Title || p.Session.Status != belay.SessionAwaitingInput {
		t.Errorf("session summary = %+v", p.Session)
	}
	if list[1].TimeRemaining != nil {
		t.Errorf("a request without timeout has timeRemaining %d", *list[1].TimeRemaining)
	}
	_, err = e.svc.PendingHITL(hitlAs("alice"), "not-a-uuid")
	testutil.WantCode(t, err, belay.CodeValidation)
}

// TestHITLPendingFindsOwnRequestAmongMany: the requests a caller may decide
// are found however many requests of other people are open.
func TestHITLPendingFindsOwnRequestAmongMany(t *testing.T) {
	e := newHITLEnv(t)
	crowd := e.session(t, "bob")
	for range 501 {
		e.request(t, crowd.ID, "agent", belay.HITLInput{})
	}
	mine := e.request(t, e.session(t, "alice").ID, "agent", belay.HITLInput{})
	list, err := e.svc.PendingHITL(hitlAs("alice"), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Checkpoint.ID != mine.ID {
		t.Errorf("alice's pending = %d items, want her one request %s", len(list), mine.ID)
	}
}

func TestHITLWhoMayDecide(t *testing.T) {
	e := newHITLEnv(t)
	sess := e.session(t, "alice")
	cases := []struct {
		name    string
		ctx     context.Context
		creator string
		hitl    belay.HITLInput
		want    belay.Code
	}{
		{"owner", hitlAs("alice"), "agent", belay.HITLInput{}, ""},
		{"admin", hitlAdminCtx, "agent", belay.HITLInput{}, ""},
		{"listed approver", hitlAs("bob"), "agent", belay.HITLInput{Approvers: []string{"bob"}}, ""},
		// Who may not read a request is told it does not exist.
		{"stranger", hitlAs("mallory"), "agent", belay.HITLInput{Approvers: []string{"bob"}}, belay.CodeCheckpointNotFound},
		{"anonymous", context.Background(), "agent", belay.HITLInput{}, belay.CodeUnauthenticated},
		{"requester may decide by default", hitlAs("alice"), "alice", belay.HITLInput{}, ""},
		{"requester with forbidSelfApproval", hitlAs("alice"), "alice", belay.HITLInput{ForbidSelfApproval: true}, belay.CodeUnauthorized},
		{"requester admin with forbidSelfApproval", hitlAdminCtx, "root", belay.HITLInput{ForbidSelfApproval: true}, belay.CodeUnauthorized},
		{"requester approver with forbidSelfApproval", hitlAs("bob"), "bob", belay.HITLInput{ForbidSelfApproval: true, Approvers: []string{"bob"}}, belay.CodeUnauthorized},
		{"owner with forbidSelfApproval by another", hitlAs("alice"), "agent", belay.HITLInput{ForbidSelfApproval: true}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cp := e.request(t, sess.ID, tc.creator, tc.hitl)
			_, err := e.svc.Decide(tc.ctx, belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionApprove, SelectedOption: "ok"})
			if got := belay.ErrorCode(err); got != tc.want {
				t.Fatalf("Decide: %v, want code %q", err, tc.want)
			}
			pending, err := e.svc.PendingHITL(tc.ctx, sess.ID)
			if tc.want == belay.CodeUnauthenticated {
				testutil.WantCode(t, err, belay.CodeUnauthenticated)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != "" && slices.ContainsFunc(pending, func(p belay.PendingHITL) bool { return p.Checkpoint.ID == cp.ID }) {
				t.Errorf("PendingHITL lists a request the caller may not decide")
			}
		})
	}
}

func TestHITLTokens(t *testing.T) {
	e := newHITLEnv(t)
	ctx := context.Background()
	admin, err := e.svc.Bootstrap(ctx)
	if err != nil || admin == "" {
		t.Fatalf("Bootstrap = %q, %v; want a token", admin, err)
	}
	if again, err := e.svc.Bootstrap(ctx); err != nil || again != "" {
		t.Fatalf("second Bootstrap = %q, %v; want no token", again, err)
	}
	a, err := e.svc.Authenticate(ctx, admin)
	if err != nil || a.UserID != core.BootstrapUser || !a.Admin {
		t.Fatalf("Authenticate(bootstrap token) = %+v, %v", a, err)
	}
	adminCtx := belay.WithActor(ctx, a)

	alice, err := createToken(adminCtx, e.svc, "alice", false)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := e.svc.Authenticate(ctx, alice); err != nil || a.UserID != "alice" || a.Admin {
		t.Fatalf("Authenticate(alice) = %+v, %v", a, err)
	}
	_, err = createToken(belay.WithActor(ctx, belay.Actor{UserID: "alice"}), e.svc, "eve", true)
	testutil.WantCode(t, err, belay.CodeUnauthorized)
	_, err = createToken(ctx, e.svc, "eve", false)
	testutil.WantCode(t, err, belay.CodeUnauthenticated)
	_, err = createToken(adminCtx, e.svc, core.SystemUser, false)
	testutil.WantCode(t, err, belay.CodeValidation)

	for _, bad := range []string{"", "belay_", "belay_unknown", alice + "x", "Bearer " + alice} {
		_, err := e.svc.Authenticate(ctx, bad)
		testutil.WantCode(t, err, belay.CodeUnauthenticated)
	}

	// A second token for alice works alongside the first.
	alice2, err := createToken(adminCtx, e.svc, "alice", false)
	if err != nil || alice2 == alice {
		t.Fatalf("second token = %q, %v", alice2, err)
	}
	for _, tok := range []string{alice, alice2} {
		if a, err := e.svc.Authenticate(ctx, tok); err != nil || a.UserID != "alice" {
			t.Errorf("Authenticate = %+v, %v", a, err)
		}
	}
}

// createToken creates a token for user and returns its secret.
func createToken(ctx context.Context, svc belay.Service, user string, admin bool) (string, error) {
	tk, err := svc.CreateToken(ctx, belay.CreateTokenInput{User: user, Admin: admin})
	if err != nil {
		return "", err
	}
	return tk.Secret, nil
}

func TestHITLWaitDecision(t *testing.T) {
	e := newHITLEnv(t)
	sess := e.session(t, "alice")
	cp := e.request(t, sess.ID, "agent", belay.HITLInput{})
	ctx, cancel := context.WithTimeout(localCtx, 20*time.Second)
	defer cancel()

	got := make(chan *belay.WaitResult, 1)
	go func() {
		res, err := e.svc.WaitDecision(ctx, cp.ID, time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- res
	}()
	if _, err := e.svc.Decide(hitlAs("alice"), belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionRetry, SelectedOption: "again"}); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-got:
		if res == nil || !res.Decided || res.Decision.Action != belay.ActionRetry || res.Session.Status != belay.SessionRunning {
			t.Fatalf("WaitDecision = %+v", res)
		}
	case <-ctx.Done():
		t.Fatal("WaitDecision did not return after the decision")
	}

	// Already decided: at once, even with no wait.
	res, err := e.svc.WaitDecision(ctx, cp.ID, 0)
	if err != nil || !res.Decided || res.Decision.Action != belay.ActionRetry {
		t.Fatalf("WaitDecision on a decided request = %+v, %v", res, err)
	}

	open := e.request(t, sess.ID, "agent", belay.HITLInput{})
	res, err = e.svc.WaitDecision(ctx, open.ID, 50*time.Millisecond)
	if err != nil || res.Decided || res.Decision != nil || res.Checkpoint.ID != open.ID {
		t.Fatalf("WaitDecision on an open request = %+v, %v; want decided false", res, err)
	}

	plain, err := e.svc.CreateCheckpoint(hitlAs("agent"), belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.WaitDecision(ctx, plain.ID, time.Second)
	testutil.WantCode(t, err, belay.CodeHITLNotRequired)
}
