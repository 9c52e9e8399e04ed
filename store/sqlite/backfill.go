package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
)

// SQLite copies the write-ahead log back into the database file (a WAL
// checkpoint, its "backfill") and then starts the log over. Left to itself it
// does so inside the COMMIT that crosses wal_autocheckpoint pages: that
// commit writes and syncs a thousand pages of the database file before it
// returns, and the writer connection waits. belay backfills on a connection
// of its own, beside the writer, every backfillEvery commits; the writer's
// own automatic checkpoint stays as a backstop for when the backfill falls
// far behind (a reader holding an old snapshot keeps a passive backfill from
// finishing).
//
// A backfill costs two syncs whatever it copies, so it waits for about as
// many frames as SQLite's own (1000 pages): commits vary in size, so the
// number of commits between backfills follows the frames the last one found.
const (
	backfillFrames = 1000
	// firstBackfill is the commits before the first backfill.
	firstBackfill = 32
	// maxBackfillEvery bounds the commits between backfills.
	maxBackfillEvery = 1024
	// backstopPages is the writer connection's wal_autocheckpoint.
	backstopPages = 8000
)

// backfiller runs passive WAL checkpoints on its own connection when the
// writer wakes it.
type backfiller struct {
	conn *sql.DB
	wake chan struct{}
	done chan struct{}
	// commits counts the writer's commits since the last wake; only the
	// writer's turn holder touches it.
	commits int64
	// every is the number of commits between backfills.
	every atomic.Int64
	// runs counts the backfills done.
	runs atomic.Int64
	// running is held while a backfill runs; a test holds it to keep the log
	// from being backfilled while it counts frames.
	running sync.Mutex
}

func newBackfiller(path string, pragmas []string) (*backfiller, error) {
	conn, err := openPool(path, pragmas, false)
	if err != nil {
		return nil, err
	}
	conn.SetMaxOpenConns(1)
	conn.SetMaxIdleConns(1)
	conn.SetConnMaxLifetime(0)
	b := &backfiller{conn: conn, wake: make(chan struct{}, 1), done: make(chan struct{})}
	b.every.Store(firstBackfill)
	return b, nil
}

// committed counts a commit of the writer connection and wakes the
// backfiller when enough have passed; the caller holds the writer's turn.
func (b *backfiller) committed() {
	b.commits++
	if b.commits < b.every.Load() {
		return
	}
	b.commits = 0
	select {
	case b.wake <- struct{}{}:
	default: // one is running, or already due
	}
}

// run backfills when woken until closed is closed.
func (b *backfiller) run(closed <-chan struct{}) {
	defer close(b.done)
	for {
		select {
		case <-b.wake:
		case <-closed:
			return
		}
		b.running.Lock()
		var busy, frames, copied int
		err := b.conn.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied)
		if err != nil {
			// The writer's automatic checkpoint is the backstop; a storage
			// fault shows on the writes themselves.
			slog.Warn("sqlite: backfill the write-ahead log", "err", fmt.Sprint(err))
		}
		if err == nil && frames > 0 {
			b.every.Store(min(maxBackfillEvery, max(1, b.every.Load()*backfillFrames/int64(frames))))
		}
		b.runs.Add(1)
		b.running.Unlock()
	}
}

// close waits for run to return (closed must be closed) and closes the
// connection.
func (b *backfiller) close() error {
	<-b.done
	return b.conn.Close()
}
