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
// write failed on it, until a write (its own probe, or any other) succeeds;
// and when the database does not answer a read.
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
	// While writes fail, so does Health's own.
	testutil.WantCode(t, svc.Health(ctx), belay.CodeStorageUnavailable, "")
	// Once the storage is back, Health's own write shows it, with no
	// request needed (a load balancer sends none to an unhealthy instance).
	fs.fail.Store(false)
	if err := svc.Health(ctx); err != nil {
		t.Errorf("Health once writes work again: %v", err)
	}
	if err := svc.Health(ctx); err != nil {
		t.Errorf("Health after recovering: %v", err)
	}
	db.Close()
	if err := svc.Health(ctx); err == nil {
		t.Error("Health with the database closed: nil")
	}
}
