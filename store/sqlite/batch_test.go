package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"testing/synctest"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// TestBatchLostTransactionAnswersEveryone: when SQLite rolls a shared
// transaction back under a caller's feet (disk full, I/O error), every caller
// of the batch gets an error, the one whose fn succeeded too, and none hangs.
func TestBatchLostTransactionAnswersEveryone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, err := Open(context.Background(), filepath.Join(t.TempDir(), "belay.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		ctx := context.Background()
		release := make(chan struct{})
		first := make(chan error, 1)
		go func() { first <- db.Update(ctx, func(store.Tx) error { <-release; return nil }) }()
		synctest.Wait() // the writer is busy with the first batch
		lost, after := make(chan error, 1), make(chan error, 1)
		go func() {
			lost <- db.Update(ctx, func(stx store.Tx) error {
				// Stands in for SQLite's own rollback on SQLITE_FULL or IOERR
				// during a statement whose error this fn tolerates.
				_, err := stx.(*tx).q.ExecContext(ctx, "ROLLBACK")
				if err != nil {
					t.Errorf("rollback: %v", err)
				}
				return nil
			})
		}()
		synctest.Wait()
		go func() { after <- db.Update(ctx, func(store.Tx) error { return nil }) }()
		synctest.Wait() // both queued: they share the next batch
		close(release)
		if err := <-first; err != nil {
			t.Errorf("first batch: %v", err)
		}
		if err := <-lost; err == nil {
			t.Error("the caller whose transaction was lost got no error")
		}
		if err := <-after; err == nil {
			t.Error("the next caller in the lost batch got no error")
		}
	})
}

// TestLostTransactionKeepsNothing: when SQLite rolls the transaction back
// under a fn that goes on, alone in its batch or sharing one, the statements
// the fn runs afterwards fail instead of committing on their own
// (autocommit), and the caller gets an error.
func TestLostTransactionKeepsNothing(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "Alone", true: "Shared"}[shared], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				db, err := Open(context.Background(), filepath.Join(t.TempDir(), "belay.db"))
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				ctx := context.Background()
				release := make(chan struct{})
				first := make(chan error, 1)
				go func() { first <- db.Update(ctx, func(store.Tx) error { <-release; return nil }) }()
				synctest.Wait() // the writer is busy with the first batch
				sess := &belay.Session{ID: "0190c2a0-0000-7000-8000-000000000001", Status: belay.SessionRunning}
				lost := make(chan error, 1)
				go func() {
					lost <- db.Update(ctx, func(stx store.Tx) error {
						// Stands in for SQLite's own rollback on SQLITE_FULL
						// or IOERR during a statement whose error this fn
						// tolerates; the fn then goes on writing.
						if _, err := stx.(*tx).q.ExecContext(ctx, "ROLLBACK"); err != nil {
							t.Errorf("rollback: %v", err)
						}
						stx.InsertSession(ctx, sess)
						stx.AppendEvent(ctx, &belay.Event{Type: belay.EventSessionCreated, SessionID: sess.ID})
						return nil
					})
				}()
				synctest.Wait()
				after := make(chan error, 1)
				if shared {
					go func() { after <- db.Update(ctx, func(store.Tx) error { return nil }) }()
					synctest.Wait()
				}
				close(release)
				if err := <-first; err != nil {
					t.Errorf("first batch: %v", err)
				}
				if err := <-lost; err == nil {
					t.Error("the caller whose transaction was lost got no error")
				}
				if shared {
					if err := <-after; err == nil {
						t.Error("the next caller in the lost batch got no error")
					}
				}
				if _, err := db.GetSession(ctx, sess.ID); !belay.IsCode(err, belay.CodeSessionNotFound) {
					t.Errorf("GetSession after the lost transaction: %v; want SESSION_NOT_FOUND", err)
				}
				if n, err := db.LastEventSeq(ctx); err != nil || n != 0 {
					t.Errorf("LastEventSeq = %d, %v; want 0: a write after the loss was kept", n, err)
				}
				// The writer carries on.
				if err := db.Update(ctx, func(stx store.Tx) error { return stx.InsertSession(ctx, sess) }); err != nil {
					t.Errorf("Update after the lost transaction: %v", err)
				}
			})
		})
	}
}
