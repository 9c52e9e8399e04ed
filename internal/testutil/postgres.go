package testutil

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// PostgresURL is the PostgreSQL server the tests use,
// BELAY_TEST_POSTGRES_URL; a test without one is skipped.
func PostgresURL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv("BELAY_TEST_POSTGRES_URL")
	if u == "" {
		tb.Skip("BELAY_TEST_POSTGRES_URL is not set")
	}
	return u
}

// PostgresSchema creates an empty schema on PostgresURL's server for one
// test, dropped when it ends, and returns a URL whose connections use it.
func PostgresSchema(tb testing.TB) string {
	tb.Helper()
	base := PostgresURL(tb)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "belay_test_" + hex.EncodeToString(b)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		tb.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(context.Background(), "CREATE SCHEMA "+schema); err != nil {
		tb.Fatalf("create schema: %v", err)
	}
	tb.Cleanup(func() {
		db, err := sql.Open("pgx", base)
		if err != nil {
			return
		}
		defer db.Close()
		_, _ = db.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
	})
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
