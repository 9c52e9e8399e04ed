package core_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/sqlite"
)

// faultyStore fails every write the way the SQLite driver reports a full
// disk while fail is set.
type faultyStore struct {
	store.Store
	fail atomic.Bool
}

func (f *faultyStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	if f.fail.Load() {
		return belay.Errorf(belay.CodeStorageUnavailable, "the database's disk is full")
	}
	return f.Store.Update(ctx, fn)
}

// TestHealthTracksWrites: Health fails with the storage's error after a
// write failed on it, until a write succeeds; and when the database does not
// answer a read.
func TestHealthTracksWrites(t *testing.T) {
	ctx := localCtx
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	fs := &faultyStore{Store: db}
	svc := core.New(core.Options{Store: fs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	project := t.TempDir()
	if err := svc.Health(ctx); err != nil {
		t.Fatalf("Health of a fresh service: %v", err)
	}
	fs.fail.Store(true)
	_, err = svc.CreateSession(ctx, belay.CreateSessionInput{ProjectPath: project})
	testutil.WantCode(t, err, belay.CodeStorageUnavailable, "")
	testutil.WantCode(t, svc.Health(ctx), belay.CodeStorageUnavailable, "")
	fs.fail.Store(false)
	// Reads work again, but no write has shown that writes do.
	testutil.WantCode(t, svc.Health(ctx), belay.CodeStorageUnavailable, "")
	// A write refused for another reason says nothing about the storage.
	_, err = svc.CreateCheckpoint(ctx, belay.CreateCheckpointInput{SessionID: "0190c2a0-0000-7000-8000-000000000099", Summary: "x"})
	testutil.WantCode(t, err, belay.CodeSessionNotFound, "")
	testutil.WantCode(t, svc.Health(ctx), belay.CodeStorageUnavailable, "")
	if _, err := svc.CreateSession(ctx, belay.CreateSessionInput{ProjectPath: project}); err != nil {
		t.Fatal(err)
	}
	if err := svc.Health(ctx); err != nil {
		t.Errorf("Health after a write succeeded: %v", err)
	}
	db.Close()
	if err := svc.Health(ctx); err == nil {
		t.Error("Health with the database closed: nil")
	}
}
