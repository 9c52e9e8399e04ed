package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// maxCachedStatements bounds the statement cache: list queries are built from
// filters, so their texts vary, but only over a few hundred combinations.
const maxCachedStatements = 512

// stmtCache keeps prepared statements per query text, so the hot paths do not
// parse SQL on every call (a large share of a small transaction's cost).
type stmtCache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: map[string]*sql.Stmt{}}
}

// get returns the prepared statement for query, or nil when the cache is full.
func (c *stmtCache) get(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[query]; ok {
		return st, nil
	}
	if len(c.m) >= maxCachedStatements {
		return nil, nil
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.m[query] = st
	return st, nil
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = nil
}

// cachedDB runs queries on a pool through the cache.
type cachedDB struct {
	db    *sql.DB
	cache *stmtCache
}

func (c cachedDB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := c.cache.get(ctx, query)
	if err != nil || st == nil {
		return c.db.ExecContext(ctx, query, args...)
	}
	return st.ExecContext(ctx, args...)
}

func (c cachedDB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := c.cache.get(ctx, query)
	if err != nil || st == nil {
		return c.db.QueryContext(ctx, query, args...)
	}
	return st.QueryContext(ctx, args...)
}

func (c cachedDB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := c.cache.get(ctx, query)
	if err != nil || st == nil {
		return c.db.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}
