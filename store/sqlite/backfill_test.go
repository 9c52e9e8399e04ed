package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store"
)

// saveRows commits n transactions, each a session with a 2 KB state.
func saveRows(t *testing.T, db *DB, from, n int) {
	t.Helper()
	ctx := context.Background()
	state := []byte(`{"k":"` + strings.Repeat("x", 2040) + `"}`)
	for i := from; i < from+n; i++ {
		now := time.Now().UTC()
		s := &belay.Session{ID: fmt.Sprintf("0190c2a0-0000-7000-8000-%012d", i), Status: belay.SessionRunning,
			State: state, CreatedAt: now, UpdatedAt: now}
		if err := db.Update(ctx, func(tx store.Tx) error { return tx.InsertSession(ctx, s) }); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBackfillCopiesBesideTheWriter: the log is copied into the database file
// long before it reaches the writer's wal_autocheckpoint, by the backfiller.
func TestBackfillCopiesBesideTheWriter(t *testing.T) {
	for _, d := range []Durability{Full, Relaxed} {
		t.Run(d.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "belay.db")
			db, err := Open(context.Background(), path, WithDurability(d))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			before := testutil.FileSize(t, path)
			// Far fewer frames than walCheckpointPages: only the backfiller copies.
			saveRows(t, db, 0, backfillCommits)
			deadline := time.Now().Add(10 * time.Second)
			for testutil.FileSize(t, path) <= before {
				if time.Now().After(deadline) {
					t.Fatalf("the database file stayed at %d bytes after %d commits", before, backfillCommits)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestBackfillLogStartsOver: with the backfiller copying beside the writer,
// the log still starts over from its beginning instead of growing: its size
// stays near the writer's wal_autocheckpoint however much is written.
func TestBackfillLogStartsOver(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 40 MiB")
	}
	path := filepath.Join(t.TempDir(), "belay.db")
	db, err := Open(context.Background(), path, WithDurability(Relaxed))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Each commit writes a few pages: 10,000 of them fill the log to the
	// writer's checkpoint many times over. A log that never starts over
	// grows to about 400 MB. One that does stays near the checkpoint's
	// size, plus what commits append while the writer's checkpoint waits for
	// a copy of the backfiller's to end: on a loaded machine (CI running
	// other packages' tests) that went past twice the checkpoint's size once,
	// so the bound is four times.
	saveRows(t, db, 0, 10000)
	const frame = 24 + 4096
	if size, limit := testutil.FileSize(t, path+"-wal"), int64(4*walCheckpointPages*frame); size > limit {
		t.Errorf("the log grew to %d bytes, want at most %d", size, limit)
	}
}
