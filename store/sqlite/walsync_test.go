package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// put stores a setting in an Update of its own.
func put(db *DB, name string) error {
	return db.Update(context.Background(), func(tx store.Tx) error {
		return tx.PutSetting(context.Background(), name, []byte("v"))
	})
}

// visible reports whether readers see the setting name.
func visible(t *testing.T, db *DB, name string) bool {
	t.Helper()
	var n int
	if err := db.read.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM settings WHERE name = ?`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// waitVisible waits until readers see the setting name.
func waitVisible(t *testing.T, db *DB, name string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !visible(t, db, name); {
		if time.Now().After(deadline) {
			t.Fatalf("setting %s never became visible", name)
		}
		time.Sleep(time.Millisecond)
	}
}

// gateSyncs makes every sync of the write-ahead log wait for the test: each
// one sends a channel on which the test answers with the sync's outcome (the
// real sync runs on nil).
func gateSyncs(db *DB) chan chan error {
	syncs := make(chan chan error)
	db.wal.sync = func(f *os.File) error {
		answer := make(chan error)
		syncs <- answer
		if err := <-answer; err != nil {
			return err
		}
		return syncData(f)
	}
	return syncs
}

func nextSync(t *testing.T, syncs chan chan error) chan error {
	t.Helper()
	select {
	case answer := <-syncs:
		return answer
	case <-time.After(10 * time.Second):
		t.Fatal("no sync of the write-ahead log began")
		return nil
	}
}

func notReturned(t *testing.T, done chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s returned (%v) before a sync covered its commit", what, err)
	default:
	}
}

// firstSyncHeld opens a database whose syncs wait for the test (gateSyncs)
// and saves the setting a: it returns with a committed and its sync held,
// the channel that answers that sync, and where a's Update reports.
func firstSyncHeld(t *testing.T) (*DB, chan chan error, chan error, chan error) {
	db := mustOpen(t, filepath.Join(t.TempDir(), "belay.db"))
	t.Cleanup(func() { db.Close() })
	syncs := gateSyncs(db)
	doneA := make(chan error, 1)
	go func() { doneA <- put(db, "a") }()
	return db, syncs, nextSync(t, syncs), doneA
}

// TestFullAcknowledgesAfterSync: in the Full mode an Update returns only once
// a sync of the write-ahead log that began after its commit has finished; the
// commit is visible at once, and the writer runs the next transaction while
// the sync runs. A sync already running when a commit lands does not count
// for it.
func TestFullAcknowledgesAfterSync(t *testing.T) {
	db, syncs, first, doneA := firstSyncHeld(t)
	doneB := make(chan error, 1)
	if !visible(t, db, "a") {
		t.Fatal("a write being synced is not visible to readers")
	}
	notReturned(t, doneA, "the first Update")

	go func() { doneB <- put(db, "b") }()
	waitVisible(t, db, "b") // committed while the first sync still runs
	notReturned(t, doneB, "the second Update")

	first <- nil
	if err := <-doneA; err != nil {
		t.Fatalf("first Update: %v", err)
	}
	second := nextSync(t, syncs)
	notReturned(t, doneB, "the second Update")
	second <- nil
	if err := <-doneB; err != nil {
		t.Fatalf("second Update: %v", err)
	}
}

// TestFullSyncFailureSticks: when a sync of the write-ahead log fails, the
// Update waiting for it fails with STORAGE_UNAVAILABLE, and so does every
// later one (the kernel reports a lost write once, so a later sync that
// succeeds proves nothing) until the database is opened again.
func TestFullSyncFailureSticks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	db := mustOpen(t, path)
	syncs := gateSyncs(db)
	done := make(chan error, 1)
	go func() { done <- put(db, "a") }()
	nextSync(t, syncs) <- syscall.EIO
	if err := <-done; !belay.IsCode(err, belay.CodeStorageUnavailable) {
		t.Fatalf("Update whose sync failed: %v, want STORAGE_UNAVAILABLE", err)
	}
	db.wal.sync = syncData
	err := put(db, "b")
	if !belay.IsCode(err, belay.CodeStorageUnavailable) {
		t.Fatalf("Update after a failed sync: %v, want STORAGE_UNAVAILABLE", err)
	}
	var be *belay.Error
	if !errors.As(err, &be) || !strings.Contains(be.Message, "restart belay") {
		t.Errorf("the error after a failed sync is %v; it should say what to do", err)
	}
	if visible(t, db, "b") {
		t.Error("a write after a failed sync was committed")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = mustOpen(t, path)
	defer db.Close()
	if err := put(db, "c"); err != nil {
		t.Fatalf("Update after reopening: %v", err)
	}
}

// TestFullGathersWritesBehindASync: while a sync runs and a commit already
// waits for the next one, the writer starts no other transaction: the writes
// arriving meanwhile wait for that next sync to begin and then commit
// together, instead of one small commit each.
func TestFullGathersWritesBehindASync(t *testing.T) {
	db, syncs, first, doneA := firstSyncHeld(t)
	doneB := make(chan error, 1)
	go func() { doneB <- put(db, "b") }()
	waitVisible(t, db, "b") // committed; waits for a sync after the first

	ran := make(chan struct{})
	done := make([]chan error, 3)
	for i := range done {
		done[i] = make(chan error, 1)
		go func() {
			done[i] <- db.Update(t.Context(), func(tx store.Tx) error {
				ran <- struct{}{}
				return tx.PutSetting(t.Context(), fmt.Sprint("c", i), []byte("v"))
			})
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); db.queued.Load() < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 writes queued", db.queued.Load())
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	select {
	case <-ran:
		t.Fatal("a transaction began while a commit was waiting for a sync that had not begun")
	default:
	}

	first <- nil // the first sync ends; the second, for b, begins
	second := nextSync(t, syncs)
	for range done {
		<-ran // the three run now
	}
	second <- nil
	for _, ch := range []chan error{doneA, doneB} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	nextSync(t, syncs) <- nil // the three's
	for _, ch := range done {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
}

// TestCloseWaitsForSync: Close waits for a sync in progress instead of
// closing the log under it, and the write that sync covers is acknowledged.
func TestCloseWaitsForSync(t *testing.T) {
	db, _, first, doneA := firstSyncHeld(t)
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	notReturned(t, doneA, "the Update")
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a sync was running", err)
	case <-time.After(50 * time.Millisecond):
	}
	first <- nil
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-doneA; err != nil {
		t.Fatalf("Update: %v", err)
	}
}
