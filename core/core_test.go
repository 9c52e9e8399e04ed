package core_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the raw SQL connection that corrupts rows

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testclock"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/sqlite"
)

// start is when the tests' clocks begin.
var start = time.Date(2025, 1, 15, 12, 0, 0, 0, time.UTC)

// newService returns a service over a fresh SQLite file.
func newService(tb testing.TB, clock belay.Clock) *core.Service {
	tb.Helper()
	db, err := sqlite.Open(localCtx, filepath.Join(tb.TempDir(), "belay.db"))
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	return core.New(core.Options{Store: db, Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func mustCreate(tb testing.TB, svc *core.Service, in belay.CreateCheckpointInput) *belay.Checkpoint {
	tb.Helper()
	cp, err := svc.CreateCheckpoint(localCtx, in)
	if err != nil {
		tb.Fatalf("CreateCheckpoint(%+v): %v", in, err)
	}
	return cp
}

func mustSession(tb testing.TB, svc *core.Service, id string) *belay.Session {
	tb.Helper()
	sess, err := svc.GetSession(localCtx, id)
	if err != nil {
		tb.Fatalf("GetSession(%s): %v", id, err)
	}
	return sess
}

func events(tb testing.TB, svc *core.Service) []belay.Event {
	tb.Helper()
	evs, err := core.StoreOf(svc).ListEvents(localCtx, store.EventQuery{Scope: store.Everything, Limit: 10000})
	if err != nil {
		tb.Fatalf("ListEvents: %v", err)
	}
	return evs
}

func eventTypes(evs []belay.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func TestCheckpointWithoutSessionGoesToActiveSessionCreatedOnDemand(t *testing.T) {
	ctx := localCtx
	svc := newService(t, testclock.New(start, time.Second))
	project := t.TempDir()

	if _, err := svc.ActiveSession(ctx, project); !belay.IsCode(err, belay.CodeSessionNotFound) {
		t.Fatalf("ActiveSession before any checkpoint: err = %v, want SESSION_NOT_FOUND", err)
	}
	// A trailing slash names the same project.
	first := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project + "/", Summary: "first"})
	second := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "second"})
	if first.SessionID == "" || second.SessionID != first.SessionID {
		t.Fatalf("sessions = %q, %q; want one session for the project", first.SessionID, second.SessionID)
	}
	if first.ProjectPath != project {
		t.Errorf("checkpoint projectPath = %q, want cleaned %q", first.ProjectPath, project)
	}
	active, err := svc.ActiveSession(ctx, project)
	if err != nil {
		t.Fatalf("ActiveSession: %v", err)
	}
	if active.ID != first.SessionID || active.Status != belay.SessionRunning || active.ProjectPath != project {
		t.Errorf("active session = %+v, want running session %s of %s", active, first.SessionID, project)
	}
	if active.Owner != "local" {
		t.Errorf("owner = %q, want the caller, local", active.Owner)
	}
	list, err := svc.ListSessions(ctx, belay.ListSessionsInput{})
	if err != nil {
		t.Fatal(err)
	}
	if list.TotalCount != 1 {
		t.Errorf("sessions = %d, want 1", list.TotalCount)
	}

	// Another project gets its own session.
	other := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: t.TempDir(), Summary: "elsewhere"})
	if other.SessionID == first.SessionID || other.Seq != 1 {
		t.Errorf("other project: session %s seq %d, want a new session with seq 1", other.SessionID, other.Seq)
	}

	got := eventTypes(events(t, svc))
	want := []string{belay.EventSessionCreated, belay.EventCheckpointCreated, belay.EventCheckpointCreated,
		belay.EventSessionCreated, belay.EventCheckpointCreated}
	if !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
}

func TestSeqParentHeadAndEvents(t *testing.T) {
	ctx := localCtx
	svc := newService(t, testclock.New(start, time.Second))
	ctx = belay.WithActor(ctx, belay.Actor{UserID: "ada"})
	sess, err := svc.CreateSession(ctx, belay.CreateSessionInput{ProjectPath: t.TempDir(), Title: "run"})
	if err != nil {
		t.Fatal(err)
	}
	if sess.Owner != "ada" {
		t.Errorf("owner = %q, want ada", sess.Owner)
	}

	var cps []*belay.Checkpoint
	for i := 1; i <= 3; i++ {
		cp, err := svc.CreateCheckpoint(ctx, belay.CreateCheckpointInput{SessionID: sess.ID,
			Summary: fmt.Sprintf("step %d", i), Step: i, Phase: "build", AgentState: json.RawMessage(fmt.Sprintf(`{ "step" : %d }`, i))})
		if err != nil {
			t.Fatal(err)
		}
		cps = append(cps, cp)
	}
	for i, cp := range cps {
		if cp.Seq != int64(i+1) {
			t.Errorf("checkpoint %d: seq = %d, want %d", i, cp.Seq, i+1)
		}
		wantParent := ""
		if i > 0 {
			wantParent = cps[i-1].ID
		}
		if cp.ParentID != wantParent {
			t.Errorf("checkpoint %d: parent = %q, want %q", i, cp.ParentID, wantParent)
		}
		if cp.Type != belay.TypeManual || cp.Trigger != belay.TriggerUserRequest || cp.CreatedBy != "ada" {
			t.Errorf("checkpoint %d: type %s trigger %s createdBy %s; want manual, user_request, ada", i, cp.Type, cp.Trigger, cp.CreatedBy)
		}
		if !strings.HasPrefix(cp.Checksum, "sha256:") {
			t.Errorf("checkpoint %d: checksum = %q", i, cp.Checksum)
		}
		got, err := svc.GetCheckpoint(ctx, cp.ID)
		if err != nil {
			t.Fatal(err)
		}
		bySeq, err := svc.GetCheckpointBySeq(ctx, sess.ID, cp.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != cp.ID || bySeq.ID != cp.ID || string(got.AgentState) != fmt.Sprintf(`{"step":%d}`, i+1) {
			t.Errorf("read back %+v / %+v, want %s with compact state", got, bySeq, cp.ID)
		}
	}
	s := mustSession(t, svc, sess.ID)
	if s.HeadCheckpointID != cps[2].ID || s.LastSeq != 3 || s.CheckpointCount != 3 || s.CurrentStep != 3 ||
		s.Phase != "build" || string(s.State) != `{"step":3}` {
		t.Errorf("session after 3 checkpoints = %+v", s)
	}

	evs := events(t, svc)
	if len(evs) != 4 {
		t.Fatalf("events = %v, want session.created and 3 checkpoint.created", eventTypes(evs))
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Errorf("event %d: seq = %d, want gap-free %d", i, e.Seq, i+1)
		}
		if e.SessionID != sess.ID {
			t.Errorf("event %d: session = %q", i, e.SessionID)
		}
	}
	for i, e := range evs[1:] {
		var data struct {
			Seq int64 `json:"seq"`
		}
		if err := json.Unmarshal(e.Data, &data); err != nil {
			t.Fatal(err)
		}
		if e.Type != belay.EventCheckpointCreated || e.CheckpointID != cps[i].ID || data.Seq != cps[i].Seq {
			t.Errorf("event %+v, want checkpoint.created of %s seq %d", e, cps[i].ID, cps[i].Seq)
		}
	}
}

// A save changes its session's head, count, state, phase, step and status
// and keeps the rest: title, metadata, plan, cost and lease.
func TestSaveKeepsTheRestOfTheSession(t *testing.T) {
	svc := newService(t, testclock.New(start, time.Second))
	sess, err := svc.CreateSession(localCtx, belay.CreateSessionInput{ProjectPath: t.TempDir(), Title: "run",
		Phase: "plan", Metadata: json.RawMessage(`{"model":"m"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetPlan(localCtx, belay.SetPlanInput{SessionID: sess.ID, Tasks: []belay.Task{{ID: "a", Title: "A"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AddCost(localCtx, belay.CostInput{SessionID: sess.ID, Micros: 1500}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Heartbeat(localCtx, belay.LeaseInput{SessionID: sess.ID, Holder: "host:1", Lease: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	before := mustSession(t, svc, sess.ID)
	first := mustCreate(t, svc, belay.CreateCheckpointInput{SessionID: sess.ID, Holder: "host:1", Summary: "one",
		Phase: "build", Step: 2, AgentState: json.RawMessage(`{"step":2}`)})
	second := mustCreate(t, svc, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "two",
		HITL: &belay.HITLInput{Required: true, Title: "ok?"}})
	after := mustSession(t, svc, sess.ID)

	want := *before
	want.HeadCheckpointID, want.LastSeq, want.CheckpointCount = second.ID, 2, 2
	want.State, want.Phase, want.CurrentStep = json.RawMessage(`{"step":2}`), "build", 2
	want.Status, want.UpdatedAt = belay.SessionAwaitingInput, second.CreatedAt
	if first.Seq != 1 || second.ParentID != first.ID {
		t.Errorf("checkpoints #%d and #%d (parent %s), want #1 and #2 after it", first.Seq, second.Seq, second.ParentID)
	}
	if !reflect.DeepEqual(after, &want) {
		t.Errorf("session after two saves:\n got %+v\nwant %+v", after, &want)
	}
}

func TestDeleteMovesHeadToParent(t *testing.T) {
	ctx := belay.WithActor(context.Background(), belay.Actor{UserID: "ada"})
	svc := newService(t, testclock.New(start, time.Second))
	project := t.TempDir()
	var cps []*belay.Checkpoint
	for i := 1; i <= 3; i++ {
		cp, err := svc.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: project, Summary: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		cps = append(cps, cp)
	}
	sessionID := cps[0].SessionID

	// Someone else may not delete: who may not read it is told it does not exist.
	before := len(events(t, svc))
	err := svc.DeleteCheckpoint(belay.WithActor(context.Background(), belay.Actor{UserID: "eve"}), cps[2].ID)
	testutil.WantCode(t, err, belay.CodeCheckpointNotFound)
	if n := len(events(t, svc)); n != before {
		t.Errorf("refused delete wrote %d events", n-before)
	}

	// The head goes back to its parent.
	if err := svc.DeleteCheckpoint(ctx, cps[2].ID); err != nil {
		t.Fatal(err)
	}
	s := mustSession(t, svc, sessionID)
	if s.HeadCheckpointID != cps[1].ID || s.CheckpointCount != 2 || s.LastSeq != 3 {
		t.Errorf("after deleting the head: head %s count %d lastSeq %d; want head %s, 2, 3 (seqs are never reused)",
			s.HeadCheckpointID, s.CheckpointCount, s.LastSeq, cps[1].ID)
	}
	_, err = svc.GetCheckpoint(ctx, cps[2].ID)
	testutil.WantCode(t, err, belay.CodeCheckpointNotFound)

	// A non-head checkpoint leaves the head alone.
	if err := svc.DeleteCheckpoint(belay.WithActor(context.Background(), belay.Actor{UserID: "root", Admin: true}), cps[0].ID); err != nil {
		t.Fatalf("admin delete: %v", err)
	}
	if s := mustSession(t, svc, sessionID); s.HeadCheckpointID != cps[1].ID || s.CheckpointCount != 1 {
		t.Errorf("after deleting a non-head: head %s count %d, want %s, 1", s.HeadCheckpointID, s.CheckpointCount, cps[1].ID)
	}

	// The next checkpoint gets a fresh seq and descends from the head.
	next := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "after"})
	if next.Seq != 4 || next.ParentID != cps[1].ID {
		t.Errorf("next checkpoint: seq %d parent %s, want 4 and %s", next.Seq, next.ParentID, cps[1].ID)
	}

	testutil.WantCode(t, svc.DeleteCheckpoint(ctx, cps[2].ID), belay.CodeCheckpointNotFound, "")
	testutil.WantCode(t, svc.DeleteCheckpoint(ctx, "nope"), belay.CodeValidation, "id")

	evs := events(t, svc)
	var deleted []string
	for _, e := range evs {
		if e.Type == belay.EventCheckpointDeleted {
			deleted = append(deleted, e.CheckpointID)
		}
	}
	if !slices.Equal(deleted, []string{cps[2].ID, cps[0].ID}) {
		t.Errorf("checkpoint.deleted events for %v, want %v", deleted, []string{cps[2].ID, cps[0].ID})
	}
}

func TestHITLCheckpointAwaitsInputAndDeleteResumes(t *testing.T) {
	ctx := localCtx
	svc := newService(t, testclock.New(start, time.Second))
	project := t.TempDir()
	mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "plain"})
	cp := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "approve the plan",
		HITL: &belay.HITLInput{Required: true, Timeout: &belay.TimeoutInput{Duration: 3600, DefaultAction: belay.ActionReject}}})
	if !cp.HITLRequired || cp.Type != belay.TypeHITL || cp.HITL == nil || cp.HITL.Title != "approve the plan" ||
		len(cp.HITL.Options) != 2 || cp.HITL.OnReject != belay.OnRejectFail {
		t.Fatalf("hitl checkpoint = %+v, hitl %+v", cp, cp.HITL)
	}
	if want := cp.CreatedAt.Add(time.Hour); !cp.HITL.Timeout.ExpiresAt.Equal(want) {
		t.Errorf("timeout expires at %v, want %v", cp.HITL.Timeout.ExpiresAt, want)
	}
	if s := mustSession(t, svc, cp.SessionID); s.Status != belay.SessionAwaitingInput {
		t.Errorf("status = %s, want awaiting_input", s.Status)
	}
	yes, no := true, false
	pending, err := svc.ListCheckpoints(ctx, belay.ListCheckpointsInput{HITLRequired: &yes, HITLDecided: &no})
	if err != nil {
		t.Fatal(err)
	}
	if len(pending.Items) != 1 || pending.Items[0].ID != cp.ID {
		t.Errorf("pending = %v, want %s", ids(pending.Items), cp.ID)
	}

	if err := svc.DeleteCheckpoint(ctx, cp.ID); err != nil {
		t.Fatal(err)
	}
	if s := mustSession(t, svc, cp.SessionID); s.Status != belay.SessionRunning {
		t.Errorf("status after deleting the only pending request = %s, want running", s.Status)
	}
	got := eventTypes(events(t, svc))
	want := []string{belay.EventSessionCreated, belay.EventCheckpointCreated, belay.EventCheckpointCreated,
		belay.EventSessionStatusChanged, belay.EventHITLRequired, belay.EventSessionStatusChanged, belay.EventCheckpointDeleted}
	if !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
}

func TestInvalidInputWritesNothing(t *testing.T) {
	ctx := localCtx
	svc := newService(t, testclock.New(start, time.Second))
	project := t.TempDir()
	seed := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "seed"})
	missing := "01890000-0000-7000-8000-000000000000"
	past := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

	tests := []struct {
		name  string
		in    belay.CreateCheckpointInput
		code  belay.Code
		field string
	}{
		{"no session and no project", belay.CreateCheckpointInput{Summary: "x"}, belay.CodeValidation, "projectPath"},
		{"relative project", belay.CreateCheckpointInput{ProjectPath: "rel/dir", Summary: "x"}, belay.CodeValidation, "projectPath"},
		{"missing project dir", belay.CreateCheckpointInput{ProjectPath: filepath.Join(project, "gone"), Summary: "x"}, belay.CodeValidation, "projectPath"},
		{"bad session id", belay.CreateCheckpointInput{SessionID: "nope", Summary: "x"}, belay.CodeValidation, "sessionId"},
		{"unknown session", belay.CreateCheckpointInput{SessionID: missing, Summary: "x"}, belay.CodeSessionNotFound, ""},
		{"empty summary", belay.CreateCheckpointInput{ProjectPath: project}, belay.CodeValidation, "summary"},
		{"long summary", belay.CreateCheckpointInput{ProjectPath: project, Summary: strings.Repeat("é", belay.MaxSummary+1)}, belay.CodeValidation, "summary"},
		{"bad type", belay.CreateCheckpointInput{ProjectPath: project, Summary: "x", Type: "big"}, belay.CodeValidation, "type"},
		{"bad trigger", belay.CreateCheckpointInput{ProjectPath: project, Summary: "x", Trigger: "whim"}, belay.CodeValidation, "trigger"},
		{"negative step", belay.CreateCheckpointInput{ProjectPath: project, Summary: "x", Step: -1}, belay.CodeValidation, "step"},
		{"bad state", belay.CreateCheckpointInput{ProjectPath: project, Summary: "x", AgentState: json.RawMessage(`{`)}, belay.CodeValidation, "agentState"},
		{"metadata array", belay.CreateCheckpointInput{ProjectPath: project, Summary: "x", Metadata: json.RawMessage(`[1]`)}, belay.CodeValidation, "metadata"},
		{"too many tags", belay.CreateCheckpointInput{ProjectPath: project, Summary: "x", Tags: make([]string, belay.MaxTags+1)}, belay.CodeValidation, "tags"},
		{"empty tag", belay.CreateCheckpointInput{ProjectPath: project, Summary: "x", Tags: []string{"ok", ""}}, belay.CodeValidation, "tags[1]"},
		{"past expiry", belay.CreateCheckpointInput{ProjectPath: project, Summary: "x", ExpiresAt: &past}, belay.CodeValidation, "expiresAt"},
		{"short timeout", belay.CreateCheckpointInput{ProjectPath: project, Summary: "x",
			HITL: &belay.HITLInput{Required: true, Timeout: &belay.TimeoutInput{Duration: 5, DefaultAction: belay.ActionApprove}}},
			belay.CodeValidation, "hitl.timeout.duration"},
		{"two defaults", belay.CreateCheckpointInput{ProjectPath: project, Summary: "x", HITL: &belay.HITLInput{Required: true,
			Options: []belay.HITLOption{{ID: "a", Label: "A", Action: belay.ActionApprove, IsDefault: true},
				{ID: "b", Label: "B", Action: belay.ActionReject, IsDefault: true}}}}, belay.CodeValidation, "hitl.options"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(events(t, svc))
			_, err := svc.CreateCheckpoint(ctx, tt.in)
			testutil.WantCode(t, err, tt.code, tt.field)
			if n := len(events(t, svc)); n != before {
				t.Errorf("refused request appended %d events", n-before)
			}
			list, err := svc.ListCheckpoints(ctx, belay.ListCheckpointsInput{})
			if err != nil {
				t.Fatal(err)
			}
			if list.TotalCount != 1 {
				t.Errorf("checkpoints = %d, want only the seed", list.TotalCount)
			}
		})
	}
	if s := mustSession(t, svc, seed.SessionID); s.LastSeq != 1 || s.HeadCheckpointID != seed.ID {
		t.Errorf("session moved: %+v", s)
	}
}

func TestListFilters(t *testing.T) {
	ctx := localCtx
	clock := testclock.New(start, 0)
	svc := newService(t, clock)
	projA, projB := t.TempDir(), t.TempDir()
	at := func(sec int) time.Time { return time.Date(2025, 1, 15, 12, 0, sec, 0, time.UTC) }
	create := func(sec int, in belay.CreateCheckpointInput) *belay.Checkpoint {
		clock.Set(at(sec))
		return mustCreate(t, svc, in)
	}
	a1 := create(1, belay.CreateCheckpointInput{ProjectPath: projA, Summary: "a1", Type: belay.TypePhase, Tags: []string{"x"}})
	a2 := create(2, belay.CreateCheckpointInput{ProjectPath: projA, Summary: "a2", Tags: []string{"x", "y"}})
	a3 := create(3, belay.CreateCheckpointInput{ProjectPath: projA, Summary: "a3", Tags: []string{"y"},
		HITL: &belay.HITLInput{Required: true}})
	b1 := create(4, belay.CreateCheckpointInput{ProjectPath: projB, Summary: "b1", Type: belay.TypePhase, Tags: []string{"x", "y"}})

	yes, no := true, false
	after, before := at(1), at(4)
	tests := []struct {
		name string
		in   belay.ListCheckpointsInput
		want []*belay.Checkpoint
	}{
		{"all newest first", belay.ListCheckpointsInput{}, []*belay.Checkpoint{b1, a3, a2, a1}},
		{"oldest first", belay.ListCheckpointsInput{OrderDir: belay.OrderAsc}, []*belay.Checkpoint{a1, a2, a3, b1}},
		{"session", belay.ListCheckpointsInput{SessionID: a1.SessionID}, []*belay.Checkpoint{a3, a2, a1}},
		{"project", belay.ListCheckpointsInput{ProjectPath: projB + "/"}, []*belay.Checkpoint{b1}},
		{"type", belay.ListCheckpointsInput{Type: belay.TypePhase}, []*belay.Checkpoint{b1, a1}},
		{"hitl required", belay.ListCheckpointsInput{HITLRequired: &yes}, []*belay.Checkpoint{a3}},
		{"hitl not required", belay.ListCheckpointsInput{HITLRequired: &no}, []*belay.Checkpoint{b1, a2, a1}},
		{"hitl undecided", belay.ListCheckpointsInput{HITLDecided: &no}, []*belay.Checkpoint{a3}},
		{"hitl decided", belay.ListCheckpointsInput{HITLDecided: &yes}, nil},
		{"created window is exclusive", belay.ListCheckpointsInput{CreatedAfter: &after, CreatedBefore: &before}, []*belay.Checkpoint{a3, a2}},
		{"one tag", belay.ListCheckpointsInput{Tags: []string{"x"}}, []*belay.Checkpoint{b1, a2, a1}},
		{"tags are AND", belay.ListCheckpointsInput{Tags: []string{"x", "y"}}, []*belay.Checkpoint{b1, a2}},
		{"filters are AND", belay.ListCheckpointsInput{ProjectPath: projA, Tags: []string{"y"}, HITLRequired: &no}, []*belay.Checkpoint{a2}},
		{"by type desc", belay.ListCheckpointsInput{OrderBy: belay.OrderType}, []*belay.Checkpoint{b1, a1, a2, a3}},
		{"by type asc", belay.ListCheckpointsInput{OrderBy: belay.OrderType, OrderDir: belay.OrderAsc}, []*belay.Checkpoint{a3, a2, a1, b1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list, err := svc.ListCheckpoints(ctx, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := ids(list.Items), ids(tt.want); !slices.Equal(got, want) {
				t.Errorf("items = %v, want %v", got, want)
			}
			if list.TotalCount != int64(len(tt.want)) || list.HasMore || list.NextCursor != "" {
				t.Errorf("totalCount %d hasMore %v nextCursor %q, want %d, false, none", list.TotalCount, list.HasMore, list.NextCursor, len(tt.want))
			}
			if list.Items == nil {
				t.Error("items is nil; an empty page must encode as []")
			}
		})
	}
}

func TestListRejectsBadInput(t *testing.T) {
	ctx := localCtx
	svc := newService(t, testclock.New(start, time.Second))
	project := t.TempDir()
	for i := 0; i < 3; i++ {
		mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "x"})
	}
	page, err := svc.ListCheckpoints(ctx, belay.ListCheckpointsInput{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	t1 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		in    belay.ListCheckpointsInput
		field string
	}{
		{"negative limit", belay.ListCheckpointsInput{Limit: -1}, "limit"},
		{"limit over 100", belay.ListCheckpointsInput{Limit: belay.MaxListLimit + 1}, "limit"},
		{"bad session", belay.ListCheckpointsInput{SessionID: "x"}, "sessionId"},
		{"bad type", belay.ListCheckpointsInput{Type: "nope"}, "type"},
		{"bad order", belay.ListCheckpointsInput{OrderBy: "name"}, "orderBy"},
		{"bad dir", belay.ListCheckpointsInput{OrderDir: "up"}, "orderDir"},
		{"empty window", belay.ListCheckpointsInput{CreatedAfter: &t1, CreatedBefore: &t1}, "createdAfter"},
		{"relative project", belay.ListCheckpointsInput{ProjectPath: "rel"}, "projectPath"},
		{"empty tag", belay.ListCheckpointsInput{Tags: []string{""}}, "tags[0]"},
		{"garbage cursor", belay.ListCheckpointsInput{Cursor: "!!"}, "cursor"},
		{"cursor of another direction", belay.ListCheckpointsInput{Cursor: page.NextCursor, OrderDir: belay.OrderAsc}, "cursor"},
		{"cursor of another order", belay.ListCheckpointsInput{Cursor: page.NextCursor, OrderBy: belay.OrderType}, "cursor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := svc.ListCheckpoints(ctx, tt.in)
			testutil.WantCode(t, err, belay.CodeValidation, tt.field)
		})
	}
	// A checkpoint cursor is not a session cursor and the other way round.
	_, err = svc.ListSessions(ctx, belay.ListSessionsInput{Cursor: page.NextCursor})
	testutil.WantCode(t, err, belay.CodeValidation, "cursor")
	if _, err := svc.CreateSession(ctx, belay.CreateSessionInput{}); err != nil {
		t.Fatal(err)
	}
	sessPage, err := svc.ListSessions(ctx, belay.ListSessionsInput{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !sessPage.HasMore {
		t.Fatalf("sessions page = %+v, want more", sessPage)
	}
	_, err = svc.ListCheckpoints(ctx, belay.ListCheckpointsInput{Cursor: sessPage.NextCursor})
	testutil.WantCode(t, err, belay.CodeValidation, "cursor")
}

func ids(cps []*belay.Checkpoint) []string {
	out := make([]string, len(cps))
	for i, c := range cps {
		out[i] = c.ID
	}
	return out
}

// before reports whether a sorts strictly before b in the list order of in.
func before(in belay.ListCheckpointsInput, a, b *belay.Checkpoint) bool {
	less := func(x, y *belay.Checkpoint) bool {
		if in.OrderBy == belay.OrderType && x.Type != y.Type {
			return x.Type < y.Type
		}
		if !x.CreatedAt.Equal(y.CreatedAt) {
			return x.CreatedAt.Before(y.CreatedAt)
		}
		return x.ID < y.ID
	}
	if in.OrderDir == belay.OrderAsc {
		return less(a, b)
	}
	return less(b, a)
}

// walk lists every page of in, calling between after each page but the last,
// and checks that no item repeats and every item sorts after the one before.
func walk(tb testing.TB, svc *core.Service, in belay.ListCheckpointsInput, between func()) []*belay.Checkpoint {
	tb.Helper()
	var all []*belay.Checkpoint
	seen := map[string]bool{}
	for pages := 0; ; pages++ {
		if pages > 1000 {
			tb.Fatal("paging does not end")
		}
		list, err := svc.ListCheckpoints(localCtx, in)
		if err != nil {
			tb.Fatalf("page %d: %v", pages, err)
		}
		if len(list.Items) > pageSize(in) {
			tb.Fatalf("page %d has %d items, limit %d", pages, len(list.Items), in.Limit)
		}
		for _, cp := range list.Items {
			if seen[cp.ID] {
				tb.Fatalf("page %d repeats %s", pages, cp.ID)
			}
			seen[cp.ID] = true
			if n := len(all); n > 0 && !before(in, all[n-1], cp) {
				tb.Fatalf("page %d: %s (%s %v) is out of order after %s (%s %v)", pages, cp.ID, cp.Type, cp.CreatedAt,
					all[n-1].ID, all[n-1].Type, all[n-1].CreatedAt)
			}
			all = append(all, cp)
		}
		if !list.HasMore {
			if list.NextCursor != "" {
				tb.Fatalf("last page has a nextCursor %q", list.NextCursor)
			}
			return all
		}
		if list.NextCursor == "" || len(list.Items) != pageSize(in) && pageBytes(list.Items) < store.PageBytes {
			tb.Fatalf("page %d: hasMore with %d items of %d bytes and cursor %q", pages, len(list.Items), pageBytes(list.Items), list.NextCursor)
		}
		in.Cursor = list.NextCursor
		if between != nil {
			between()
		}
	}
}

// pageBytes is what a page of checkpoints weighs (see store.PageBytes).
func pageBytes(cps []*belay.Checkpoint) int64 {
	var n int64
	for _, cp := range cps {
		n += store.CheckpointBytes(cp)
	}
	return n
}

// TestListPagesEndAtTheirBytes: pages of checkpoints and sessions end once
// their agent states reach store.PageBytes, before their limit, and say
// where the next page begins; paging on lists everything.
func TestListPagesEndAtTheirBytes(t *testing.T) {
	svc := newService(t, testclock.New(start, time.Millisecond))
	big := json.RawMessage(`"` + strings.Repeat("x", belay.MaxStateBytes-100) + `"`)
	perPage := int(store.PageBytes/int64(len(big))) + 1
	n := perPage + 1
	for range n {
		mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: t.TempDir(), Summary: "big", AgentState: big})
	}
	list, err := svc.ListCheckpoints(localCtx, belay.ListCheckpointsInput{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != perPage || !list.HasMore || list.NextCursor == "" || list.TotalCount != int64(n) {
		t.Fatalf("first page of checkpoints: %d items, hasMore %v, cursor %q, total %d; want %d, more, a cursor, %d",
			len(list.Items), list.HasMore, list.NextCursor, list.TotalCount, perPage, n)
	}
	if got := walk(t, svc, belay.ListCheckpointsInput{Limit: 100}, nil); len(got) != n {
		t.Errorf("paging on listed %d checkpoints, want %d", len(got), n)
	}
	sessions, err := svc.ListSessions(localCtx, belay.ListSessionsInput{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions.Items) != perPage || !sessions.HasMore {
		t.Fatalf("first page of sessions: %d items, hasMore %v; want %d and more", len(sessions.Items), sessions.HasMore, perPage)
	}
	rest, err := svc.ListSessions(localCtx, belay.ListSessionsInput{Limit: 100, Cursor: sessions.NextCursor})
	if err != nil {
		t.Fatal(err)
	}
	if len(rest.Items) != n-perPage || rest.HasMore || !bytes.Equal(rest.Items[0].State, big) {
		t.Errorf("second page of sessions: %d items, hasMore %v; want %d whole, and no more", len(rest.Items), rest.HasMore, n-perPage)
	}
}

// pageSize is the number of items a full page of in holds.
func pageSize(in belay.ListCheckpointsInput) int {
	if in.Limit == 0 {
		return belay.DefaultListLimit
	}
	return in.Limit
}

var orders = []belay.ListCheckpointsInput{
	{},
	{OrderDir: belay.OrderAsc},
	{OrderBy: belay.OrderType},
	{OrderBy: belay.OrderType, OrderDir: belay.OrderAsc},
}

func orderName(in belay.ListCheckpointsInput) string {
	by, dir := in.OrderBy, in.OrderDir
	if by == "" {
		by = belay.OrderCreatedAt
	}
	if dir == "" {
		dir = belay.OrderDesc
	}
	return by + "-" + dir
}

var types = []belay.CheckpointType{belay.TypeAuto, belay.TypePhase, belay.TypeHITL, belay.TypeError, belay.TypeManual}

func TestPagingWalksEveryOrder(t *testing.T) {
	// A frozen clock makes every createdAt equal, so the id alone breaks ties.
	for _, step := range []time.Duration{0, time.Millisecond} {
		svc := newService(t, testclock.New(start, step))
		project := t.TempDir()
		for i := range 23 {
			mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: fmt.Sprint(i), Type: types[i%len(types)]})
		}
		for _, order := range orders {
			for _, limit := range []int{1, 2, 5, 22, 23, 100} {
				t.Run(fmt.Sprintf("step %v/%s/limit %d", step, orderName(order), limit), func(t *testing.T) {
					in := order
					in.Limit = limit
					got := walk(t, svc, in, nil)
					if len(got) != 23 {
						t.Errorf("walk saw %d checkpoints, want 23", len(got))
					}
				})
			}
		}
	}
}

func TestPagingUnderInsertsBetweenPages(t *testing.T) {
	for _, order := range orders {
		t.Run(orderName(order), func(t *testing.T) {
			svc := newService(t, testclock.New(start, time.Millisecond))
			project := t.TempDir()
			initial := map[string]bool{}
			for i := range 12 {
				cp := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: fmt.Sprint(i), Type: types[i%len(types)]})
				initial[cp.ID] = true
			}
			var inserted []*belay.Checkpoint
			n := 0
			in := order
			in.Limit = 3
			got := walk(t, svc, in, func() {
				// Two rows per gap, of types that sort before and after the position.
				for range 2 {
					cp := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "late", Type: types[n%len(types)]})
					inserted = append(inserted, cp)
					n++
				}
			})
			seen := map[string]bool{}
			for _, cp := range got {
				seen[cp.ID] = true
			}
			for id := range initial {
				if !seen[id] {
					t.Errorf("walk missed %s, which existed before the walk", id)
				}
			}
			// Oldest first, every later insert sorts after the cursor and must show up.
			if orderName(order) == belay.OrderCreatedAt+"-"+belay.OrderAsc {
				for _, cp := range inserted {
					if !seen[cp.ID] {
						t.Errorf("oldest-first walk missed %s, inserted during the walk", cp.ID)
					}
				}
			}
		})
	}
}

func TestPagingUnderConcurrentInserts(t *testing.T) {
	for _, order := range orders {
		t.Run(orderName(order), func(t *testing.T) {
			svc := newService(t, testclock.New(start, time.Millisecond))
			project := t.TempDir()
			initial := map[string]bool{}
			for i := range 40 {
				cp := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: fmt.Sprint(i), Type: types[i%len(types)]})
				initial[cp.ID] = true
			}
			ctx, cancel := context.WithCancel(localCtx)
			var wg sync.WaitGroup
			errc := make(chan error, 1)
			wg.Go(func() {
				for i := 0; ctx.Err() == nil && i < 500; i++ {
					_, err := svc.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: project, Summary: "late", Type: types[i%len(types)]})
					if err != nil && ctx.Err() == nil {
						errc <- err
						return
					}
				}
			})
			in := order
			in.Limit = 4
			got := walk(t, svc, in, nil)
			cancel()
			wg.Wait()
			select {
			case err := <-errc:
				t.Fatalf("concurrent insert: %v", err)
			default:
			}
			seen := map[string]bool{}
			for _, cp := range got {
				seen[cp.ID] = true
			}
			for id := range initial {
				if !seen[id] {
					t.Errorf("walk missed %s, which existed before the walk", id)
				}
			}
		})
	}
}

func TestSessionPaging(t *testing.T) {
	ctx := localCtx
	svc := newService(t, testclock.New(start, 0))
	want := map[string]bool{}
	for range 7 {
		s, err := svc.CreateSession(ctx, belay.CreateSessionInput{Title: "s"})
		if err != nil {
			t.Fatal(err)
		}
		want[s.ID] = true
	}
	in := belay.ListSessionsInput{Limit: 3}
	seen := map[string]bool{}
	for pages := 0; ; pages++ {
		list, err := svc.ListSessions(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if list.TotalCount != 7 {
			t.Errorf("totalCount = %d, want 7", list.TotalCount)
		}
		for _, s := range list.Items {
			if seen[s.ID] {
				t.Fatalf("session %s repeats", s.ID)
			}
			seen[s.ID] = true
		}
		if !list.HasMore {
			break
		}
		in.Cursor = list.NextCursor
	}
	if len(seen) != len(want) {
		t.Errorf("saw %d sessions, want %d", len(seen), len(want))
	}
}

// corrupt changes a stored checkpoint behind the store's back.
func corrupt(tb testing.TB, svc *core.Service, id string) {
	tb.Helper()
	db, ok := core.StoreOf(svc).(*sqlite.DB)
	if !ok {
		tb.Fatalf("store is %T, want *sqlite.DB", core.StoreOf(svc))
	}
	raw, err := sql.Open("sqlite", db.Path()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		tb.Fatal(err)
	}
	defer raw.Close()
	res, err := raw.Exec(`UPDATE checkpoints SET summary = 'x' WHERE id = ?`, id)
	if err != nil {
		tb.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		tb.Fatalf("corrupted %d rows, want 1", n)
	}
}

func TestChecksumVerifiedOnRead(t *testing.T) {
	ctx := localCtx
	svc := newService(t, testclock.New(start, time.Second))
	project := t.TempDir()
	good := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "good",
		Context: map[string]string{"b": "2", "a": "1"}, Tags: []string{"t", "t", "u"}, Metadata: json.RawMessage(`{"k": [1, 2]}`)})
	bad := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "bad"})
	if !slices.Equal(good.Tags, []string{"t", "u"}) {
		t.Errorf("tags = %v, want duplicates removed", good.Tags)
	}
	if _, err := svc.GetCheckpoint(ctx, good.ID); err != nil {
		t.Fatalf("intact checkpoint: %v", err)
	}
	corrupt(t, svc, bad.ID)

	_, err := svc.GetCheckpoint(ctx, bad.ID)
	testutil.WantCode(t, err, belay.CodeCheckpointCorrupt)
	var be *belay.Error
	errors.As(err, &be)
	if be.Details["id"] != bad.ID {
		t.Errorf("details = %v, want the corrupt checkpoint's id", be.Details)
	}
	_, err = svc.GetCheckpointBySeq(ctx, bad.SessionID, bad.Seq)
	testutil.WantCode(t, err, belay.CodeCheckpointCorrupt)
	// A list leaves the corrupted checkpoint out and says so; it fails no one.
	list, err := svc.ListCheckpoints(ctx, belay.ListCheckpointsInput{})
	if err != nil || len(list.Items) != 1 || list.Items[0].ID != good.ID || len(list.Corrupted) != 1 || list.Corrupted[0].Details["id"] != bad.ID {
		t.Errorf("list with a corrupted checkpoint = %+v, %v; want the intact one, the other named in Corrupted", list, err)
	}
	if _, err := svc.GetCheckpoint(ctx, good.ID); err != nil {
		t.Errorf("intact checkpoint after another was corrupted: %v", err)
	}
}

func TestSessionInputRules(t *testing.T) {
	ctx := localCtx
	svc := newService(t, testclock.New(start, time.Second))
	tests := []struct {
		name  string
		call  func() error
		code  belay.Code
		field string
	}{
		{"relative project", func() error {
			_, err := svc.CreateSession(ctx, belay.CreateSessionInput{ProjectPath: "rel"})
			return err
		}, belay.CodeValidation, "projectPath"},
		{"metadata not an object", func() error {
			_, err := svc.CreateSession(ctx, belay.CreateSessionInput{Metadata: json.RawMessage(`"x"`)})
			return err
		}, belay.CodeValidation, "metadata"},
		{"bad id", func() error { _, err := svc.GetSession(ctx, "x"); return err }, belay.CodeValidation, "id"},
		{"unknown id", func() error {
			_, err := svc.GetSession(ctx, "01890000-0000-7000-8000-000000000000")
			return err
		}, belay.CodeSessionNotFound, ""},
		{"active without project", func() error { _, err := svc.ActiveSession(ctx, ""); return err }, belay.CodeValidation, "projectPath"},
		{"active relative", func() error { _, err := svc.ActiveSession(ctx, "a/b"); return err }, belay.CodeValidation, "projectPath"},
		{"active NUL", func() error { _, err := svc.ActiveSession(ctx, "/a\x00b"); return err }, belay.CodeValidation, "projectPath"},
		{"token project NUL", func() error {
			_, err := svc.CreateToken(ctx, belay.CreateTokenInput{User: "bob", Projects: []string{"/a\x00b"}})
			return err
		}, belay.CodeValidation, "projects"},
		{"token project too long", func() error {
			_, err := svc.CreateToken(ctx, belay.CreateTokenInput{User: "bob", Projects: []string{"/" + strings.Repeat("a", belay.MaxPathLen)}})
			return err
		}, belay.CodeValidation, "projects"},
		{"retention project NUL", func() error {
			_, err := svc.SetRetention(ctx, belay.RetentionPolicy{ProjectPath: "/a\x00b", KeepLast: 3})
			return err
		}, belay.CodeValidation, "projectPath"},
		{"heartbeat holder NUL", func() error {
			_, err := svc.Heartbeat(ctx, belay.LeaseInput{SessionID: "01890000-0000-7000-8000-000000000000", Holder: "h\x00"})
			return err
		}, belay.CodeValidation, "holder"},
		{"end reason NUL", func() error {
			_, err := svc.EndSession(ctx, belay.EndSessionInput{SessionID: "01890000-0000-7000-8000-000000000000", Status: belay.SessionFailed, Reason: "r\x00"})
			return err
		}, belay.CodeValidation, "reason"},
		{"bad status", func() error {
			_, err := svc.ListSessions(ctx, belay.ListSessionsInput{Status: "asleep"})
			return err
		}, belay.CodeValidation, "status"},
		{"seq zero", func() error {
			_, err := svc.GetCheckpointBySeq(ctx, "01890000-0000-7000-8000-000000000000", 0)
			return err
		}, belay.CodeValidation, "seq"},
		{"seq of bad session", func() error { _, err := svc.GetCheckpointBySeq(ctx, "x", 1); return err }, belay.CodeValidation, "sessionId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			testutil.WantCode(t, tt.call(), tt.code, tt.field)
			if n := len(events(t, svc)); n != 0 {
				t.Errorf("%d events written", n)
			}
		})
	}
}

// droppingStore answers the first list of checkpoints and of sessions as a
// driver does when every row it read was deleted before their states were:
// no items, but more follow.
type droppingStore struct {
	store.Store
	dropped map[string]bool
}

func (d *droppingStore) ListCheckpoints(ctx context.Context, q store.CheckpointQuery) ([]*belay.Checkpoint, int64, bool, error) {
	items, total, more, err := d.Store.ListCheckpoints(ctx, q)
	if err == nil && !d.dropped["checkpoints"] {
		d.dropped["checkpoints"] = true
		return nil, total, true, nil
	}
	return items, total, more, err
}

func (d *droppingStore) ListSessions(ctx context.Context, q store.SessionQuery) ([]*belay.Session, int64, bool, error) {
	items, total, more, err := d.Store.ListSessions(ctx, q)
	if err == nil && !d.dropped["sessions"] {
		d.dropped["sessions"] = true
		return nil, total, true, nil
	}
	return items, total, more, err
}

// TestListReadsAgainAPageOfDeletedRows: a page whose rows were all deleted
// between the query and the reading of their states is read again, not
// taken for the end of the list.
func TestListReadsAgainAPageOfDeletedRows(t *testing.T) {
	base := newService(t, testclock.New(start, time.Millisecond))
	project := t.TempDir()
	for range 3 {
		mustCreate(t, base, belay.CreateCheckpointInput{ProjectPath: project, Summary: "s"})
	}
	svc := core.New(core.Options{Store: &droppingStore{Store: core.StoreOf(base), dropped: map[string]bool{}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	list, err := svc.ListCheckpoints(localCtx, belay.ListCheckpointsInput{Limit: 2})
	if err != nil || len(list.Items) != 2 || !list.HasMore {
		t.Fatalf("checkpoints: %+v, %v; want 2 and more", list, err)
	}
	sessions, err := svc.ListSessions(localCtx, belay.ListSessionsInput{})
	if err != nil || len(sessions.Items) != 1 {
		t.Fatalf("sessions: %+v, %v; want the one", sessions, err)
	}
}
