package storetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/chunkstore"
)

func testHITL(t *testing.T, o opener) {
	subtests(t, o, []subtest{
		{"DecideOnce", testDecideOnce},
		{"DecideRace", testDecideRace},
		{"DecideNotRequired", func(t *testing.T, st store.Store) {
			s := mustInsertSession(t, st, newSession("/p", at(0)))
			c := mustInsertCheckpoint(t, st, newCheckpoint(s, 1, at(1)))
			if decide(t, st, c.ID, newDecision("bob", at(2))) {
				t.Error("DecideIfPending decided a checkpoint without a HITL request")
			}
			if got := mustGetCheckpoint(t, st, c.ID); got.Decision != nil {
				t.Errorf("decision = %+v, want none", got.Decision)
			}
		}},
		{"MarkTimeoutFired", func(t *testing.T, st store.Store) {
			s := mustInsertSession(t, st, newSession("/p", at(0)))
			c := mustInsertCheckpoint(t, st, withHITL(newCheckpoint(s, 1, at(1)), at(2)))
			if !markFired(t, st, c.ID) {
				t.Fatal("first MarkTimeoutFired = false, want true")
			}
			if markFired(t, st, c.ID) {
				t.Error("second MarkTimeoutFired = true, want false")
			}
			got := mustGetCheckpoint(t, st, c.ID)
			want := *c
			want.TimeoutFired = true
			wantEqual(t, "checkpoint after the timeout fired", &want, got)
			// A fired timeout (a pause) leaves the request open to a person.
			if !decide(t, st, c.ID, newDecision("bob", at(3))) {
				t.Error("DecideIfPending after the timeout fired = false, want true")
			}
			// A request decided before its timeout is applied keeps it unfired.
			d := mustInsertCheckpoint(t, st, withHITL(newCheckpoint(s, 2, at(4)), at(5)))
			if !decide(t, st, d.ID, newDecision("bob", at(6))) {
				t.Fatal("DecideIfPending = false")
			}
			if markFired(t, st, d.ID) {
				t.Error("MarkTimeoutFired of a decided request = true, want false")
			}
		}},
		{"DueHITL", testDueHITL},
		{"DueHITLConcurrentSweepers", testDueHITLConcurrent},
		{"NextHITLDeadline", testNextHITLDeadline},
		{"DueHITLByExpiry", testDueHITLByExpiry},
		{"DueHITLByExpiryConcurrentSweepers", testDueHITLByExpiryConcurrent},
		{"NextHITLDeadlineByExpiry", testNextHITLDeadlineByExpiry},
		{"PendingHITL", testPendingHITL},
	})
}

func testDecideOnce(t *testing.T, st store.Store) {
	s := mustInsertSession(t, st, newSession("/p", at(0)))
	c := mustInsertCheckpoint(t, st, withHITL(newCheckpoint(s, 1, at(1)), at(60)))
	first := newDecision("bob", at(2))
	first.Feedback, first.Modifications, first.IdempotencyKey = "fine", []byte(`{"k":"v"}`), "key-1"
	second := newDecision("carol", at(3))
	second.Action, second.SelectedOption, second.IdempotencyKey = belay.ActionReject, "reject", "key-2"

	if !decide(t, st, c.ID, first) {
		t.Fatal("first DecideIfPending = false, want true")
	}
	if decide(t, st, c.ID, second) {
		t.Fatal("second DecideIfPending = true, want false")
	}
	got := mustGetCheckpoint(t, st, c.ID)
	want := *c
	want.Decision, want.UpdatedAt = first, first.DecidedAt
	wantEqual(t, "checkpoint after the decision", &want, got) // idempotency key included
	wantEqual(t, "idempotency key", "key-1", got.Decision.IdempotencyKey)
	wantUTC(t, "DecidedAt", got.Decision.DecidedAt)
	if err := got.VerifyChecksum(); err != nil {
		t.Errorf("the decision changed the checksum: %v", err)
	}
	pend, _, err := st.PendingHITL(t.Context(), store.PendingQuery{Scope: store.Everything, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(pend) != 0 {
		t.Errorf("PendingHITL after the decision returned %d checkpoints", len(pend))
	}
	if due, err := st.DueHITL(t.Context(), at(1000), 10); err != nil || len(due) != 0 {
		t.Errorf("DueHITL after the decision = %d rows, %v; want none", len(due), err)
	}
}

func testDecideRace(t *testing.T, st store.Store) {
	const deciders = 50
	s := mustInsertSession(t, st, newSession("/p", at(0)))
	c := mustInsertCheckpoint(t, st, withHITL(newCheckpoint(s, 1, at(1)), time.Time{}))
	decisions := make([]*belay.Decision, deciders)
	won := make([]bool, deciders)
	errs := make([]error, deciders)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range deciders {
		decisions[i] = newDecision("user", at(2+i))
		decisions[i].IdempotencyKey = decisions[i].ID
		wg.Go(func() {
			<-start
			errs[i] = st.Update(t.Context(), func(tx store.Tx) error {
				var err error
				won[i], err = tx.DecideIfPending(t.Context(), c.ID, decisions[i])
				return err
			})
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i := range deciders {
		if errs[i] != nil {
			t.Errorf("decider %d: %v", i, errs[i])
		}
		if won[i] {
			if winner >= 0 {
				t.Errorf("deciders %d and %d both won", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no decider won")
	}
	wantEqual(t, "stored decision (the winner's)", decisions[winner], mustGetCheckpoint(t, st, c.ID).Decision)
}

// dueFixture: three due requests (one exactly at now) inserted in another
// order than their deadlines, and rows that must never be due.
type dueFixture struct {
	now     time.Time
	due     []*belay.Checkpoint // in deadline order
	notDue  *belay.Checkpoint   // deadline after now
	decided *belay.Checkpoint   // earliest deadline, but decided
	fired   *belay.Checkpoint   // second earliest, but fired
}

func newDueFixture(t *testing.T, st store.Store) *dueFixture {
	t.Helper()
	f := &dueFixture{now: at(100)}
	s := mustInsertSession(t, st, newSession("/p", at(0)))
	seq := int64(0)
	add := func(deadline time.Time, created int) *belay.Checkpoint {
		seq++
		return mustInsertCheckpoint(t, st, withHITL(newCheckpoint(s, seq, at(created)), deadline))
	}
	atNow := add(f.now, 1)
	first := add(f.now.Add(-2*time.Minute), 3)
	second := add(f.now.Add(-time.Minute), 2)
	f.due = []*belay.Checkpoint{first, second, atNow}
	f.notDue = add(f.now.Add(1), 4)
	add(time.Time{}, 5)                                      // no timeout
	mustInsertCheckpoint(t, st, newCheckpoint(s, 99, at(6))) // no HITL
	f.decided = add(f.now.Add(-time.Hour), 7)
	if !decide(t, st, f.decided.ID, newDecision("bob", at(8))) {
		t.Fatal("deciding the fixture failed")
	}
	f.fired = add(f.now.Add(-30*time.Minute), 9)
	if !markFired(t, st, f.fired.ID) {
		t.Fatal("firing the fixture failed")
	}
	return f
}

func dueIDs(t *testing.T, st store.Reader, now time.Time, limit int) []string {
	t.Helper()
	due, err := st.DueHITL(t.Context(), now, limit)
	if err != nil {
		t.Fatal(err)
	}
	return nilIfEmpty(checkpointIDs(due))
}

func testDueHITL(t *testing.T, st store.Store) {
	if got := dueIDs(t, st, at(0), 10); got != nil {
		t.Errorf("DueHITL of an empty store = %v", got)
	}
	f := newDueFixture(t, st)
	wantEqual(t, "due, deadline order", checkpointIDs(f.due), dueIDs(t, st, f.now, 10))
	wantEqual(t, "due with limit 2", checkpointIDs(f.due[:2]), dueIDs(t, st, f.now, 2))
	wantEqual(t, "due a nanosecond earlier", checkpointIDs(f.due[:2]), dueIDs(t, st, f.now.Add(-1), 10))
	wantEqual(t, "due a nanosecond later", checkpointIDs(append(slices.Clone(f.due), f.notDue)), dueIDs(t, st, f.now.Add(1), 10))
	due, err := st.DueHITL(t.Context(), f.now, 1)
	if err != nil || len(due) != 1 {
		t.Fatalf("DueHITL = %d rows, %v", len(due), err)
	}
	wantEqual(t, "due checkpoint", f.due[0], due[0])

	if !markFired(t, st, f.due[0].ID) {
		t.Fatal("MarkTimeoutFired = false")
	}
	if !decide(t, st, f.due[1].ID, newDecision("bob", f.now)) {
		t.Fatal("DecideIfPending = false")
	}
	wantEqual(t, "due after one fired and one decided", checkpointIDs(f.due[2:]), dueIDs(t, st, f.now, 10))
	mustUpdate(t, st, func(tx store.Tx) error {
		due, err := tx.DueHITL(t.Context(), f.now, 10)
		wantEqual(t, "due inside a transaction", checkpointIDs(f.due[2:]), checkpointIDs(due))
		return err
	})
}

// testDueHITLConcurrent runs sweepers that claim due requests the way core
// does (DueHITL then MarkTimeoutFired in one transaction): each request is
// claimed exactly once.
func testDueHITLConcurrent(t *testing.T, st store.Store) {
	const requests = 30
	s := mustInsertSession(t, st, newSession("/p", at(0)))
	for i := range requests {
		mustInsertCheckpoint(t, st, withHITL(newCheckpoint(s, int64(i+1), at(i)), at(100+i)))
	}
	sweepConcurrently(t, st, requests, "fired", func(tx store.Tx, id string) (bool, error) {
		return tx.MarkTimeoutFired(t.Context(), id)
	})
}

// sweepConcurrently runs four sweepers at once over st, each claiming the
// due requests three at a time with claim in its transaction, and checks
// that each of the requests due was claimed exactly once (what says what a
// claim does).
func sweepConcurrently(t *testing.T, st store.Store, requests int, what string, claim func(tx store.Tx, id string) (bool, error)) {
	const sweepers = 4
	var mu sync.Mutex
	claims := map[string]int{}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range sweepers {
		wg.Go(func() {
			<-start
			for {
				var claimed []string
				err := st.Update(t.Context(), func(tx store.Tx) error {
					claimed = nil
					due, err := tx.DueHITL(t.Context(), at(1000), 3)
					if err != nil {
						return err
					}
					for _, c := range due {
						ok, err := claim(tx, c.ID)
						if err != nil {
							return err
						}
						if !ok {
							t.Errorf("DueHITL returned %s, already %s", c.ID, what)
							continue
						}
						claimed = append(claimed, c.ID)
					}
					return nil
				})
				if err != nil {
					t.Errorf("sweep: %v", err)
					return
				}
				if len(claimed) == 0 {
					return
				}
				mu.Lock()
				for _, id := range claimed {
					claims[id]++
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if len(claims) != requests {
		t.Errorf("%d requests %s, want %d", len(claims), what, requests)
	}
	for id, n := range claims {
		if n != 1 {
			t.Errorf("request %s %s %d times", id, what, n)
		}
	}
}

func testNextHITLDeadline(t *testing.T, st store.Store) {
	if _, ok, err := st.NextHITLDeadline(t.Context()); err != nil || ok {
		t.Fatalf("NextHITLDeadline of an empty store = (_, %v, %v), want none", ok, err)
	}
	f := newDueFixture(t, st)
	next := func() time.Time {
		t.Helper()
		d, ok, err := st.NextHITLDeadline(t.Context())
		if err != nil || !ok {
			t.Fatalf("NextHITLDeadline = (%v, %v, %v)", d, ok, err)
		}
		wantUTC(t, "deadline", d)
		return d
	}
	// The decided and fired requests have earlier deadlines; they do not count.
	wantEqual(t, "next deadline", f.due[0].HITL.Timeout.ExpiresAt, next())
	markFired(t, st, f.due[0].ID)
	wantEqual(t, "next deadline after one fired", f.due[1].HITL.Timeout.ExpiresAt, next())
	decide(t, st, f.due[1].ID, newDecision("bob", f.now))
	decide(t, st, f.due[2].ID, newDecision("bob", f.now))
	wantEqual(t, "next deadline in the future", f.notDue.HITL.Timeout.ExpiresAt, next())
	markFired(t, st, f.notDue.ID)
	if d, ok, err := st.NextHITLDeadline(t.Context()); err != nil || ok {
		t.Errorf("NextHITLDeadline with every timeout settled = (%v, %v, %v), want none", d, ok, err)
	}
}

// withExpiry makes c's checkpoint expire at expiresAt.
func withExpiry(c *belay.Checkpoint, expiresAt time.Time) *belay.Checkpoint {
	c.ExpiresAt = &expiresAt
	return c
}

// expiryFixture: requests due by their checkpoint's expiry (or their
// timeout, whichever comes first) inserted in another order than their
// deadlines, and rows that must never be due.
type expiryFixture struct {
	now      time.Time
	due      []*belay.Checkpoint // in deadline order
	notDue   *belay.Checkpoint   // expires after now, its timeout later still
	paused   *belay.Checkpoint   // its timeout fired, its expiry after now
	decided  *belay.Checkpoint   // expired, but decided
	noReview *belay.Checkpoint   // expired, but asks no decision
}

func newExpiryFixture(t *testing.T, st store.Store) *expiryFixture {
	t.Helper()
	f := &expiryFixture{now: at(100)}
	s := mustInsertSession(t, st, newSession("/p", at(0)))
	seq := int64(0)
	add := func(expires, deadline time.Time) *belay.Checkpoint {
		seq++
		return mustInsertCheckpoint(t, st, withExpiry(withHITL(newCheckpoint(s, seq, at(int(seq))), deadline), expires))
	}
	atNow := add(f.now, time.Time{})
	byTimeout := add(f.now.Add(time.Hour), f.now.Add(-3*time.Minute)) // the timeout comes first
	bare := add(f.now.Add(-4*time.Minute), time.Time{})               // no timeout
	laterTimeout := add(f.now.Add(-2*time.Minute), f.now.Add(time.Hour))
	firedTimeout := add(f.now.Add(-time.Minute), f.now.Add(-5*time.Minute))
	if !markFired(t, st, firedTimeout.ID) {
		t.Fatal("firing the fixture failed")
	}
	f.due = []*belay.Checkpoint{bare, byTimeout, laterTimeout, firedTimeout, atNow}
	f.notDue = add(f.now.Add(1), f.now.Add(time.Hour))
	f.paused = add(f.now.Add(2*time.Minute), f.now.Add(-10*time.Minute))
	if !markFired(t, st, f.paused.ID) {
		t.Fatal("firing the fixture failed")
	}
	f.decided = add(f.now.Add(-time.Hour), time.Time{})
	if !decide(t, st, f.decided.ID, newDecision("bob", at(8))) {
		t.Fatal("deciding the fixture failed")
	}
	seq++
	f.noReview = mustInsertCheckpoint(t, st, withExpiry(newCheckpoint(s, seq, at(5)), f.now.Add(-2*time.Hour)))
	return f
}

// testDueHITLByExpiry: a request no one decided is due at its checkpoint's
// expiry, also when it has no timeout or its timeout fired (a pause).
func testDueHITLByExpiry(t *testing.T, st store.Store) {
	f := newExpiryFixture(t, st)
	wantEqual(t, "due, deadline order", checkpointIDs(f.due), dueIDs(t, st, f.now, 10))
	wantEqual(t, "due with limit 2", checkpointIDs(f.due[:2]), dueIDs(t, st, f.now, 2))
	wantEqual(t, "due a nanosecond earlier", checkpointIDs(f.due[:4]), dueIDs(t, st, f.now.Add(-1), 10))
	wantEqual(t, "due a nanosecond later", checkpointIDs(append(slices.Clone(f.due), f.notDue)), dueIDs(t, st, f.now.Add(1), 10))
	due, err := st.DueHITL(t.Context(), f.now, 1)
	if err != nil || len(due) != 1 {
		t.Fatalf("DueHITL = %d rows, %v", len(due), err)
	}
	wantEqual(t, "due checkpoint", f.due[0], due[0])

	for _, c := range f.due[:3] {
		if !decide(t, st, c.ID, newDecision("system", f.now)) {
			t.Fatal("DecideIfPending = false")
		}
	}
	wantEqual(t, "due after three were decided", checkpointIDs(f.due[3:]), dueIDs(t, st, f.now, 10))
	mustUpdate(t, st, func(tx store.Tx) error {
		due, err := tx.DueHITL(t.Context(), f.now, 10)
		wantEqual(t, "due inside a transaction", checkpointIDs(f.due[3:]), checkpointIDs(due))
		return err
	})
}

// testDueHITLByExpiryConcurrent runs sweepers that settle expired requests
// the way core does (DueHITL then DecideIfPending in one transaction): each
// request is decided exactly once, and DueHITL never returns one decided.
func testDueHITLByExpiryConcurrent(t *testing.T, st store.Store) {
	const requests = 30
	s := mustInsertSession(t, st, newSession("/p", at(0)))
	for i := range requests {
		deadline := time.Time{}
		if i%2 == 1 { // every other request paused by its timeout before its expiry
			deadline = at(50 + i)
		}
		c := mustInsertCheckpoint(t, st, withExpiry(withHITL(newCheckpoint(s, int64(i+1), at(i)), deadline), at(100+i)))
		if !deadline.IsZero() && !markFired(t, st, c.ID) {
			t.Fatal("firing the fixture failed")
		}
	}
	sweepConcurrently(t, st, requests, "decided", func(tx store.Tx, id string) (bool, error) {
		return tx.DecideIfPending(t.Context(), id, newDecision("system", at(1000)))
	})
}

// testNextHITLDeadlineByExpiry: the next deadline is the earliest timeout
// not fired or expiry of a request no one decided.
func testNextHITLDeadlineByExpiry(t *testing.T, st store.Store) {
	f := newExpiryFixture(t, st)
	next := func() time.Time {
		t.Helper()
		d, ok, err := st.NextHITLDeadline(t.Context())
		if err != nil || !ok {
			t.Fatalf("NextHITLDeadline = (%v, %v, %v)", d, ok, err)
		}
		wantUTC(t, "deadline", d)
		return d
	}
	// The decided request, the one asking nothing and the fired timeouts
	// have earlier deadlines; they do not count.
	wantEqual(t, "next deadline", *f.due[0].ExpiresAt, next())
	for _, c := range f.due {
		decide(t, st, c.ID, newDecision("system", f.now))
	}
	wantEqual(t, "next deadline in the future", *f.notDue.ExpiresAt, next())
	decide(t, st, f.notDue.ID, newDecision("system", f.now))
	wantEqual(t, "a paused request's expiry", *f.paused.ExpiresAt, next())
	decide(t, st, f.paused.ID, newDecision("system", f.now))
	if d, ok, err := st.NextHITLDeadline(t.Context()); err != nil || ok {
		t.Errorf("NextHITLDeadline with every request decided = (%v, %v, %v), want none", d, ok, err)
	}
}

func testPendingHITL(t *testing.T, st store.Store) {
	s1 := mustInsertSession(t, st, newSession("/p", at(0)))
	s2 := mustInsertSession(t, st, newSession("/q", at(0)))
	mustInsertCheckpoint(t, st, newCheckpoint(s1, 1, at(0))) // no HITL
	p1 := mustInsertCheckpoint(t, st, withHITL(newCheckpoint(s1, 2, at(1)), time.Time{}))
	decided := mustInsertCheckpoint(t, st, withHITL(newCheckpoint(s1, 3, at(3)), time.Time{}))
	paused := mustInsertCheckpoint(t, st, withHITL(newCheckpoint(s1, 4, at(2)), at(5)))
	other := mustInsertCheckpoint(t, st, withHITL(newCheckpoint(s2, 1, at(0)), time.Time{}))
	decide(t, st, decided.ID, newDecision("bob", at(4)))
	markFired(t, st, paused.ID) // a paused request still waits for a person
	paused.TimeoutFired = true

	for _, tc := range []struct {
		name string
		q    store.PendingQuery
		want []*belay.Checkpoint
		more bool
	}{
		{"All", store.PendingQuery{Limit: 10}, []*belay.Checkpoint{other, p1, paused}, false},
		{"Session", store.PendingQuery{SessionID: s1.ID, Limit: 10}, []*belay.Checkpoint{p1, paused}, false},
		{"Limit", store.PendingQuery{Limit: 2}, []*belay.Checkpoint{other, p1}, true},
		{"LimitOfAll", store.PendingQuery{Limit: 3}, []*belay.Checkpoint{other, p1, paused}, false},
		{"UnknownSession", store.PendingQuery{SessionID: newID(), Limit: 10}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.Scope = store.Everything
			got, more, err := st.PendingHITL(t.Context(), q)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				got = nil
			}
			wantEqual(t, "pending, oldest first", tc.want, got)
			wantEqual(t, "more", tc.more, more)
		})
	}
	t.Run("Bytes", func(t *testing.T) {
		heavy := withHITL(newCheckpoint(s2, 2, at(6)), time.Time{})
		heavy.AgentState = jsonOfSize(chunkstore.InlineMax + 10)
		mustInsertCheckpoint(t, st, heavy)
		last := mustInsertCheckpoint(t, st, withHITL(newCheckpoint(s2, 3, at(7)), time.Time{}))
		q := store.PendingQuery{Scope: store.Everything, Limit: 10, MaxBytes: 1000, After: &store.CheckpointKey{CreatedAt: paused.CreatedAt, ID: paused.ID}}
		got, more, err := st.PendingHITL(t.Context(), q)
		if err != nil || len(got) != 1 || got[0].ID != heavy.ID || len(got[0].AgentState) != len(heavy.AgentState) || !more {
			t.Fatalf("a page of 1000 bytes = %d items, more %v, %v; want the heavy request whole, and more", len(got), more, err)
		}
		q.After = &store.CheckpointKey{CreatedAt: heavy.CreatedAt, ID: heavy.ID}
		if got, more, err = st.PendingHITL(t.Context(), q); err != nil || len(got) != 1 || got[0].ID != last.ID || more {
			t.Fatalf("the next page = %d items, more %v, %v; want the last request alone", len(got), more, err)
		}
	})
}
