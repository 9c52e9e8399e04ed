package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

const headTestSession = "0190c2a0-0000-7000-8000-0000000000aa"

// newHeadTestDB opens a database holding one running session.
func newHeadTestDB(t *testing.T) *DB {
	t.Helper()
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	now := time.Now().UTC()
	sess := &belay.Session{ID: headTestSession, Status: belay.SessionRunning, ProjectPath: "/p", Owner: "u", CreatedAt: now, UpdatedAt: now}
	if err := db.Update(context.Background(), func(tx store.Tx) error { return tx.InsertSession(context.Background(), sess) }); err != nil {
		t.Fatal(err)
	}
	return db
}

// writerHead reads the session's head inside a write transaction, where the
// cache serves it.
func writerHead(t *testing.T, db *DB) *belay.Session {
	t.Helper()
	var got *belay.Session
	err := db.Update(context.Background(), func(tx store.Tx) error {
		var err error
		got, err = tx.GetSessionHead(context.Background(), headTestSession)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// advance moves the session's head one save on, as a save does.
func advance(tx store.Tx) error {
	ctx := context.Background()
	s, err := tx.GetSessionHead(ctx, headTestSession)
	if err != nil {
		return err
	}
	s.LastSeq++
	s.CheckpointCount++
	s.HeadCheckpointID = "head"
	s.Phase = "phase"
	s.UpdatedAt = time.Now().UTC()
	return tx.AdvanceSession(ctx, s)
}

// checkHead compares the head the writer's cache serves with the row as a
// reader connection sees it.
func checkHead(t *testing.T, db *DB, wantSeq int64) {
	t.Helper()
	got := writerHead(t, db)
	want, err := db.GetSessionHead(context.Background(), headTestSession)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the writer's head differs from the row (-row +writer):\n%s", diff)
	}
	if got.LastSeq != wantSeq {
		t.Errorf("last seq %d, want %d", got.LastSeq, wantSeq)
	}
}

var errFnFails = errors.New("fn fails")

// TestHeadCacheFollowsWrites: the head the writer serves from its cache is
// the row's after saves, a save rolled back alone, a whole-session update and
// a deletion.
func TestHeadCacheFollowsWrites(t *testing.T) {
	ctx := context.Background()
	db := newHeadTestDB(t)
	checkHead(t, db, 0)
	for range 3 {
		if err := db.Update(ctx, advance); err != nil {
			t.Fatal(err)
		}
	}
	checkHead(t, db, 3)

	err := db.Update(ctx, func(tx store.Tx) error {
		if err := advance(tx); err != nil {
			return err
		}
		return errFnFails
	})
	if !errors.Is(err, errFnFails) {
		t.Fatalf("failing fn: %v", err)
	}
	checkHead(t, db, 3)

	err = db.Update(ctx, func(tx store.Tx) error {
		s, err := tx.GetSession(ctx, headTestSession)
		if err != nil {
			return err
		}
		s.Status, s.Holder = belay.SessionPaused, "holder"
		lease := time.Now().UTC().Add(time.Minute).Truncate(time.Millisecond)
		s.LeaseExpiresAt = &lease
		return tx.UpdateSession(ctx, s)
	})
	if err != nil {
		t.Fatal(err)
	}
	checkHead(t, db, 3)
	if s := writerHead(t, db); s.Status != belay.SessionPaused || s.Holder != "holder" {
		t.Errorf("after an update: status %s, holder %q", s.Status, s.Holder)
	}

	if err := db.Update(ctx, func(tx store.Tx) error { return tx.DeleteSession(ctx, headTestSession) }); err != nil {
		t.Fatal(err)
	}
	err = db.Update(ctx, func(tx store.Tx) error {
		_, err := tx.GetSessionHead(ctx, headTestSession)
		return err
	})
	if !belay.IsCode(err, belay.CodeSessionNotFound) {
		t.Errorf("head of a deleted session: %v", err)
	}
}

// TestHeadCacheForgetsRolledBackSavepoint: a fn that advances the session and
// fails is rolled back to its savepoint; the next fn of the same batch reads
// the head from before it.
func TestHeadCacheForgetsRolledBackSavepoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := newHeadTestDB(t)
		if err := db.Update(ctx, advance); err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		first := make(chan error, 1)
		go func() { first <- db.Update(ctx, func(store.Tx) error { <-release; return nil }) }()
		synctest.Wait() // the writer is busy: the next two share a batch
		failed, next := make(chan error, 1), make(chan error, 1)
		var seen int64
		go func() {
			failed <- db.Update(ctx, func(tx store.Tx) error {
				if err := advance(tx); err != nil {
					return err
				}
				return errFnFails
			})
		}()
		synctest.Wait()
		go func() {
			next <- db.Update(ctx, func(tx store.Tx) error {
				s, err := tx.GetSessionHead(ctx, headTestSession)
				seen = s.LastSeq
				return err
			})
		}()
		synctest.Wait()
		close(release)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if err := <-failed; !errors.Is(err, errFnFails) {
			t.Fatalf("failing fn: %v", err)
		}
		if err := <-next; err != nil {
			t.Fatal(err)
		}
		if seen != 1 {
			t.Errorf("the fn after a rolled-back one read last seq %d, want 1", seen)
		}
		checkHead(t, db, 1)
	})
}

// TestHeadCacheSeesOtherConnections: a session's row changed by another
// connection (another process) is read again, not served from the cache.
func TestHeadCacheSeesOtherConnections(t *testing.T) {
	ctx := context.Background()
	db := newHeadTestDB(t)
	if err := db.Update(ctx, advance); err != nil {
		t.Fatal(err)
	}
	checkHead(t, db, 1)
	other, err := openPool(db.Path(), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Exec(`UPDATE sessions SET last_seq = 7, status = ? WHERE id = ?`, string(belay.SessionPaused), headTestSession); err != nil {
		t.Fatal(err)
	}
	checkHead(t, db, 7)
	if s := writerHead(t, db); s.Status != belay.SessionPaused {
		t.Errorf("status %s after another connection paused the session", s.Status)
	}
	if err := db.Update(ctx, advance); err != nil {
		t.Fatal(err)
	}
	checkHead(t, db, 8)
}
