package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/belayhq/belay/store"
)

// Messages of STORAGE_UNAVAILABLE, written for the person reading them: what
// is wrong with the database, never its address or an internal detail.
const (
	msgDiskFull    = "the database's disk is full"
	msgReadOnly    = "the database cannot be written: it is read-only (a standby, or default_transaction_read_only)"
	msgIOError     = "the database server reported an I/O error"
	msgUnreachable = "the database server cannot be reached"
	msgOverloaded  = "the database server is out of resources (memory or connections)"
	msgShutdown    = "the database server is shutting down or starting up"
	msgTimeout     = "the database did not answer within its statement timeout"
)

// storageFault returns err as a STORAGE_UNAVAILABLE error when the database
// failed the request rather than refusing it (a full disk, a read-only
// server, an I/O error, a lost or refused connection, exhausted resources, a
// shutdown, a statement timeout), and err unchanged otherwise.
func storageFault(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if store.IsFault(err) {
		return err
	}
	msg := faultMessage(err)
	if msg == "" {
		return err
	}
	return store.Fault(msg, err)
}

func faultMessage(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "53100": // disk_full
			return msgDiskFull
		case pe.Code == "25006": // read_only_sql_transaction
			return msgReadOnly
		case pe.Code == "58030", pe.Code == "58000": // io_error, system_error
			return msgIOError
		case pe.Code == "53200", pe.Code == "53300", pe.Code == "53400": // out of memory, too many connections, configuration limit
			return msgOverloaded
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // admin or crash shutdown, cannot connect now
			return msgShutdown
		case pe.Code == "57014" && pe.Message == "canceling statement due to statement timeout":
			return msgTimeout
		case pe.Code[:2] == "08": // connection exception
			return msgUnreachable
		}
		return ""
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, driver.ErrBadConn),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), pgconn.SafeToRetry(err):
		return msgUnreachable
	}
	return ""
}

// row is what rebinder's QueryRowContext returns: *sql.Row's behaviour with
// storage faults reported as such.
type row struct{ r *sql.Row }

// Scan is sql.Row's Scan; sql.ErrNoRows is returned as it is.
func (r row) Scan(dest ...any) error { return storageFault(r.r.Scan(dest...)) }

// Err is sql.Row's Err.
func (r row) Err() error { return storageFault(r.r.Err()) }
