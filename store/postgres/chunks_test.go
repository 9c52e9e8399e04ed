package postgres_test

import (
	"database/sql"
	"testing"

	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store/postgres"
	"github.com/belayhq/belay/store/storetest"
)

func TestDamagedChunk(t *testing.T) {
	url := testutil.PostgresSchema(t)
	db, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storetest.RunDamagedChunk(t, db, func(t *testing.T) {
		other, err := sql.Open("pgx", url)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if _, err := other.ExecContext(t.Context(), `UPDATE state_chunks
			SET data = set_byte(data, length(data) / 2, get_byte(data, length(data) / 2) # 255)`); err != nil {
			t.Fatal(err)
		}
	})
}
