package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/belayhq/belay/store/storetest"
)

func TestDamagedChunk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	db := mustOpen(t, path)
	defer db.Close()
	storetest.RunDamagedChunk(t, db, func(t *testing.T) {
		other, err := openPool(path, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if _, err := other.ExecContext(t.Context(), `UPDATE state_chunks SET data = zeroblob(size)`); err != nil {
			t.Fatal(err)
		}
	})
}
