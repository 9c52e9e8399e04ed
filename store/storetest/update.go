package storetest

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

var errBoom = errors.New("boom")

func testUpdate(t *testing.T, o opener) {
	subtests(t, o, []subtest{
		{"ErrorKeepsNothing", testUpdateErrorKeepsNothing},
		{"PanicRollsBack", testUpdatePanicRollsBack},
		{"GoexitRollsBack", testUpdateGoexitRollsBack},
		{"Isolation", testUpdateIsolation},
	})
}

// writeEverything writes one record of every kind in tx and returns what a
// reader would look for to find them.
type written struct {
	session, checkpoint, user, webhook string
	decided                            string
}

func writeEverything(t *testing.T, tx store.Tx, pending *belay.Checkpoint) (written, error) {
	ctx := t.Context()
	s := newSession("/rolled-back", at(50))
	c := newCheckpoint(s, 1, at(51))
	c.Tags = []string{"rolled-back"}
	seal(t, c)
	w := written{session: s.ID, checkpoint: c.ID, user: "ghost", webhook: newID(), decided: pending.ID}
	for _, step := range []func() error{
		func() error { return tx.InsertSession(ctx, s) },
		func() error { return tx.InsertCheckpoint(ctx, c) },
		func() error { return tx.AppendEvent(ctx, &belay.Event{Type: "x", CreatedAt: at(52)}) },
		func() error { return tx.PutUser(ctx, &belay.User{Name: w.user, CreatedAt: at(53)}) },
		func() error {
			return tx.InsertToken(ctx, &belay.Token{ID: newID(), User: w.user, CreatedAt: at(53)}, "ghost-token")
		},
		func() error {
			return tx.PutGrant(ctx, &belay.Grant{SessionID: pending.SessionID, User: w.user, Role: belay.RoleRead, GrantedBy: "alice", CreatedAt: at(53)})
		},
		func() error {
			return tx.InsertWebhook(ctx, &belay.Webhook{ID: w.webhook, URL: "https://example.com", Secret: "s", CreatedAt: at(54)})
		},
		func() error {
			return tx.InsertRollback(ctx, &belay.Rollback{ID: newID(), SessionID: s.ID, TargetID: c.ID, UserID: "a", CreatedAt: at(55)})
		},
		func() error {
			ok, err := tx.DecideIfPending(ctx, pending.ID, newDecision("bob", at(56)))
			if err == nil && !ok {
				err = errors.New("DecideIfPending = false")
			}
			return err
		},
		func() error { _, err := tx.MarkTimeoutFired(ctx, pending.ID); return err },
	} {
		if err := step(); err != nil {
			return w, err
		}
	}
	return w, nil
}

// wantNothingOf fails for every record of w that a reader can find.
func wantNothingOf(t *testing.T, st store.Store, w written, pending *belay.Checkpoint) {
	t.Helper()
	ctx := t.Context()
	_, err := st.GetSession(ctx, w.session)
	wantCode(t, "session of a rolled-back transaction", err, belay.CodeSessionNotFound)
	_, err = st.GetCheckpoint(ctx, w.checkpoint)
	wantCode(t, "checkpoint of a rolled-back transaction", err, belay.CodeCheckpointNotFound)
	if items, total, _, err := st.ListCheckpoints(ctx, store.CheckpointQuery{Scope: store.Everything, Tags: []string{"rolled-back"}, Limit: 10}); err != nil || len(items) != 0 || total != 0 {
		t.Errorf("tagged checkpoints of a rolled-back transaction: %d items, total %d, %v", len(items), total, err)
	}
	if n := lastSeq(t, st); n != 0 {
		t.Errorf("LastEventSeq = %d after a rolled-back append", n)
	}
	_, err = st.GetUser(ctx, w.user)
	wantCode(t, "user of a rolled-back transaction", err, belay.CodeNotFound)
	_, _, err = st.TokenByHash(ctx, "ghost-token")
	wantCode(t, "token of a rolled-back transaction", err, belay.CodeNotFound)
	if grants, err := st.SessionGrants(ctx, pending.SessionID); err != nil || len(grants) != 0 {
		t.Errorf("grants of a rolled-back transaction: %d, %v", len(grants), err)
	}
	if hooks, err := st.ListWebhooks(ctx); err != nil || len(hooks) != 0 {
		t.Errorf("webhooks of a rolled-back transaction: %d, %v", len(hooks), err)
	}
	if rbs, err := st.ListRollbacks(ctx, w.session); err != nil || len(rbs) != 0 {
		t.Errorf("rollbacks of a rolled-back transaction: %d, %v", len(rbs), err)
	}
	wantEqual(t, "checkpoint decided and fired in a rolled-back transaction", pending, mustGetCheckpoint(t, st, pending.ID))
}

func pendingFixture(t *testing.T, st store.Store) *belay.Checkpoint {
	t.Helper()
	s := mustInsertSession(t, st, newSession("/p", at(0)))
	return mustInsertCheckpoint(t, st, withHITL(newCheckpoint(s, 1, at(1)), at(2)))
}

func testUpdateErrorKeepsNothing(t *testing.T, st store.Store) {
	pending := pendingFixture(t, st)
	var w written
	err := st.Update(t.Context(), func(tx store.Tx) error {
		var err error
		if w, err = writeEverything(t, tx, pending); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update = %v, want the error fn returned", err)
	}
	wantNothingOf(t, st, w, pending)
}

func testUpdatePanicRollsBack(t *testing.T, st store.Store) {
	pending := pendingFixture(t, st)
	var w written
	var writeErr error
	recovered := func() (p any) {
		defer func() { p = recover() }()
		_ = st.Update(t.Context(), func(tx store.Tx) error {
			w, writeErr = writeEverything(t, tx, pending)
			panic(errBoom)
		})
		return nil
	}()
	if writeErr != nil {
		t.Fatalf("writes before the panic: %v", writeErr)
	}
	if recovered != errBoom {
		t.Fatalf("recovered %v, want the value fn panicked with", recovered)
	}
	wantNothingOf(t, st, w, pending)
	// The store is still usable: the panic released the write transaction.
	mustInsertSession(t, st, newSession("/after", at(60)))
}

// testUpdateGoexitRollsBack ends fn with runtime.Goexit, as t.FailNow does
// when a test fails inside Update: the transaction must still be rolled back
// and released, or every later Update waits forever.
func testUpdateGoexitRollsBack(t *testing.T, st store.Store) {
	pending := pendingFixture(t, st)
	var w written
	var writeErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = st.Update(t.Context(), func(tx store.Tx) error {
			w, writeErr = writeEverything(t, tx, pending)
			runtime.Goexit()
			return nil
		})
	}()
	// A bound on the wait, not a sleep: a driver with the bug never returns.
	limit := time.NewTimer(5 * time.Second)
	defer limit.Stop()
	select {
	case <-done:
	case <-limit.C:
		t.Fatal("Update never returned after fn called runtime.Goexit")
	}
	if writeErr != nil {
		t.Fatalf("writes before Goexit: %v", writeErr)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := st.Update(ctx, func(tx store.Tx) error { return tx.InsertSession(ctx, newSession("/after", at(60))) }); err != nil {
		t.Fatalf("Update after a Goexit inside Update: %v (the abandoned transaction was not released)", err)
	}
	wantNothingOf(t, st, w, pending)
}

// testUpdateIsolation: until Update commits, readers outside the
// transaction do not see its writes.
func testUpdateIsolation(t *testing.T, st store.Store) {
	s := newSession("/p", at(0))
	mustUpdate(t, st, func(tx store.Tx) error {
		if err := tx.InsertSession(t.Context(), s); err != nil {
			return err
		}
		if _, err := tx.GetSession(t.Context(), s.ID); err != nil {
			t.Errorf("the transaction does not see its own write: %v", err)
		}
		_, err := st.GetSession(t.Context(), s.ID)
		wantCode(t, "GetSession outside the open transaction", err, belay.CodeSessionNotFound)
		return nil
	})
	mustGetSession(t, st, s.ID)
}
