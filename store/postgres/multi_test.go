package postgres_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testclock"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/postgres"
)

var admin = belay.WithActor(context.Background(), belay.Actor{UserID: "root", Admin: true})

// instances opens n stores on one fresh schema: n `belay serve` processes
// sharing a database.
func instances(t *testing.T, n int) []*postgres.DB {
	t.Helper()
	u := testutil.PostgresSchema(t)
	var out []*postgres.DB
	for range n {
		db, err := postgres.Open(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		out = append(out, db)
	}
	return out
}

// services starts a service on each of n instances (see instances).
func services(t *testing.T, n int) []*core.Service {
	t.Helper()
	var out []*core.Service
	for _, db := range instances(t, n) {
		svc := core.New(core.Options{Store: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		t.Cleanup(svc.Close)
		out = append(out, svc)
	}
	return out
}

func appendEvent(t *testing.T, tx store.Tx, typ string) int64 {
	t.Helper()
	e := belay.Event{Type: typ, CreatedAt: time.Now().UTC()}
	if err := tx.AppendEvent(context.Background(), &e); err != nil {
		t.Fatal(err)
	}
	return e.Seq
}

func seqs(t *testing.T, r store.Reader, after int64) []int64 {
	t.Helper()
	evs, err := r.ListEvents(context.Background(), store.EventQuery{Scope: store.Everything, After: after, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
}

// TestEventsCommittedOutOfOrderAreNeverSkipped forces the interleaving a
// follower could trip on: writer A takes a sequence number and holds its
// transaction open while writer B appends too. B must not overtake A — else
// a follower that saw B's event would skip A's when it commits.
func TestEventsCommittedOutOfOrderAreNeverSkipped(t *testing.T) {
	dbs := instances(t, 3)
	a, b, follower := dbs[0], dbs[1], dbs[2]
	aTook, aCommit := make(chan int64), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		err := a.Update(context.Background(), func(tx store.Tx) error {
			aTook <- appendEvent(t, tx, "test.a")
			<-aCommit
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	})
	seqA := <-aTook
	bDone := make(chan int64, 1)
	wg.Go(func() {
		var seqB int64
		err := b.Update(context.Background(), func(tx store.Tx) error {
			seqB = appendEvent(t, tx, "test.b")
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		bDone <- seqB
	})
	// Wait until B is blocked on A's lock, then check it did not commit.
	for waiting := 0; waiting == 0; {
		if err := follower.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	// While A is open the follower sees neither event.
	if got := seqs(t, follower, seqA-1); len(got) != 0 {
		t.Fatalf("follower saw %v while the first writer was still open", got)
	}
	select {
	case seqB := <-bDone:
		t.Fatalf("the second writer committed seq %d before the first (seq %d) did", seqB, seqA)
	default:
	}
	close(aCommit)
	wg.Wait()
	seqB := <-bDone
	if seqB != seqA+1 {
		t.Fatalf("seqs %d then %d: want consecutive, in commit order", seqA, seqB)
	}
	if got := seqs(t, follower, seqA-1); len(got) != 2 || got[0] != seqA || got[1] != seqB {
		t.Fatalf("follower sees %v, want [%d %d]", got, seqA, seqB)
	}
	// A rolled-back writer gives its number back: no gap.
	_ = a.Update(context.Background(), func(tx store.Tx) error {
		appendEvent(t, tx, "test.rolled_back")
		return context.Canceled
	})
	var seqC int64
	if err := b.Update(context.Background(), func(tx store.Tx) error { seqC = appendEvent(t, tx, "test.c"); return nil }); err != nil {
		t.Fatal(err)
	}
	if seqC != seqB+1 {
		t.Fatalf("after a rollback the next seq is %d, want %d", seqC, seqB+1)
	}
}

// TestTimeoutsFireOnceAcrossInstances: several instances sweep the same due
// requests at once; each request's default is applied exactly once.
// clockedInstances is n services on instances of one database, sharing a
// fake clock, and a session to ask in.
func clockedInstances(t *testing.T, n int) ([]*postgres.DB, []*core.Service, *testclock.Clock, *belay.Session) {
	t.Helper()
	dbs := instances(t, n)
	clock := testclock.New(time.Date(2025, 1, 15, 11, 0, 0, 0, time.UTC), 0)
	var svcs []*core.Service
	for _, db := range dbs {
		svcs = append(svcs, core.New(core.Options{Store: db, Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	}
	sess, err := svcs[0].CreateSession(admin, belay.CreateSessionInput{Title: "many"})
	if err != nil {
		t.Fatal(err)
	}
	return dbs, svcs, clock, sess
}

func TestTimeoutsFireOnceAcrossInstances(t *testing.T) {
	dbs, svcs, clock, sess := clockedInstances(t, 4)
	const n = 40
	for i := range n {
		_, err := svcs[i%len(svcs)].CreateCheckpoint(admin, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "ask",
			HITL: &belay.HITLInput{Required: true, OnReject: belay.OnRejectContinue,
				Timeout: &belay.TimeoutInput{Duration: 60, DefaultAction: belay.ActionReject}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(2 * time.Minute)
	var wg sync.WaitGroup
	fired := make([]int, len(svcs))
	for i, s := range svcs {
		wg.Go(func() {
			for range 3 {
				k, err := s.Sweep(context.Background())
				if err != nil {
					t.Error(err)
				}
				fired[i] += k
			}
		})
	}
	wg.Wait()
	total := 0
	for _, k := range fired {
		total += k
	}
	evs, err := dbs[0].ListEvents(context.Background(), store.EventQuery{Scope: store.Everything, Types: []string{belay.EventHITLTimedOut}, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if total != n || len(evs) != n {
		t.Fatalf("%d timeouts applied (%v per instance), %d events; want %d each", total, fired, len(evs), n)
	}
}

// TestExpiriesFireOnceAcrossInstances: several instances sweep and read the
// same expired requests at once, some paused by their timeout before; each
// is rejected by its expiry exactly once.
func TestExpiriesFireOnceAcrossInstances(t *testing.T) {
	dbs, svcs, clock, sess := clockedInstances(t, 4)
	const n = 40
	expires := clock.Now().Add(time.Hour)
	var ids []string
	for i := range n {
		h := &belay.HITLInput{Required: true, OnReject: belay.OnRejectContinue}
		if i%2 == 1 {
			h.Timeout = &belay.TimeoutInput{Duration: 60, DefaultAction: belay.ActionPause}
		}
		cp, err := svcs[i%len(svcs)].CreateCheckpoint(admin, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "ask", ExpiresAt: &expires, HITL: h})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, cp.ID)
	}
	clock.Advance(2 * time.Hour)
	var wg sync.WaitGroup
	for _, s := range svcs {
		wg.Go(func() {
			for range 3 {
				if _, err := s.Sweep(context.Background()); err != nil {
					t.Error(err)
				}
			}
		})
		wg.Go(func() {
			for _, id := range ids {
				if _, err := s.GetCheckpoint(admin, id); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	count := func(typ string) (expired, total int) {
		evs, err := dbs[0].ListEvents(context.Background(), store.EventQuery{Scope: store.Everything, Types: []string{typ}, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if strings.Contains(string(e.Data), `"reason":"expired"`) {
				expired++
			}
		}
		return expired, len(evs)
	}
	if expired, total := count(belay.EventHITLTimedOut); expired != n || total != n+n/2 {
		t.Errorf("%d hitl.timed_out events, %d of them expiries; want %d, %d", total, expired, n+n/2, n)
	}
	if _, total := count(belay.EventHITLDecided); total != n {
		t.Errorf("%d hitl.decided events, want %d", total, n)
	}
	for _, id := range ids {
		cp, err := dbs[0].GetCheckpoint(context.Background(), id)
		if err != nil || cp.Decision == nil || cp.Decision.Action != belay.ActionReject || !cp.Decision.AutoTriggered {
			t.Errorf("request %s = %+v, %v; want rejected by its expiry", id, cp, err)
		}
	}
}

// TestDecidesAtTheDeadlineAcrossInstances: people decide requests on two
// instances while the requests expire, and both instances sweep and read
// them meanwhile. Deciders, sweepers and readers lock a session and its
// requests in one order, so none fails (PostgreSQL found deadlocks when the
// expiry locked a request before its session and a decider the session
// before the request); each request is decided once, by a person or by its
// expiry.
func TestDecidesAtTheDeadlineAcrossInstances(t *testing.T) {
	dbs, svcs, clock, sess := clockedInstances(t, 2)
	const requests, deciders = 12, 7
	for round := range 3 {
		expires := clock.Now().Add(2 * time.Second)
		var ids []string
		for i := range requests {
			cp, err := svcs[i%len(svcs)].CreateCheckpoint(admin, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "ask", ExpiresAt: &expires,
				HITL: &belay.HITLInput{Required: true, OnReject: belay.OnRejectContinue}})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, cp.ID)
		}
		// The clock crosses the deadline while the decides run.
		clock.Set(expires.Add(-20 * time.Millisecond))
		ticking := make(chan struct{})
		go func() {
			defer close(ticking)
			for range 40 {
				time.Sleep(time.Millisecond)
				clock.Advance(time.Millisecond)
			}
		}()
		var wg sync.WaitGroup
		for i, id := range ids {
			for k := range deciders {
				wg.Go(func() {
					_, err := svcs[(i+k)%len(svcs)].Decide(admin, belay.DecideInput{CheckpointID: id, SelectedOption: "approve"})
					if err != nil && !belay.IsCode(err, belay.CodeCheckpointExpired) && !belay.IsCode(err, belay.CodeHITLAlreadyDecided) {
						t.Errorf("round %d: decide %s: %v", round, id, err)
					}
				})
			}
		}
		for _, s := range svcs {
			wg.Go(func() {
				for done := false; !done; {
					select {
					case <-ticking:
						done = true
					default:
					}
					if _, err := s.Sweep(context.Background()); err != nil {
						t.Errorf("round %d: sweep: %v", round, err)
					}
					for _, id := range ids {
						if _, err := s.GetCheckpoint(admin, id); err != nil {
							t.Errorf("round %d: read %s: %v", round, id, err)
						}
					}
				}
			})
		}
		wg.Wait()
		for _, id := range ids {
			cp, err := dbs[0].GetCheckpoint(context.Background(), id)
			if err != nil || cp.Decision == nil {
				t.Errorf("round %d: request %s = %+v, %v; want decided", round, id, cp, err)
			}
		}
		evs, err := dbs[0].ListEvents(context.Background(), store.EventQuery{Scope: store.Everything, Types: []string{belay.EventHITLDecided}, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != (round+1)*requests {
			t.Errorf("round %d: %d hitl.decided events, want %d", round, len(evs), (round+1)*requests)
		}
	}
}

// TestNotifyWakesAnotherInstance: a commit through one instance reaches a
// stream following another at once (LISTEN/NOTIFY), not at its next poll.
func TestNotifyWakesAnotherInstance(t *testing.T) {
	dbs := instances(t, 2)
	writer := core.New(core.Options{Store: dbs[0]})
	reader := core.New(core.Options{Store: dbs[1]})
	defer writer.Close()
	defer reader.Close()
	ctx, cancel := context.WithTimeout(admin, 10*time.Second)
	defer cancel()
	got := make(chan belay.Event, 4)
	opened := make(chan struct{})
	go func() {
		_ = reader.Follow(ctx, belay.EventFilter{After: belay.FromNow}, 0, func(_ int64, batch []belay.Event) error {
			if batch == nil {
				close(opened)
			}
			for _, e := range batch {
				got <- e
			}
			return nil
		})
	}()
	<-opened
	ch, stop := dbs[1].Listen()
	defer stop()
	// The LISTEN connection comes up in the background: commit until one
	// notification arrives (before it, streams poll, as they always may).
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	heard := false
	for !heard {
		if _, err := writer.CreateSession(admin, belay.CreateSessionInput{Title: "elsewhere"}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
			heard = true
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("no notification reached the other instance")
		}
	}
	select {
	case e := <-got:
		if e.Type != belay.EventSessionCreated {
			t.Errorf("event = %s", e.Type)
		}
	case <-ctx.Done():
		t.Fatal("the other instance's stream never saw the commit")
	}
}

// TestConcurrentSavesToOneSessionAcrossInstances: writers on several
// instances save into one session at once; every save succeeds and the
// checkpoints are numbered 1..n without a gap or a repeat.
func TestConcurrentSavesToOneSessionAcrossInstances(t *testing.T) {
	svcs := services(t, 3)
	sess, err := svcs[0].CreateSession(admin, belay.CreateSessionInput{Title: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 24
	seqs := make(chan int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cp, err := svcs[i%len(svcs)].CreateCheckpoint(admin, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "step"})
			if err != nil {
				t.Errorf("save %d: %v", i, err)
				return
			}
			seqs <- cp.Seq
		})
	}
	wg.Wait()
	close(seqs)
	seen := map[int64]bool{}
	for s := range seqs {
		if seen[s] || s < 1 || s > n {
			t.Errorf("seq %d repeated or out of 1..%d", s, n)
		}
		seen[s] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct seqs, want %d", len(seen), n)
	}
}

// TestConcurrentSavesByProjectAcrossInstances: saves naming only their
// project (no session yet) run at once on several instances: every save
// succeeds, exactly one session is created, and its checkpoints are
// numbered 1..n; a second burst, into the session now there, continues it.
func TestConcurrentSavesByProjectAcrossInstances(t *testing.T) {
	svcs := services(t, 3)
	project := t.TempDir()
	const n = 12
	sessions := map[string]bool{}
	seen := map[int64]bool{}
	for burst := range 2 {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				cp, err := svcs[i%len(svcs)].CreateCheckpoint(admin, belay.CreateCheckpointInput{ProjectPath: project, Summary: fmt.Sprint("c", i)})
				if err != nil {
					t.Errorf("burst %d, save %d: %v", burst, i, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if seen[cp.Seq] {
					t.Errorf("seq %d repeated", cp.Seq)
				}
				seen[cp.Seq], sessions[cp.SessionID] = true, true
			})
		}
		wg.Wait()
	}
	if len(sessions) != 1 {
		t.Errorf("the saves went to %d sessions, want 1", len(sessions))
	}
	for seq := range int64(2 * n) {
		if !seen[seq+1] {
			t.Errorf("no checkpoint #%d: seqs %v", seq+1, slices.Sorted(maps.Keys(seen)))
			break
		}
	}
}

// TestEmbeddingClaimsAcrossInstances: indexers on several instances take
// batches of the embedding queue at once; each checkpoint is taken by
// exactly one of them.
func TestEmbeddingClaimsAcrossInstances(t *testing.T) {
	dbs := instances(t, 4)
	svc := core.New(core.Options{Store: dbs[0]})
	defer svc.Close()
	const n = 120
	project := t.TempDir()
	for i := range n {
		if _, err := svc.CreateCheckpoint(admin, belay.CreateCheckpointInput{ProjectPath: project, Summary: fmt.Sprint("step ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	var (
		mu    sync.Mutex
		taken = map[string]int{}
		wg    sync.WaitGroup
	)
	for _, db := range dbs {
		wg.Go(func() {
			for {
				var jobs []store.EmbeddingJob
				err := db.Update(context.Background(), func(tx store.Tx) (err error) {
					jobs, err = tx.ClaimEmbeddings(context.Background(), now, now.Add(time.Hour), 7)
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
				if len(jobs) == 0 {
					return
				}
				mu.Lock()
				for _, j := range jobs {
					taken[j.Checkpoint.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(taken) != n {
		t.Errorf("%d checkpoints taken, want all %d", len(taken), n)
	}
	for id, k := range taken {
		if k != 1 {
			t.Errorf("checkpoint %s taken %d times, want once", id, k)
		}
	}
}
