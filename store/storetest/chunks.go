package storetest

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// bigState is an agent state of n documents of about 1 KiB each (n = 1000
// makes 1 MiB), seeded so its text does not compress to nothing.
type bigState struct {
	Step int      `json:"step"`
	Docs []string `json:"docs"`
}

func newBigState(seed uint64, n int) *bigState {
	r := rand.New(rand.NewPCG(seed, 1))
	s := &bigState{Docs: make([]string, n)}
	for i := range s.Docs {
		s.Docs[i] = randomText(r, 1000)
	}
	return s
}

func randomText(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = "abcdefghijklmnopqrstuvwxyz     "[r.IntN(31)]
	}
	return string(b)
}

// incompressibleState is 8 KiB that DEFLATE cannot shrink, kept in its row
// as it is. (No JSON document is: its text has too few distinct bytes.)
func incompressibleState(seed uint64) json.RawMessage {
	r := rand.New(rand.NewPCG(seed, 3))
	b := make([]byte, 8<<10)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	b[0] = '"'
	return b
}

// edit changes one document (1 KiB) of s, as a step of an agent would.
func (s *bigState) edit(step int) {
	r := rand.New(rand.NewPCG(uint64(step), 2))
	s.Step = step
	s.Docs[(step*37)%len(s.Docs)] = randomText(r, 1000)
}

func (s *bigState) json(t *testing.T) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withState returns c carrying state, sealed.
func withState(t *testing.T, c *belay.Checkpoint, state json.RawMessage) *belay.Checkpoint {
	c.AgentState = state
	return seal(t, c)
}

// saveStep stores c and makes it sess's head with its state, in one
// transaction, as core saves a checkpoint.
func saveStep(t *testing.T, st store.Store, sess *belay.Session, c *belay.Checkpoint) {
	t.Helper()
	mustUpdate(t, st, func(tx store.Tx) error {
		if err := tx.InsertCheckpoint(t.Context(), c); err != nil {
			return err
		}
		sess.HeadCheckpointID, sess.LastSeq, sess.State = c.ID, c.Seq, c.AgentState
		return tx.UpdateSession(t.Context(), sess)
	})
}

func stateChunks(t *testing.T, st store.Reader) store.ChunkUsage {
	t.Helper()
	u, err := st.StateChunks(t.Context())
	if err != nil {
		t.Fatalf("StateChunks: %v", err)
	}
	return u
}

func sweep(t *testing.T, st store.Store, dryRun bool) store.ChunkUsage {
	t.Helper()
	var u store.ChunkUsage
	mustUpdate(t, st, func(tx store.Tx) error {
		var err error
		u, err = tx.SweepStateChunks(t.Context(), dryRun)
		return err
	})
	return u
}

// readsBack checks that state, saved as a session's and a checkpoint's,
// comes back byte for byte through every read of either.
func readsBack(t *testing.T, st store.Store, state json.RawMessage) {
	t.Helper()
	sess := newSession("/p", at(0))
	sess.State = state
	mustInsertSession(t, st, sess)
	c := mustInsertCheckpoint(t, st, withState(t, withHITL(newCheckpoint(sess, 1, at(1)), at(60)), state))
	var got []*belay.Checkpoint
	got = append(got, mustGetCheckpoint(t, st, c.ID))
	bySeq, err := st.GetCheckpointBySeq(t.Context(), sess.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	list, _, _, err := st.ListCheckpoints(t.Context(), store.CheckpointQuery{Scope: store.Everything, SessionID: sess.ID, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	pending, _, err := st.PendingHITL(t.Context(), store.PendingQuery{Scope: store.Everything, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	due, err := st.DueHITL(t.Context(), at(61), 10)
	if err != nil {
		t.Fatal(err)
	}
	got = append(append(append(append(got, bySeq), list...), pending...), due...)
	mustUpdate(t, st, func(tx store.Tx) error {
		c, err := tx.GetCheckpoint(t.Context(), c.ID)
		got = append(got, c)
		return err
	})
	if len(got) != 6 {
		t.Fatalf("read the checkpoint %d times, want 6", len(got))
	}
	for i, g := range got {
		if !bytes.Equal(g.AgentState, state) {
			t.Fatalf("read %d: a state of %d bytes came back as %d bytes", i, len(state), len(g.AgentState))
		}
		if err := g.VerifyChecksum(); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	sessions, _, _, err := st.ListSessions(t.Context(), store.SessionQuery{Scope: store.Everything, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	active, err := st.ActiveSession(t.Context(), "/p", store.Everything)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range append(sessions, mustGetSession(t, st, sess.ID), active) {
		if !bytes.Equal(s.State, state) {
			t.Fatalf("the session's state of %d bytes came back as %d bytes", len(state), len(s.State))
		}
	}
}

func testStateChunks(t *testing.T, o opener) {
	subtests(t, o, []subtest{
		{"a large state comes back byte for byte through every read", func(t *testing.T, st store.Store) {
			state := newBigState(1, 1000).json(t)
			readsBack(t, st, state)
			if u := stateChunks(t, st); u.Chunks == 0 || u.Bytes == 0 || u.Bytes > int64(len(state)) {
				t.Fatalf("a state of %d bytes stored as %d chunks of %d bytes", len(state), u.Chunks, u.Bytes)
			}
		}},
		{"a state kept compressed in its row comes back byte for byte through every read", func(t *testing.T, st store.Store) {
			readsBack(t, st, newBigState(1, 8).json(t))
			if u := stateChunks(t, st); u.Chunks != 0 {
				t.Fatalf("a state of 8 KiB stored %d chunks", u.Chunks)
			}
		}},
		{"a session advanced after another session's save keeps its own state", func(t *testing.T, st store.Store) {
			// One transaction saves a checkpoint of x and advances x, then
			// advances y, as a batch of two saves does: y's state is its own,
			// small or kept in its row, compressed or not.
			x := mustInsertSession(t, st, newSession("/p", at(0)))
			y := mustInsertSession(t, st, newSession("/q", at(0)))
			xState := newBigState(7, 4).json(t)
			for i, yState := range []json.RawMessage{json.RawMessage(`{"small":1}`), newBigState(8, 4).json(t), incompressibleState(9)} {
				c := withState(t, newCheckpoint(x, int64(i+1), at(i+1)), xState)
				mustUpdate(t, st, func(tx store.Tx) error {
					if err := tx.InsertCheckpoint(t.Context(), c); err != nil {
						return err
					}
					x.HeadCheckpointID, x.LastSeq, x.State = c.ID, c.Seq, xState
					if err := tx.AdvanceSession(t.Context(), x); err != nil {
						return err
					}
					y.State = yState
					return tx.AdvanceSession(t.Context(), y)
				})
				if got := mustGetSession(t, st, y.ID); !bytes.Equal(got.State, yState) {
					t.Fatalf("step %d: session y's state of %d bytes came back as %d bytes", i+1, len(yState), len(got.State))
				}
				if got := mustGetSession(t, st, x.ID); !bytes.Equal(got.State, xState) {
					t.Fatalf("step %d: session x's state of %d bytes came back as %d bytes", i+1, len(xState), len(got.State))
				}
			}
		}},
		{"a state that changes 1 KiB per step costs about the change", func(t *testing.T, st store.Store) {
			sess := mustInsertSession(t, st, newSession("/p", at(0)))
			state := newBigState(2, 1000)
			saveStep(t, st, sess, withState(t, newCheckpoint(sess, 1, at(1)), state.json(t)))
			first := stateChunks(t, st)
			for i := 2; i <= 100; i++ {
				state.edit(i)
				saveStep(t, st, sess, withState(t, newCheckpoint(sess, int64(i), at(i)), state.json(t)))
			}
			after := stateChunks(t, st)
			t.Logf("one state of %d bytes: %d bytes in %d chunks; 100 steps: %d bytes in %d chunks",
				len(state.json(t)), first.Bytes, first.Chunks, after.Bytes, after.Chunks)
			if after.Bytes > 2<<20 {
				t.Fatalf("100 steps of a 1 MiB state changing 1 KiB each stored %d bytes of chunks, want at most 2 MiB", after.Bytes)
			}
			c, err := st.GetCheckpointBySeq(t.Context(), sess.ID, 100)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(c.AgentState, state.json(t)) {
				t.Fatal("the last step's state differs")
			}
			if u := sweep(t, st, false); u.Chunks != 0 {
				t.Fatalf("a sweep with every checkpoint alive deleted %d chunks", u.Chunks)
			}
		}},
		{"deleted checkpoints' chunks are swept, shared ones stay", func(t *testing.T, st store.Store) {
			sess := mustInsertSession(t, st, newSession("/p", at(0)))
			state := newBigState(3, 300)
			var cps []*belay.Checkpoint
			for i := 1; i <= 3; i++ {
				state.edit(i)
				c := withState(t, newCheckpoint(sess, int64(i), at(i)), state.json(t))
				saveStep(t, st, sess, c)
				cps = append(cps, c)
			}
			sess.State = nil
			mustUpdate(t, st, func(tx store.Tx) error { return tx.UpdateSession(t.Context(), sess) })
			before := stateChunks(t, st)
			if u := sweep(t, st, true); u.Chunks != 0 {
				t.Fatalf("nothing to sweep, yet a dry run counts %d chunks", u.Chunks)
			}
			mustUpdate(t, st, func(tx store.Tx) error {
				if err := tx.DeleteCheckpoint(t.Context(), cps[0].ID); err != nil {
					return err
				}
				return tx.DeleteCheckpoint(t.Context(), cps[1].ID)
			})
			dry := sweep(t, st, true)
			if dry.Chunks == 0 || dry.Bytes == 0 || dry.Bytes > before.Bytes/2 {
				t.Fatalf("after deleting two of three near copies, a dry run counts %d chunks of %d bytes (of %d)", dry.Chunks, dry.Bytes, before.Bytes)
			}
			if u := stateChunks(t, st); u != before {
				t.Fatalf("a dry run changed the chunks: %+v, was %+v", u, before)
			}
			if u := sweep(t, st, false); u != dry {
				t.Fatalf("the sweep freed %+v, the dry run said %+v", u, dry)
			}
			if u := stateChunks(t, st); u.Chunks != before.Chunks-dry.Chunks || u.Bytes != before.Bytes-dry.Bytes {
				t.Fatalf("after the sweep %+v, want %+v less %+v", u, before, dry)
			}
			if got := mustGetCheckpoint(t, st, cps[2].ID); !bytes.Equal(got.AgentState, cps[2].AgentState) {
				t.Fatal("the kept checkpoint's state changed in the sweep")
			}
			mustUpdate(t, st, func(tx store.Tx) error { return tx.DeleteSession(t.Context(), sess.ID) })
			sweep(t, st, false)
			if u := stateChunks(t, st); u.Chunks != 0 || u.Bytes != 0 {
				t.Fatalf("with no checkpoint left, %+v remain", u)
			}
		}},
		{"checkpoint usage counts large and compressed states whole without reading them back", func(t *testing.T, st store.Store) {
			sess := mustInsertSession(t, st, newSession("/p", at(0)))
			other := mustInsertSession(t, st, newSession("/q", at(0)))
			big := newBigState(5, 300).json(t)
			c := newCheckpoint(sess, 1, at(1))
			c.Outputs, c.Metadata = json.RawMessage(`{"out":1}`), json.RawMessage(`{"m":"x"}`)
			mustInsertCheckpoint(t, st, withState(t, c, big))
			mustInsertCheckpoint(t, st, withState(t, newCheckpoint(sess, 2, at(2)), json.RawMessage(`{"step":2}`)))
			mustInsertCheckpoint(t, st, newCheckpoint(sess, 3, at(3)))
			compressed := newBigState(6, 8).json(t)
			mustInsertCheckpoint(t, st, withState(t, newCheckpoint(sess, 4, at(4)), compressed))
			mustInsertCheckpoint(t, st, withState(t, newCheckpoint(other, 1, at(1)), big))
			want := store.CheckpointUsage{Checkpoints: 4, StateBytes: int64(len(big) + len(c.Outputs) + len(c.Metadata) + len(`{"step":2}`) + len(compressed))}
			if u, err := st.CheckpointUsage(t.Context(), sess.ID); err != nil || u != want {
				t.Fatalf("CheckpointUsage = %+v, %v; want %+v", u, err, want)
			}
			if u, err := st.CheckpointUsage(t.Context(), newID()); err != nil || u != (store.CheckpointUsage{}) {
				t.Fatalf("CheckpointUsage of no session = %+v, %v", u, err)
			}
		}},
		{"a save reusing swept chunks keeps them", func(t *testing.T, st store.Store) {
			sess := mustInsertSession(t, st, newSession("/p", at(0)))
			const rounds = 12
			var wg sync.WaitGroup
			saved := make([]*belay.Checkpoint, rounds)
			for i := range rounds {
				// The chunks of state become garbage when the first
				// checkpoint goes; a second checkpoint reuses them while
				// sweeps run.
				state := newBigState(uint64(100+i), 100).json(t)
				gone := withState(t, newCheckpoint(sess, int64(2*i+1), at(2*i+1)), state)
				mustInsertCheckpoint(t, st, gone)
				mustUpdate(t, st, func(tx store.Tx) error { return tx.DeleteCheckpoint(t.Context(), gone.ID) })
				wg.Add(2)
				go func() {
					defer wg.Done()
					if err := st.Update(t.Context(), func(tx store.Tx) error {
						_, err := tx.SweepStateChunks(t.Context(), false)
						return err
					}); err != nil {
						t.Errorf("sweep: %v", err)
					}
				}()
				go func() {
					defer wg.Done()
					c := withState(t, newCheckpoint(sess, int64(2*i+2), at(2*i+2)), state)
					if err := st.Update(t.Context(), func(tx store.Tx) error { return tx.InsertCheckpoint(t.Context(), c) }); err != nil {
						t.Errorf("save: %v", err)
					}
					saved[i] = c
				}()
				wg.Wait()
			}
			sweep(t, st, false)
			for i, c := range saved {
				got, err := st.GetCheckpoint(t.Context(), c.ID)
				if err != nil {
					t.Fatalf("round %d: %v", i, err)
				}
				if !bytes.Equal(got.AgentState, c.AgentState) {
					t.Fatalf("round %d: the state changed", i)
				}
			}
		}},
	})
}

// RunDamagedChunk checks that a store reports a damaged chunk of a large
// state as CHECKPOINT_CORRUPTED, never as a wrong state, and only for the
// checkpoint and session whose state it is: a direct read fails, a list
// returns them with StateErr set and the others whole. damage must change
// the bytes of every chunk st holds, behind the store's back.
func RunDamagedChunk(t *testing.T, st store.Store, damage func(t *testing.T)) {
	sess := mustInsertSession(t, st, newSession("/p", at(0)))
	small := withState(t, newCheckpoint(sess, 1, at(1)), json.RawMessage(`{"step":1}`))
	mustInsertCheckpoint(t, st, small)
	state := newBigState(4, 200).json(t)
	c := withState(t, newCheckpoint(sess, 2, at(2)), state)
	saveStep(t, st, sess, c)
	damage(t)
	_, err := st.GetCheckpoint(t.Context(), c.ID)
	wantCode(t, "GetCheckpoint of a damaged state", err, belay.CodeCheckpointCorrupt)
	_, err = st.GetCheckpointBySeq(t.Context(), sess.ID, 2)
	wantCode(t, "GetCheckpointBySeq of a damaged state", err, belay.CodeCheckpointCorrupt)
	_, err = st.GetSession(t.Context(), sess.ID)
	wantCode(t, "GetSession of a damaged state", err, belay.CodeCheckpointCorrupt)

	list, total, _, err := st.ListCheckpoints(t.Context(), store.CheckpointQuery{Scope: store.Everything, Limit: 10})
	if err != nil || total != 2 || len(list) != 2 {
		t.Fatalf("ListCheckpoints with one damaged state: %d of %d, %v; want both", len(list), total, err)
	}
	for _, got := range list {
		switch got.ID {
		case small.ID:
			if got.StateErr != nil || !bytes.Equal(got.AgentState, small.AgentState) || got.VerifyChecksum() != nil {
				t.Errorf("the intact checkpoint came back with state %q, StateErr %v", got.AgentState, got.StateErr)
			}
		case c.ID:
			if got.AgentState != nil {
				t.Errorf("the damaged checkpoint came back with a state of %d bytes", len(got.AgentState))
			}
			wantCode(t, "StateErr of the damaged checkpoint", got.StateErr, belay.CodeCheckpointCorrupt)
			wantCode(t, "VerifyChecksum of the damaged checkpoint", got.VerifyChecksum(), belay.CodeCheckpointCorrupt)
			if got.StateErr != nil && !strings.Contains(got.StateErr.Message, c.ID) {
				t.Errorf("StateErr %q does not name the checkpoint", got.StateErr.Message)
			}
		}
	}
	sessions, _, _, err := st.ListSessions(t.Context(), store.SessionQuery{Scope: store.Everything, Limit: 10})
	if err != nil || len(sessions) != 1 {
		t.Fatalf("ListSessions with one damaged state: %d, %v", len(sessions), err)
	}
	if sessions[0].State != nil {
		t.Errorf("the damaged session came back with a state of %d bytes", len(sessions[0].State))
	}
	wantCode(t, "StateErr of the damaged session", sessions[0].StateErr, belay.CodeCheckpointCorrupt)
	u, err := st.CheckpointUsage(t.Context(), sess.ID)
	if want := int64(len(state) + len(small.AgentState)); err != nil || u.Checkpoints != 2 || u.StateBytes != want {
		t.Errorf("CheckpointUsage = %+v, %v; want 2 checkpoints of %d bytes, counted from the root", u, err, want)
	}
}
