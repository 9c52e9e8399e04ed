package sqlite

import (
	"database/sql"
	"time"
)

// backfillCommits is how many commits of the writer connection wake the
// backfiller: about 800 log frames of saves (13 each) alone, more in batches.
const backfillCommits = 64

// backfiller copies the write-ahead log into the database file on a
// connection of its own (a PASSIVE WAL checkpoint), so that most of the copy
// runs beside the writer instead of inside the commit that crosses the
// writer's wal_autocheckpoint. That commit still checkpoints, the frames
// appended since the backfiller's last copy, which lets the log start over
// from its beginning; SQLite allows one checkpoint at a time, and a
// backfiller that finds the writer's (or another process's) running gives up
// until the next wake-up.
//
// Its copy waits for no lock the writer or the readers hold, and changes
// nothing they see. An error (a checkpoint busy, a failing disk) is not
// reported: the frames stay in the log, which every reader consults, for the
// next copy, and a failing disk fails the writer's own writes and syncs.
type backfiller struct {
	conn *sql.DB
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	// commits counts the writer connection's commits; only the holder of
	// the writer's turn touches it.
	commits uint64
}

func newBackfiller(conn *sql.DB) *backfiller {
	conn.SetMaxOpenConns(1)
	conn.SetMaxIdleConns(1)
	conn.SetConnMaxLifetime(0)
	b := &backfiller{conn: conn, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

// committed counts a commit of the writer connection and wakes the
// backfiller every backfillCommits of them.
func (b *backfiller) committed() {
	b.commits++
	if b.commits%backfillCommits != 0 {
		return
	}
	select {
	case b.kick <- struct{}{}:
	default: // a copy is already due
	}
}

// run copies on each wake-up, then rests as long as the copy took (and
// forgets the wake-ups meanwhile), so that it holds SQLite's one checkpoint
// lock at most half the time: on a busy machine a copy can outlast 64
// commits, and a backfiller copying back to back would keep the writer's own
// checkpoint, the one that lets the log start over, from ever running.
func (b *backfiller) run() {
	defer close(b.done)
	for {
		select {
		case <-b.stop:
			return
		case <-b.kick:
		}
		start := time.Now()
		b.conn.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
		select {
		case <-b.stop:
			return
		case <-time.After(time.Since(start)):
		}
		select {
		case <-b.kick:
		default:
		}
	}
}

// close stops the backfiller, after the copy it is running, and closes its
// connection.
func (b *backfiller) close() error {
	close(b.stop)
	<-b.done
	return b.conn.Close()
}
