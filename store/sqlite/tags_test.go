package sqlite

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// TestTagsMigration: tags saved before 00014 still find their checkpoints,
// and deleting a checkpoint, then its session, deletes their tags, which no
// foreign key cascades to since 00014.
func TestTagsMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	raw, _ := migratedTo(t, path, 13)
	for _, q := range []string{
		`INSERT INTO sessions (id, status, created_at, updated_at) VALUES ('s1', 'running', 1, 1)`,
		`INSERT INTO checkpoints (id, session_id, seq, type, trigger_kind, summary, checksum, tags, created_at)
			VALUES ('a', 's1', 1, 'manual', 'user_request', 'first', 'x', '["db","auth"]', 5)`,
		`INSERT INTO checkpoints (id, session_id, seq, type, trigger_kind, summary, checksum, tags, created_at)
			VALUES ('b', 's1', 2, 'manual', 'user_request', 'second', 'x', '["db"]', 6)`,
		`INSERT INTO checkpoint_tags (checkpoint_id, tag) VALUES ('a', 'db'), ('a', 'auth'), ('b', 'db')`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db := mustOpen(t, path)
	defer db.Close()
	tagged := func(tag string) []string {
		t.Helper()
		items, _, _, err := db.ListCheckpoints(t.Context(), store.CheckpointQuery{Scope: store.Everything, Tags: []string{tag}, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range items {
			ids = append(ids, c.ID)
		}
		return ids
	}
	if got := tagged("db"); len(got) != 2 {
		t.Errorf("tagged db after the migration: %v, want a and b", got)
	}
	rowsLeft := func() int {
		t.Helper()
		var n int
		if err := raw.QueryRow(`SELECT COUNT(*) FROM checkpoint_tags`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := db.Update(t.Context(), func(tx store.Tx) error { return tx.DeleteCheckpoint(t.Context(), "a") }); err != nil {
		t.Fatal(err)
	}
	if got := tagged("db"); len(got) != 1 || got[0] != "b" {
		t.Errorf("tagged db after deleting a: %v, want b", got)
	}
	if n := rowsLeft(); n != 1 {
		t.Errorf("%d tag rows after deleting a, want b's one", n)
	}
	if err := db.Update(t.Context(), func(tx store.Tx) error { return tx.DeleteSession(t.Context(), "s1") }); err != nil {
		t.Fatal(err)
	}
	if n := rowsLeft(); n != 0 {
		t.Errorf("%d tag rows after deleting the session, want none", n)
	}
}

// TestTagsByDateMigration: tags saved before 00021 take their checkpoints'
// created_at, so lists by tag come in the lists' order (created_at, then id),
// both ways and across pages, with their count; and deleting a checkpoint
// still deletes its tags.
func TestTagsByDateMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	raw, p := migratedTo(t, path, 20)
	schema := func() string {
		t.Helper()
		var sql string
		if err := raw.QueryRow(`SELECT group_concat(sql, ';') FROM (SELECT sql FROM sqlite_master
			WHERE tbl_name = 'checkpoint_tags' OR name = 'checkpoints_tags_delete' ORDER BY name)`).Scan(&sql); err != nil {
			t.Fatal(err)
		}
		return sql
	}
	before := schema()
	for _, q := range []string{
		`INSERT INTO sessions (id, status, created_at, updated_at) VALUES ('s1', 'running', 1, 1)`,
		`INSERT INTO checkpoints (id, session_id, seq, type, trigger_kind, summary, checksum, tags, created_at)
			VALUES ('c', 's1', 1, 'manual', 'user_request', 'first', 'x', '["db","auth"]', 5)`,
		`INSERT INTO checkpoints (id, session_id, seq, type, trigger_kind, summary, checksum, tags, created_at)
			VALUES ('a', 's1', 2, 'manual', 'user_request', 'second', 'x', '["db","auth"]', 7)`,
		`INSERT INTO checkpoints (id, session_id, seq, type, trigger_kind, summary, checksum, tags, created_at)
			VALUES ('b', 's1', 3, 'manual', 'user_request', 'third', 'x', '["db"]', 7)`,
		`INSERT INTO checkpoint_tags (checkpoint_id, tag) VALUES ('c', 'db'), ('c', 'auth'), ('a', 'db'), ('a', 'auth'), ('b', 'db')`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db := mustOpen(t, path)
	defer db.Close()
	list := func(q store.CheckpointQuery) ([]string, int64) {
		t.Helper()
		q.Scope = store.Everything
		items, total, _, err := db.ListCheckpoints(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range items {
			ids = append(ids, c.ID)
		}
		return ids, total
	}
	for _, c := range []struct {
		q     store.CheckpointQuery
		want  string
		total int64
	}{
		{store.CheckpointQuery{Tags: []string{"db"}, Limit: 10}, "c a b", 3},
		{store.CheckpointQuery{Tags: []string{"db"}, Limit: 10, Desc: true}, "b a c", 3},
		{store.CheckpointQuery{Tags: []string{"db"}, Limit: 10, After: &store.CheckpointKey{CreatedAt: fromTS(7), ID: "a"}}, "b", 3},
		{store.CheckpointQuery{Tags: []string{"db"}, Limit: 10, Desc: true, After: &store.CheckpointKey{CreatedAt: fromTS(7), ID: "a"}}, "c", 3},
		{store.CheckpointQuery{Tags: []string{"db", "auth"}, Limit: 1}, "c", 2},
		{store.CheckpointQuery{Tags: []string{"auth", "db"}, Limit: 10, Offset: 1}, "a", 2},
		{store.CheckpointQuery{Tags: []string{"db"}, Limit: 10, Type: belay.TypeManual, SessionID: "s1"}, "c a b", 3},
	} {
		if got, total := list(c.q); strings.Join(got, " ") != c.want || total != c.total {
			t.Errorf("%+v: %v of %d, want %s of %d", c.q, got, total, c.want, c.total)
		}
	}
	if err := db.Update(t.Context(), func(tx store.Tx) error { return tx.DeleteCheckpoint(t.Context(), "a") }); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := raw.QueryRow(`SELECT COUNT(*) FROM checkpoint_tags`).Scan(&left); err != nil || left != 3 {
		t.Errorf("%d tag rows after deleting a (%v), want the other two checkpoints' 3", left, err)
	}
	if got, total := list(store.CheckpointQuery{Tags: []string{"db", "auth"}, Limit: 10}); strings.Join(got, " ") != "c" || total != 1 {
		t.Errorf("tagged db and auth after deleting a: %v of %d, want c of 1", got, total)
	}

	// Down gives back version 20's table and trigger, with the rows.
	db.Close()
	if _, err := p.DownTo(t.Context(), 20); err != nil {
		t.Fatal(err)
	}
	if after := schema(); after != before {
		t.Errorf("schema after down:\n%s\nwant:\n%s", after, before)
	}
	if err := raw.QueryRow(`SELECT COUNT(*) FROM checkpoint_tags`).Scan(&left); err != nil || left != 3 {
		t.Errorf("%d tag rows after down (%v), want 3", left, err)
	}
}
