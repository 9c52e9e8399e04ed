package postgres_test

import (
	"testing"

	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/postgres"
	"github.com/belayhq/belay/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		db, err := postgres.Open(t.Context(), testutil.PostgresSchema(t))
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}
