package sqlite

import (
	"database/sql"
	"errors"
	"syscall"

	"github.com/belayhq/belay"
)

// Messages of STORAGE_UNAVAILABLE, written for the person reading them: what
// is wrong with the storage, never a path or an internal detail.
const (
	msgDiskFull   = "the database's disk is full"
	msgReadOnly   = "the database cannot be written: read-only file system"
	msgIOError    = "storage I/O error"
	msgCannotOpen = "the database file cannot be opened"
)

// SQLite's primary result codes of storage faults.
const (
	sqliteReadOnly = 8
	sqliteIOErr    = 10
	sqliteFull     = 13
	sqliteCantOpen = 14
)

// faultError is a storage fault: a STORAGE_UNAVAILABLE *belay.Error for
// callers, with SQLite's or the OS's error kept for logs.
type faultError struct {
	public *belay.Error
	cause  error
}

func (e *faultError) Error() string   { return e.public.Error() + ": " + e.cause.Error() }
func (e *faultError) Unwrap() []error { return []error{e.public, e.cause} }

// storageFault returns err as a STORAGE_UNAVAILABLE error when the storage
// failed (a full disk or SQLITE_FULL, a read-only file system or
// SQLITE_READONLY, an I/O error, a database file that cannot be opened), and
// err unchanged otherwise.
func storageFault(err error) error {
	if err == nil || isFault(err) {
		return err
	}
	msg := faultMessage(err)
	if msg == "" {
		return err
	}
	return &faultError{public: belay.Errorf(belay.CodeStorageUnavailable, "%s", msg), cause: err}
}

func isFault(err error) bool {
	var f *faultError
	return errors.As(err, &f)
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
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EFBIG):
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
