package core_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testutil"
)

// A graph run writes its events and takes and gives up its lease in the
// transactions of its own writes: a session created held, a checkpoint that
// carries the step's events, an end or a release that carries the last.
func TestEventsRideWithTheirWrite(t *testing.T) {
	svc := newService(t, nil)
	alice, bob := asUser("alice"), asUser("bob")
	if _, err := svc.CreateToken(localCtx, belay.CreateTokenInput{User: "bob"}); err != nil {
		t.Fatal(err)
	}
	_, err := svc.CreateSession(alice, belay.CreateSessionInput{Holder: "h1", Lease: 500 * time.Millisecond})
	testutil.WantCode(t, err, belay.CodeValidation, "lease")
	_, err = svc.CreateSession(alice, belay.CreateSessionInput{Lease: time.Minute})
	testutil.WantCode(t, err, belay.CodeValidation, "holder")
	sess, err := svc.CreateSession(alice, belay.CreateSessionInput{Holder: "h1", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if sess.Holder != "h1" || sess.LeaseExpiresAt == nil {
		t.Fatalf("created %+v, want held by h1", sess)
	}
	_, err = svc.Heartbeat(alice, belay.LeaseInput{SessionID: sess.ID, Holder: "h2"})
	testutil.WantCode(t, err, belay.CodeLeaseLost, "")
	if _, err := svc.GrantSession(alice, belay.GrantInput{SessionID: sess.ID, User: "bob", Role: belay.RoleRead}); err != nil {
		t.Fatal(err)
	}

	start := belay.EventRecord{Type: belay.EventGraphNodeStart, Data: json.RawMessage(`{"node":"plan","step":1}`)}
	end := belay.EventRecord{Type: belay.EventGraphNodeEnd, ThisCheckpoint: true, Data: json.RawMessage(`{"node":"plan","step":1}`)}
	step := func(evs ...belay.EventRecord) belay.CreateCheckpointInput {
		return belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "plan", Events: evs}
	}
	before := len(events(t, svc))
	for _, c := range []struct {
		name  string
		err   error
		code  belay.Code
		field string
	}{
		{"thisCheckpoint with a checkpoint id", func() error {
			named := end
			named.CheckpointID = sess.ID
			_, err := svc.CreateCheckpoint(alice, step(start, named))
			return err
		}(), belay.CodeValidation, "events[1].thisCheckpoint"},
		{"events with a snapshot", func() error {
			in := step(start)
			in.Snapshot = true
			_, err := svc.CreateCheckpoint(alice, in)
			return err
		}(), belay.CodeValidation, "events"},
		{"a type of belay's own", func() error {
			_, err := svc.CreateCheckpoint(alice, step(belay.EventRecord{Type: belay.EventCheckpointCreated}))
			return err
		}(), belay.CodeValidation, "events[0].type"},
		{"thisCheckpoint with no checkpoint", func() error {
			_, err := svc.AppendEvents(alice, belay.AppendEventsInput{SessionID: sess.ID, Events: []belay.EventRecord{end}})
			return err
		}(), belay.CodeValidation, "events[0].thisCheckpoint"},
		{"thisCheckpoint ending a session", func() error {
			_, err := svc.EndSession(alice, belay.EndSessionInput{SessionID: sess.ID, Status: belay.SessionCompleted, Events: []belay.EventRecord{end}})
			return err
		}(), belay.CodeValidation, "events[0].thisCheckpoint"},
		{"events with a renewal", func() error {
			_, err := svc.Heartbeat(alice, belay.LeaseInput{SessionID: sess.ID, Holder: "h1", Events: []belay.EventRecord{start}})
			return err
		}(), belay.CodeValidation, "events"},
		{"a reader's checkpoint", func() error {
			_, err := svc.CreateCheckpoint(bob, step(start))
			return err
		}(), belay.CodeUnauthorized, ""},
		{"a reader's end", func() error {
			_, err := svc.EndSession(bob, belay.EndSessionInput{SessionID: sess.ID, Status: belay.SessionCompleted, Events: []belay.EventRecord{start}})
			return err
		}(), belay.CodeUnauthorized, ""},
		{"another holder's release", func() error {
			_, err := svc.Heartbeat(alice, belay.LeaseInput{SessionID: sess.ID, Holder: "h2", Release: true, Events: []belay.EventRecord{start}})
			return err
		}(), belay.CodeLeaseLost, ""},
	} {
		t.Run(c.name, func(t *testing.T) { testutil.WantCode(t, c.err, c.code, c.field) })
	}
	if n := len(events(t, svc)); n != before {
		t.Fatalf("refused calls wrote %d events", n-before)
	}

	cp, err := svc.CreateCheckpoint(alice, step(start, end))
	if err != nil {
		t.Fatal(err)
	}
	evs := events(t, svc)[before:]
	if len(evs) != 3 || evs[0].Type != belay.EventCheckpointCreated || evs[1].Type != belay.EventGraphNodeStart ||
		evs[2].Type != belay.EventGraphNodeEnd || evs[2].CheckpointID != cp.ID || evs[1].CheckpointID != "" {
		t.Fatalf("the checkpoint wrote %+v", evs)
	}

	hitl, err := svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "review",
		HITL: &belay.HITLInput{Required: true, Title: "Approve?"}})
	if err != nil {
		t.Fatal(err)
	}
	interrupt := belay.EventRecord{Type: belay.EventGraphInterrupt, CheckpointID: hitl.ID, Data: json.RawMessage(`{"node":"review"}`)}
	released, err := svc.Heartbeat(alice, belay.LeaseInput{SessionID: sess.ID, Holder: "h1", Release: true, Events: []belay.EventRecord{interrupt}})
	if err != nil {
		t.Fatal(err)
	}
	if released.Holder != "" || released.Status != belay.SessionAwaitingInput {
		t.Fatalf("released %+v, want awaiting input, held by no one", released)
	}
	evs = events(t, svc)
	if last := evs[len(evs)-1]; last.Type != belay.EventGraphInterrupt || last.CheckpointID != hitl.ID {
		t.Fatalf("the release wrote %+v", last)
	}

	result := belay.EventRecord{Type: belay.EventGraphResult, Data: json.RawMessage(`{"status":"completed"}`)}
	ended, err := svc.EndSession(alice, belay.EndSessionInput{SessionID: sess.ID, Status: belay.SessionCompleted, Events: []belay.EventRecord{result}})
	if err != nil {
		t.Fatal(err)
	}
	evs = events(t, svc)
	if last := evs[len(evs)-1]; ended.Status != belay.SessionCompleted || last.Type != belay.EventGraphResult || last.SessionID != sess.ID {
		t.Fatalf("the end left %s and wrote %+v", ended.Status, last)
	}
}

// A checkpoint can be saved under a lease, release it or end the session,
// and record the decisions a run's resume made, all in its transaction.
func TestCheckpointCarriesTheSessionLife(t *testing.T) {
	svc := newService(t, nil)
	alice := asUser("alice")
	writeOnly := belay.WithActor(context.Background(), belay.Actor{UserID: "alice", Scopes: []belay.Scope{belay.ScopeRead, belay.ScopeWrite}})
	sess, err := svc.CreateSession(alice, belay.CreateSessionInput{Holder: "h1", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	other, err := svc.CreateSession(alice, belay.CreateSessionInput{})
	if err != nil {
		t.Fatal(err)
	}
	otherReq, err := svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: other.ID, Summary: "other",
		HITL: &belay.HITLInput{Required: true}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "review", Holder: "h1",
		HITL: &belay.HITLInput{Required: true}})
	if err != nil {
		t.Fatal(err)
	}
	approve := belay.DecideInput{CheckpointID: req.ID, SelectedOption: "approve"}
	in := func(f func(*belay.CreateCheckpointInput)) belay.CreateCheckpointInput {
		in := belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "step", Holder: "h1"}
		f(&in)
		return in
	}
	before, _ := svc.GetSession(alice, sess.ID)
	for _, c := range []struct {
		name  string
		ctx   context.Context
		in    belay.CreateCheckpointInput
		code  belay.Code
		field string
	}{
		{"another holder", alice, in(func(in *belay.CreateCheckpointInput) { in.Holder = "h2" }), belay.CodeLeaseLost, ""},
		{"a release with no holder", alice, in(func(in *belay.CreateCheckpointInput) { in.Holder, in.Release = "", true }), belay.CodeValidation, "release"},
		{"a release and an end", alice, in(func(in *belay.CreateCheckpointInput) { in.Release, in.End = true, belay.SessionCompleted }), belay.CodeValidation, "release"},
		{"an end that is no end", alice, in(func(in *belay.CreateCheckpointInput) { in.End = belay.SessionRunning }), belay.CodeValidation, "end"},
		{"a reason with no end", alice, in(func(in *belay.CreateCheckpointInput) { in.EndReason = "why" }), belay.CodeValidation, "endReason"},
		{"a project's checkpoint with a holder", alice, belay.CreateCheckpointInput{ProjectPath: t.TempDir(), Summary: "s", Holder: "h1"}, belay.CodeValidation, "sessionId"},
		{"answers from a token that may not decide", writeOnly, in(func(in *belay.CreateCheckpointInput) { in.Answers = []belay.DecideInput{approve} }), belay.CodeUnauthorized, ""},
		{"an answer to another session's request", alice, in(func(in *belay.CreateCheckpointInput) {
			in.Answers = []belay.DecideInput{{CheckpointID: otherReq.ID, SelectedOption: "approve"}}
		}), belay.CodeValidation, "answers"},
		{"an answer naming no option", alice, in(func(in *belay.CreateCheckpointInput) {
			in.Answers = []belay.DecideInput{{CheckpointID: req.ID, SelectedOption: "maybe"}}
		}), belay.CodeInvalidOption, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := svc.CreateCheckpoint(c.ctx, c.in)
			testutil.WantCode(t, err, c.code, c.field)
		})
	}
	if after, _ := svc.GetSession(alice, sess.ID); after.CheckpointCount != before.CheckpointCount || after.Status != belay.SessionAwaitingInput {
		t.Fatalf("refused checkpoints left %d checkpoints (was %d), status %s", after.CheckpointCount, before.CheckpointCount, after.Status)
	}

	// The step after the interrupt records its answer first; an answer to
	// a request decided already is dropped.
	if _, err := svc.CreateCheckpoint(alice, in(func(in *belay.CreateCheckpointInput) { in.Answers = []belay.DecideInput{approve} })); err != nil {
		t.Fatal(err)
	}
	decided, err := svc.GetCheckpoint(alice, req.ID)
	if err != nil || decided.Decision == nil || decided.Decision.SelectedOption != "approve" {
		t.Fatalf("the request after its answer: %+v, %v", decided, err)
	}
	late := approve
	late.SelectedOption = "reject"
	if _, err := svc.CreateCheckpoint(alice, in(func(in *belay.CreateCheckpointInput) { in.Answers = []belay.DecideInput{late} })); err != nil {
		t.Fatal(err)
	}
	if again, _ := svc.GetCheckpoint(alice, req.ID); again.Decision.ID != decided.Decision.ID {
		t.Fatalf("a second answer replaced the decision: %+v", again.Decision)
	}
	if s, _ := svc.GetSession(alice, sess.ID); s.Status != belay.SessionRunning || s.Holder != "h1" {
		t.Fatalf("after the answer the session is %s, held by %q", s.Status, s.Holder)
	}

	// A request saved with a release waits held by no one; the last step
	// ends the session.
	if _, err := svc.CreateCheckpoint(alice, in(func(in *belay.CreateCheckpointInput) {
		in.HITL, in.Release = &belay.HITLInput{Required: true}, true
	})); err != nil {
		t.Fatal(err)
	}
	if s, _ := svc.GetSession(alice, sess.ID); s.Status != belay.SessionAwaitingInput || s.Holder != "" || s.LeaseExpiresAt != nil {
		t.Fatalf("after the release the session is %s, held by %q", s.Status, s.Holder)
	}
	if _, err := svc.ResumeSession(alice, belay.ResumeInput{SessionID: sess.ID, Holder: "h3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateCheckpoint(alice, in(func(in *belay.CreateCheckpointInput) { in.Holder = "h1" })); !belay.IsCode(err, belay.CodeLeaseLost) {
		t.Fatalf("the holder that released saved again: %v", err)
	}
	final, err := svc.CreateCheckpoint(alice, in(func(in *belay.CreateCheckpointInput) {
		in.Holder, in.End, in.EndReason = "h3", belay.SessionFailed, "the model gave up"
	}))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := svc.GetSession(alice, sess.ID)
	if s.Status != belay.SessionFailed || s.EndReason != "the model gave up" || s.Holder != "" || s.HeadCheckpointID != final.ID {
		t.Fatalf("after the last step the session is %+v", s)
	}
}

// A session can be created with its first checkpoint, in one transaction.
func TestSessionCreatedWithItsFirstCheckpoint(t *testing.T) {
	svc := newService(t, nil)
	alice := asUser("alice")
	start := belay.EventRecord{Type: belay.EventGraphCustom, ThisCheckpoint: true, Data: json.RawMessage(`{"name":"input"}`)}
	for _, bad := range []belay.CreateCheckpointInput{
		{SessionID: "0190d5b8-7d7e-7000-8000-000000000000", Summary: "input"},
		{Summary: "input", Holder: "h1"},
		{Summary: "input", Answers: []belay.DecideInput{{CheckpointID: "0190d5b8-7d7e-7000-8000-000000000000", SelectedOption: "approve"}}},
	} {
		_, err := svc.CreateSession(alice, belay.CreateSessionInput{Checkpoint: &bad})
		testutil.WantCode(t, err, belay.CodeValidation, "checkpoint")
	}
	_, err := svc.CreateSession(alice, belay.CreateSessionInput{Checkpoint: &belay.CreateCheckpointInput{Summary: ""}})
	testutil.WantCode(t, err, belay.CodeValidation, "summary")
	before := len(events(t, svc))
	sess, err := svc.CreateSession(alice, belay.CreateSessionInput{ProjectPath: t.TempDir(), Holder: "h1", Lease: time.Minute,
		Checkpoint: &belay.CreateCheckpointInput{Name: "__start__", Summary: "input", AgentState: json.RawMessage(`{"topic":"x"}`),
			Events: []belay.EventRecord{start}}})
	if err != nil {
		t.Fatal(err)
	}
	if sess.CheckpointCount != 1 || sess.HeadCheckpointID == "" || string(sess.State) != `{"topic":"x"}` || sess.Holder != "h1" {
		t.Fatalf("created %+v", sess)
	}
	cp, err := svc.GetCheckpoint(alice, sess.HeadCheckpointID)
	if err != nil || cp.Name != "__start__" || cp.Seq != 1 || cp.ProjectPath != sess.ProjectPath {
		t.Fatalf("the first checkpoint is %+v, %v", cp, err)
	}
	evs := events(t, svc)[before:]
	if len(evs) != 3 || evs[0].Type != belay.EventSessionCreated || evs[1].Type != belay.EventCheckpointCreated ||
		evs[2].Type != belay.EventGraphCustom || evs[2].CheckpointID != cp.ID {
		t.Fatalf("the creation wrote %+v", evs)
	}
}
