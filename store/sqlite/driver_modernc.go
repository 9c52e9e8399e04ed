//go:build !belay_cgo

package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"

	msqlite "modernc.org/sqlite" // also registers the "sqlite" driver
)

// Driver names the SQLite library this build uses: the pure-Go translation of
// SQLite by default, the C library with the belay_cgo build tag.
const Driver = "modernc.org/sqlite"

// openPool opens a pool of connections to the file at path, each running
// pragmas (in order) when it connects; immediate makes BEGIN take the write
// lock at once. The connections go through the belay-wal VFS (vfs_modernc.go),
// which writes a commit's log frames with one system call.
func openPool(path string, pragmas []string, immediate bool) (*sql.DB, error) {
	if err := registerWALVFS(); err != nil {
		return nil, err
	}
	var dsn strings.Builder
	dsn.WriteString(path + "?vfs=" + walVFSName)
	for _, p := range pragmas {
		dsn.WriteString("&_pragma=" + p)
	}
	if immediate {
		dsn.WriteString("&_txlock=immediate")
	}
	return sql.Open("sqlite", dsn.String())
}

// setHooks registers commit and rollback hooks on a driver connection.
func setHooks(dc any, commit func() int32, rollback func()) error {
	type hooks interface {
		RegisterCommitHook(msqlite.CommitHookFn)
		RegisterRollbackHook(msqlite.RollbackHookFn)
	}
	h, ok := dc.(hooks)
	if !ok {
		return fmt.Errorf("sqlite: driver connection %T has no commit and rollback hooks", dc)
	}
	h.RegisterCommitHook(commit)
	h.RegisterRollbackHook(rollback)
	return nil
}

// resultCode returns SQLite's primary result code of err, when err is an
// SQLite error.
func resultCode(err error) (int, bool) {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return 0, false
	}
	// Extended codes (SQLITE_IOERR_WRITE, SQLITE_READONLY_DBMOVED…) carry
	// their primary code in the low byte.
	return se.Code() & 0xff, true
}
