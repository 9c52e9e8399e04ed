//go:build belay_cgo

package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// Driver names the SQLite library this build uses: the C library through cgo
// with the belay_cgo build tag (and sqlite_fts5, which search needs), the
// pure-Go translation otherwise.
const Driver = "github.com/mattn/go-sqlite3"

// connector opens connections of the C driver and runs the pragmas on each.
type connector struct {
	dsn     string
	pragmas []string
	driver  *sqlite3.SQLiteDriver
}

func (c connector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.driver.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	for _, p := range c.pragmas {
		if _, err := conn.(*sqlite3.SQLiteConn).Exec("PRAGMA "+p, nil); err != nil {
			conn.Close()
			return nil, fmt.Errorf("PRAGMA %s: %w", p, err)
		}
	}
	return conn, nil
}

func (c connector) Driver() driver.Driver { return c.driver }

// openPool opens a pool of connections to the file at path, each running
// pragmas (in order) when it connects; immediate makes BEGIN take the write
// lock at once.
func openPool(path string, pragmas []string, immediate bool) (*sql.DB, error) {
	dsn := "file:" + path
	if immediate {
		dsn += "?_txlock=immediate"
	}
	return sql.OpenDB(connector{dsn: dsn, pragmas: pragmas, driver: &sqlite3.SQLiteDriver{}}), nil
}

// setHooks registers commit and rollback hooks on a driver connection.
func setHooks(dc any, commit func() int32, rollback func()) error {
	c, ok := dc.(*sqlite3.SQLiteConn)
	if !ok {
		return fmt.Errorf("sqlite: driver connection %T has no commit and rollback hooks", dc)
	}
	c.RegisterCommitHook(func() int { return int(commit()) })
	c.RegisterRollbackHook(rollback)
	return nil
}

// resultCode returns SQLite's primary result code of err, when err is an
// SQLite error.
func resultCode(err error) (int, bool) {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return 0, false
	}
	return int(se.Code), true
}
