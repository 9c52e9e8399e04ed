package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// FuzzFTSQuery: whatever a person types, the full-text query built from it
// is valid FTS5 and made of quoted phrases only.
func FuzzFTSQuery(f *testing.F) {
	for _, s := range []string{`OC-41252`, `"`, `AND (`, `a OR b`, `NEAR(a b)`, `x*`, `col:x`, `^a`, `{a b}: c`,
		`"" ""`, "\x00", `🚀 über`, `a-b-c d_e`, `''`, `\"`, `(((`, `+-*/`} {
		f.Add(s)
	}
	db := mustOpen(f, filepath.Join(f.TempDir(), "belay.db"))
	f.Cleanup(func() { db.Close() })
	f.Fuzz(func(t *testing.T, text string) {
		q := ftsQuery(text)
		if q == "" {
			return
		}
		// "p1" OR "p2" splits at the quotes into "", p1, " OR ", p2, "".
		parts := strings.Split(q, `"`)
		for i, p := range parts {
			switch {
			case i == 0 || i == len(parts)-1:
				if p != "" || len(parts)%2 == 0 {
					t.Fatalf("ftsQuery(%q) = %q: not quoted phrases", text, q)
				}
			case i%2 == 1 && strings.TrimSpace(p) == "", i%2 == 0 && p != " OR ":
				t.Fatalf("ftsQuery(%q) = %q: %q is neither a phrase nor OR", text, q, p)
			}
		}
		var n int
		if err := db.read.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM checkpoint_fts WHERE checkpoint_fts MATCH ?`, q).Scan(&n); err != nil {
			t.Fatalf("ftsQuery(%q) = %q: %v", text, q, err)
		}
	})
}

// TestVectorsFromAnotherHandle: the in-memory vectors of one handle follow
// what another handle (another process) writes, replaces and deletes.
func TestVectorsFromAnotherHandle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	writer, reader := mustOpen(t, path), mustOpen(t, path)
	defer writer.Close()
	defer reader.Close()
	ctx := t.Context()
	sess := &belay.Session{ID: "s1", ProjectPath: "/p", Owner: "alice", Status: belay.SessionRunning}
	var ids []string
	err := writer.Update(ctx, func(tx store.Tx) error {
		if err := tx.InsertSession(ctx, sess); err != nil {
			return err
		}
		for i, s := range []string{"a", "b", "c"} {
			c := &belay.Checkpoint{ID: "cp-" + s, SessionID: "s1", Seq: int64(i + 1), Type: belay.TypeManual,
				Trigger: belay.TriggerUserRequest, Summary: s, ProjectPath: "/p", Checksum: "x"}
			if err := tx.InsertCheckpoint(ctx, c); err != nil {
				return err
			}
			ids = append(ids, c.ID)
		}
		_, err := tx.QueueEmbeddings(ctx, store.IndexModel{Model: "m", Dimensions: 2}, false, sess.CreatedAt)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	put := func(id string, v []float32) {
		t.Helper()
		if err := writer.Update(ctx, func(tx store.Tx) error { return tx.PutEmbedding(ctx, id, store.Embedding{Model: "m", Vector: v}) }); err != nil {
			t.Fatal(err)
		}
	}
	found := func() []string {
		t.Helper()
		hits, err := reader.SearchCheckpoints(ctx, store.SearchQuery{Scope: store.Everything, Vector: []float32{1, 0}, Model: "m", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, len(hits))
		for _, h := range hits {
			out[h.VectorRank-1] = h.CheckpointID
		}
		return out
	}
	put(ids[0], []float32{1, 0})
	put(ids[1], []float32{0.6, 0.8})
	if got := found(); strings.Join(got, ",") != "cp-a,cp-b" {
		t.Fatalf("found %v, want cp-a,cp-b", got)
	}
	put(ids[2], []float32{0.8, 0.6})
	put(ids[0], []float32{0, 1})
	if got := found(); strings.Join(got, ",") != "cp-c,cp-b" {
		t.Fatalf("after a write and a replacement: found %v, want cp-c,cp-b", got)
	}
	if err := writer.Update(ctx, func(tx store.Tx) error { return tx.DeleteCheckpoint(ctx, "cp-c") }); err != nil {
		t.Fatal(err)
	}
	if got := found(); strings.Join(got, ",") != "cp-b" {
		t.Fatalf("after a deletion: found %v, want cp-b", got)
	}
}

// TestSearchMigrationIndexesExisting: checkpoints saved before search
// existed are indexed by text and queued for vectors by the migration.
func TestSearchMigrationIndexesExisting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	raw, _ := migratedTo(t, path, 7)
	for _, q := range []string{
		`INSERT INTO sessions (id, status, created_at, updated_at) VALUES ('s1', 'running', 1, 1)`,
		`INSERT INTO checkpoints (id, session_id, seq, type, trigger_kind, summary, description, checksum, tags, created_at, decided_at)
			VALUES ('old', 's1', 1, 'manual', 'user_request', 'legacy migration', 'from before search', 'x', '["tagged"]', 5, 9)`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	db := mustOpen(t, path)
	defer db.Close()
	for _, text := range []string{"legacy", "before", "tagged"} {
		hits, err := db.SearchCheckpoints(t.Context(), store.SearchQuery{Scope: store.Everything, Text: text, Limit: 5})
		if err != nil || len(hits) != 1 || hits[0].CheckpointID != "old" {
			t.Errorf("search %q after the migration: %v, %v", text, hits, err)
		}
	}
	jobs, err := db.DueEmbeddings(t.Context(), fromTS(0), 5)
	if err != nil || len(jobs) != 1 || jobs[0].Checkpoint.ID != "old" {
		t.Errorf("queued after the migration: %v, %v", jobs, err)
	}
	if got := jobs[0].Checkpoint.UpdatedAt; !got.Equal(fromTS(9)) {
		t.Errorf("UpdatedAt after the migration = %v, want the decision's time", got)
	}
}

// TestSearchIndexesPendingFirst: a saved checkpoint waits for its entry in
// the full-text index; a search (on the database or in a transaction, which sees
// its own saves) writes every entry waiting first. A checkpoint deleted while
// it waits, or after it was indexed, is found no more.
func TestSearchIndexesPendingFirst(t *testing.T) {
	ctx := t.Context()
	db := mustOpen(t, filepath.Join(t.TempDir(), "belay.db"))
	defer db.Close()
	sess := testSession(1)
	checkpoint := func(n int, summary string) *belay.Checkpoint {
		return &belay.Checkpoint{ID: fmt.Sprintf("0190c2a0-0000-7000-8000-%012d", 100+n), SessionID: sess.ID, Seq: int64(n),
			Type: belay.TypeManual, Trigger: belay.TriggerUserRequest, Summary: summary, Tags: []string{"t" + summary[:1]},
			Checksum: "x", CreatedAt: fromTS(int64(n))}
	}
	alpha, beta, gamma, delta := checkpoint(1, "alpha deploy"), checkpoint(2, "beta deploy"), checkpoint(3, "gamma"), checkpoint(4, "delta deploy")
	err := db.Update(ctx, func(stx store.Tx) error {
		if err := stx.InsertSession(ctx, sess); err != nil {
			return err
		}
		for _, c := range []*belay.Checkpoint{alpha, beta, gamma} {
			if err := stx.InsertCheckpoint(ctx, c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pending := func() (n int) {
		t.Helper()
		if err := db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM checkpoints
			WHERE doc_id > (SELECT indexed_through FROM search_state WHERE id = 1)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := pending(); n != 3 {
		t.Errorf("%d checkpoints wait for the full-text index after three saves, want 3", n)
	}
	if err := db.Update(ctx, func(stx store.Tx) error { return stx.DeleteCheckpoint(ctx, beta.ID) }); err != nil {
		t.Fatalf("delete a waiting checkpoint: %v", err)
	}
	search := func(s interface {
		SearchCheckpoints(context.Context, store.SearchQuery) ([]store.SearchHit, error)
	}, text string) []string {
		t.Helper()
		hits, err := s.SearchCheckpoints(ctx, store.SearchQuery{Scope: store.Everything, Text: text, Limit: 10})
		if err != nil {
			t.Fatalf("search %q: %v", text, err)
		}
		var ids []string
		for _, h := range hits {
			ids = append(ids, h.CheckpointID)
		}
		slices.Sort(ids)
		return ids
	}
	if got := search(db, "deploy"); !slices.Equal(got, []string{alpha.ID}) {
		t.Errorf("search deploy = %v, want only alpha", got)
	}
	if got := search(db, "tg"); !slices.Equal(got, []string{gamma.ID}) {
		t.Errorf("search of gamma's tag = %v, want gamma", got)
	}
	if n := pending(); n != 0 {
		t.Errorf("%d checkpoints still wait after a search", n)
	}
	err = db.Update(ctx, func(stx store.Tx) error {
		if err := stx.InsertCheckpoint(ctx, delta); err != nil {
			return err
		}
		if got := search(stx, "deploy"); !slices.Equal(got, []string{alpha.ID, delta.ID}) {
			t.Errorf("search deploy in the transaction that saved delta = %v, want alpha and delta", got)
		}
		return stx.DeleteCheckpoint(ctx, alpha.ID)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := search(db, "deploy"); !slices.Equal(got, []string{delta.ID}) {
		t.Errorf("search deploy after deleting alpha = %v, want only delta", got)
	}
	// The highest doc_id, indexed, is deleted: the next save still waits
	// for its entry and is found, the deleted one is not.
	epsilon := checkpoint(5, "epsilon deploy")
	err = db.Update(ctx, func(stx store.Tx) error {
		if err := stx.DeleteCheckpoint(ctx, delta.ID); err != nil {
			return err
		}
		return stx.InsertCheckpoint(ctx, epsilon)
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := pending(); n != 1 {
		t.Errorf("%d checkpoints wait after a save that followed deleting the newest indexed one, want 1", n)
	}
	if got := search(db, "deploy"); !slices.Equal(got, []string{epsilon.ID}) {
		t.Errorf("search deploy after deleting delta and saving epsilon = %v, want only epsilon", got)
	}
}

// TestSavesQueueWithoutRows: a save writes no queue row, yet its checkpoint
// waits for its vector as if queued when saved; a claim writes the rows,
// and a save after the newest claimed checkpoint was deleted waits too.
func TestSavesQueueWithoutRows(t *testing.T) {
	ctx := t.Context()
	db := mustOpen(t, filepath.Join(t.TempDir(), "belay.db"))
	defer db.Close()
	sess := testSession(1)
	checkpoint := func(n int) *belay.Checkpoint {
		return &belay.Checkpoint{ID: fmt.Sprintf("0190c2a0-0000-7000-8000-%012d", 100+n), SessionID: sess.ID, Seq: int64(n),
			Type: belay.TypeManual, Trigger: belay.TriggerUserRequest, Summary: fmt.Sprint("step ", n), Checksum: "x",
			CreatedAt: fromTS(int64(n))}
	}
	save := func(first func(stx store.Tx) error, cps ...*belay.Checkpoint) {
		t.Helper()
		err := db.Update(ctx, func(stx store.Tx) error {
			if err := first(stx); err != nil {
				return err
			}
			for _, c := range cps {
				if err := stx.InsertCheckpoint(ctx, c); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	rows := func() (n int) {
		t.Helper()
		if err := db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM embedding_queue`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	due := func() (ids []string) {
		t.Helper()
		jobs, err := db.DueEmbeddings(ctx, fromTS(100), 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			ids = append(ids, j.Checkpoint.ID)
		}
		return ids
	}
	a, b, c := checkpoint(1), checkpoint(2), checkpoint(3)
	save(func(stx store.Tx) error { return stx.InsertSession(ctx, sess) }, a, b)
	if n := rows(); n != 0 {
		t.Errorf("%d queue rows after two saves, want none", n)
	}
	if got := due(); !slices.Equal(got, []string{a.ID, b.ID}) {
		t.Errorf("due after two saves = %v, want both", got)
	}
	if st, err := db.SearchIndex(ctx); err != nil || st.Queued != 2 {
		t.Errorf("SearchIndex after two saves = %+v, %v; want 2 queued", st, err)
	}
	var claimed []store.EmbeddingJob
	err := db.Update(ctx, func(stx store.Tx) (err error) {
		claimed, err = stx.ClaimEmbeddings(ctx, fromTS(100), fromTS(200), 10)
		return err
	})
	if err != nil || len(claimed) != 2 || claimed[0].Checkpoint.ID != a.ID {
		t.Fatalf("claim = %v, %v; want a and b", claimed, err)
	}
	if n := rows(); n != 2 {
		t.Errorf("%d queue rows after the claim, want 2", n)
	}
	if got := due(); len(got) != 0 {
		t.Errorf("due while claimed = %v, want none", got)
	}
	save(func(stx store.Tx) error { return stx.DeleteCheckpoint(ctx, b.ID) }, c)
	if got := due(); !slices.Equal(got, []string{c.ID}) {
		t.Errorf("due after deleting the newest claimed checkpoint and saving another = %v, want the new one", got)
	}
	err = db.Update(ctx, func(stx store.Tx) error {
		return stx.PutEmbedding(ctx, c.ID, store.Embedding{Model: "", Vector: []float32{1}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := due(); len(got) != 0 {
		t.Errorf("due after c's vector = %v, want none", got)
	}
}

// TestQueueMarksMigration: checkpoints waiting in search_pending and
// embedding_queue before 00013 are indexed and embedded as before.
func TestQueueMarksMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	raw, _ := migratedTo(t, path, 12)
	for _, q := range []string{
		`INSERT INTO sessions (id, status, created_at, updated_at) VALUES ('s1', 'running', 1, 1)`,
		`INSERT INTO checkpoints (id, session_id, seq, type, trigger_kind, summary, checksum, created_at)
			VALUES ('indexed', 's1', 1, 'manual', 'user_request', 'alpha', 'x', 5)`,
		`INSERT INTO checkpoint_fts (rowid, name, summary, description, tags) SELECT doc_id, '', 'alpha', '', '' FROM search_pending`,
		`DELETE FROM search_pending`,
		`DELETE FROM embedding_queue`,
		`INSERT INTO checkpoints (id, session_id, seq, type, trigger_kind, summary, checksum, created_at)
			VALUES ('waiting', 's1', 2, 'manual', 'user_request', 'alpha beta', 'x', 6)`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	db := mustOpen(t, path)
	defer db.Close()
	hits, err := db.SearchCheckpoints(t.Context(), store.SearchQuery{Scope: store.Everything, Text: "alpha", Limit: 5})
	if err != nil || len(hits) != 2 {
		t.Errorf("search after the migration: %v, %v; want both", hits, err)
	}
	jobs, err := db.DueEmbeddings(t.Context(), fromTS(10), 5)
	if err != nil || len(jobs) != 1 || jobs[0].Checkpoint.ID != "waiting" {
		t.Errorf("queued after the migration: %v, %v; want the one queued before", jobs, err)
	}
}

// TestSearchRowByDocMigration: a checkpoint saved before 00015 keeps its
// search row, which its vector then reaches through the checkpoint's doc_id,
// and which goes with the checkpoint now that no foreign key cascades to it.
func TestSearchRowByDocMigration(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "belay.db")
	raw, _ := migratedTo(t, path, 14)
	for _, q := range []string{
		`INSERT INTO sessions (id, status, created_at, updated_at) VALUES ('s1', 'running', 1, 1)`,
		`INSERT INTO checkpoints (id, session_id, seq, type, trigger_kind, summary, checksum, created_at)
			VALUES ('old', 's1', 1, 'manual', 'user_request', 'alpha', 'x', 5)`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db := mustOpen(t, path)
	defer db.Close()
	searchRows := func() int {
		t.Helper()
		var n int
		if err := raw.QueryRow(`SELECT COUNT(*) FROM checkpoint_search s JOIN checkpoints c ON c.doc_id = s.doc_id`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := searchRows(); n != 1 {
		t.Fatalf("%d search rows reached by doc_id after the migration, want 1", n)
	}
	err := db.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.QueueEmbeddings(ctx, store.IndexModel{Model: "m", Dimensions: 1}, false, fromTS(6)); err != nil {
			return err
		}
		return tx.PutEmbedding(ctx, "old", store.Embedding{Model: "m", Vector: []float32{1}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := db.SearchIndex(ctx); err != nil || st.Embedded != 1 {
		t.Errorf("index after the vector: %+v, %v; want one embedded", st, err)
	}
	if err := db.Update(ctx, func(tx store.Tx) error { return tx.DeleteCheckpoint(ctx, "old") }); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := raw.QueryRow(`SELECT COUNT(*) FROM checkpoint_search`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d search rows after the deletion (%v), want none", left, err)
	}
}

// TestDocKeyMigration: across 00017, which makes doc_id the checkpoints'
// key and writes search rows only with vectors, what was indexed, embedded,
// queued or still waiting stays so; a deleted checkpoint leaves the
// full-text index; a new one is keyed past the marks; and the way down
// gives every checkpoint its search row again.
func TestDocKeyMigration(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "belay.db")
	// Foreign keys on, as Open runs the migrations.
	raw, p := migratedTo(t, path, 16, "foreign_keys(1)")
	insert := `INSERT INTO checkpoints (id, session_id, seq, type, trigger_kind, summary, checksum, created_at, doc_id)
		VALUES (?, 's1', ?, 'manual', 'user_request', ?, 'x', ?, ?)`
	for _, q := range [][]any{
		{`INSERT INTO sessions (id, status, created_at, updated_at) VALUES ('s1', 'running', 1, 1)`},
		{insert, "indexed", 1, "alpha", 5, 1},
		{insert, "embedded", 2, "alpha gamma", 6, 2},
		{insert, "failing", 3, "alpha beta", 7, 3},
		{insert, "waiting", 4, "alpha delta", 8, 4},
		{`INSERT INTO checkpoint_fts (rowid, name, summary, description, tags) VALUES (1, '', 'alpha', '', ''), (2, '', 'alpha gamma', '', '')`},
		{`UPDATE search_state SET indexed_through = 2, queued_through = 3, model = 'm', dims = 2, vector_version = 1 WHERE id = 1`},
		{`UPDATE checkpoint_search SET model = 'm', dims = 2, vector = ?, vector_version = 1 WHERE doc_id = 2`, encodeVector([]float32{1, 0})},
		{`INSERT INTO embedding_queue (checkpoint_id, queued_at, attempts, next_attempt_at, last_error) VALUES ('failing', 7, 2, 9, 'boom')`},
	} {
		if _, err := raw.Exec(q[0].(string), q[1:]...); err != nil {
			t.Fatalf("%s: %v", q[0], err)
		}
	}
	if _, err := p.UpTo(ctx, 17); err != nil {
		t.Fatal(err)
	}
	var searchRows, allRows int
	if err := raw.QueryRow(`SELECT (SELECT COUNT(*) FROM checkpoint_search), (SELECT COUNT(*) FROM checkpoint_search_all)`).Scan(&searchRows, &allRows); err != nil {
		t.Fatal(err)
	}
	if searchRows != 4 || allRows != 4 {
		t.Errorf("%d search rows and %d in checkpoint_search_all after the migration, want the 4 kept and 4", searchRows, allRows)
	}

	db := mustOpen(t, path)
	defer db.Close()
	find := func(q store.SearchQuery) []string {
		t.Helper()
		q.Scope, q.Limit = store.Everything, 10
		hits, err := db.SearchCheckpoints(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, h := range hits {
			ids = append(ids, h.CheckpointID)
		}
		slices.Sort(ids)
		return ids
	}
	if got := find(store.SearchQuery{Text: "alpha"}); !slices.Equal(got, []string{"embedded", "failing", "indexed", "waiting"}) {
		t.Errorf("search alpha after the migration = %v, want all four", got)
	}
	if got := find(store.SearchQuery{Model: "m", Vector: []float32{1, 0}}); !slices.Equal(got, []string{"embedded"}) {
		t.Errorf("vector search after the migration = %v, want the embedded one", got)
	}
	st, err := db.SearchIndex(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Checkpoints != 4 || st.Embedded != 1 || st.Queued != 2 || st.Failing != 1 || st.LastError != "boom" {
		t.Errorf("index after the migration: %+v; want 4 checkpoints, 1 embedded, 2 queued (failing, waiting), 1 failing with boom", st)
	}

	// The newest checkpoint, indexed by the search above, goes: its entry
	// leaves the index, and the next save is keyed past it.
	now := fromTS(20)
	next := &belay.Checkpoint{ID: "next", SessionID: "s1", Seq: 5, Type: belay.TypeManual, Trigger: belay.TriggerUserRequest,
		Summary: "alpha epsilon", Checksum: "x", CreatedAt: now, UpdatedAt: now}
	err = db.Update(ctx, func(tx store.Tx) error {
		if err := tx.DeleteCheckpoint(ctx, "waiting"); err != nil {
			return err
		}
		if err := tx.DeleteCheckpoint(ctx, "embedded"); err != nil {
			return err
		}
		return tx.InsertCheckpoint(ctx, next)
	})
	if err != nil {
		t.Fatal(err)
	}
	var doc int64
	if err := raw.QueryRow(`SELECT doc_id FROM checkpoints WHERE id = 'next'`).Scan(&doc); err != nil || doc != 5 {
		t.Errorf("the next save's doc_id = %d (%v), want 5: past the deleted 4", doc, err)
	}
	if got := find(store.SearchQuery{Text: "alpha"}); !slices.Equal(got, []string{"failing", "indexed", "next"}) {
		t.Errorf("search alpha after two deletions and a save = %v, want failing, indexed and next", got)
	}
	if got := find(store.SearchQuery{Model: "m", Vector: []float32{1, 0}}); len(got) != 0 {
		t.Errorf("vector search after deleting the embedded one = %v, want none", got)
	}
	if st, err := db.SearchIndex(ctx); err != nil || st.Embedded != 0 {
		t.Errorf("index after deleting the embedded one: %+v, %v; want none embedded", st, err)
	}
	db.Close()

	if _, err := p.DownTo(ctx, 16); err != nil {
		t.Fatal(err)
	}
	var missing, queued int
	if err := raw.QueryRow(`SELECT (SELECT COUNT(*) FROM checkpoints c WHERE NOT EXISTS (SELECT 1 FROM checkpoint_search s WHERE s.doc_id = c.doc_id)),
		(SELECT COUNT(*) FROM embedding_queue WHERE checkpoint_id = 'failing' AND attempts = 2)`).Scan(&missing, &queued); err != nil {
		t.Fatal(err)
	}
	if missing != 0 || queued != 1 {
		t.Errorf("after the way down: %d checkpoints without a search row, %d failing queue rows; want 0 and 1", missing, queued)
	}
}
