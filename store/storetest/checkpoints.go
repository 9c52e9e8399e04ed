package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

func testCheckpoints(t *testing.T, o opener) {
	subtests(t, o, []subtest{
		{"RoundTrip", testCheckpointRoundTrip},
		{"GetMissing", func(t *testing.T, st store.Store) {
			s := mustInsertSession(t, st, newSession("/p", at(0)))
			mustInsertCheckpoint(t, st, newCheckpoint(s, 1, at(1)))
			_, err := st.GetCheckpoint(t.Context(), newID())
			wantCode(t, "GetCheckpoint of a missing id", err, belay.CodeCheckpointNotFound)
			_, err = st.GetCheckpointBySeq(t.Context(), s.ID, 2)
			wantCode(t, "GetCheckpointBySeq of a missing seq", err, belay.CodeCheckpointNotFound)
			// The details name what was asked for, as fields.
			if be, ok := err.(*belay.Error); !ok || be.Details["sessionId"] != s.ID || be.Details["seq"] != int64(2) || be.Details["id"] != nil {
				t.Errorf("GetCheckpointBySeq of a missing seq: details %v, want sessionId and seq", err)
			}
			_, err = st.GetCheckpointBySeq(t.Context(), newID(), 1)
			wantCode(t, "GetCheckpointBySeq of a missing session", err, belay.CodeCheckpointNotFound)
		}},
		{"BySeq", func(t *testing.T, st store.Store) {
			s1 := mustInsertSession(t, st, newSession("/p", at(0)))
			s2 := mustInsertSession(t, st, newSession("/p", at(0)))
			var want []*belay.Checkpoint
			for i := range 3 {
				want = append(want, mustInsertCheckpoint(t, st, newCheckpoint(s1, int64(i+1), at(i))))
				mustInsertCheckpoint(t, st, newCheckpoint(s2, int64(i+1), at(i)))
			}
			for _, c := range want {
				got, err := st.GetCheckpointBySeq(t.Context(), s1.ID, c.Seq)
				if err != nil {
					t.Fatal(err)
				}
				wantEqual(t, "GetCheckpointBySeq", c, got)
			}
		}},
		{"UniqueSessionSeq", func(t *testing.T, st store.Store) {
			s1 := mustInsertSession(t, st, newSession("/p", at(0)))
			s2 := mustInsertSession(t, st, newSession("/p", at(0)))
			first := mustInsertCheckpoint(t, st, newCheckpoint(s1, 1, at(1)))
			dup := seal(t, newCheckpoint(s1, 1, at(2)))
			if err := st.Update(t.Context(), func(tx store.Tx) error { return tx.InsertCheckpoint(t.Context(), dup) }); err == nil {
				t.Fatal("a second checkpoint with the same (session, seq) was stored")
			}
			_, err := st.GetCheckpoint(t.Context(), dup.ID)
			wantCode(t, "GetCheckpoint of the rejected duplicate", err, belay.CodeCheckpointNotFound)
			got, err := st.GetCheckpointBySeq(t.Context(), s1.ID, 1)
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, "checkpoint #1", first, got)
			// The same seq in another session is fine.
			mustInsertCheckpoint(t, st, newCheckpoint(s2, 1, at(3)))
		}},
		{"DuplicateID", func(t *testing.T, st store.Store) {
			s := mustInsertSession(t, st, newSession("/p", at(0)))
			first := mustInsertCheckpoint(t, st, newCheckpoint(s, 1, at(1)))
			dup := newCheckpoint(s, 2, at(2))
			dup.ID = first.ID
			seal(t, dup)
			if err := st.Update(t.Context(), func(tx store.Tx) error { return tx.InsertCheckpoint(t.Context(), dup) }); err == nil {
				t.Fatal("a second checkpoint with the same id was stored")
			}
			wantEqual(t, "checkpoint", first, mustGetCheckpoint(t, st, first.ID))
		}},
		{"MissingSession", func(t *testing.T, st store.Store) {
			orphan := seal(t, newCheckpoint(&belay.Session{ID: newID()}, 1, at(1)))
			if err := st.Update(t.Context(), func(tx store.Tx) error { return tx.InsertCheckpoint(t.Context(), orphan) }); err == nil {
				t.Fatal("a checkpoint of a missing session was stored")
			}
		}},
		{"Delete", func(t *testing.T, st store.Store) {
			s := mustInsertSession(t, st, newSession("/p", at(0)))
			keep := newCheckpoint(s, 1, at(1))
			keep.Tags = []string{"x"}
			mustInsertCheckpoint(t, st, keep)
			gone := newCheckpoint(s, 2, at(2))
			gone.Tags = []string{"x"}
			mustInsertCheckpoint(t, st, withHITL(gone, at(3)))
			mustUpdate(t, st, func(tx store.Tx) error { return tx.DeleteCheckpoint(t.Context(), gone.ID) })
			_, err := st.GetCheckpoint(t.Context(), gone.ID)
			wantCode(t, "GetCheckpoint after delete", err, belay.CodeCheckpointNotFound)
			_, err = st.GetCheckpointBySeq(t.Context(), s.ID, 2)
			wantCode(t, "GetCheckpointBySeq after delete", err, belay.CodeCheckpointNotFound)
			err = st.Update(t.Context(), func(tx store.Tx) error { return tx.DeleteCheckpoint(t.Context(), gone.ID) })
			wantCode(t, "DeleteCheckpoint twice", err, belay.CodeCheckpointNotFound)
			items, total, _, err := st.ListCheckpoints(t.Context(), store.CheckpointQuery{Scope: store.Everything, Tags: []string{"x"}, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, "checkpoints tagged x", []string{keep.ID}, checkpointIDs(items))
			if total != 1 {
				t.Errorf("total = %d, want 1", total)
			}
			if due, err := st.DueHITL(t.Context(), at(10), 10); err != nil || len(due) != 0 {
				t.Errorf("DueHITL after deleting the only HITL checkpoint = %d rows, %v", len(due), err)
			}
		}},
	})
}

// fullCheckpoint sets every field, decision and timeout bookkeeping included.
func fullCheckpoint(sess *belay.Session, seq int64) *belay.Checkpoint {
	expires := base.Add(30*24*time.Hour + 1)
	return &belay.Checkpoint{
		ID: newID(), SessionID: sess.ID, Seq: seq, Name: "architecture",
		Type: belay.TypeHITL, Trigger: belay.TriggerPhaseChange,
		Summary:      "Chose PostgreSQL ✓ — über",
		Description:  "Line one\nline two\ttabbed \"quoted\" 🚀",
		ProjectPath:  sess.ProjectPath,
		WorkspaceRef: "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
		Files: &belay.FileChanges{
			Created: []string{"db/schema.sql"}, Modified: []string{"go.mod", "main.go"}, Deleted: []string{"old.txt"},
		},
		// Whitespace, escapes and number spellings must survive byte for byte.
		AgentState: json.RawMessage(`{"b": 1,  "a": [1, 2.50, {"z": null}], "s": "\u00e9", "big": 1e400}`),
		Outputs:    json.RawMessage(`[1, "two", 3e2]`),
		Metadata:   json.RawMessage(`{"cost":0.25,"model":"opus"}`),
		Context:    map[string]string{"branch": "main", "commit": "abc123", "ünï": "cödé"},
		Tags:       []string{"db", "architecture"},
		Phase:      "design", Step: 7, ParentID: newID(),
		HITLRequired: true,
		HITL: &belay.HITLRequest{
			Title: "Which database?", Message: "Pick one.",
			Options: []belay.HITLOption{
				{ID: "pg", Label: "PostgreSQL", Description: "scales out", Action: belay.ActionApprove, IsDefault: true},
				{ID: "sqlite", Label: "SQLite", Action: belay.ActionModify},
			},
			Context:            json.RawMessage(`{"alternatives":["mysql"]}`),
			Timeout:            &belay.HITLTimeout{Duration: 3600, DefaultAction: belay.ActionReject, ExpiresAt: base.Add(time.Hour)},
			Approvers:          []string{"bob"},
			ForbidSelfApproval: true,
			OnReject:           belay.OnRejectContinue,
		},
		Decision: &belay.Decision{
			ID: newID(), UserID: "bob", Action: belay.ActionModify, SelectedOption: "sqlite",
			Feedback: "smaller first", Modifications: json.RawMessage(`{"db":"sqlite"}`),
			DecidedAt: base.Add(20*time.Minute + 3), ResponseTime: 1200003, AutoTriggered: true,
			IdempotencyKey: "decide-1",
		},
		TimeoutFired:  true,
		CreatedBy:     "agent-7",
		CreatedAt:     base,
		UpdatedAt:     base.Add(20*time.Minute + 3),
		TokenCount:    42,
		TokenEncoding: "o200k_base",
		ExpiresAt:     &expires,
	}
}

func testCheckpointRoundTrip(t *testing.T, st store.Store) {
	sess := mustInsertSession(t, st, newSession("/home/alice/project", at(0)))
	pending := fullCheckpoint(sess, 2)
	pending.Decision, pending.TimeoutFired = nil, false
	minimal := &belay.Checkpoint{ID: newID(), SessionID: sess.ID, Seq: 3, Type: belay.TypeAuto,
		Trigger: belay.TriggerPeriodic, Summary: "s", CreatedAt: at(2), UpdatedAt: at(2)}
	// Empty but not nil: a checksum tells [] from null, so the store must too.
	empty := newCheckpoint(sess, 4, at(3))
	empty.Files = &belay.FileChanges{Created: []string{}, Modified: []string{}, Deleted: []string{}}
	empty.Context = map[string]string{}
	empty.Tags = []string{}
	empty.HITL = &belay.HITLRequest{Options: []belay.HITLOption{}}
	empty.HITLRequired = true

	full := fullCheckpoint(sess, 1)
	wantAllSet(t, "fullCheckpoint", seal(t, full))
	for _, tc := range []struct {
		name string
		c    *belay.Checkpoint
	}{
		{"Full", full},
		{"PendingHITL", pending},
		{"Minimal", minimal},
		{"EmptyNotNil", empty},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := mustInsertCheckpoint(t, st, tc.c)
			sum := want.Checksum
			check := func(how string, got *belay.Checkpoint) {
				t.Helper()
				wantEqual(t, how, want, got) // Decision.IdempotencyKey included
				wantUTC(t, how+": CreatedAt", got.CreatedAt)
				if got.ExpiresAt != nil {
					wantUTC(t, how+": ExpiresAt", *got.ExpiresAt)
				}
				if again, err := got.ComputeChecksum(); err != nil || again != sum {
					t.Errorf("%s: checksum of the read-back checkpoint = %s (%v), want %s", how, again, err, sum)
				}
				if err := got.VerifyChecksum(); err != nil {
					t.Errorf("%s: VerifyChecksum: %v", how, err)
				}
			}
			check("GetCheckpoint", mustGetCheckpoint(t, st, want.ID))
			bySeq, err := st.GetCheckpointBySeq(t.Context(), sess.ID, want.Seq)
			if err != nil {
				t.Fatal(err)
			}
			check("GetCheckpointBySeq", bySeq)
			items, _, _, err := st.ListCheckpoints(t.Context(), store.CheckpointQuery{Scope: store.Everything, SessionID: sess.ID, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range items {
				if c.ID == want.ID {
					check("ListCheckpoints", c)
				}
			}
			mustUpdate(t, st, func(tx store.Tx) error {
				got, err := tx.GetCheckpoint(t.Context(), want.ID)
				if err != nil {
					return err
				}
				check("GetCheckpoint in a transaction", got)
				return nil
			})
		})
	}
}
