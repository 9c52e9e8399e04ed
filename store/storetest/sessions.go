package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/chunkstore"
)

func testSessions(t *testing.T, o opener) {
	subtests(t, o, []subtest{
		{"RoundTrip", testSessionRoundTrip},
		{"GetMissing", func(t *testing.T, st store.Store) {
			_, err := st.GetSession(t.Context(), newID())
			wantCode(t, "GetSession of a missing id", err, belay.CodeSessionNotFound)
		}},
		{"InsertDuplicateID", func(t *testing.T, st store.Store) {
			s := mustInsertSession(t, st, newSession("/p", at(0)))
			dup := newSession("/q", at(1))
			dup.ID = s.ID
			if err := st.Update(t.Context(), func(tx store.Tx) error { return tx.InsertSession(t.Context(), dup) }); err == nil {
				t.Fatal("InsertSession with an existing id succeeded")
			}
			wantEqual(t, "session after a rejected duplicate", s, mustGetSession(t, st, s.ID))
		}},
		{"Update", testSessionUpdate},
		{"UpdateMissing", func(t *testing.T, st store.Store) {
			err := st.Update(t.Context(), func(tx store.Tx) error { return tx.UpdateSession(t.Context(), newSession("/p", at(0))) })
			wantCode(t, "UpdateSession of a missing id", err, belay.CodeSessionNotFound)
		}},
		{"Delete", func(t *testing.T, st store.Store) {
			keep := mustInsertSession(t, st, newSession("/p", at(0)))
			gone := mustInsertSession(t, st, newSession("/p", at(1)))
			mustUpdate(t, st, func(tx store.Tx) error { return tx.DeleteSession(t.Context(), gone.ID) })
			_, err := st.GetSession(t.Context(), gone.ID)
			wantCode(t, "GetSession after delete", err, belay.CodeSessionNotFound)
			err = st.Update(t.Context(), func(tx store.Tx) error { return tx.DeleteSession(t.Context(), gone.ID) })
			wantCode(t, "DeleteSession twice", err, belay.CodeSessionNotFound)
			wantEqual(t, "other session", keep, mustGetSession(t, st, keep.ID))
		}},
		{"Head", testSessionHead},
		{"HeadMissing", func(t *testing.T, st store.Store) {
			_, err := st.GetSessionHead(t.Context(), newID())
			wantCode(t, "GetSessionHead of a missing id", err, belay.CodeSessionNotFound)
		}},
		{"Advance", testSessionAdvance},
		{"AdvanceLargeState", testSessionAdvanceLargeState},
		{"AdvanceToHeadsLargeState", testSessionAdvanceToHeadsLargeState},
		{"AdvanceMissing", func(t *testing.T, st store.Store) {
			err := st.Update(t.Context(), func(tx store.Tx) error { return tx.AdvanceSession(t.Context(), newSession("/p", at(0))) })
			wantCode(t, "AdvanceSession of a missing id", err, belay.CodeSessionNotFound)
		}},
		{"DeleteCascades", testSessionDeleteCascades},
		{"ActiveSessionByStatus", testActiveSessionByStatus},
		{"ActiveSessionNewestOpen", testActiveSessionNewestOpen},
		{"ActiveSessionLookupOrCreate", testActiveSessionLookupOrCreate},
		{"ActiveSessionBesideWriters", testActiveSessionBesideWriters},
		{"List", testListSessions},
		{"ListPaging", testListSessionsPaging},
		{"ListBytes", testListSessionsBytes},
	})
}

// fullSession sets every field, so the round trip covers all of them.
func fullSession() *belay.Session {
	return &belay.Session{
		ID: newID(), ProjectPath: "/home/alice/project", Title: "Migrate to PostgreSQL ✓", Owner: "alice",
		Status: belay.SessionAwaitingInput, Phase: "design", CurrentStep: 3,
		State:            json.RawMessage(`{"step": 3,  "notes": ["a", "\u00e9"], "n": 1.50}`),
		HeadCheckpointID: newID(), LastSeq: 7, CheckpointCount: 6, Cost: 12.625, CostMicros: 12_625_000,
		Metadata:  json.RawMessage(`{"model":"opus"}`),
		CreatedAt: base, UpdatedAt: base.Add(90*60e9 + 1),
		Holder: "pid 4242 on build-7", LeaseExpiresAt: ptr(base.Add(2*time.Hour + 1)), EndReason: "lease lapsed",
		Plan: &belay.Plan{
			Tasks: []belay.Task{{
				ID: "t1", Title: "Port the schema", Description: "tables, then indexes", Status: belay.TaskCompleted,
				ChangedFiles: []string{"schema.sql"}, CommitSHA: "0a1b2c3", CostMicros: 1_500_000, FixCycles: 2, Reason: "done",
			}},
			Mode: belay.ModeEveryN, Every: 2, Budget: belay.Budget{WarnAtMicros: 10_000_000, HardLimitMicros: 20_000_000},
			Fired: []belay.TriggerKind{belay.TriggerBudgetWarning}, BudgetHold: newID(),
		},
	}
}

// sessionCase is a session to store, named.
type sessionCase struct {
	name string
	s    *belay.Session
}

// sessionCases are a session with every field set and one with only the
// fields a session needs.
func sessionCases() []sessionCase {
	return []sessionCase{
		{"Full", fullSession()},
		{"Minimal", &belay.Session{ID: newID(), Status: belay.SessionRunning, CreatedAt: at(1), UpdatedAt: at(1)}},
	}
}

func testSessionRoundTrip(t *testing.T, st store.Store) {
	for _, tc := range sessionCases() {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "Full" {
				wantAllSet(t, "fullSession", tc.s)
			}
			mustInsertSession(t, st, tc.s)
			got := mustGetSession(t, st, tc.s.ID)
			wantEqual(t, "GetSession", tc.s, got)
			wantUTC(t, "CreatedAt", got.CreatedAt)
			wantUTC(t, "UpdatedAt", got.UpdatedAt)
			mustUpdate(t, st, func(tx store.Tx) error {
				got, err := tx.GetSession(t.Context(), tc.s.ID)
				if err != nil {
					return err
				}
				wantEqual(t, "GetSession in a transaction", tc.s, got)
				return nil
			})
		})
	}
}

func testSessionUpdate(t *testing.T, st store.Store) {
	s := mustInsertSession(t, st, newSession("/p", at(0)))
	changed := fullSession()
	changed.ID = s.ID
	changed.CreatedAt = at(99) // immutable: the update must not move it
	mustUpdate(t, st, func(tx store.Tx) error { return tx.UpdateSession(t.Context(), changed) })
	want := *changed
	// Immutable: the update must not change them.
	want.CreatedAt, want.ProjectPath, want.Owner = s.CreatedAt, s.ProjectPath, s.Owner
	wantEqual(t, "session after UpdateSession", &want, mustGetSession(t, st, s.ID))

	// Clearing the JSON documents, the plan and the lease stores NULL again,
	// not an empty document or time.
	want.State, want.Metadata, want.Plan, want.LeaseExpiresAt = nil, nil, nil, nil
	mustUpdate(t, st, func(tx store.Tx) error { return tx.UpdateSession(t.Context(), &want) })
	wantEqual(t, "session after clearing state", &want, mustGetSession(t, st, s.ID))
}

// headOf is s as GetSessionHead returns it.
func headOf(s *belay.Session) *belay.Session {
	return &belay.Session{ID: s.ID, ProjectPath: s.ProjectPath, Owner: s.Owner, Status: s.Status, Phase: s.Phase,
		CurrentStep: s.CurrentStep, HeadCheckpointID: s.HeadCheckpointID, LastSeq: s.LastSeq,
		CheckpointCount: s.CheckpointCount, Holder: s.Holder, LeaseExpiresAt: s.LeaseExpiresAt}
}

func testSessionHead(t *testing.T, st store.Store) {
	for _, tc := range sessionCases() {
		t.Run(tc.name, func(t *testing.T) {
			mustInsertSession(t, st, tc.s)
			got, err := st.GetSessionHead(t.Context(), tc.s.ID)
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, "GetSessionHead", headOf(tc.s), got)
			mustUpdate(t, st, func(tx store.Tx) error {
				got, err := tx.GetSessionHead(t.Context(), tc.s.ID)
				if err != nil {
					return err
				}
				wantEqual(t, "GetSessionHead in a transaction", headOf(tc.s), got)
				return nil
			})
		})
	}
}

// testSessionAdvance stores a save's changes to a session read with
// GetSessionHead: the session's other fields stay as they were, and so does
// its state when the save carries none.
func testSessionAdvance(t *testing.T, st store.Store) {
	s := mustInsertSession(t, st, fullSession())
	want := *s
	advance := func(change func(h *belay.Session)) {
		t.Helper()
		mustUpdate(t, st, func(tx store.Tx) error {
			h, err := tx.GetSessionHead(t.Context(), s.ID)
			if err != nil {
				return err
			}
			change(h)
			return tx.AdvanceSession(t.Context(), h)
		})
	}
	advance(func(h *belay.Session) {
		h.Status, h.Phase, h.CurrentStep = belay.SessionRunning, "build", 4
		h.HeadCheckpointID, h.LastSeq, h.CheckpointCount, h.UpdatedAt = newID(), 8, 7, at(5)
		h.State = json.RawMessage(`{"step":4}`)
		want.Status, want.Phase, want.CurrentStep = h.Status, h.Phase, h.CurrentStep
		want.HeadCheckpointID, want.LastSeq, want.CheckpointCount, want.UpdatedAt = h.HeadCheckpointID, h.LastSeq, h.CheckpointCount, h.UpdatedAt
		want.State = h.State
	})
	wantEqual(t, "session after AdvanceSession", &want, mustGetSession(t, st, s.ID))

	advance(func(h *belay.Session) {
		h.HeadCheckpointID, h.LastSeq, h.CheckpointCount, h.UpdatedAt = newID(), 9, 8, at(6)
		want.HeadCheckpointID, want.LastSeq, want.CheckpointCount, want.UpdatedAt = h.HeadCheckpointID, h.LastSeq, h.CheckpointCount, h.UpdatedAt
	})
	wantEqual(t, "session after AdvanceSession without a state", &want, mustGetSession(t, st, s.ID))

	// The fields a save does not change stay, whatever the session passed holds.
	mustUpdate(t, st, func(tx store.Tx) error {
		h := *fullSession()
		h.ID, h.Status, h.Phase, h.CurrentStep, h.State = s.ID, want.Status, want.Phase, want.CurrentStep, nil
		h.HeadCheckpointID, h.LastSeq, h.CheckpointCount, h.UpdatedAt = want.HeadCheckpointID, want.LastSeq, want.CheckpointCount, want.UpdatedAt
		return tx.AdvanceSession(t.Context(), &h)
	})
	wantEqual(t, "session after AdvanceSession of other fields", &want, mustGetSession(t, st, s.ID))
}

// testSessionAdvanceLargeState advances a session to a large state and on,
// without one, and reads the state back whole.
func testSessionAdvanceLargeState(t *testing.T, st store.Store) {
	s := mustInsertSession(t, st, newSession("/p", at(0)))
	big := newBigState(3, 300)
	for step := 1; step <= 3; step++ {
		var state json.RawMessage
		if step != 2 {
			big.edit(step)
			state = big.json(t)
		}
		mustUpdate(t, st, func(tx store.Tx) error {
			h, err := tx.GetSessionHead(t.Context(), s.ID)
			if err != nil {
				return err
			}
			h.LastSeq, h.State = int64(step), state
			return tx.AdvanceSession(t.Context(), h)
		})
		got := mustGetSession(t, st, s.ID)
		if want := big.json(t); !slices.Equal(got.State, want) || got.LastSeq != int64(step) {
			t.Fatalf("step %d: seq %d and a state of %d bytes, want seq %d and %d bytes", step, got.LastSeq, len(got.State), step, len(want))
		}
	}
}

// testSessionAdvanceToHeadsLargeState saves a checkpoint with a large state
// and advances its session to it in one transaction, as core saves; the
// session's state outlives the checkpoint and a sweep of the chunks.
func testSessionAdvanceToHeadsLargeState(t *testing.T, st store.Store) {
	s := mustInsertSession(t, st, newSession("/p", at(0)))
	state := newBigState(5, 200).json(t)
	c := withState(t, newCheckpoint(s, 1, at(1)), state)
	mustUpdate(t, st, func(tx store.Tx) error {
		if err := tx.InsertCheckpoint(t.Context(), c); err != nil {
			return err
		}
		h, err := tx.GetSessionHead(t.Context(), s.ID)
		if err != nil {
			return err
		}
		h.HeadCheckpointID, h.LastSeq, h.CheckpointCount, h.State = c.ID, c.Seq, 1, state
		return tx.AdvanceSession(t.Context(), h)
	})
	mustUpdate(t, st, func(tx store.Tx) error { return tx.DeleteCheckpoint(t.Context(), c.ID) })
	sweep(t, st, false)
	if got := mustGetSession(t, st, s.ID); !slices.Equal(got.State, state) {
		t.Fatalf("a state of %d bytes, want %d", len(got.State), len(state))
	}
}

func testSessionDeleteCascades(t *testing.T, st store.Store) {
	gone := mustInsertSession(t, st, newSession("/p", at(0)))
	keep := mustInsertSession(t, st, newSession("/p", at(1)))
	var goneCPs []*belay.Checkpoint
	for i := range 3 {
		c := newCheckpoint(gone, int64(i+1), at(i))
		c.Tags = []string{"shared"}
		goneCPs = append(goneCPs, mustInsertCheckpoint(t, st, c))
	}
	pending := mustInsertCheckpoint(t, st, withHITL(newCheckpoint(gone, 4, at(4)), at(50)))
	goneCPs = append(goneCPs, pending)
	kept := newCheckpoint(keep, 1, at(5))
	kept.Tags = []string{"shared"}
	mustInsertCheckpoint(t, st, kept)
	mustUpdate(t, st, func(tx store.Tx) error {
		return tx.InsertRollback(t.Context(), &belay.Rollback{ID: newID(), SessionID: gone.ID, TargetID: goneCPs[0].ID, UserID: "alice", CreatedAt: at(6)})
	})

	mustUpdate(t, st, func(tx store.Tx) error { return tx.DeleteSession(t.Context(), gone.ID) })

	for _, c := range goneCPs {
		_, err := st.GetCheckpoint(t.Context(), c.ID)
		wantCode(t, "GetCheckpoint of a deleted session's checkpoint", err, belay.CodeCheckpointNotFound)
	}
	items, total, _, err := st.ListCheckpoints(t.Context(), store.CheckpointQuery{Scope: store.Everything, Tags: []string{"shared"}, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "checkpoints tagged after the cascade", []string{kept.ID}, checkpointIDs(items))
	if total != 1 {
		t.Errorf("total = %d, want 1", total)
	}
	rbs, err := st.ListRollbacks(t.Context(), gone.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rbs) != 0 {
		t.Errorf("ListRollbacks of a deleted session returned %d rollbacks", len(rbs))
	}
	pend, _, err := st.PendingHITL(t.Context(), store.PendingQuery{Scope: store.Everything, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(pend) != 0 {
		t.Errorf("PendingHITL still returns %d checkpoints of a deleted session", len(pend))
	}
	if _, ok, err := st.NextHITLDeadline(t.Context()); err != nil || ok {
		t.Errorf("NextHITLDeadline after the cascade = (_, %v, %v), want none", ok, err)
	}
}

func testActiveSessionByStatus(t *testing.T, st store.Store) {
	statuses := []belay.SessionStatus{
		belay.SessionRunning, belay.SessionAwaitingInput, belay.SessionPaused, belay.SessionInterrupted,
		belay.SessionCompleted, belay.SessionFailed, belay.SessionAbandoned,
	}
	for _, status := range statuses {
		t.Run(string(status), func(t *testing.T) {
			project := "/projects/" + string(status)
			s := newSession(project, at(0))
			s.Status = status
			mustInsertSession(t, st, s)
			got, err := st.ActiveSession(t.Context(), project, store.Everything)
			if status.Open() {
				if err != nil {
					t.Fatalf("ActiveSession with one %s session: %v", status, err)
				}
				wantEqual(t, "ActiveSession", s, got)
				return
			}
			wantCode(t, "ActiveSession with only a "+string(status)+" session", err, belay.CodeSessionNotFound)
		})
	}
}

func testActiveSessionNewestOpen(t *testing.T, st store.Store) {
	_, err := st.ActiveSession(t.Context(), "/p", store.Everything)
	wantCode(t, "ActiveSession of an unknown project", err, belay.CodeSessionNotFound)

	insert := func(project string, status belay.SessionStatus, i int) *belay.Session {
		s := newSession(project, at(i))
		s.Status = status
		return mustInsertSession(t, st, s)
	}
	insert("/p", belay.SessionRunning, 1)
	want := insert("/p", belay.SessionPaused, 3)
	insert("/p", belay.SessionRunning, 2)
	insert("/p", belay.SessionCompleted, 5)
	insert("/p", belay.SessionFailed, 6)
	insert("/p", belay.SessionAbandoned, 7)
	insert("/other", belay.SessionRunning, 9)
	insert("/p/sub", belay.SessionRunning, 9)
	got, err := st.ActiveSession(t.Context(), "/p", store.Everything)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "ActiveSession (the newest open session)", want.ID, got.ID)

	// Two open sessions created at the same instant: the greater id wins,
	// the same order as ListSessions.
	a, b := insert("/tie", belay.SessionRunning, 4), insert("/tie", belay.SessionRunning, 4)
	wantID := max(a.ID, b.ID)
	got, err = st.ActiveSession(t.Context(), "/tie", store.Everything)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "ActiveSession of a tie", wantID, got.ID)
}

// saveByPath is a save naming only its project, as core makes it: in one
// transaction, the project's active session, created when there is none,
// takes the next checkpoint.
func saveByPath(t *testing.T, st store.Store, project string, createdAt time.Time) error {
	ctx := t.Context()
	return st.Update(ctx, func(tx store.Tx) error {
		s, err := tx.ActiveSession(ctx, project, store.Everything)
		if belay.IsCode(err, belay.CodeSessionNotFound) {
			s = newSession(project, createdAt)
			err = tx.InsertSession(ctx, s)
		}
		if err != nil {
			return err
		}
		return advance(t, tx, s, createdAt)
	})
}

// saveByID is a save naming its session.
func saveByID(t *testing.T, st store.Store, id string, createdAt time.Time) error {
	ctx := t.Context()
	return st.Update(ctx, func(tx store.Tx) error {
		s, err := tx.GetSessionHead(ctx, id)
		if err != nil {
			return err
		}
		return advance(t, tx, s, createdAt)
	})
}

// advance stores the next checkpoint of s and moves s's head to it.
func advance(t *testing.T, tx store.Tx, s *belay.Session, createdAt time.Time) error {
	c := seal(t, newCheckpoint(s, s.LastSeq+1, createdAt))
	if err := tx.InsertCheckpoint(t.Context(), c); err != nil {
		return err
	}
	s.LastSeq, s.HeadCheckpointID, s.CheckpointCount, s.UpdatedAt = c.Seq, c.ID, s.CheckpointCount+1, createdAt
	return tx.AdvanceSession(t.Context(), s)
}

// wantGapFree fails unless the sessions of project are n and each one's
// checkpoints are numbered 1..LastSeq, as many as it counts; it returns how
// many checkpoints they hold in all.
func wantGapFree(t *testing.T, st store.Store, project string, n int) int64 {
	t.Helper()
	sessions, _, _, err := st.ListSessions(t.Context(), store.SessionQuery{Scope: store.Everything, ProjectPath: project, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) != n {
		t.Errorf("%d sessions of %s, want %d", len(sessions), project, n)
	}
	var all int64
	for _, s := range sessions {
		cps, _, _, err := st.ListCheckpoints(t.Context(), store.CheckpointQuery{Scope: store.Everything, SessionID: s.ID, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		var seqs []int64
		for _, c := range cps {
			seqs = append(seqs, c.Seq)
		}
		for i, seq := range seqs {
			if seq != int64(i+1) {
				t.Errorf("session %s holds checkpoints %v, want 1..%d", s.ID, seqs, len(seqs))
				break
			}
		}
		if s.LastSeq != int64(len(seqs)) || s.CheckpointCount != int64(len(seqs)) {
			t.Errorf("session %s: last seq %d, count %d; it holds %d checkpoints", s.ID, s.LastSeq, s.CheckpointCount, len(seqs))
		}
		all += int64(len(seqs))
	}
	return all
}

// testActiveSessionLookupOrCreate: saves naming only a project that has no
// session yet run at once; inside a transaction ActiveSession makes them
// take turns, so exactly one creates the session and the others number
// their checkpoints after each other's.
func testActiveSessionLookupOrCreate(t *testing.T, st store.Store) {
	const saves = 16
	var wg sync.WaitGroup
	for i := range saves {
		wg.Go(func() {
			if err := saveByPath(t, st, "/p", at(i)); err != nil {
				t.Errorf("save %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if n := wantGapFree(t, st, "/p", 1); n != saves {
		t.Errorf("%d checkpoints, want %d", n, saves)
	}
}

// testActiveSessionBesideWriters: saves by project run beside saves naming
// the session and beside a writer that completes the session. None fails,
// each session's checkpoints are gap-free, and the saves by project that
// come after the completion go to the project's older open session, never
// to a new one.
func testActiveSessionBesideWriters(t *testing.T, st store.Store) {
	mustInsertSession(t, st, newSession("/p", at(0)))
	newest := mustInsertSession(t, st, newSession("/p", at(1)))
	const saves = 24
	var wg sync.WaitGroup
	for i := range saves {
		wg.Go(func() {
			save := func() error { return saveByPath(t, st, "/p", at(10+i)) }
			if i%3 == 0 {
				save = func() error { return saveByID(t, st, newest.ID, at(10+i)) }
			}
			if err := save(); err != nil {
				t.Errorf("save %d: %v", i, err)
			}
		})
		if i == saves/2 {
			wg.Go(func() {
				err := st.Update(t.Context(), func(tx store.Tx) error {
					s, err := tx.GetSession(t.Context(), newest.ID)
					if err != nil {
						return err
					}
					s.Status = belay.SessionCompleted
					return tx.UpdateSession(t.Context(), s)
				})
				if err != nil {
					t.Errorf("complete the session: %v", err)
				}
			})
		}
	}
	wg.Wait()
	if n := wantGapFree(t, st, "/p", 2); n != saves {
		t.Errorf("%d checkpoints, want %d", n, saves)
	}
}

// sessionFixture inserts sessions over two projects and several statuses,
// two of them created at the same instant.
func sessionFixture(t *testing.T, st store.Store) []*belay.Session {
	t.Helper()
	specs := []struct {
		project string
		status  belay.SessionStatus
		minute  int
	}{
		{"/one", belay.SessionRunning, 0},
		{"/one", belay.SessionCompleted, 1},
		{"/two", belay.SessionRunning, 2},
		{"/one", belay.SessionRunning, 3},
		{"/two", belay.SessionFailed, 3},
		{"/two", belay.SessionRunning, 3},
		{"/one", belay.SessionPaused, 4},
	}
	var out []*belay.Session
	for _, sp := range specs {
		s := newSession(sp.project, at(sp.minute))
		s.Status = sp.status
		out = append(out, mustInsertSession(t, st, s))
	}
	return out
}

func testListSessions(t *testing.T, st store.Store) {
	empty, total, _, err := st.ListSessions(t.Context(), store.SessionQuery{Scope: store.Everything, Limit: 10})
	if err != nil || len(empty) != 0 || total != 0 {
		t.Fatalf("ListSessions of an empty store = %d items, total %d, %v", len(empty), total, err)
	}
	all := sessionFixture(t, st)
	match := func(pred func(s *belay.Session) bool) []string {
		var out []*belay.Session
		for _, s := range all {
			if pred(s) {
				out = append(out, s)
			}
		}
		return sessionIDs(newestFirst(out))
	}
	for _, tc := range []struct {
		name string
		q    store.SessionQuery
		want []string
	}{
		{"All", store.SessionQuery{}, match(func(*belay.Session) bool { return true })},
		{"Project", store.SessionQuery{ProjectPath: "/one"}, match(func(s *belay.Session) bool { return s.ProjectPath == "/one" })},
		{"Status", store.SessionQuery{Status: belay.SessionRunning}, match(func(s *belay.Session) bool { return s.Status == belay.SessionRunning })},
		{"ProjectAndStatus", store.SessionQuery{ProjectPath: "/two", Status: belay.SessionRunning},
			match(func(s *belay.Session) bool { return s.ProjectPath == "/two" && s.Status == belay.SessionRunning })},
		{"NoMatch", store.SessionQuery{ProjectPath: "/none"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.Scope, q.Limit = store.Everything, 100
			got, total, _, err := st.ListSessions(t.Context(), q)
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, "ids, newest first", tc.want, nilIfEmpty(sessionIDs(got)))
			if total != int64(len(tc.want)) {
				t.Errorf("total = %d, want %d", total, len(tc.want))
			}
			q.Limit = 2
			got, total, _, err = st.ListSessions(t.Context(), q)
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, "first page of 2", nilIfEmpty(tc.want[:min(2, len(tc.want))]), nilIfEmpty(sessionIDs(got)))
			if total != int64(len(tc.want)) {
				t.Errorf("total with a limit = %d, want %d", total, len(tc.want))
			}
		})
	}
	got, _, _, err := st.ListSessions(t.Context(), store.SessionQuery{Scope: store.Everything, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "listed sessions", newestFirst(all), got)
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// testListSessionsPaging walks the list with After while sessions are created
// between pages: every session that existed at the start is seen exactly once.
func testListSessionsPaging(t *testing.T, st store.Store) {
	initial := sessionFixture(t, st)
	for i := range 5 {
		initial = append(initial, mustInsertSession(t, st, newSession("/three", at(10+i))))
	}
	want := sessionIDs(newestFirst(initial))
	seen := map[string]int{}
	var walked []string
	var after *store.SessionKey
	for page := 0; ; page++ {
		if page > len(initial)+2 {
			t.Fatal("paging does not end")
		}
		items, total, more, err := st.ListSessions(t.Context(), store.SessionQuery{Scope: store.Everything, After: after, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		if more != (len(items) == 3) {
			t.Errorf("page %d: %d items, more %v", page, len(items), more)
		}
		if want := int64(len(initial) + 2*page); total != want {
			t.Errorf("page %d: total = %d, want %d (it ignores After)", page, total, want)
		}
		for _, s := range items {
			seen[s.ID]++
			walked = append(walked, s.ID)
		}
		if len(items) < 3 {
			break
		}
		last := items[len(items)-1]
		after = &store.SessionKey{CreatedAt: last.CreatedAt, ID: last.ID}
		// One session older than the position (the next pages show it) and
		// one newer (they do not).
		mustInsertSession(t, st, newSession("/late", last.CreatedAt.Add(-1)))
		mustInsertSession(t, st, newSession("/late", at(100+page)))
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("session %s seen %d times", id, n)
		}
	}
	var initialWalked []string
	for _, id := range walked {
		if slices.Contains(want, id) {
			initialWalked = append(initialWalked, id)
		}
	}
	wantEqual(t, "initial sessions in walk order", want, initialWalked)
}

// testListSessionsBytes: MaxBytes ends a page of sessions after the one
// whose state and metadata bring it to MaxBytes or more.
func testListSessionsBytes(t *testing.T, st store.Store) {
	// state and metadata bytes, newest first
	sizes := [][2]int{{4000, 500}, {10, 0}, {chunkstore.InlineMax + 1, 0}, {0, 0}, {100, 100}}
	want := make([]*belay.Session, len(sizes))
	for i := len(sizes) - 1; i >= 0; i-- {
		s := newSession("/bytes", at(len(sizes)-i))
		s.State, s.Metadata = jsonOfSize(sizes[i][0]), jsonOfSize(sizes[i][1])
		want[i] = mustInsertSession(t, st, s)
	}
	// 4500 | 10 + 65537 | 0 + 200
	pages := [][]int{{0}, {1, 2}, {3, 4}}
	q := store.SessionQuery{Scope: store.Everything, Limit: 10, MaxBytes: 4500}
	for i, idx := range pages {
		items, total, more, err := st.ListSessions(t.Context(), q)
		if err != nil {
			t.Fatalf("page %d: %v", i, err)
		}
		var ids []string
		for _, j := range idx {
			ids = append(ids, want[j].ID)
		}
		wantEqual(t, fmt.Sprintf("page %d", i), ids, sessionIDs(items))
		wantEqual(t, fmt.Sprintf("page %d: more", i), i < len(pages)-1, more)
		wantEqual(t, "total", int64(len(sizes)), total)
		for _, s := range items {
			if j := slices.IndexFunc(want, func(w *belay.Session) bool { return w.ID == s.ID }); len(s.State) != sizes[j][0] {
				t.Errorf("session %d: state of %d bytes, want %d", j, len(s.State), sizes[j][0])
			}
		}
		if len(items) > 0 {
			last := items[len(items)-1]
			q.After = &store.SessionKey{CreatedAt: last.CreatedAt, ID: last.ID}
		}
	}
}
