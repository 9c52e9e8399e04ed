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

// get returns the prepared statement for query, or nil when the cache is
// full or closed (the query then runs on the pool, which says it is closed).
func (c *stmtCache) get(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[query]; ok {
		return st, nil
	}
	if c.m == nil || len(c.m) >= maxCachedStatements {
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
	var res sql.Result
	if err != nil || st == nil {
		res, err = c.db.ExecContext(ctx, query, args...)
	} else {
		res, err = st.ExecContext(ctx, args...)
	}
	return res, storageFault(err)
}

func (c cachedDB) QueryContext(ctx context.Context, query string, args ...any) (*rows, error) {
	st, err := c.cache.get(ctx, query)
	var rs *sql.Rows
	if err != nil || st == nil {
		rs, err = c.db.QueryContext(ctx, query, args...)
	} else {
		rs, err = st.QueryContext(ctx, args...)
	}
	if err != nil {
		return nil, storageFault(err)
	}
	return &rows{Rows: rs}, nil
}

func (c cachedDB) QueryRowContext(ctx context.Context, query string, args ...any) scanner {
	st, err := c.cache.get(ctx, query)
	if err != nil || st == nil {
		return row{c.db.QueryRowContext(ctx, query, args...), nil}
	}
	return row{st.QueryRowContext(ctx, args...), nil}
}
