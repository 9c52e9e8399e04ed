package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

func testEvents(t *testing.T, o opener) {
	subtests(t, o, []subtest{
		{"AppendAssignsSeq", testAppendAssignsSeq},
		{"RollbackLeavesNoGap", testEventRollbackLeavesNoGap},
		{"ConcurrentAppendsGapFree", testConcurrentAppends},
		{"List", testListEvents},
	})
}

func appendEvents(t *testing.T, st store.Store, events ...*belay.Event) {
	t.Helper()
	mustUpdate(t, st, func(tx store.Tx) error {
		for _, e := range events {
			if err := tx.AppendEvent(t.Context(), e); err != nil {
				return err
			}
		}
		return nil
	})
}

func lastSeq(t *testing.T, st store.Reader) int64 {
	t.Helper()
	n, err := st.LastEventSeq(t.Context())
	if err != nil {
		t.Fatalf("LastEventSeq: %v", err)
	}
	return n
}

func listEvents(t *testing.T, st store.Reader, q store.EventQuery) []belay.Event {
	t.Helper()
	events, err := st.ListEvents(t.Context(), q)
	if err != nil {
		t.Fatalf("ListEvents: %v", err)
	}
	return events
}

func seqs(events []belay.Event) []int64 {
	var out []int64
	for _, e := range events {
		out = append(out, e.Seq)
	}
	return out
}

func testAppendAssignsSeq(t *testing.T, st store.Store) {
	if n := lastSeq(t, st); n != 0 {
		t.Fatalf("LastEventSeq of an empty store = %d, want 0", n)
	}
	sid, cid := newID(), newID()
	first := []*belay.Event{
		{Type: belay.EventSessionCreated, SessionID: sid, Data: json.RawMessage(`{"title": "x",  "n": 1.50}`), CreatedAt: at(0).Add(1)},
		{Type: belay.EventCheckpointCreated, SessionID: sid, CheckpointID: cid, Data: json.RawMessage(`{"seq":1}`), CreatedAt: at(1)},
		{Type: belay.EventHITLRequired, SessionID: sid, CheckpointID: cid, CreatedAt: at(1)},
	}
	mustUpdate(t, st, func(tx store.Tx) error {
		for i, e := range first {
			if err := tx.AppendEvent(t.Context(), e); err != nil {
				return err
			}
			if e.Seq != int64(i+1) {
				t.Errorf("event %d got Seq %d, want %d", i, e.Seq, i+1)
			}
			// A transaction reads its own writes.
			if n, err := tx.LastEventSeq(t.Context()); err != nil || n != e.Seq {
				t.Errorf("LastEventSeq inside the transaction = %d, %v; want %d", n, err, e.Seq)
			}
		}
		return nil
	})
	next := &belay.Event{Type: belay.EventWorkspaceRestored, CreatedAt: at(2)}
	appendEvents(t, st, next)
	if next.Seq != 4 {
		t.Errorf("event of the next transaction got Seq %d, want 4", next.Seq)
	}
	if n := lastSeq(t, st); n != 4 {
		t.Errorf("LastEventSeq = %d, want 4", n)
	}
	got := listEvents(t, st, store.EventQuery{Scope: store.Everything, Limit: 10})
	var want []belay.Event
	for _, e := range append(first, next) {
		want = append(want, *e)
	}
	wantEqual(t, "events", want, got) // Data byte for byte, CreatedAt to the nanosecond
	for _, e := range got {
		wantUTC(t, "event CreatedAt", e.CreatedAt)
	}
}

func testEventRollbackLeavesNoGap(t *testing.T, st store.Store) {
	appendEvents(t, st, &belay.Event{Type: "a", CreatedAt: at(0)}, &belay.Event{Type: "b", CreatedAt: at(1)})
	err := st.Update(t.Context(), func(tx store.Tx) error {
		for range 3 {
			if err := tx.AppendEvent(t.Context(), &belay.Event{Type: "lost", CreatedAt: at(2)}); err != nil {
				return err
			}
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update = %v, want the error fn returned", err)
	}
	func() {
		defer func() { _ = recover() }()
		_ = st.Update(t.Context(), func(tx store.Tx) error {
			if err := tx.AppendEvent(t.Context(), &belay.Event{Type: "lost", CreatedAt: at(3)}); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	if n := lastSeq(t, st); n != 2 {
		t.Errorf("LastEventSeq after rolled-back appends = %d, want 2", n)
	}
	c := &belay.Event{Type: "c", CreatedAt: at(4)}
	appendEvents(t, st, c)
	if c.Seq != 3 {
		t.Errorf("event after rolled-back appends got Seq %d, want 3 (no gap)", c.Seq)
	}
	got := listEvents(t, st, store.EventQuery{Scope: store.Everything, Limit: 10})
	wantEqual(t, "seqs", []int64{1, 2, 3}, seqs(got))
	for _, e := range got {
		if e.Type == "lost" {
			t.Errorf("event %d of a rolled-back transaction was kept", e.Seq)
		}
	}
}

// testConcurrentAppends appends from many goroutines, some of whose
// transactions fail: the log holds exactly the committed events, 1..n.
func testConcurrentAppends(t *testing.T, st store.Store) {
	const writers, perWriter = 8, 10
	var wg sync.WaitGroup
	start := make(chan struct{})
	var mu sync.Mutex
	var committed []int64
	for w := range writers {
		wg.Go(func() {
			<-start
			for i := range perWriter {
				var e belay.Event
				err := st.Update(t.Context(), func(tx store.Tx) error {
					e = belay.Event{Type: "tick", CreatedAt: at(i)}
					if err := tx.AppendEvent(t.Context(), &e); err != nil {
						return err
					}
					if (w+i)%3 == 0 {
						return errBoom
					}
					return nil
				})
				switch {
				case errors.Is(err, errBoom):
				case err != nil:
					t.Errorf("writer %d: %v", w, err)
					return
				default:
					mu.Lock()
					committed = append(committed, e.Seq)
					mu.Unlock()
				}
			}
		})
	}
	close(start)
	wg.Wait()
	slices.Sort(committed)
	want := make([]int64, len(committed))
	for i := range want {
		want[i] = int64(i + 1)
	}
	wantEqual(t, "committed seqs", want, committed)
	wantEqual(t, "listed seqs", nil2empty(want), nil2empty(seqs(listEvents(t, st, store.EventQuery{Scope: store.Everything, Limit: 1000}))))
}

func nil2empty(s []int64) []int64 {
	if s == nil {
		return []int64{}
	}
	return s
}

func testListEvents(t *testing.T, st store.Store) {
	s1, s2 := newID(), newID()
	events := []*belay.Event{
		{Type: belay.EventSessionCreated, SessionID: s1, CreatedAt: at(0)},
		{Type: belay.EventCheckpointCreated, SessionID: s1, CheckpointID: newID(), CreatedAt: at(1)},
		{Type: belay.EventSessionCreated, SessionID: s2, CreatedAt: at(2)},
		{Type: belay.EventHITLRequired, SessionID: s1, CheckpointID: newID(), CreatedAt: at(3)},
		{Type: belay.EventCheckpointCreated, SessionID: s2, CheckpointID: newID(), CreatedAt: at(4)},
		{Type: belay.EventHITLDecided, SessionID: s1, CreatedAt: at(5)},
	}
	appendEvents(t, st, events...)
	for _, tc := range []struct {
		name string
		q    store.EventQuery
		want []int64
	}{
		{"All", store.EventQuery{Limit: 100}, []int64{1, 2, 3, 4, 5, 6}},
		{"After", store.EventQuery{After: 4, Limit: 100}, []int64{5, 6}},
		{"AfterLast", store.EventQuery{After: 6, Limit: 100}, nil},
		{"Limit", store.EventQuery{After: 1, Limit: 2}, []int64{2, 3}},
		{"Session", store.EventQuery{SessionID: s2, Limit: 100}, []int64{3, 5}},
		{"Type", store.EventQuery{Types: []string{belay.EventCheckpointCreated}, Limit: 100}, []int64{2, 5}},
		{"Types", store.EventQuery{Types: []string{belay.EventHITLRequired, belay.EventHITLDecided, "nope"}, Limit: 100}, []int64{4, 6}},
		{"SessionTypesAfterLimit", store.EventQuery{After: 1, SessionID: s1, Types: []string{belay.EventCheckpointCreated, belay.EventHITLRequired, belay.EventHITLDecided}, Limit: 2}, []int64{2, 4}},
		{"UnknownSession", store.EventQuery{SessionID: newID(), Limit: 100}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.Scope = store.Everything
			got := listEvents(t, st, q)
			wantEqual(t, "seqs", tc.want, seqs(got))
			for _, e := range got {
				wantEqual(t, "event", *events[e.Seq-1], e)
			}
		})
	}
}
