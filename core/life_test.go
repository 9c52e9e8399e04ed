package core_test

import (
	"sync"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testclock"
	"github.com/belayhq/belay/internal/testutil"
)

func TestSessionEndStates(t *testing.T) {
	svc := newService(t, testclock.New(start, 0))
	project := t.TempDir()
	cp := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "one"})

	done, err := svc.EndSession(localCtx, belay.EndSessionInput{SessionID: cp.SessionID, Status: belay.SessionCompleted})
	if err != nil || done.Status != belay.SessionCompleted {
		t.Fatalf("complete = %+v, %v", done, err)
	}
	// An ended session takes no checkpoint by id, and ends once.
	_, err = svc.CreateCheckpoint(localCtx, belay.CreateCheckpointInput{SessionID: cp.SessionID, Summary: "late"})
	testutil.WantCode(t, err, belay.CodeConflict)
	_, err = svc.EndSession(localCtx, belay.EndSessionInput{SessionID: cp.SessionID, Status: belay.SessionFailed})
	testutil.WantCode(t, err, belay.CodeConflict)
	// By project path, a new session starts.
	next := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "again"})
	if next.SessionID == cp.SessionID || next.Seq != 1 {
		t.Errorf("save after the end went to %s #%d", next.SessionID, next.Seq)
	}
	for _, bad := range []belay.SessionStatus{belay.SessionRunning, belay.SessionInterrupted, "done"} {
		_, err := svc.EndSession(localCtx, belay.EndSessionInput{SessionID: next.SessionID, Status: bad})
		testutil.WantCode(t, err, belay.CodeValidation, "status")
	}
	abandoned, err := svc.EndSession(localCtx, belay.EndSessionInput{SessionID: next.SessionID, Status: belay.SessionAbandoned, Reason: "wrong idea"})
	if err != nil || abandoned.EndReason != "wrong idea" {
		t.Fatalf("abandon = %+v, %v", abandoned, err)
	}
	_, err = svc.ResumeSession(localCtx, belay.ResumeInput{SessionID: next.SessionID, Holder: "me"})
	testutil.WantCode(t, err, belay.CodeConflict)
}

func TestLeaseLapseInterruptsOnceAndResumeTakesOver(t *testing.T) {
	clock := testclock.New(start, 0)
	svc := newService(t, clock)
	project := t.TempDir()
	cp := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "work",
		AgentState: []byte(`{"step":1}`)})
	id := cp.SessionID

	held, err := svc.Heartbeat(localCtx, belay.LeaseInput{SessionID: id, Holder: "host:1", Lease: 30 * time.Second})
	if err != nil || held.Holder != "host:1" || held.LeaseExpiresAt == nil {
		t.Fatalf("heartbeat = %+v, %v", held, err)
	}
	// A second holder is refused while the lease lasts: never two holders.
	_, err = svc.Heartbeat(localCtx, belay.LeaseInput{SessionID: id, Holder: "host:2"})
	testutil.WantCode(t, err, belay.CodeLeaseLost)
	clock.Advance(20 * time.Second)
	if _, err := svc.Heartbeat(localCtx, belay.LeaseInput{SessionID: id, Holder: "host:1", Lease: 30 * time.Second}); err != nil {
		t.Fatalf("renew: %v", err)
	}
	// The holder dies: the lease lapses, and the first read interrupts it.
	clock.Advance(31 * time.Second)
	sess, err := svc.GetSession(localCtx, id)
	if err != nil || sess.Status != belay.SessionInterrupted || sess.Holder != "" {
		t.Fatalf("after the lapse: %+v, %v", sess, err)
	}
	if n := countEvents(t, svc, belay.EventSessionStatusChanged, id); n != 1 {
		t.Errorf("%d status changes, want 1", n)
	}
	// The old holder learns it lost the session.
	_, err = svc.Heartbeat(localCtx, belay.LeaseInput{SessionID: id, Holder: "host:1"})
	testutil.WantCode(t, err, belay.CodeLeaseLost)

	// Two processes resume at once: exactly one gets it.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = svc.ResumeSession(localCtx, belay.ResumeInput{SessionID: id, Holder: "proc-" + string(rune('a'+i))})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !belay.IsCode(err, belay.CodeLeaseLost):
			t.Errorf("a losing resume got %v, want LEASE_LOST", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d resumes won, want 1", won)
	}
	// Nothing is left to resume in the project; the holder renews as it goes.
	_, err = svc.ResumeSession(localCtx, belay.ResumeInput{ProjectPath: project, Holder: "late"})
	testutil.WantCode(t, err, belay.CodeSessionNotFound)
	holder := mustSession(t, svc, id).Holder
	res, err := svc.ResumeSession(localCtx, belay.ResumeInput{SessionID: id, Holder: holder})
	if err != nil || res.Session.Status != belay.SessionRunning || res.Head == nil || res.Head.ID != cp.ID || string(res.State) != `{"step":1}` {
		t.Fatalf("resume = %+v, %v", res, err)
	}
}

func TestSweeperInterruptsLapsedLeases(t *testing.T) {
	clock := testclock.New(start, 0)
	svc := newService(t, clock)
	cp := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: t.TempDir(), Summary: "work"})
	if _, err := svc.Heartbeat(localCtx, belay.LeaseInput{SessionID: cp.SessionID, Holder: "h", Lease: time.Second}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	list, err := svc.ListSessions(localCtx, belay.ListSessionsInput{})
	if err != nil || len(list.Items) != 1 || list.Items[0].Status != belay.SessionInterrupted {
		t.Fatalf("list = %+v, %v", list, err)
	}
}

func TestLeaseInputRules(t *testing.T) {
	svc := newService(t, testclock.New(start, 0))
	cp := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: t.TempDir(), Summary: "work"})
	for name, in := range map[string]belay.LeaseInput{
		"no holder":       {SessionID: cp.SessionID},
		"lease too long":  {SessionID: cp.SessionID, Holder: "h", Lease: time.Hour},
		"lease too short": {SessionID: cp.SessionID, Holder: "h", Lease: time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := svc.Heartbeat(localCtx, in)
			testutil.WantCode(t, err, belay.CodeValidation)
		})
	}
	_, err := svc.ResumeSession(localCtx, belay.ResumeInput{ProjectPath: t.TempDir(), Holder: "h"})
	testutil.WantCode(t, err, belay.CodeSessionNotFound)
}

func TestCleanupDeletesEndedSessions(t *testing.T) {
	clock := testclock.New(start, 0)
	svc := newService(t, clock)
	project := t.TempDir()
	var ids []string
	for range 3 {
		cp := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "work"})
		if _, err := svc.EndSession(localCtx, belay.EndSessionInput{SessionID: cp.SessionID, Status: belay.SessionCompleted}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, cp.SessionID)
		clock.Advance(time.Hour)
	}
	open := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "still going"})
	clock.Advance(48 * time.Hour)
	dry, err := svc.CleanupSessions(localCtx, belay.CleanupInput{OlderThan: 24 * time.Hour, KeepLast: 1, DryRun: true})
	if err != nil || len(dry.Sessions) != 2 || dry.Checkpoints != 2 || !dry.DryRun {
		t.Fatalf("dry run = %+v, %v", dry, err)
	}
	if _, err := svc.GetSession(localCtx, ids[0]); err != nil {
		t.Fatalf("a dry run deleted: %v", err)
	}
	res, err := svc.CleanupSessions(localCtx, belay.CleanupInput{OlderThan: 24 * time.Hour, KeepLast: 1})
	if err != nil || len(res.Sessions) != 2 {
		t.Fatalf("cleanup = %+v, %v", res, err)
	}
	for i, id := range ids {
		_, err := svc.GetSession(localCtx, id)
		if gone := belay.IsCode(err, belay.CodeSessionNotFound); gone != (i < 2) {
			t.Errorf("session %d gone = %v (%v)", i, gone, err)
		}
	}
	if _, err := svc.GetSession(localCtx, open.SessionID); err != nil {
		t.Errorf("the open session went: %v", err)
	}
	_, err = svc.CleanupSessions(localCtx, belay.CleanupInput{Statuses: []belay.SessionStatus{belay.SessionRunning}})
	testutil.WantCode(t, err, belay.CodeValidation, "statuses")
}

// countEvents counts the events of a type in a session.
func countEvents(tb testing.TB, svc *core.Service, typ, sessionID string) int {
	tb.Helper()
	n := 0
	for _, e := range events(tb, svc) {
		if e.Type == typ && e.SessionID == sessionID {
			n++
		}
	}
	return n
}

func TestReleaseWhileAwaitingInputKeepsTheSessionWaiting(t *testing.T) {
	clock := testclock.New(start, 0)
	svc := newService(t, clock)
	cp := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: t.TempDir(), Summary: "ask",
		HITL: &belay.HITLInput{Required: true, Title: "ok?"}})
	id := cp.SessionID
	if _, err := svc.Heartbeat(localCtx, belay.LeaseInput{SessionID: id, Holder: "host:1"}); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	sess, err := svc.Heartbeat(localCtx, belay.LeaseInput{SessionID: id, Holder: "host:1", Release: true})
	if err != nil || sess.Status != belay.SessionAwaitingInput || sess.Holder != "" || sess.LeaseExpiresAt != nil {
		t.Fatalf("release while awaiting input = %+v, %v; want awaiting_input, held by no one", sess, err)
	}
	// No lease is left to lapse: the session still waits for its person.
	clock.Advance(time.Hour)
	if got := mustSession(t, svc, id); got.Status != belay.SessionAwaitingInput {
		t.Fatalf("an hour later the session is %s, want awaiting_input", got.Status)
	}
}

// TestResumeSaysMoreRequestsWait: a resume lists the open requests one
// answer holds and says when more wait.
func TestResumeSaysMoreRequestsWait(t *testing.T) {
	svc := newService(t, testclock.New(start, 0))
	first := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: t.TempDir(), Summary: "work"})
	ask := func() {
		t.Helper()
		mustCreate(t, svc, belay.CreateCheckpointInput{SessionID: first.SessionID, Summary: "ask",
			HITL: &belay.HITLInput{Required: true, Title: "go on?"}})
	}
	ask()
	res, err := svc.ResumeSession(localCtx, belay.ResumeInput{SessionID: first.SessionID, Holder: "h"})
	if err != nil || len(res.Pending) != 1 || res.MorePending {
		t.Fatalf("resume with one request = %d pending, more %v, %v", len(res.Pending), res.MorePending, err)
	}
	for range 500 {
		ask()
	}
	res, err = svc.ResumeSession(localCtx, belay.ResumeInput{SessionID: first.SessionID, Holder: "h"})
	if err != nil || len(res.Pending) == 0 || len(res.Pending) > 500 || !res.MorePending {
		t.Fatalf("resume with 501 requests = %d pending, more %v, %v", len(res.Pending), res.MorePending, err)
	}
}
