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

// TestIndexerGathersAStreamOfSaves: saves in quick succession, each waking
// the indexer, are embedded a few batches at a time, not a batch (and two
// write transactions) each.
func TestIndexerGathersAStreamOfSaves(t *testing.T) {
	db, err := sqlite.Open(localCtx, filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	emb := &countingEmbedder{Hash: search.NewHash(0)}
	svc := core.New(core.Options{Store: db, Embedder: emb, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer svc.Close()
	ctx, cancel := context.WithCancel(localCtx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		svc.RunIndexer(ctx)
	}()
	defer func() { cancel(); <-done }()

	const saves = 60
	project := t.TempDir()
	for i := range saves {
		mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "step", Description: string(rune('a' + i%26))})
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err := svc.IndexStatus(localCtx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Embedded == saves {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the indexer embedded %d of %d saves", st.Embedded, saves)
		}
	}
	n := emb.batches.Load()
	t.Logf("%d saves embedded in %d batches", saves, n)
	if n > saves/4 {
		t.Errorf("%d saves in a row were embedded in %d batches, want them gathered into a few", saves, n)
	}
}
