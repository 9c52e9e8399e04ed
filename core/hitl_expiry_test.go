package core_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/sqlite"
	"github.com/google/uuid"
)

// expiring creates a HITL checkpoint in sessionID, by agent, whose
// checkpoint expires after expiresIn. h.Required is set and h.Options
// default to hitlOptions.
func (e *hitlEnv) expiring(tb testing.TB, sessionID string, expiresIn time.Duration, h belay.HITLInput) *belay.Checkpoint {
	tb.Helper()
	h.Required = true
	if h.Options == nil {
		h.Options = hitlOptions
	}
	e.member(tb, sessionID, "agent")
	exp := e.clock.Now().Add(expiresIn)
	cp, err := e.svc.CreateCheckpoint(hitlAs("agent"), belay.CreateCheckpointInput{SessionID: sessionID, Summary: "deploy?", ExpiresAt: &exp, HITL: &h})
	if err != nil {
		tb.Fatalf("CreateCheckpoint: %v", err)
	}
	return cp
}

// timedOutReasons returns the reasons of the hitl.timed_out events about
// checkpoint id, oldest first.
func timedOutReasons(tb testing.TB, st store.Reader, id string) []string {
	tb.Helper()
	evs, err := st.ListEvents(localCtx, store.EventQuery{Scope: store.Everything, Types: []string{belay.EventHITLTimedOut}, Limit: 100000})
	if err != nil {
		tb.Fatalf("ListEvents: %v", err)
	}
	var out []string
	for _, ev := range evs {
		if ev.CheckpointID != id {
			continue
		}
		var d struct{ Reason string }
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			tb.Fatalf("hitl.timed_out data %s: %v", ev.Data, err)
		}
		out = append(out, d.Reason)
	}
	return out
}

// TestAnExpiringRequestIsDecidedAtItsExpiry: no one may decide a request once
// its checkpoint expires, so the expiry decides it, exactly once, however it
// is noticed: with its timeout's default action when that approves or
// rejects, else (no timeout, or a pause) with a rejection. Its timeout is
// stored as asked, not moved to the expiry.
func TestAnExpiringRequestIsDecidedAtItsExpiry(t *testing.T) {
	cases := []struct {
		name       string
		timeout    *belay.TimeoutInput
		onReject   string
		action     belay.Action
		option     string
		wantStatus belay.SessionStatus
	}{
		{"no timeout", nil, "", belay.ActionReject, "no", belay.SessionFailed},
		{"no timeout, onReject continue", nil, belay.OnRejectContinue, belay.ActionReject, "no", belay.SessionRunning},
		{"an approve timeout after the expiry", &belay.TimeoutInput{Duration: 7200, DefaultAction: belay.ActionApprove}, "", belay.ActionApprove, "ok", belay.SessionRunning},
		{"a pause timeout after the expiry", &belay.TimeoutInput{Duration: 7200, DefaultAction: belay.ActionPause}, "", belay.ActionReject, "no", belay.SessionFailed},
	}
	settle := map[string]func(e *hitlEnv, cp *belay.Checkpoint) error{
		"Sweep": func(e *hitlEnv, _ *belay.Checkpoint) error {
			if n, err := e.svc.Sweep(localCtx); err != nil || n != 1 {
				return fmt.Errorf("Sweep at the expiry = %d, %v; want 1", n, err)
			}
			return nil
		},
		"GetCheckpoint": func(e *hitlEnv, cp *belay.Checkpoint) error {
			got, err := e.svc.GetCheckpoint(hitlAs("alice"), cp.ID)
			if err == nil && got.Decision == nil {
				err = fmt.Errorf("GetCheckpoint at the expiry shows no decision")
			}
			return err
		},
		"PendingHITL": func(e *hitlEnv, cp *belay.Checkpoint) error {
			list, err := e.svc.PendingHITL(hitlAs("alice"), "")
			if len(list) != 0 {
				return fmt.Errorf("PendingHITL at the expiry still lists %d requests", len(list))
			}
			return err
		},
		"Decide": func(e *hitlEnv, cp *belay.Checkpoint) error {
			_, err := e.svc.Decide(hitlAs("alice"), belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionApprove, SelectedOption: "ok"})
			if belay.ErrorCode(err) != belay.CodeCheckpointExpired {
				return fmt.Errorf("Decide at the expiry: %v, want CHECKPOINT_EXPIRED", err)
			}
			return nil
		},
		"WaitDecision": func(e *hitlEnv, cp *belay.Checkpoint) error {
			res, err := e.svc.WaitDecision(hitlAs("alice"), cp.ID, 0)
			if err == nil && !res.Decided {
				err = fmt.Errorf("WaitDecision at the expiry: not decided")
			}
			return err
		},
	}
	for _, tc := range cases {
		for how, fn := range settle {
			t.Run(tc.name+" via "+how, func(t *testing.T) {
				e := newHITLEnv(t)
				sess := e.session(t, "alice")
				cp := e.expiring(t, sess.ID, time.Hour, belay.HITLInput{Timeout: tc.timeout, OnReject: tc.onReject})
				if tc.timeout == nil && cp.HITL.Timeout != nil || tc.timeout != nil && (cp.HITL.Timeout == nil || cp.HITL.Timeout.Duration != tc.timeout.Duration ||
					cp.HITL.Timeout.DefaultAction != tc.timeout.DefaultAction || !cp.HITL.Timeout.ExpiresAt.Equal(cp.CreatedAt.Add(2*time.Hour))) {
					t.Fatalf("stored timeout = %+v, want the one asked for, %+v", cp.HITL.Timeout, tc.timeout)
				}
				e.clock.Advance(time.Hour - time.Second)
				if n, err := e.svc.Sweep(localCtx); err != nil || n != 0 {
					t.Fatalf("Sweep before the expiry = %d, %v; want 0", n, err)
				}
				e.clock.Advance(time.Second)
				if err := fn(e, cp); err != nil {
					t.Fatal(err)
				}
				for range 3 {
					if n, err := e.svc.Sweep(localCtx); err != nil || n != 0 {
						t.Fatalf("Sweep after the expiry fired = %d, %v; want 0", n, err)
					}
					if _, err := e.svc.GetCheckpoint(localCtx, cp.ID); err != nil {
						t.Fatal(err)
					}
				}
				d := e.stored(t, cp.ID).Decision
				if d == nil || !d.AutoTriggered || d.UserID != core.SystemUser || d.Action != tc.action || d.SelectedOption != tc.option ||
					d.ResponseTime != time.Hour.Milliseconds() || !strings.Contains(d.Feedback, "expired at 2025-01-15T12:00:00Z with no decision") {
					t.Fatalf("decision = %+v, want automatic %s (%s) by system at the expiry", d, tc.action, tc.option)
				}
				if got := e.status(t, sess.ID); got != tc.wantStatus {
					t.Errorf("session = %s, want %s", got, tc.wantStatus)
				}
				if got := timedOutReasons(t, core.StoreOf(e.svc), cp.ID); len(got) != 1 || got[0] != "expired" {
					t.Errorf("hitl.timed_out reasons = %v, want [expired]", got)
				}
				if n := hitlCount(t, core.StoreOf(e.svc), cp.ID, belay.EventHITLDecided); n != 1 {
					t.Errorf("%d hitl.decided events, want 1", n)
				}
				_, err := e.svc.Decide(hitlAs("alice"), belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionApprove, SelectedOption: "ok"})
				testutil.WantCode(t, err, belay.CodeCheckpointExpired)
			})
		}
	}
}

// TestAPauseTimeoutBeforeTheExpiry: a pause timeout due before the expiry
// pauses the session and leaves the request open; at the expiry, no one may
// decide it any more, so it is rejected and leaves the pending list.
func TestAPauseTimeoutBeforeTheExpiry(t *testing.T) {
	e := newHITLEnv(t)
	sess := e.session(t, "alice")
	cp := e.expiring(t, sess.ID, time.Hour, belay.HITLInput{Timeout: &belay.TimeoutInput{Duration: 1800, DefaultAction: belay.ActionPause}})
	e.clock.Advance(30 * time.Minute)
	if n, err := e.svc.Sweep(localCtx); err != nil || n != 1 {
		t.Fatalf("Sweep at the pause = %d, %v; want 1", n, err)
	}
	if got := e.stored(t, cp.ID); got.Decision != nil || !got.TimeoutFired {
		t.Fatalf("after the pause: decision %+v, timeoutFired %v; want none and true", got.Decision, got.TimeoutFired)
	}
	if s := e.status(t, sess.ID); s != belay.SessionPaused {
		t.Fatalf("session after the pause = %s, want paused", s)
	}
	if list, err := e.svc.PendingHITL(hitlAs("alice"), sess.ID); err != nil || len(list) != 1 {
		t.Fatalf("pending after the pause = %d, %v; want the request", len(list), err)
	}
	e.clock.Advance(30*time.Minute - time.Millisecond)
	if n, err := e.svc.Sweep(localCtx); err != nil || n != 0 {
		t.Fatalf("Sweep before the expiry = %d, %v; want 0", n, err)
	}
	e.clock.Advance(time.Millisecond)
	if n, err := e.svc.Sweep(localCtx); err != nil || n != 1 {
		t.Fatalf("Sweep at the expiry = %d, %v; want 1", n, err)
	}
	if d := e.stored(t, cp.ID).Decision; d == nil || !d.AutoTriggered || d.Action != belay.ActionReject || d.SelectedOption != "no" {
		t.Fatalf("decision at the expiry = %+v, want an automatic rejection", d)
	}
	if list, err := e.svc.PendingHITL(hitlAs("alice"), sess.ID); err != nil || len(list) != 0 {
		t.Errorf("pending after the expiry = %d, %v; want none", len(list), err)
	}
	if s := e.status(t, sess.ID); s != belay.SessionFailed {
		t.Errorf("session after the expiry = %s, want failed (onReject fail)", s)
	}
	if got := timedOutReasons(t, core.StoreOf(e.svc), cp.ID); len(got) != 2 || got[0] != "timeout" || got[1] != "expired" {
		t.Errorf("hitl.timed_out reasons = %v, want [timeout expired]", got)
	}
}

// TestATimeoutBeforeTheExpiryDecidesFirst: a timeout due before the expiry
// applies its own default action, at its own deadline.
func TestATimeoutBeforeTheExpiryDecidesFirst(t *testing.T) {
	e := newHITLEnv(t)
	sess := e.session(t, "alice")
	cp := e.expiring(t, sess.ID, time.Hour, belay.HITLInput{Timeout: &belay.TimeoutInput{Duration: 1800, DefaultAction: belay.ActionApprove}})
	e.clock.Advance(30 * time.Minute)
	got, err := e.svc.GetCheckpoint(hitlAs("alice"), cp.ID)
	if err != nil || got.Decision == nil || got.Decision.Action != belay.ActionApprove || !got.Decision.AutoTriggered {
		t.Fatalf("request at its timeout = %+v, %v; want approved by the timeout", got, err)
	}
	e.clock.Advance(time.Hour)
	if n, err := e.svc.Sweep(localCtx); err != nil || n != 0 {
		t.Errorf("Sweep after the expiry = %d, %v; want 0 (decided already)", n, err)
	}
	if got := timedOutReasons(t, core.StoreOf(e.svc), cp.ID); len(got) != 1 || got[0] != "timeout" {
		t.Errorf("hitl.timed_out reasons = %v, want [timeout]", got)
	}
}

// TestADecisionBeforeTheExpiryIsRetriedAfterIt: a retry under the
// idempotency key of a decision made before the expiry gets that decision;
// any other decision after the expiry is CHECKPOINT_EXPIRED.
func TestADecisionBeforeTheExpiryIsRetriedAfterIt(t *testing.T) {
	e := newHITLEnv(t)
	sess := e.session(t, "alice")
	cp := e.expiring(t, sess.ID, time.Hour, belay.HITLInput{})
	in := belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionApprove, SelectedOption: "ok", IdempotencyKey: "k-1"}
	first, err := e.svc.Decide(hitlAs("alice"), in)
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Hour)
	again, err := e.svc.Decide(hitlAs("alice"), in)
	if err != nil || again.Decision.ID != first.Decision.ID {
		t.Fatalf("retry after the expiry = %+v, %v; want the decision made", again, err)
	}
	in.IdempotencyKey = "k-2"
	_, err = e.svc.Decide(hitlAs("alice"), in)
	testutil.WantCode(t, err, belay.CodeCheckpointExpired)
	if n := hitlCount(t, core.StoreOf(e.svc), cp.ID, belay.EventHITLTimedOut); n != 0 {
		t.Errorf("%d hitl.timed_out events for a request decided in time, want 0", n)
	}
}

// TestAnExpiringRequestNeedsARejectOption: the expiry rejects a request
// whose timeout does not approve or reject it, so such a request must offer
// an option with the reject action.
func TestAnExpiringRequestNeedsARejectOption(t *testing.T) {
	e := newHITLEnv(t)
	sess := e.session(t, "alice")
	e.member(t, sess.ID, "agent")
	noReject := []belay.HITLOption{
		{ID: "ok", Label: "Approve", Action: belay.ActionApprove, IsDefault: true},
		{ID: "change", Label: "Change", Action: belay.ActionModify},
	}
	exp := e.clock.Now().Add(time.Hour)
	for name, tc := range map[string]struct {
		expiresAt *time.Time
		timeout   *belay.TimeoutInput
		ok        bool
	}{
		"expiring, no timeout":          {&exp, nil, false},
		"expiring, a pause timeout":     {&exp, &belay.TimeoutInput{Duration: 60, DefaultAction: belay.ActionPause}, false},
		"expiring, an approve timeout":  {&exp, &belay.TimeoutInput{Duration: 60, DefaultAction: belay.ActionApprove}, true},
		"not expiring, no timeout":      {nil, nil, true},
		"not expiring, a pause timeout": {nil, &belay.TimeoutInput{Duration: 60, DefaultAction: belay.ActionPause}, true},
	} {
		_, err := e.svc.CreateCheckpoint(hitlAs("agent"), belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "deploy?", ExpiresAt: tc.expiresAt,
			HITL: &belay.HITLInput{Required: true, Options: noReject, Timeout: tc.timeout}})
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v", name, err)
		case !tc.ok:
			if be := testutil.WantCode(t, err, belay.CodeValidation, "expiresAt"); be != nil && !strings.Contains(be.Message, "reject") {
				t.Errorf("%s: message %q does not say a reject option is needed", name, be.Message)
			}
		}
	}
}

// TestALegacyExpiringRequestIsSettled: requests stored by earlier versions
// with an expiry and no timeout are settled at the expiry too, one that
// offers no reject option included (now refused at creation): it is
// rejected without an option chosen.
func TestALegacyExpiringRequestIsSettled(t *testing.T) {
	e := newHITLEnv(t)
	sess := e.session(t, "alice")
	held := e.request(t, sess.ID, "agent", belay.HITLInput{})
	exp := e.clock.Now().Add(time.Hour)
	legacy := func(seq int64, options []belay.HITLOption) *belay.Checkpoint {
		t.Helper()
		cp := *held
		h := *held.HITL
		cp.ID, cp.Seq, cp.ExpiresAt, cp.HITL = uuid.Must(uuid.NewV7()).String(), seq, &exp, &h
		h.Options, h.OnReject = options, belay.OnRejectContinue
		sum, err := cp.ComputeChecksum()
		if err != nil {
			t.Fatal(err)
		}
		cp.Checksum = sum
		if err := core.StoreOf(e.svc).Update(localCtx, func(tx store.Tx) error { return tx.InsertCheckpoint(localCtx, &cp) }); err != nil {
			t.Fatal(err)
		}
		return &cp
	}
	withReject := legacy(100, hitlOptions)
	noReject := legacy(101, []belay.HITLOption{{ID: "ok", Label: "Approve", Action: belay.ActionApprove, IsDefault: true}})
	e.clock.Advance(time.Hour)
	if n, err := e.svc.Sweep(localCtx); err != nil || n != 2 {
		t.Fatalf("Sweep at the expiry = %d, %v; want 2", n, err)
	}
	if d := e.stored(t, withReject.ID).Decision; d == nil || !d.AutoTriggered || d.Action != belay.ActionReject || d.SelectedOption != "no" {
		t.Errorf("legacy request's decision = %+v, want an automatic rejection with option no", d)
	}
	if d := e.stored(t, noReject.ID).Decision; d == nil || !d.AutoTriggered || d.Action != belay.ActionReject || d.SelectedOption != "" {
		t.Errorf("legacy request without a reject option: decision = %+v, want an automatic rejection choosing no option", d)
	}
	if s := e.status(t, sess.ID); s != belay.SessionAwaitingInput {
		t.Errorf("session = %s, want awaiting_input (one request still open)", s)
	}
}

// TestAnExpiringRequestIsExported: a session with an expiring request
// exports and imports, before the expiry and after it decided the request.
func TestAnExpiringRequestIsExported(t *testing.T) {
	e := newHITLEnv(t)
	sess := e.session(t, "alice")
	cp := e.expiring(t, sess.ID, 48*time.Hour, belay.HITLInput{})
	roundTrip := func(want *belay.Decision) {
		t.Helper()
		var arc bytes.Buffer
		if err := e.svc.ExportSession(hitlAdminCtx, sess.ID, &arc); err != nil {
			t.Fatalf("export: %v", err)
		}
		dst := newHITLEnv(t)
		dst.clock.Set(e.clock.Now())
		if _, err := dst.svc.ImportSession(hitlAdminCtx, belay.ImportInput{}, &arc); err != nil {
			t.Fatalf("import: %v", err)
		}
		got := dst.stored(t, cp.ID)
		if got.HITL.Timeout != nil || !got.ExpiresAt.Equal(*cp.ExpiresAt) || (got.Decision == nil) != (want == nil) ||
			want != nil && got.Decision.SelectedOption != want.SelectedOption {
			t.Errorf("imported request = %+v, decision %+v; want no timeout, the expiry and decision %+v", got.HITL, got.Decision, want)
		}
	}
	roundTrip(nil)
	e.clock.Advance(48 * time.Hour)
	got, err := e.svc.GetCheckpoint(hitlAdminCtx, cp.ID)
	if err != nil || got.Decision == nil {
		t.Fatalf("request after its expiry = %+v, %v", got, err)
	}
	roundTrip(got.Decision)
}

// TestAnExpiryFiresOnceAcrossProcesses: two processes on one database sweep
// and read expiring requests at once; each request is decided once, with
// one hitl.timed_out event.
func TestAnExpiryFiresOnceAcrossProcesses(t *testing.T) {
	e := newHITLEnv(t)
	sess := e.session(t, "alice")
	var cps []*belay.Checkpoint
	for range 20 {
		cps = append(cps, e.expiring(t, sess.ID, time.Hour, belay.HITLInput{OnReject: belay.OnRejectContinue}))
	}
	other, err := sqlite.Open(localCtx, e.path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	svc2 := core.New(core.Options{Store: other, Clock: e.clock})
	e.clock.Advance(time.Hour)
	var wg sync.WaitGroup
	for _, svc := range []*core.Service{e.svc, svc2} {
		wg.Go(func() {
			if _, err := svc.Sweep(localCtx); err != nil {
				t.Errorf("Sweep: %v", err)
			}
		})
		wg.Go(func() {
			for _, cp := range cps {
				if _, err := svc.GetCheckpoint(hitlAs("alice"), cp.ID); err != nil {
					t.Errorf("GetCheckpoint: %v", err)
				}
			}
		})
	}
	wg.Wait()
	for _, cp := range cps {
		if d := e.stored(t, cp.ID).Decision; d == nil || d.Action != belay.ActionReject {
			t.Errorf("request %s: decision %+v, want the expiry's rejection", cp.ID, d)
		}
		for _, typ := range []string{belay.EventHITLTimedOut, belay.EventHITLDecided} {
			if n := hitlCount(t, core.StoreOf(e.svc), cp.ID, typ); n != 1 {
				t.Errorf("request %s: %d %s events, want 1", cp.ID, n, typ)
			}
		}
	}
	if s := e.status(t, sess.ID); s != belay.SessionRunning {
		t.Errorf("session = %s, want running", s)
	}
}

// TestPendingShowsTheNextDeadline: a pending request carries the deadline
// that settles it next and what that does — the timeout or the checkpoint's
// expiry, whichever comes first — and its time remaining counts down to it.
func TestPendingShowsTheNextDeadline(t *testing.T) {
	cases := []struct {
		name     string
		expires  time.Duration // 0: the checkpoint does not expire
		timeout  *belay.TimeoutInput
		pauseNow bool // let the timeout pause the session first
		want     *belay.HITLDeadline
		left     int64
	}{
		{"no deadline", 0, nil, false, nil, 0},
		{"a timeout only", 0, &belay.TimeoutInput{Duration: 600, DefaultAction: belay.ActionReject},
			false, &belay.HITLDeadline{Reason: belay.DeadlineTimeout, Action: belay.ActionReject, Option: "no"}, 600},
		{"an expiry only", time.Hour, nil,
			false, &belay.HITLDeadline{Reason: belay.DeadlineExpired, Action: belay.ActionReject, Option: "no"}, 3600},
		{"a pause timeout after the expiry", time.Hour, &belay.TimeoutInput{Duration: 7200, DefaultAction: belay.ActionPause},
			false, &belay.HITLDeadline{Reason: belay.DeadlineExpired, Action: belay.ActionReject, Option: "no"}, 3600},
		{"an approve timeout after the expiry", time.Hour, &belay.TimeoutInput{Duration: 7200, DefaultAction: belay.ActionApprove},
			false, &belay.HITLDeadline{Reason: belay.DeadlineExpired, Action: belay.ActionApprove, Option: "ok"}, 3600},
		{"a timeout at the expiry", time.Hour, &belay.TimeoutInput{Duration: 3600, DefaultAction: belay.ActionPause},
			false, &belay.HITLDeadline{Reason: belay.DeadlineExpired, Action: belay.ActionReject, Option: "no"}, 3600},
		{"a pause timeout before the expiry", time.Hour, &belay.TimeoutInput{Duration: 1800, DefaultAction: belay.ActionPause},
			false, &belay.HITLDeadline{Reason: belay.DeadlineTimeout, Action: belay.ActionPause}, 1800},
		{"the expiry after a pause", time.Hour, &belay.TimeoutInput{Duration: 1800, DefaultAction: belay.ActionPause},
			true, &belay.HITLDeadline{Reason: belay.DeadlineExpired, Action: belay.ActionReject, Option: "no"}, 1200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newHITLEnv(t)
			sess := e.session(t, "alice")
			var cp *belay.Checkpoint
			h := belay.HITLInput{Timeout: tc.timeout}
			if tc.expires > 0 {
				cp = e.expiring(t, sess.ID, tc.expires, h)
			} else {
				cp = e.request(t, sess.ID, "alice", h)
			}
			if tc.pauseNow {
				e.clock.Advance(40 * time.Minute)
			}
			list, err := e.svc.PendingHITL(hitlAs("alice"), sess.ID)
			if err != nil || len(list) != 1 {
				t.Fatalf("PendingHITL = %d, %v; want the request", len(list), err)
			}
			p := list[0]
			if tc.want == nil {
				if p.Deadline != nil || p.TimeRemaining != nil {
					t.Errorf("deadline %+v, time remaining %v; want none", p.Deadline, p.TimeRemaining)
				}
				return
			}
			want := *tc.want
			if want.Reason == belay.DeadlineExpired {
				want.At = *cp.ExpiresAt
			} else {
				want.At = cp.HITL.Timeout.ExpiresAt
			}
			if p.Deadline == nil || !p.Deadline.At.Equal(want.At) || p.Deadline.Reason != want.Reason ||
				p.Deadline.Action != want.Action || p.Deadline.Option != want.Option {
				t.Errorf("deadline = %+v, want %+v", p.Deadline, want)
			}
			if p.TimeRemaining == nil || *p.TimeRemaining != tc.left {
				t.Errorf("time remaining = %v, want %d", p.TimeRemaining, tc.left)
			}
		})
	}
}

// TestHITLRequiredNamesTheExpiry: the hitl.required event of a request whose
// checkpoint expires says when, and what its next deadline does.
func TestHITLRequiredNamesTheExpiry(t *testing.T) {
	e := newHITLEnv(t)
	sess := e.session(t, "alice")
	cp := e.expiring(t, sess.ID, time.Hour, belay.HITLInput{Timeout: &belay.TimeoutInput{Duration: 7200, DefaultAction: belay.ActionPause}})
	evs, err := core.StoreOf(e.svc).ListEvents(localCtx, store.EventQuery{Scope: store.Everything, Types: []string{belay.EventHITLRequired}, Limit: 10})
	if err != nil || len(evs) != 1 {
		t.Fatalf("hitl.required events = %d, %v; want 1", len(evs), err)
	}
	var d struct {
		ExpiresAt           time.Time
		DefaultAction       belay.Action
		CheckpointExpiresAt *time.Time
		Deadline            *belay.HITLDeadline
	}
	if err := json.Unmarshal(evs[0].Data, &d); err != nil {
		t.Fatal(err)
	}
	if !d.ExpiresAt.Equal(cp.HITL.Timeout.ExpiresAt) || d.DefaultAction != belay.ActionPause {
		t.Errorf("timeout in the event = %s %s, want %s pause", d.ExpiresAt, d.DefaultAction, cp.HITL.Timeout.ExpiresAt)
	}
	if d.CheckpointExpiresAt == nil || !d.CheckpointExpiresAt.Equal(*cp.ExpiresAt) {
		t.Errorf("checkpointExpiresAt = %v, want %s", d.CheckpointExpiresAt, cp.ExpiresAt)
	}
	if dl := d.Deadline; dl == nil || !dl.At.Equal(*cp.ExpiresAt) || dl.Reason != belay.DeadlineExpired || dl.Action != belay.ActionReject || dl.Option != "no" {
		t.Errorf("deadline in the event = %+v, want the expiry's rejection", d.Deadline)
	}
}
