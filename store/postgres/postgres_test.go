package postgres_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/postgres"
	"github.com/belayhq/belay/store/storetest"
)

// testURL is the server the tests use; they skip without one.
func testURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("BELAY_TEST_POSTGRES_URL")
	if u == "" {
		t.Skip("BELAY_TEST_POSTGRES_URL is not set")
	}
	return u
}

// freshSchema creates an empty schema for one test, dropped when it ends,
// and returns a URL whose connections use it.
func freshSchema(t *testing.T) string {
	t.Helper()
	base := testURL(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "belay_test_" + hex.EncodeToString(b)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(t.Context(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", base)
		if err != nil {
			return
		}
		defer db.Close()
		_, _ = db.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		db, err := postgres.Open(t.Context(), freshSchema(t))
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}
