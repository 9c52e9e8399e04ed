package core

import (
	"context"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/pace"
	"github.com/belayhq/belay/search"
	"github.com/belayhq/belay/store"
)

const (
	// indexBatch is how many checkpoints one embedding request takes.
	indexBatch = 64
	// indexPoll is how often the indexer looks for work nobody woke it for
	// (saves in other processes, retries coming due).
	indexPoll = 2 * time.Second
	// indexGap is the least time between two runs of the indexer that saves
	// woke (see pace.Pacer): a checkpoint is embedded up to this much later than
	// at once, and a stream of saves costs two write transactions a gap, not
	// two a save (one sequential HTTP client: 929-937 -> 1,107-1,263 saves/s).
	indexGap = 100 * time.Millisecond
	// embedClaim is how long a batch taken for embedding is this
	// instance's: if it dies with the batch, another takes it after that.
	embedClaim = 5 * time.Minute
	// Failed embeddings are retried after retryFirst, doubling up to retryMax.
	retryFirst = 30 * time.Second
	retryMax   = time.Hour
)

// RunIndexer embeds queued checkpoints until ctx ends: the background worker
// of a long-running process (belay serve). It first makes the index this
// service's model's: a changed model queues every checkpoint to be embedded
// again, and until then searches rank by text alone, never mixing the two
// vector spaces. Then it embeds what is due, woken by every save. A failed
// batch stays queued and is retried with backoff; saves never wait for it.
func (s *Service) RunIndexer(ctx context.Context) {
	wake, stopWake := s.Wake()
	defer stopWake()
	remote, stopRemote := s.remoteWake()
	defer stopRemote()
	adopted := false
	pacer := pace.Pacer{Gap: indexGap}
	for ctx.Err() == nil {
		var err error
		if !adopted {
			adopted, err = s.adoptModel(ctx, true)
		}
		n := 0
		if err == nil {
			n, err = s.indexDue(ctx)
		}
		if err != nil && ctx.Err() == nil {
			s.log.Warn("search indexer", "model", s.embed.Model(), "error", err)
		}
		if n == indexBatch && err == nil {
			continue // more may be due at once
		}
		pacer.Pause(ctx, wake, remote, indexPoll)
	}
}

// IndexQueued embeds the queued checkpoints that are due, until none is left
// or one batch fails, reporting after each batch how many are done of how
// many were queued: for a process without an indexer (the CLI on the local
// database). When the index is of another model it embeds nothing: Reindex
// switches models, a process that merely searches does not.
func (s *Service) IndexQueued(ctx context.Context, progress func(done, queued int64)) error {
	ok, err := s.adoptModel(ctx, false)
	if err != nil || !ok {
		return err
	}
	st, err := s.store.SearchIndex(ctx)
	if err != nil {
		return err
	}
	var done int64
	for {
		n, err := s.indexDue(ctx)
		if err != nil || n == 0 {
			return err
		}
		done += int64(n)
		if progress != nil {
			progress(done, max(st.Queued, done))
		}
	}
}

// adoptModel makes sure the index is of this service's model: an index
// without a model takes it, one of another model only when switchModel. It
// reports whether the index is of this service's model now.
func (s *Service) adoptModel(ctx context.Context, switchModel bool) (bool, error) {
	st, err := s.store.SearchIndex(ctx)
	if err != nil {
		return false, err
	}
	m := s.indexModel()
	if st.Model != "" && sameModel(st.IndexModel, m) {
		return true, nil
	}
	if st.Model != "" && !switchModel {
		return false, nil
	}
	var queued int64
	err = s.update(ctx, func(tx store.Tx) error {
		queued, err = tx.QueueEmbeddings(ctx, m, false, s.clock.Now())
		return err
	})
	if err != nil {
		return false, err
	}
	if st.Model != "" {
		s.log.Info("search index: the embedding model changed; re-embedding", "from", st.Model, "to", m.Model, "queued", queued)
	}
	return true, nil
}

// indexDue embeds one batch of due checkpoints and reports how many it took.
func (s *Service) indexDue(ctx context.Context) (int, error) {
	now := s.clock.Now()
	// A read first: an idle index costs no write.
	if due, err := s.store.DueEmbeddings(ctx, now, 1); err != nil || len(due) == 0 {
		return 0, err
	}
	var jobs []store.EmbeddingJob
	err := s.store.Update(ctx, func(tx store.Tx) (err error) {
		jobs, err = tx.ClaimEmbeddings(ctx, now, now.Add(embedClaim), indexBatch)
		return err
	})
	s.health.note(err)
	if err != nil || len(jobs) == 0 {
		return 0, err
	}
	texts := make([]string, len(jobs))
	for i, j := range jobs {
		texts[i] = embedText(j.Checkpoint)
	}
	vecs, embedErr := s.embed.Embed(ctx, texts)
	if embedErr != nil && ctx.Err() != nil {
		return 0, ctx.Err()
	}
	model := s.embed.Model()
	// Without a wake-up: embeddings are no event, and the indexer would wake
	// itself (see pace.Pacer).
	err = s.store.Update(ctx, func(tx store.Tx) error {
		for i, j := range jobs {
			if embedErr != nil {
				attempts := j.Attempts + 1
				if err := tx.RetryEmbedding(ctx, j.Checkpoint.ID, attempts, now.Add(retryAfter(attempts)), belay.Clip(embedErr.Error(), 500)); err != nil {
					return err
				}
				continue
			}
			if err := tx.PutEmbedding(ctx, j.Checkpoint.ID, store.Embedding{Model: model, Vector: vecs[i]}); err != nil {
				return err
			}
			// Checkpoints saved before token counts were kept get theirs here.
			if cp := j.Checkpoint; cp.TokenEncoding == "" {
				n, err := search.CountTokens(cp.Summary, cp.Description)
				if err != nil {
					return err
				}
				if err := tx.SetTokenCount(ctx, cp.ID, n, search.TokenEncoding); err != nil && !belay.IsCode(err, belay.CodeCheckpointNotFound) {
					return err
				}
			}
		}
		return nil
	})
	s.health.note(err)
	if err != nil {
		return 0, err
	}
	return len(jobs), embedErr
}

// retryAfter is the wait before attempt number attempts+1.
func retryAfter(attempts int) time.Duration {
	return min(retryFirst<<min(attempts-1, 10), retryMax)
}
