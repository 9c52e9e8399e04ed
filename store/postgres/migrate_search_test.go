package postgres_test

import (
	"database/sql"
	"io/fs"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/postgres"
)

// TestSearchMigrationIndexesExisting: checkpoints saved before search
// existed are indexed by text and queued for vectors when the database is
// next opened, and their UpdatedAt is their decision's time.
func TestSearchMigrationIndexesExisting(t *testing.T) {
	url := testutil.PostgresSchema(t)
	raw, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := fs.Sub(postgres.Migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, raw, sub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(t.Context(), 7); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO sessions (id, status, created_at, updated_at) VALUES ('s1', 'running', 1, 1)`,
		`INSERT INTO checkpoints (id, session_id, seq, type, trigger_kind, summary, description, checksum, tags, created_at, decided_at)
			VALUES ('old', 's1', 1, 'manual', 'user_request', 'legacy migration', 'from before search', 'x', '["tagged"]', 5, 9)`,
	} {
		if _, err := raw.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	db, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, text := range []string{"legacy", "before", "tagged"} {
		hits, err := db.SearchCheckpoints(t.Context(), store.SearchQuery{Scope: store.Everything, Text: text, Limit: 5})
		if err != nil || len(hits) != 1 || hits[0].CheckpointID != "old" {
			t.Errorf("search %q after the migration: %v, %v", text, hits, err)
		}
	}
	jobs, err := db.DueEmbeddings(t.Context(), time.Unix(0, 0), 5)
	if err != nil || len(jobs) != 1 || jobs[0].Checkpoint.ID != "old" {
		t.Fatalf("queued after the migration: %v, %v", jobs, err)
	}
	if got := jobs[0].Checkpoint.UpdatedAt; !got.Equal(time.Unix(0, 9)) {
		t.Errorf("UpdatedAt after the migration = %v, want the decision's time", got)
	}
}
