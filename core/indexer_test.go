package core_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/search"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/sqlite"
)

// countingEmbedder counts the batches it embeds.
type countingEmbedder struct {
	*search.Hash
	batches atomic.Int32
}

func (e *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.batches.Add(1)
	return e.Hash.Embed(ctx, texts)
}

// indexing returns a service over a fresh SQLite file, seen through wrap
// when it is not nil, embedding with emb (the default when nil), with its
// indexer running until the test ends.
func indexing(t *testing.T, emb search.Embedder, wrap func(store.Store) store.Store) *core.Service {
	t.Helper()
	db, err := sqlite.Open(localCtx, filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var st store.Store = db
	if wrap != nil {
		st = wrap(db)
	}
	svc := core.New(core.Options{Store: st, Embedder: emb, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(svc.Close)
	ctx, cancel := context.WithCancel(localCtx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		svc.RunIndexer(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return svc
}

// waitEmbedded waits until the index holds n embeddings.
func waitEmbedded(t *testing.T, svc *core.Service, n int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st, err := svc.IndexStatus(localCtx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Embedded == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the indexer embedded %d of %d checkpoints", st.Embedded, n)
		}
	}
}

// TestIndexerGathersAStreamOfSaves: saves in quick succession, each waking
// the indexer, are embedded a few batches at a time, not a batch (and two
// write transactions) each.
func TestIndexerGathersAStreamOfSaves(t *testing.T) {
	emb := &countingEmbedder{Hash: search.NewHash(0)}
	svc := indexing(t, emb, nil)
	const saves = 100
	project := t.TempDir()
	for i := range saves {
		mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "step", Description: string(rune('a' + i%26))})
	}
	waitEmbedded(t, svc, saves)
	n := emb.batches.Load()
	t.Logf("%d saves embedded in %d batches", saves, n)
	if n > saves/4 {
		t.Errorf("%d saves in a row were embedded in %d batches, want them gathered into a few", saves, n)
	}
}

// countingStore counts the indexer's looks for due checkpoints.
type countingStore struct {
	store.Store
	looks atomic.Int32
}

func (c *countingStore) DueEmbeddings(ctx context.Context, now time.Time, limit int) ([]store.EmbeddingJob, error) {
	c.looks.Add(1)
	return c.Store.DueEmbeddings(ctx, now, limit)
}

// TestIndexerDoesNotWakeItself: storing its embeddings wakes no one, so a
// run that embedded a save is not followed by an empty one (which would
// also hold back the next save's run by the pacer's gap).
func TestIndexerDoesNotWakeItself(t *testing.T) {
	var st *countingStore
	svc := indexing(t, nil, func(db store.Store) store.Store {
		st = &countingStore{Store: db}
		return st
	})
	// The runs at start (the first, and one after making the index this
	// model's) are over after a few gaps.
	for st.looks.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(5 * 100 * time.Millisecond)
	before := st.looks.Load()
	mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: t.TempDir(), Summary: "one save"})
	waitEmbedded(t, svc, 1)
	time.Sleep(3 * 100 * time.Millisecond) // three gaps, well short of the 2 s poll
	if n := st.looks.Load() - before; n != 1 {
		t.Errorf("the indexer looked for due checkpoints %d times after one save, want once", n)
	}
}
