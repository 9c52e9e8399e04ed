package storetest

import (
	"cmp"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// base is the suite's epoch: nanoseconds set, so a driver that rounds times
// to microseconds or milliseconds fails the round trips.
var base = time.Date(2026, time.March, 4, 5, 6, 7, 123456789, time.UTC)

// at returns base plus i minutes.
func at(i int) time.Time { return base.Add(time.Duration(i) * time.Minute) }

func newID() string { return uuid.NewString() }

func mustUpdate(t *testing.T, st store.Store, fn func(tx store.Tx) error) {
	t.Helper()
	if err := st.Update(t.Context(), fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

// newSession returns a running session of project created at createdAt.
func newSession(project string, createdAt time.Time) *belay.Session {
	return &belay.Session{
		ID: newID(), ProjectPath: project, Title: "session", Owner: "alice",
		Status: belay.SessionRunning, CreatedAt: createdAt, UpdatedAt: createdAt,
	}
}

func mustInsertSession(t *testing.T, st store.Store, s *belay.Session) *belay.Session {
	t.Helper()
	mustUpdate(t, st, func(tx store.Tx) error { return tx.InsertSession(t.Context(), s) })
	return s
}

// newCheckpoint returns a minimal manual checkpoint of sess.
func newCheckpoint(sess *belay.Session, seq int64, createdAt time.Time) *belay.Checkpoint {
	return &belay.Checkpoint{
		ID: newID(), SessionID: sess.ID, Seq: seq, Type: belay.TypeManual,
		Trigger: belay.TriggerUserRequest, Summary: "checkpoint", ProjectPath: sess.ProjectPath,
		CreatedBy: "alice", CreatedAt: createdAt, UpdatedAt: createdAt,
	}
}

// withHITL makes c wait for a decision; a non-zero deadline adds a timeout.
func withHITL(c *belay.Checkpoint, deadline time.Time) *belay.Checkpoint {
	c.Type, c.HITLRequired = belay.TypeHITL, true
	c.HITL = &belay.HITLRequest{
		Title: "Proceed?",
		Options: []belay.HITLOption{
			{ID: "approve", Label: "Approve", Action: belay.ActionApprove, IsDefault: true},
			{ID: "reject", Label: "Reject", Action: belay.ActionReject},
		},
		OnReject: belay.OnRejectFail,
	}
	if !deadline.IsZero() {
		c.HITL.Timeout = &belay.HITLTimeout{Duration: 3600, DefaultAction: belay.ActionReject, ExpiresAt: deadline}
	}
	return c
}

// seal sets c's checksum, as core does before inserting.
func seal(t *testing.T, c *belay.Checkpoint) *belay.Checkpoint {
	t.Helper()
	sum, err := c.ComputeChecksum()
	if err != nil {
		t.Fatalf("ComputeChecksum: %v", err)
	}
	c.Checksum = sum
	return c
}

func mustInsertCheckpoint(t *testing.T, st store.Store, c *belay.Checkpoint) *belay.Checkpoint {
	t.Helper()
	seal(t, c)
	mustUpdate(t, st, func(tx store.Tx) error { return tx.InsertCheckpoint(t.Context(), c) })
	return c
}

func newDecision(user string, decidedAt time.Time) *belay.Decision {
	return &belay.Decision{
		ID: newID(), UserID: user, Action: belay.ActionApprove, SelectedOption: "approve",
		DecidedAt: decidedAt, ResponseTime: 1500,
	}
}

// decide stores d on checkpoint id in its own transaction and reports whether it won.
func decide(t *testing.T, st store.Store, id string, d *belay.Decision) bool {
	t.Helper()
	var won bool
	mustUpdate(t, st, func(tx store.Tx) error {
		var err error
		won, err = tx.DecideIfPending(t.Context(), id, d)
		return err
	})
	return won
}

func markFired(t *testing.T, st store.Store, id string) bool {
	t.Helper()
	var fired bool
	mustUpdate(t, st, func(tx store.Tx) error {
		var err error
		fired, err = tx.MarkTimeoutFired(t.Context(), id)
		return err
	})
	return fired
}

func mustGetCheckpoint(t *testing.T, st store.Reader, id string) *belay.Checkpoint {
	t.Helper()
	c, err := st.GetCheckpoint(t.Context(), id)
	if err != nil {
		t.Fatalf("GetCheckpoint(%s): %v", id, err)
	}
	return c
}

func mustGetSession(t *testing.T, st store.Reader, id string) *belay.Session {
	t.Helper()
	s, err := st.GetSession(t.Context(), id)
	if err != nil {
		t.Fatalf("GetSession(%s): %v", id, err)
	}
	return s
}

// wantCode fails unless err carries code.
func wantCode(t *testing.T, what string, err error, code belay.Code) {
	t.Helper()
	if !belay.IsCode(err, code) {
		t.Errorf("%s: error %v (code %q), want code %s", what, err, belay.ErrorCode(err), code)
	}
}

// wantEqual fails with a diff unless got equals want. Times compare with
// time.Time.Equal (to the nanosecond); nil and empty slices, maps and JSON
// documents are different values.
func wantEqual[T any](t *testing.T, what string, want, got T) {
	t.Helper()
	if d := gocmp.Diff(want, got); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, d)
	}
}

// wantUTC fails unless tm is in UTC, as every time a store returns must be.
func wantUTC(t *testing.T, what string, tm time.Time) {
	t.Helper()
	if tm.Location() != time.UTC {
		t.Errorf("%s = %v is in %v, want UTC", what, tm, tm.Location())
	}
}

func checkpointIDs(cs []*belay.Checkpoint) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

func sessionIDs(ss []*belay.Session) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.ID
	}
	return out
}

// newestFirst sorts sessions the way ListSessions returns them.
func newestFirst(ss []*belay.Session) []*belay.Session {
	out := slices.Clone(ss)
	slices.SortFunc(out, func(a, b *belay.Session) int {
		return -cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// compareCheckpoints orders checkpoints as a CheckpointQuery with the given
// order asks for.
func compareCheckpoints(byType, desc bool) func(a, b *belay.Checkpoint) int {
	return func(a, b *belay.Checkpoint) int {
		c := cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
		if byType {
			c = cmp.Or(cmp.Compare(a.Type, b.Type), c)
		}
		if desc {
			return -c
		}
		return c
	}
}

// keyOf is the position of c in a checkpoint order.
func keyOf(c *belay.Checkpoint) *store.CheckpointKey {
	return &store.CheckpointKey{Type: c.Type, CreatedAt: c.CreatedAt, Seq: c.Seq, ID: c.ID}
}

// notStored names the fields a store does not keep: core sets them on
// answers only (Checkpoint.StartedSession, Session.Access), a store on a
// state it could not read back (StateErr, see RunDamagedChunk).
var notStored = map[string]bool{"StartedSession": true, "StateErr": true, "Access": true}

// wantAllSet fails for every field of v (recursively through structs,
// pointers and the first element of slices) that holds its zero value, so a
// round-trip fixture has to grow with the type it covers.
func wantAllSet(t *testing.T, what string, v any) {
	t.Helper()
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		if v.IsZero() {
			t.Errorf("%s: fixture leaves %s unset; set it so the round trip covers it", what, path)
			return
		}
		switch v.Kind() {
		case reflect.Pointer:
			walk(path, v.Elem())
		case reflect.Struct:
			if v.Type() == reflect.TypeFor[time.Time]() {
				return
			}
			for i := range v.NumField() {
				if notStored[v.Type().Field(i).Name] {
					continue
				}
				walk(path+"."+v.Type().Field(i).Name, v.Field(i))
			}
		case reflect.Slice:
			if v.Type() != reflect.TypeFor[json.RawMessage]() && v.Len() > 0 {
				walk(path+"[0]", v.Index(0))
			}
		}
	}
	walk(reflect.TypeOf(v).Elem().Name(), reflect.ValueOf(v))
}
