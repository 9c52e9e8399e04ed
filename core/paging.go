package core

import (
	"context"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// storePage is how many rows one read of a walk over a table fetches.
const storePage = 500

// walk reads a keyset-paged query to its end: read fetches the page after
// key (nil for the first) and whether more follow, fn sees each item, and
// next is the key of an item. It stops at the last page or the first error.
func walk[T, K any](read func(after *K) ([]T, bool, error), next func(T) *K, fn func(T) error) error {
	var after *K
	for {
		page, more, err := refetch(func() ([]T, bool, error) { return read(after) })
		if err != nil {
			return err
		}
		for _, item := range page {
			if err := fn(item); err != nil {
				return err
			}
		}
		if !more || len(page) == 0 {
			return nil
		}
		after = next(page[len(page)-1])
	}
}

// forEachSession calls fn with every session within scope, newest first.
func forEachSession(ctx context.Context, r store.Reader, scope store.Scope, fn func(*belay.Session) error) error {
	return walk(func(after *store.SessionKey) ([]*belay.Session, bool, error) {
		page, _, more, err := r.ListSessions(ctx, store.SessionQuery{Scope: scope, After: after, Limit: storePage, MaxBytes: store.PageBytes})
		return page, more, err
	}, func(s *belay.Session) *store.SessionKey {
		return &store.SessionKey{CreatedAt: s.CreatedAt, ID: s.ID}
	}, fn)
}

// sessionCheckpoints returns every checkpoint of a session in seq order.
func sessionCheckpoints(ctx context.Context, r store.Reader, sessionID string) ([]*belay.Checkpoint, error) {
	var out []*belay.Checkpoint
	err := walk(func(after *store.CheckpointKey) ([]*belay.Checkpoint, bool, error) {
		page, _, more, err := r.ListCheckpoints(ctx, store.CheckpointQuery{Scope: store.Everything, SessionID: sessionID, After: after, Limit: storePage, MaxBytes: store.PageBytes})
		return page, more, err
	}, checkpointKey, func(cp *belay.Checkpoint) error {
		out = append(out, cp)
		return nil
	})
	return out, err
}

// checkpointKey is a checkpoint's position in (CreatedAt, ID) order and in
// its session's.
func checkpointKey(cp *belay.Checkpoint) *store.CheckpointKey {
	return &store.CheckpointKey{CreatedAt: cp.CreatedAt, Seq: cp.Seq, ID: cp.ID}
}

// refetch reads a list page again while it comes back empty though more
// follow: its rows were deleted between the query and the reading of their
// states, and a page of large states may hold one row. Read again, the page
// starts after them. After three empty reads it gives up. Every list and
// walk over the store reads through it.
func refetch[T any](read func() ([]T, bool, error)) (page []T, more bool, err error) {
	for range 3 {
		if page, more, err = read(); err != nil || len(page) > 0 || !more {
			break
		}
	}
	return page, more, err
}
