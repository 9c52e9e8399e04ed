package sqlite

import (
	"database/sql"
	"errors"
	"syscall"

	"github.com/belayhq/belay/store"
)

// Messages of STORAGE_UNAVAILABLE, written for the person reading them: what
// is wrong with the storage, never a path or an internal detail.
const (
	msgDiskFull   = "the database's disk is full"
	msgReadOnly   = "the database cannot be written: read-only file system"
	msgIOError    = "storage I/O error"
	msgCannotOpen = "the database file cannot be opened"
	// msgSyncFailed is every write's error after a sync of the write-ahead
	// log failed (see walSync).
	msgSyncFailed = "a write to the database's disk failed and recent writes may be lost; restart belay once the disk is healthy"
)

// SQLite's primary result codes of storage faults.
const (
	sqliteReadOnly = 8
	sqliteIOErr    = 10
	sqliteFull     = 13
	sqliteCantOpen = 14
)

// storageFault returns err as a STORAGE_UNAVAILABLE error when the storage
// failed (a full disk or SQLITE_FULL, a read-only file system or
// SQLITE_READONLY, an I/O error, a database file that cannot be opened), and
// err unchanged otherwise.
func storageFault(err error) error {
	if err == nil || store.IsFault(err) {
		return err
	}
	msg := faultMessage(err)
	if msg == "" {
		return err
	}
	return store.Fault(msg, err)
}

func faultMessage(err error) string {
	if code, ok := resultCode(err); ok {
		switch code {
		case sqliteFull:
			return msgDiskFull
		case sqliteReadOnly:
			return msgReadOnly
		case sqliteIOErr:
			return msgIOError
		case sqliteCantOpen:
			return msgCannotOpen
		}
		return ""
	}
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EFBIG):
		return msgDiskFull
	case errors.Is(err, syscall.EROFS):
		return msgReadOnly
	case errors.Is(err, syscall.EIO):
		return msgIOError
	}
	return ""
}

// row is a result row whose Scan reports storage faults as such; on the
// writer connection (db set) it also notes them for the batch.
type row struct {
	*sql.Row
	db *DB
}

func (r row) Scan(dest ...any) error { return r.db.noteFault(r.Row.Scan(dest...)) }

// rows are result rows whose Err reports storage faults as such; on the
// writer connection (db set) it also notes them for the batch.
type rows struct {
	*sql.Rows
	db *DB
}

func (r *rows) Err() error { return r.db.noteFault(r.Rows.Err()) }
