package postgres

import (
	"context"
)

// Size returns the bytes of belay's tables in the current schema, with
// their indexes and out-of-line (TOAST) storage: what the database keeps
// for belay, dead rows not yet vacuumed included.
func (d *DB) Size(ctx context.Context) (int64, error) {
	var n int64
	err := d.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint
		FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
		WHERE ns.nspname = current_schema() AND c.relkind = 'r'`).Scan(&n)
	if err != nil {
		return 0, storageError("size", err)
	}
	return n, nil
}
