package sqlite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/storetest"
)

func TestDamagedChunk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	db := mustOpen(t, path)
	defer db.Close()
	storetest.RunDamagedChunk(t, db, func(t *testing.T) {
		other, err := openPool(path, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if _, err := other.ExecContext(t.Context(), `UPDATE state_chunks SET data = zeroblob(size)`); err != nil {
			t.Fatal(err)
		}
	})
}

// TestAdvancedStateTakesTheHeadsRoot: a session advanced to the large state
// its head checkpoint was just saved with stores that checkpoint's root, and
// not when the checkpoint was rolled back (by a savepoint, as a failed
// caller in a shared batch is): its chunks went with it, so the session's
// state is chunked and stored again and reads back whole.
func TestAdvancedStateTakesTheHeadsRoot(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "belay.db")
	db := mustOpen(t, path)
	defer db.Close()
	raw, err := openPool(path, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	now := time.Unix(1, 0)
	sess := &belay.Session{ID: "s1", Owner: "alice", Status: belay.SessionRunning, CreatedAt: now, UpdatedAt: now}
	if err := db.Update(ctx, func(tx store.Tx) error { return tx.InsertSession(ctx, sess) }); err != nil {
		t.Fatal(err)
	}
	stored := func(query, id string) []byte {
		t.Helper()
		var b []byte
		if err := raw.QueryRowContext(ctx, query, id).Scan(&b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	for i, rollBack := range []bool{false, true} {
		state := json.RawMessage(fmt.Sprintf(`{"n":%d,"s":%q}`, i, strings.Repeat(fmt.Sprint("state ", i, " "), 20000)))
		cp := &belay.Checkpoint{ID: fmt.Sprint("c", i), SessionID: sess.ID, Seq: int64(i + 1), Type: belay.TypeAuto,
			Trigger: belay.TriggerPeriodic, Summary: "s", Checksum: "x", AgentState: state, CreatedAt: now, UpdatedAt: now}
		err := db.Update(ctx, func(t store.Tx) error {
			q := t.(*tx).q
			if rollBack {
				if _, err := q.ExecContext(ctx, `SAVEPOINT lost`); err != nil {
					return err
				}
			}
			if err := t.InsertCheckpoint(ctx, cp); err != nil {
				return err
			}
			if rollBack {
				if _, err := q.ExecContext(ctx, `ROLLBACK TO lost`); err != nil {
					return err
				}
				if _, err := q.ExecContext(ctx, `RELEASE lost`); err != nil {
					return err
				}
			}
			sess.HeadCheckpointID, sess.LastSeq, sess.State = cp.ID, cp.Seq, state
			return t.AdvanceSession(ctx, sess)
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err := db.GetSession(ctx, sess.ID)
		if err != nil {
			t.Fatalf("rolled back %v: %v", rollBack, err)
		}
		if !bytes.Equal(got.State, state) {
			t.Fatalf("rolled back %v: a state of %d bytes, want %d", rollBack, len(got.State), len(state))
		}
		if !rollBack && !bytes.Equal(stored(`SELECT state FROM sessions WHERE id = ?`, sess.ID), stored(`SELECT agent_state FROM checkpoints WHERE id = ?`, cp.ID)) {
			t.Error("the session does not hold its head checkpoint's root")
		}
	}
}

// TestPreparedStateIsStoredAsPrepared: a large state PrepareState prepared
// is stored, in the transaction, from what was prepared, not cut and
// compressed again (seen by changing the bytes after preparing: the
// transaction stores them as they were); a copy of the state, not the bytes
// prepared, is cut and stored as it is.
func TestPreparedStateIsStoredAsPrepared(t *testing.T) {
	ctx := t.Context()
	db := mustOpen(t, filepath.Join(t.TempDir(), "belay.db"))
	defer db.Close()
	now := time.Unix(1, 0)
	sess := &belay.Session{ID: "s1", Owner: "alice", Status: belay.SessionRunning, CreatedAt: now, UpdatedAt: now}
	if err := db.Update(ctx, func(tx store.Tx) error { return tx.InsertSession(ctx, sess) }); err != nil {
		t.Fatal(err)
	}
	state := json.RawMessage(`{"s":"` + strings.Repeat("prepared ", 20000) + `"}`)
	prepared := bytes.Clone(state)
	pctx := db.PrepareState(ctx, state)
	copy(state[6:], "CHANGED!")
	other := bytes.Clone(state)
	for i, c := range []struct {
		state json.RawMessage
		want  []byte
	}{{state, prepared}, {other, other}} {
		cp := &belay.Checkpoint{ID: fmt.Sprint("c", i), SessionID: sess.ID, Seq: int64(i + 1), Type: belay.TypeAuto,
			Trigger: belay.TriggerPeriodic, Summary: "s", Checksum: "x", AgentState: c.state, CreatedAt: now, UpdatedAt: now}
		if err := db.Update(ctx, func(tx store.Tx) error { return tx.InsertCheckpoint(pctx, cp) }); err != nil {
			t.Fatal(err)
		}
		got, err := db.GetCheckpoint(ctx, cp.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.AgentState, c.want) {
			t.Errorf("checkpoint %d: stored %.30q…; want %.30q…", i, got.AgentState, c.want)
		}
	}
	if db.PrepareState(ctx, json.RawMessage(`{"small":1}`)) != ctx {
		t.Error("PrepareState of a small state changed ctx; want it as it was")
	}
	// A read that fails prepares nothing: the transaction does the work.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if db.PrepareState(cancelled, state) != cancelled {
		t.Error("PrepareState whose read failed changed ctx; want it as it was")
	}
}
