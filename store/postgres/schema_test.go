package postgres_test

import (
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store/postgres"
)

// A database migrated by a newer belay is refused, naming both versions.
func TestOpenRefusesNewerSchema(t *testing.T) {
	u := testutil.PostgresSchema(t)
	db, err := postgres.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	raw, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var known int64
	if err := raw.QueryRow(`SELECT max(version_id) FROM goose_db_version`).Scan(&known); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, known+1); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.Open(t.Context(), u)
	var be *belay.Error
	if !errors.As(err, &be) || be.Code != belay.CodeSchemaTooNew {
		t.Fatalf("Open of a newer schema = %v, want %s", err, belay.CodeSchemaTooNew)
	}
	for _, v := range []string{"version " + strconv.FormatInt(known+1, 10), "version " + strconv.FormatInt(known, 10)} {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("error %q does not name %s", err, v)
		}
	}
}

// A statement timeout shorter than the migrations take holds for belay's
// queries, not for the migrations.
func TestMigrationsOutlastTheStatementTimeout(t *testing.T) {
	u := testutil.PostgresSchema(t)
	db, err := postgres.Open(t.Context(), u+"&statement_timeout=1ms")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The setting holds for this query too: on a loaded machine even SHOW
	// may take longer than 1 ms, and is cancelled; ask again.
	var setting string
	var showErr error
	for range 100 {
		if showErr = db.QueryRow(t.Context(), "SHOW statement_timeout").Scan(&setting); showErr == nil || !strings.Contains(showErr.Error(), "57014") {
			break
		}
	}
	if showErr != nil || setting != "1ms" {
		t.Errorf("statement_timeout = %q, %v; want 1ms", setting, showErr)
	}
}

// The URL sets the pool's size and the server's statement timeout.
func TestOpenPoolAndStatementTimeout(t *testing.T) {
	u := testutil.PostgresSchema(t)
	db, err := postgres.Open(t.Context(), u+"&pool_max_conns=3&pool_max_idle_conns=2&pool_max_conn_lifetime=10m&statement_timeout=200ms")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := db.MaxOpenConns(); n != 3 {
		t.Errorf("pool limit = %d, want 3", n)
	}
	var setting string
	if err := db.QueryRow(t.Context(), "SHOW statement_timeout").Scan(&setting); err != nil || setting != "200ms" {
		t.Errorf("statement_timeout = %q, %v; want 200ms", setting, err)
	}
	var x any
	if err := db.QueryRow(t.Context(), "SELECT pg_sleep(2)").Scan(&x); err == nil || !strings.Contains(err.Error(), "statement timeout") {
		t.Errorf("a 2s statement under a 200ms timeout: %v, want a statement timeout", err)
	}
	if d, err := postgres.Open(t.Context(), u); err != nil {
		t.Fatal(err)
	} else {
		if n := d.MaxOpenConns(); n != postgres.DefaultMaxConns {
			t.Errorf("default pool limit = %d, want %d", n, postgres.DefaultMaxConns)
		}
		d.Close()
	}
	for _, bad := range []string{"pool_max_conns=x", "pool_max_conns=1", "pool_max_idle_conns=-1", "pool_max_conn_lifetime=soon"} {
		_, err := postgres.Open(t.Context(), u+"&"+bad)
		var be *belay.Error
		if !errors.As(err, &be) || be.Code != belay.CodeValidation {
			t.Errorf("Open with %s = %v, want %s", bad, err, belay.CodeValidation)
		}
	}
}
