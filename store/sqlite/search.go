package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/search"
	"github.com/belayhq/belay/store"
)

// maxPhrases bounds the phrases of one full-text query.
const maxPhrases = 64

// maxScored bounds how many matches BM25 scores in one search: it scores
// every match of a query, so a word found in most checkpoints would cost a
// scan of them all. Past it, the newest maxScored matches in scope are
// ranked (the vector ranking still sees every checkpoint).
const maxScored = 2000

// ftsQuery turns a person's query into an FTS5 query that is never a syntax
// error: every whitespace-separated chunk becomes one quoted phrase of its
// words ("OC-41252" → "OC 41252", which matches the two tokens side by
// side), and the phrases are joined with OR, so a checkpoint matching more
// of them ranks higher. Chunks without a word (`"`, `(`) are dropped, and so
// are words too common to tell checkpoints apart (the, how) unless the query
// has no others; operators (AND, NEAR, *) are words in quotes. "" means
// nothing to match.
func ftsQuery(text string) string {
	var phrases, common []string
	seen := map[string]bool{}
	for _, chunk := range strings.Fields(text) {
		p := phrase(chunk)
		if p == "" || seen[p] || len(phrases) == maxPhrases {
			continue
		}
		seen[p] = true
		if !strings.Contains(p, " ") && search.IsStopword(strings.ToLower(strings.Trim(p, `"`))) {
			common = append(common, p)
		} else {
			phrases = append(phrases, p)
		}
	}
	if len(phrases) == 0 {
		phrases = common
	}
	return strings.Join(phrases, " OR ")
}

// phrase is an FTS5 phrase of the words of s (runs of letters and digits),
// quoted; "" when s has none.
func phrase(s string) string {
	words := strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
	if len(words) == 0 {
		return ""
	}
	return `"` + strings.Join(words, " ") + `"`
}

// SearchCheckpoints first writes the full-text entries of the checkpoints
// saved since the last search (see indexPending).
func (db *DB) SearchCheckpoints(ctx context.Context, q store.SearchQuery) ([]store.SearchHit, error) {
	var pending bool
	if err := db.reader.q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM checkpoints
		WHERE doc_id > (SELECT indexed_through FROM search_state WHERE id = 1))`).Scan(&pending); err != nil {
		return nil, fmt.Errorf("sqlite: pending search entries: %w", err)
	}
	if pending {
		if err := db.Update(ctx, func(stx store.Tx) error { return stx.(*tx).indexPending(ctx) }); err != nil {
			return nil, err
		}
	}
	return db.reader.SearchCheckpoints(ctx, q)
}

// SearchCheckpoints in a transaction first writes the full-text entries
// waiting, its own saves' included.
func (t *tx) SearchCheckpoints(ctx context.Context, q store.SearchQuery) ([]store.SearchHit, error) {
	if err := t.indexPending(ctx); err != nil {
		return nil, err
	}
	return t.reader.SearchCheckpoints(ctx, q)
}

// indexPending writes the full-text entries of the checkpoints saved since
// the last search (their doc_id is above search_state.indexed_through), all
// in one FTS5 segment, and moves the mark past them: a save writes neither
// an entry nor a queue row, which spares it the segment, the merges and a
// third of its pages.
func (t *tx) indexPending(ctx context.Context) error {
	if _, err := t.q.ExecContext(ctx, `INSERT INTO checkpoint_fts (rowid, name, summary, description, tags)
		SELECT doc_id, name, summary, description,
			COALESCE((SELECT group_concat(value, ' ') FROM json_each(CAST(tags AS TEXT))), '')
		FROM checkpoints
		WHERE doc_id > (SELECT indexed_through FROM search_state WHERE id = 1)`); err != nil {
		return fmt.Errorf("sqlite: index pending checkpoints: %w", err)
	}
	if _, err := t.q.ExecContext(ctx, `UPDATE search_state
		SET indexed_through = MAX(indexed_through, COALESCE((SELECT MAX(doc_id) FROM checkpoints), 0)) WHERE id = 1`); err != nil {
		return fmt.Errorf("sqlite: index pending checkpoints: %w", err)
	}
	return nil
}

func (r reader) SearchCheckpoints(ctx context.Context, q store.SearchQuery) ([]store.SearchHit, error) {
	ix := r.vectors
	if ix == nil {
		// Inside a transaction: what it wrote is not committed, so the
		// shared copy must not load it; read every vector afresh.
		ix = newVectorIndex()
	}
	if q.Vector != nil {
		if err := ix.refresh(ctx, r.q, q.Model, len(q.Vector)); err != nil {
			return nil, err
		}
	}
	var hits []store.SearchHit
	byDoc := map[int64]int{}
	if match := ftsQuery(q.Text); match != "" && q.Limit > 0 {
		text, err := r.textRanking(ctx, q, match)
		if err != nil {
			return nil, err
		}
		for i, t := range text {
			byDoc[t.doc] = len(hits)
			hits = append(hits, store.SearchHit{CheckpointID: t.id, TextRank: i + 1, TextScore: t.score})
		}
	}
	if q.Vector == nil || q.Limit <= 0 {
		return hits, nil
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.model != q.Model || ix.dims != len(q.Vector) {
		// Another search moved the shared copy to another vector space
		// between the refresh and now: rank by text alone this time.
		return hits, nil
	}
	keep, err := r.vectorFilter(ctx, q, ix)
	if err != nil {
		return nil, err
	}
	for i, s := range ix.rank(q.Vector, keep, q.Limit) {
		doc := ix.docs[s.pos]
		j, ok := byDoc[doc]
		if !ok {
			j = len(hits)
			byDoc[doc] = j
			hits = append(hits, store.SearchHit{CheckpointID: ix.ids[s.pos]})
		}
		hits[j].VectorRank = i + 1
	}
	for doc, j := range byDoc {
		hits[j].Similarity, hits[j].HasVector = ix.similarity(doc, q.Vector)
	}
	return hits, nil
}

type textHit struct {
	doc   int64
	id    string
	score float64
}

// plainTag reports whether the full-text index splits tag into words exactly
// as phrase does: letters and digits (FTS5's token characters) between
// ASCII separators. Other characters (private use, combining marks) might
// split differently, and such tags are checked without the index.
func plainTag(tag string) bool {
	for _, r := range tag {
		if r > unicode.MaxASCII && !unicode.IsLetter(r) && !unicode.IsNumber(r) {
			return false
		}
	}
	return true
}

// textRanking returns the best q.Limit full-text matches in scope, best
// first: of the newest maxScored matches when there are more.
func (r reader) textRanking(ctx context.Context, q store.SearchQuery, match string) ([]textHit, error) {
	where, args := []string{"checkpoint_fts MATCH ?"}, []any{match}
	if cond, a := scopeFilter(q.Scope, "c.session_id", "c.project_path", ""); cond != "" {
		where, args = append(where, cond), append(args, a...)
	}
	if q.ProjectPath != "" {
		where, args = append(where, "c.project_path = ?"), append(args, q.ProjectPath)
	}
	for _, tag := range q.Tags {
		where = append(where, "EXISTS (SELECT 1 FROM checkpoint_tags t WHERE t.tag = ? AND t.checkpoint_created_at = c.created_at AND t.checkpoint_id = c.id)")
		args = append(args, tag)
		// The tags column of the index narrows the matches first, so that
		// a rare tag does not make the search walk every match to find the
		// tagged ones; the exact check above keeps "auth v2" from passing
		// for "auth-v2".
		if p := phrase(tag); p != "" && plainTag(tag) {
			args[0] = "(" + args[0].(string) + ") AND tags : " + p
		}
	}
	// CROSS JOIN keeps the full-text index the outer loop, read in its own
	// order; the rowid bound is handed to FTS5, so only the newest matches
	// are scored.
	from := ` FROM checkpoint_fts CROSS JOIN checkpoints c ON c.doc_id = checkpoint_fts.rowid WHERE `
	var oldest int64
	err := r.q.QueryRowContext(ctx, `SELECT checkpoint_fts.rowid`+from+strings.Join(where, " AND ")+
		` ORDER BY checkpoint_fts.rowid DESC LIMIT 1 OFFSET ?`, append(args, maxScored-1)...).Scan(&oldest)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("sqlite: full-text search: %w", err)
	default:
		where, args = append(where, "checkpoint_fts.rowid >= ?"), append(args, oldest)
	}
	// rank is bm25 with the column weights set in the migration: lower is better.
	rows, err := r.q.QueryContext(ctx, `SELECT c.doc_id, c.id, checkpoint_fts.rank`+from+strings.Join(where, " AND ")+
		` ORDER BY checkpoint_fts.rank LIMIT ?`, append(args, q.Limit)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: full-text search: %w", err)
	}
	defer rows.Close()
	var out []textHit
	for rows.Next() {
		var h textHit
		if err := rows.Scan(&h.doc, &h.id, &h.score); err != nil {
			return nil, fmt.Errorf("sqlite: scan full-text hit: %w", err)
		}
		h.score = -h.score
		out = append(out, h)
	}
	return out, rows.Err()
}

// vectorFilter returns which vectors of ix are within q's scope, project and
// tags. The scope is decided in SQL with scopeFilter, once per (session,
// project) group of the index rather than per vector.
func (r reader) vectorFilter(ctx context.Context, q store.SearchQuery, ix *vectorIndex) (func(pos int) bool, error) {
	allowed := make([]bool, len(ix.groupList))
	var pairs [][2]string
	var index []int
	for i, g := range ix.groupList {
		if q.ProjectPath == "" || g.project == q.ProjectPath {
			pairs, index = append(pairs, [2]string{g.session, g.project}), append(index, i)
		}
	}
	cond, args := scopeFilter(q.Scope, "json_extract(g.value, '$[0]')", "json_extract(g.value, '$[1]')", "")
	if cond == "" {
		for _, i := range index {
			allowed[i] = true
		}
	} else if len(pairs) > 0 {
		b, err := json.Marshal(pairs)
		if err != nil {
			return nil, err
		}
		rows, err := r.q.QueryContext(ctx, `SELECT g.key FROM json_each(?) AS g WHERE `+cond, append([]any{string(b)}, args...)...)
		if err != nil {
			return nil, fmt.Errorf("sqlite: scope of vectors: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var k int
			if err := rows.Scan(&k); err != nil {
				return nil, fmt.Errorf("sqlite: scan scope: %w", err)
			}
			allowed[index[k]] = true
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("sqlite: scope of vectors: %w", err)
		}
	}
	if len(q.Tags) == 0 {
		return func(pos int) bool { return allowed[ix.groups[pos]] }, nil
	}
	tagged, err := r.taggedWithAll(ctx, q.Tags)
	if err != nil {
		return nil, err
	}
	return func(pos int) bool { return allowed[ix.groups[pos]] && tagged[ix.ids[pos]] }, nil
}

// taggedWithAll returns the ids of the checkpoints carrying every tag.
func (r reader) taggedWithAll(ctx context.Context, tags []string) (map[string]bool, error) {
	tags, err := r.rarestFirst(ctx, tags)
	if err != nil {
		return nil, err
	}
	query, args := `SELECT t0.checkpoint_id FROM checkpoint_tags t0 WHERE t0.tag = ?`, []any{tags[0]}
	for _, tag := range tags[1:] {
		query += ` AND EXISTS (SELECT 1 FROM checkpoint_tags t
			WHERE t.tag = ? AND t.checkpoint_created_at = t0.checkpoint_created_at AND t.checkpoint_id = t0.checkpoint_id)`
		args = append(args, tag)
	}
	rows, err := r.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: tagged checkpoints: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("sqlite: scan tagged checkpoint: %w", err)
		}
		out[id] = true
	}
	return out, rows.Err()
}

// withAttempts scans a checkpoint row followed by a queue entry's attempts.
type withAttempts struct {
	row      scanner
	attempts *int
}

func (w withAttempts) Scan(dest ...any) error { return w.row.Scan(append(dest, w.attempts)...) }

func (r reader) DueEmbeddings(ctx context.Context, now time.Time, limit int) ([]store.EmbeddingJob, error) {
	return r.dueEmbeddings(ctx, now, limit, "embedding_jobs")
}

// dueEmbeddings is DueEmbeddings from queue: embedding_jobs (every
// checkpoint waiting), or embedding_queue once queueSaved has run.
func (r reader) dueEmbeddings(ctx context.Context, now time.Time, limit int, queue string) ([]store.EmbeddingJob, error) {
	rows, err := r.q.QueryContext(ctx, `SELECT `+checkpointCols+`, q.attempts FROM `+queue+` q
		JOIN checkpoints ON checkpoints.id = q.checkpoint_id
		WHERE q.next_attempt_at <= ? ORDER BY q.next_attempt_at, q.queued_at, q.checkpoint_id LIMIT ?`, ts(now), limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: due embeddings: %w", err)
	}
	defer rows.Close()
	var out []store.EmbeddingJob
	for rows.Next() {
		var job store.EmbeddingJob
		if job.Checkpoint, err = scanCheckpoint(withAttempts{rows, &job.Attempts}); err != nil {
			return nil, fmt.Errorf("sqlite: scan due embedding: %w", err)
		}
		out = append(out, job)
	}
	cps := make([]*belay.Checkpoint, len(out))
	for i, job := range out {
		cps[i] = job.Checkpoint
	}
	kept, err := r.loadCheckpoints(ctx, rows, cps)
	if err != nil {
		return nil, err
	}
	// A checkpoint deleted meanwhile has no job left.
	return slices.DeleteFunc(out, func(job store.EmbeddingJob) bool { return !slices.Contains(kept, job.Checkpoint) }), nil
}

func (r reader) SearchIndex(ctx context.Context) (store.IndexState, error) {
	var st store.IndexState
	err := r.q.QueryRowContext(ctx, `SELECT model, dims,
		(SELECT COUNT(*) FROM checkpoints),
		(SELECT COUNT(*) FROM checkpoint_search s WHERE s.vector_version > 0 AND s.model = search_state.model
			AND (search_state.dims = 0 OR s.dims = search_state.dims)),
		(SELECT COUNT(*) FROM embedding_jobs),
		(SELECT COUNT(*) FROM embedding_queue WHERE attempts > 0),
		COALESCE((SELECT last_error FROM embedding_queue WHERE attempts > 0 ORDER BY next_attempt_at DESC LIMIT 1), '')
		FROM search_state WHERE id = 1`).Scan(&st.Model, &st.Dimensions, &st.Checkpoints, &st.Embedded, &st.Queued, &st.Failing, &st.LastError)
	if err != nil {
		return store.IndexState{}, fmt.Errorf("sqlite: search index state: %w", err)
	}
	return st, nil
}

// queueSaved writes the embedding_queue rows of the checkpoints saved since
// it last ran (their doc_id is above search_state.queued_through), queued
// when they were saved, and moves the mark past them: a save writes no
// queue row, and what changes the queue runs this first.
func (t *tx) queueSaved(ctx context.Context) error {
	if _, err := t.q.ExecContext(ctx, `INSERT INTO embedding_queue (checkpoint_id, queued_at)
		SELECT id, created_at FROM checkpoints
		WHERE doc_id > (SELECT queued_through FROM search_state WHERE id = 1)
		ON CONFLICT (checkpoint_id) DO NOTHING`); err != nil {
		return fmt.Errorf("sqlite: queue saved checkpoints: %w", err)
	}
	if _, err := t.q.ExecContext(ctx, `UPDATE search_state
		SET queued_through = MAX(queued_through, COALESCE((SELECT MAX(doc_id) FROM checkpoints), 0)) WHERE id = 1`); err != nil {
		return fmt.Errorf("sqlite: queue saved checkpoints: %w", err)
	}
	return nil
}

func (t *tx) PutEmbedding(ctx context.Context, id string, e store.Embedding) error {
	if err := t.queueSaved(ctx); err != nil {
		return err
	}
	// A vector of a model the index no longer uses is dropped: the
	// checkpoint stays queued for the current one.
	var model string
	var dims, version int64
	err := t.q.QueryRowContext(ctx, `UPDATE search_state SET vector_version = vector_version + 1 WHERE id = 1
		RETURNING model, dims, vector_version`).Scan(&model, &dims, &version)
	if err != nil {
		return fmt.Errorf("sqlite: put embedding: %w", err)
	}
	if e.Model != model || (dims != 0 && int(dims) != len(e.Vector)) {
		return nil
	}
	// The checkpoint's search row holds its vector, written with the first.
	if _, err := t.q.ExecContext(ctx, `INSERT INTO checkpoint_search
			(doc_id, checkpoint_id, session_id, project_path, model, dims, vector, vector_version)
		SELECT doc_id, id, session_id, project_path, ?, ?, ?, ? FROM checkpoints WHERE id = ?
		ON CONFLICT (doc_id) DO UPDATE SET model = excluded.model, dims = excluded.dims,
			vector = excluded.vector, vector_version = excluded.vector_version`,
		e.Model, len(e.Vector), encodeVector(e.Vector), version, id); err != nil {
		return fmt.Errorf("sqlite: put embedding: %w", err)
	}
	if _, err := t.q.ExecContext(ctx, `DELETE FROM embedding_queue WHERE checkpoint_id = ?`, id); err != nil {
		return fmt.Errorf("sqlite: dequeue embedding: %w", err)
	}
	return nil
}

func (t *tx) ClaimEmbeddings(ctx context.Context, now, until time.Time, limit int) ([]store.EmbeddingJob, error) {
	if err := t.queueSaved(ctx); err != nil {
		return nil, err
	}
	jobs, err := t.dueEmbeddings(ctx, now, limit, "embedding_queue")
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		if _, err := t.q.ExecContext(ctx, `UPDATE embedding_queue SET next_attempt_at = ? WHERE checkpoint_id = ?`, ts(until), j.Checkpoint.ID); err != nil {
			return nil, fmt.Errorf("sqlite: claim embedding: %w", err)
		}
	}
	return jobs, nil
}

func (t *tx) RetryEmbedding(ctx context.Context, id string, attempts int, next time.Time, reason string) error {
	if err := t.queueSaved(ctx); err != nil {
		return err
	}
	_, err := t.q.ExecContext(ctx, `UPDATE embedding_queue SET attempts = ?, next_attempt_at = ?, last_error = ?
		WHERE checkpoint_id = ?`, attempts, ts(next), reason, id)
	if err != nil {
		return fmt.Errorf("sqlite: retry embedding: %w", err)
	}
	return nil
}

func (t *tx) QueueEmbeddings(ctx context.Context, m store.IndexModel, all bool, now time.Time) (int64, error) {
	if err := t.queueSaved(ctx); err != nil {
		return 0, err
	}
	if _, err := t.q.ExecContext(ctx, `UPDATE search_state SET model = ?, dims = ? WHERE id = 1`, m.Model, m.Dimensions); err != nil {
		return 0, fmt.Errorf("sqlite: set index model: %w", err)
	}
	_, err := t.q.ExecContext(ctx, `INSERT INTO embedding_queue (checkpoint_id, queued_at)
		SELECT c.id, ? FROM checkpoints c LEFT JOIN checkpoint_search s ON s.doc_id = c.doc_id
		WHERE ? OR s.vector IS NULL OR s.model != ? OR (? > 0 AND s.dims != ?)
		ON CONFLICT (checkpoint_id) DO UPDATE SET attempts = 0, next_attempt_at = 0, last_error = ''`,
		ts(now), boolInt(all), m.Model, m.Dimensions, m.Dimensions)
	if err != nil {
		return 0, fmt.Errorf("sqlite: queue embeddings: %w", err)
	}
	var n int64
	if err := t.q.QueryRowContext(ctx, `SELECT COUNT(*) FROM embedding_queue`).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: count queued embeddings: %w", err)
	}
	return n, nil
}

func (t *tx) SetTokenCount(ctx context.Context, id string, count int, encoding string) error {
	res, err := t.q.ExecContext(ctx, `UPDATE checkpoints SET token_count = ?, token_encoding = ? WHERE id = ?`, count, encoding, id)
	if err != nil {
		return fmt.Errorf("sqlite: set token count: %w", err)
	}
	return oneRow(res, func() error { return checkpointNotFound(id) })
}
