package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// TestBatchLostTransactionAnswersEveryone: when SQLite rolls a shared
// transaction back under a caller's feet (disk full, I/O error), every caller
// of the batch gets an error, the one whose fn succeeded too, and none hangs.
func TestBatchLostTransactionAnswersEveryone(t *testing.T) {
	for _, name := range []string{"Update", "Batch"} {
		t.Run(name, func(t *testing.T) { testLostTransactionAnswersEveryone(t, name == "Batch") })
	}
}

func testLostTransactionAnswersEveryone(t *testing.T, batch bool) {
	synctest.Test(t, func(t *testing.T) {
		db, release := busyWriter(t)
		ctx := context.Background()
		lost, after := make(chan error, 1), make(chan error, 1)
		update := db.Update
		if batch {
			update = db.Batch
		}
		go func() {
			lost <- update(ctx, func(stx store.Tx) error {
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
		go func() { after <- update(ctx, func(store.Tx) error { return nil }) }()
		synctest.Wait() // both queued: they share the next batch
		release()
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
				db, release := busyWriter(t)
				ctx := context.Background()
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
				release()
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

// queuedWrite is one write a batch test queues behind a busy writer.
type queuedWrite struct {
	name  string
	again bool // Batch, not Update
	// fail ends the fn, after it wrote when write is set: "" succeeds,
	// "error", "panic" or "goexit".
	fail  string
	write bool
}

// runQueued holds the writer with a first transaction, queues ws in order,
// then lets them run as one batch. It returns each write's outcome, how many
// times its fn ran, and which of the sessions the writes insert (one each,
// named after the write) exist afterwards.
func runQueued(t *testing.T, ws []queuedWrite) (outcomes []string, runs []int, kept []bool) {
	t.Helper()
	outcomes, runs, kept = make([]string, len(ws)), make([]int, len(ws)), make([]bool, len(ws))
	synctest.Test(t, func(t *testing.T) {
		db, release := busyWriter(t)
		ctx := context.Background()
		ids := make([]string, len(ws))
		done := make(chan int, len(ws))
		for i, w := range ws {
			ids[i] = fmt.Sprintf("0190c2a0-0000-7000-8000-%012d", i+1)
			fn := func(stx store.Tx) error {
				runs[i]++
				if w.write || w.fail == "" {
					if err := stx.InsertSession(ctx, &belay.Session{ID: ids[i], Status: belay.SessionRunning}); err != nil {
						return err
					}
				}
				switch w.fail {
				case "error":
					return errors.New(w.name + " failed")
				case "panic":
					panic(w.name + " panicked")
				case "goexit":
					runtime.Goexit()
				}
				return nil
			}
			go func() {
				outcomes[i] = "goexit"
				defer func() {
					if r := recover(); r != nil {
						outcomes[i] = fmt.Sprint("panic on the caller's goroutine: ", r)
						// A panic on the writer's goroutine comes with the
						// stack it was raised on.
						if p, ok := r.(*fnPanic); ok {
							if !strings.Contains(string(p.stack), "runQueued") {
								t.Errorf("the panic's stack does not show the fn:\n%s", p.stack)
							}
							outcomes[i] = fmt.Sprint("panic: ", p.value)
						}
					}
					done <- i
				}()
				var err error
				if w.again {
					err = db.Batch(ctx, fn)
				} else {
					err = db.Update(ctx, fn)
				}
				outcomes[i] = fmt.Sprint(err)
			}()
			synctest.Wait() // queued in order
		}
		release()
		for range ws {
			<-done
		}
		for i, id := range ids {
			_, err := db.GetSession(ctx, id)
			kept[i] = err == nil
			if err != nil && !belay.IsCode(err, belay.CodeSessionNotFound) {
				t.Errorf("GetSession %s: %v", ws[i].name, err)
			}
		}
		// The writer carries on.
		if err := db.Batch(ctx, func(store.Tx) error { return nil }); err != nil {
			t.Errorf("Batch after the batch: %v", err)
		}
	})
	return outcomes, runs, kept
}

// TestBatchUndoesAFailedWriteAlone: in a batch of Batch calls, which share
// no savepoints, one that fails after it wrote leaves nothing behind, by an
// error or a panic (which continues in its caller): the transaction is
// undone and the others run again; one that fails before it writes costs the
// others nothing.
func TestBatchUndoesAFailedWriteAlone(t *testing.T) {
	for _, how := range []string{"error", "panic"} {
		t.Run(how, func(t *testing.T) {
			outcomes, runs, kept := runQueued(t, []queuedWrite{
				{name: "a", again: true},
				{name: "early", again: true, fail: "error"},
				{name: "b", again: true},
				{name: "late", again: true, fail: how, write: true},
				{name: "c", again: true},
			})
			want := map[string]string{"error": "late failed", "panic": "panic: late panicked"}[how]
			wantOutcomes := []string{"<nil>", "early failed", "<nil>", want, "<nil>"}
			// a and b ran before late failed, and again after; early failed
			// before it wrote and does not run again; c ran once, after.
			wantRuns := []int{2, 1, 2, 1, 1}
			wantKept := []bool{true, false, true, false, true}
			if !slices.Equal(outcomes, wantOutcomes) || !slices.Equal(runs, wantRuns) || !slices.Equal(kept, wantKept) {
				t.Errorf("outcomes %q, runs %v, kept %v; want %q, %v, %v", outcomes, runs, kept, wantOutcomes, wantRuns, wantKept)
			}
		})
	}
}

// TestBatchBesideUpdateKeepsSavepoints: an Update's fn runs once, so a batch
// holding one keeps a savepoint for each write, and a write that fails after
// it wrote is undone alone, no fn running again.
func TestBatchBesideUpdateKeepsSavepoints(t *testing.T) {
	outcomes, runs, kept := runQueued(t, []queuedWrite{
		{name: "a", again: true},
		{name: "u", again: false},
		{name: "late", again: true, fail: "error", write: true},
		{name: "c", again: true},
	})
	wantOutcomes := []string{"<nil>", "<nil>", "late failed", "<nil>"}
	wantRuns := []int{1, 1, 1, 1}
	wantKept := []bool{true, true, false, true}
	if !slices.Equal(outcomes, wantOutcomes) || !slices.Equal(runs, wantRuns) || !slices.Equal(kept, wantKept) {
		t.Errorf("outcomes %q, runs %v, kept %v; want %q, %v, %v", outcomes, runs, kept, wantOutcomes, wantRuns, wantKept)
	}
}

// TestBatchRunsAgainOnce: after one undone transaction the writes run again
// with savepoints, so a second failure after a write undoes that write alone
// and no fn runs a third time.
func TestBatchRunsAgainOnce(t *testing.T) {
	outcomes, runs, kept := runQueued(t, []queuedWrite{
		{name: "a", again: true},
		{name: "late1", again: true, fail: "error", write: true},
		{name: "b", again: true},
		{name: "late2", again: true, fail: "error", write: true},
		{name: "c", again: true},
	})
	wantOutcomes := []string{"<nil>", "late1 failed", "<nil>", "late2 failed", "<nil>"}
	wantRuns := []int{2, 1, 1, 1, 1}
	wantKept := []bool{true, false, true, false, true}
	if !slices.Equal(outcomes, wantOutcomes) || !slices.Equal(runs, wantRuns) || !slices.Equal(kept, wantKept) {
		t.Errorf("outcomes %q, runs %v, kept %v; want %q, %v, %v", outcomes, runs, kept, wantOutcomes, wantRuns, wantKept)
	}
}

// busyWriter opens a database in a synctest bubble and keeps its writer busy
// with a first transaction until release, so that the writes queued meanwhile
// share the next batch.
func busyWriter(t *testing.T) (*DB, func()) {
	t.Helper()
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	hold, first := make(chan struct{}), make(chan error, 1)
	go func() { first <- db.Update(context.Background(), func(store.Tx) error { <-hold; return nil }) }()
	synctest.Wait() // the writer is busy with the first batch
	return db, func() {
		close(hold)
		if err := <-first; err != nil {
			t.Errorf("first batch: %v", err)
		}
	}
}

// TestRunAgainNotTakenForTheOutcome: a caller of Batch told to run again
// while it was not yet waiting, whose context then ends before its turn,
// gets its context's error, not the leftover word to run again (both of the
// caller's channels are ready then; repeated, so that a random choice of the
// wrong one shows).
func TestRunAgainNotTakenForTheOutcome(t *testing.T) {
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			db, release := busyWriter(t)
			bg := context.Background()
			ctx, cancel := context.WithCancel(bg)
			fn := func(stx store.Tx) error {
				if err := stx.InsertSession(bg, &belay.Session{ID: "0190c2a0-0000-7000-8000-000000000001", Status: belay.SessionRunning}); err != nil {
					return err
				}
				cancel() // the caller's request ends before the run again
				return nil
			}
			// Queued as update queues it, but not yet waiting in outcome.
			w := &pendingWrite{ctx: ctx, fn: fn, again: true, turn: make(chan *tx), ran: make(chan fnOutcome, 1), committed: make(chan error, 1)}
			db.queued.Add(1)
			defer db.queued.Add(-1)
			db.writes <- w
			late := make(chan error, 1)
			go func() {
				late <- db.Batch(bg, func(stx store.Tx) error {
					if err := stx.InsertSession(bg, &belay.Session{ID: "0190c2a0-0000-7000-8000-000000000002", Status: belay.SessionRunning}); err != nil {
						return err
					}
					return errors.New("late failed")
				})
			}()
			synctest.Wait()
			release()
			synctest.Wait() // w ran, late failed after writing, w's turn to run again waits
			if err := w.outcome(db); !errors.Is(err, context.Canceled) {
				t.Errorf("outcome %v; want %v", err, context.Canceled)
			}
			if err := <-late; err == nil || err.Error() != "late failed" {
				t.Errorf("the failing write: %v", err)
			}
		})
	}
}
