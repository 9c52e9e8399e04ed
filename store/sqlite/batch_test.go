package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"testing/synctest"

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
