package postgres

import (
	"context"
	"database/sql"
)

// QueryRow lets tests look at the server's own views (pg_stat_activity).
func (d *DB) QueryRow(ctx context.Context, query string, args ...any) *sql.Row {
	return d.db.QueryRowContext(ctx, query, args...)
}

// Migrations are the embedded schema migrations, for tests that start from
// an older schema.
var Migrations = migrations

// MaxOpenConns is the pool's limit.
func (d *DB) MaxOpenConns() int { return d.db.Stats().MaxOpenConnections }
