package sqlite

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/belayhq/belay"
)

// A database migrated by a newer belay is refused, naming both versions.
func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	raw, err := openPool(path, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	var known int64
	if err := raw.QueryRow(`SELECT max(version_id) FROM goose_db_version`).Scan(&known); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, 1)`, known+1); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	_, err = Open(t.Context(), path)
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
