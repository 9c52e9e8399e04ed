package postgres

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/search"
	"github.com/belayhq/belay/store"
)

const (
	// maxPhrases bounds the phrases of one full-text query.
	maxPhrases = 64
	// maxScored bounds how many matches are ranked in one search: past it,
	// the newest maxScored matches in scope are ranked (the vector ranking
	// still sees every checkpoint).
	maxScored = 2000
	// maxLexeme is the longest word, in bytes, a tsvector holds; longer
	// words are left out of documents, and a query phrase with one matches
	// nothing.
	maxLexeme = 2047
	// maxPosition is the highest word position a tsvector records; later
	// words share it.
	maxPosition = 16383
	// maxPositions is how many positions of one word a tsvector keeps.
	maxPositions = 256
	// maxDocBytes bounds the distinct words of one document, in bytes, well
	// below a tsvector's limit of 1 MB; words past it are left out.
	maxDocBytes = 1 << 19
)

// rankWeights weigh a match in the name, summary or tags (A) twice one in
// the description (B), as the SQLite store does; C and D are unused.
const rankWeights = `'{0.1, 0.2, 0.5, 1.0}'`

// words splits text into the words the full-text index holds: runs of
// letters, digits and combining marks, lower-cased, with the diacritics of
// Latin letters removed ("Über" → "uber"). Documents and queries are split
// by this one function, so a query's words are always the document's, and
// neither depends on the server's text search parser (which reads
// "OC-41252" as "oc" and "-41252") or locale.
func words(text string) []string {
	return strings.FieldsFunc(fold(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r) && !unicode.IsMark(r)
	})
}

// fold lower-cases s and removes the combining diacritical marks
// (U+0300–U+036F) of its decomposed form. Invalid UTF-8 becomes U+FFFD,
// which is no word character.
func fold(s string) string {
	s = strings.ToLower(s)
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return s
	}
	s = strings.Map(func(r rune) rune {
		if r >= 0x300 && r <= 0x36f {
			return -1
		}
		return r
	}, norm.NFD.String(s))
	return norm.NFC.String(s)
}

// lexeme quotes a word for a tsvector or tsquery literal.
func lexeme(w string) string {
	return "'" + strings.NewReplacer(`'`, `''`, `\`, `\\`).Replace(w) + "'"
}

// searchDoc returns the tsvector literal of a checkpoint's text: the words
// of its name, summary and tags weighted A, of its description B. Fields
// are a position apart, so a phrase never runs from one into the next.
func searchDoc(name, summary, description string, tags []string) string {
	var order []string
	positions := map[string][]string{}
	pos, size := 0, 0
	add := func(text string, weight string) {
		for _, w := range words(text) {
			pos++
			if len(w) > maxLexeme {
				continue
			}
			ps, ok := positions[w]
			if !ok {
				if size+len(w) > maxDocBytes {
					continue
				}
				size += len(w)
				order = append(order, w)
			}
			p := strconv.Itoa(min(pos, maxPosition))
			if len(ps) == maxPositions || (len(ps) > 0 && strings.TrimRight(ps[len(ps)-1], "AB") == p) {
				continue
			}
			positions[w] = append(ps, p+weight)
		}
		pos++
	}
	add(name, "A")
	add(summary, "A")
	for _, tag := range tags {
		add(tag, "A")
	}
	add(description, "B")
	var b strings.Builder
	for i, w := range order {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(lexeme(w))
		b.WriteByte(':')
		b.WriteString(strings.Join(positions[w], ","))
	}
	return b.String()
}

// tsQuery turns a person's query into a tsquery literal that is never a
// syntax error, with the SQLite store's semantics: every
// whitespace-separated chunk becomes one phrase of its words ("OC-41252" →
// 'oc' <-> '41252', the two words side by side), and the phrases are
// joined with OR, so a checkpoint matching more of them ranks higher.
// Chunks without a word (`"`, `(`) are dropped, and so are words too common
// to tell checkpoints apart (the, how) unless the query has no others;
// operators (&, !, AND, NOT) are words or nothing. "" means nothing to
// match.
func tsQuery(text string) string {
	var phrases, common []string
	seen := map[string]bool{}
	for _, chunk := range strings.Fields(text) {
		ws := words(chunk)
		if len(ws) == 0 || slices.ContainsFunc(ws, func(w string) bool { return len(w) > maxLexeme }) {
			continue
		}
		quoted := make([]string, len(ws))
		for i, w := range ws {
			quoted[i] = lexeme(w)
		}
		p := strings.Join(quoted, " <-> ")
		if len(ws) > 1 {
			p = "(" + p + ")"
		}
		if seen[p] || len(phrases) == maxPhrases {
			continue
		}
		seen[p] = true
		if len(ws) == 1 && search.IsStopword(ws[0]) {
			common = append(common, p)
		} else {
			phrases = append(phrases, p)
		}
	}
	if len(phrases) == 0 {
		phrases = common
	}
	return strings.Join(phrases, " | ")
}

// searchFilter returns the conditions, on checkpoint_search AS s, that keep
// a search within q's scope, project and tags (each tag exactly).
func searchFilter(q store.SearchQuery) (string, []any) {
	var where []string
	var args []any
	if cond, a := scopeFilter(q.Scope, "s.session_id", "s.project_path", ""); cond != "" {
		where, args = append(where, cond), append(args, a...)
	}
	if q.ProjectPath != "" {
		where, args = append(where, "s.project_path = ?"), append(args, q.ProjectPath)
	}
	for _, tag := range q.Tags {
		where = append(where, "EXISTS (SELECT 1 FROM checkpoint_tags t WHERE t.tag = ? AND t.checkpoint_id = s.checkpoint_id)")
		args = append(args, tag)
	}
	if len(where) == 0 {
		return "", nil
	}
	return " AND " + strings.Join(where, " AND "), args
}

func (r reader) SearchCheckpoints(ctx context.Context, q store.SearchQuery) ([]store.SearchHit, error) {
	if q.Limit <= 0 {
		return nil, nil
	}
	filter, args := searchFilter(q)
	var hits []store.SearchHit
	byID := map[string]int{}
	if query := tsQuery(q.Text); query != "" {
		// ts_rank_cd, with the document's length damping the score (1):
		// higher is better, positive for every match.
		rows, err := r.q.QueryContext(ctx, `SELECT doc_id, checkpoint_id, ts_rank_cd(`+rankWeights+`, doc, ?::tsquery, 1) AS score
			FROM (SELECT s.doc_id, s.checkpoint_id, s.doc FROM checkpoint_search s
				WHERE s.doc @@ ?::tsquery`+filter+` ORDER BY s.doc_id DESC LIMIT ?) AS m
			ORDER BY score DESC, doc_id DESC LIMIT ?`,
			slices.Concat([]any{query, query}, args, []any{maxScored, q.Limit})...)
		if err != nil {
			return nil, fmt.Errorf("postgres: full-text search: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var doc int64
			var h store.SearchHit
			if err := rows.Scan(&doc, &h.CheckpointID, &h.TextScore); err != nil {
				return nil, fmt.Errorf("postgres: scan full-text hit: %w", err)
			}
			h.TextRank = len(hits) + 1
			byID[h.CheckpointID] = len(hits)
			hits = append(hits, h)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("postgres: full-text search: %w", err)
		}
		rows.Close()
	}
	if q.Vector == nil {
		return hits, nil
	}
	candidates, err := r.similarities(ctx, q, filter, args)
	if err != nil {
		return nil, err
	}
	for _, c := range candidates {
		if j, ok := byID[c.id]; ok {
			hits[j].Similarity, hits[j].HasVector = c.similarity, true
		}
	}
	candidates = slices.DeleteFunc(candidates, func(c similar) bool { return c.similarity <= 0 })
	slices.SortFunc(candidates, func(a, b similar) int {
		if c := cmp.Compare(b.similarity, a.similarity); c != 0 {
			return c
		}
		return cmp.Compare(b.doc, a.doc)
	})
	for i, c := range candidates[:min(len(candidates), q.Limit)] {
		j, ok := byID[c.id]
		if !ok {
			j = len(hits)
			byID[c.id] = j
			hits = append(hits, store.SearchHit{CheckpointID: c.id, Similarity: c.similarity, HasVector: true})
		}
		hits[j].VectorRank = i + 1
	}
	return hits, nil
}

// similar is a checkpoint's cosine similarity to a query's vector.
type similar struct {
	doc        int64
	id         string
	similarity float64
}

// similarities compares q.Vector with every vector of its model and length
// within the search's filter. Vectors are of unit length, so the cosine is
// their dot product.
func (r reader) similarities(ctx context.Context, q store.SearchQuery, filter string, args []any) ([]similar, error) {
	rows, err := r.q.QueryContext(ctx, `SELECT s.doc_id, s.checkpoint_id, s.vector FROM checkpoint_search s
		WHERE s.vector IS NOT NULL AND s.model = ? AND s.dims = ?`+filter,
		slices.Concat([]any{q.Model, len(q.Vector)}, args)...)
	if err != nil {
		return nil, fmt.Errorf("postgres: vector search: %w", err)
	}
	defer rows.Close()
	var out []similar
	var blob []byte
	for rows.Next() {
		var s similar
		if err := rows.Scan(&s.doc, &s.id, &blob); err != nil {
			return nil, fmt.Errorf("postgres: scan vector: %w", err)
		}
		if len(blob) != 4*len(q.Vector) {
			return nil, fmt.Errorf("postgres: the stored vector of %s has %d bytes, not %d float32s", s.id, len(blob), len(q.Vector))
		}
		var dot float64
		for i, x := range q.Vector {
			dot += float64(x) * float64(math.Float32frombits(binary.LittleEndian.Uint32(blob[4*i:])))
		}
		s.similarity = dot
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: vector search: %w", err)
	}
	return out, nil
}

// encodeVector stores a vector compactly: little-endian float32s.
func encodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// withAttempts scans a checkpoint row followed by a queue entry's attempts.
type withAttempts struct {
	row      scanner
	attempts *int
}

func (w withAttempts) Scan(dest ...any) error { return w.row.Scan(append(dest, w.attempts)...) }

func (r reader) DueEmbeddings(ctx context.Context, now time.Time, limit int) ([]store.EmbeddingJob, error) {
	return r.dueEmbeddings(ctx, now, limit, "")
}

// dueEmbeddings is DueEmbeddings, with lock after the query.
func (r reader) dueEmbeddings(ctx context.Context, now time.Time, limit int, lock string) ([]store.EmbeddingJob, error) {
	rows, err := r.q.QueryContext(ctx, `SELECT `+checkpointCols+`, q.attempts FROM embedding_queue q
		JOIN checkpoints ON checkpoints.id = q.checkpoint_id
		WHERE q.next_attempt_at <= ? ORDER BY q.next_attempt_at, q.queued_at, q.checkpoint_id LIMIT ?`+lock, ts(now), limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: due embeddings: %w", err)
	}
	defer rows.Close()
	var out []store.EmbeddingJob
	for rows.Next() {
		var job store.EmbeddingJob
		if job.Checkpoint, err = scanCheckpoint(withAttempts{rows, &job.Attempts}); err != nil {
			return nil, fmt.Errorf("postgres: scan due embedding: %w", err)
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
		(SELECT COUNT(*) FROM checkpoint_search s WHERE s.vector IS NOT NULL AND s.model = search_state.model
			AND (search_state.dims = 0 OR s.dims = search_state.dims)),
		(SELECT COUNT(*) FROM embedding_queue),
		(SELECT COUNT(*) FROM embedding_queue WHERE attempts > 0),
		COALESCE((SELECT last_error FROM embedding_queue WHERE attempts > 0 ORDER BY next_attempt_at DESC LIMIT 1), '')
		FROM search_state WHERE id = 1`).Scan(&st.Model, &st.Dimensions, &st.Checkpoints, &st.Embedded, &st.Queued, &st.Failing, &st.LastError)
	if err != nil {
		return store.IndexState{}, fmt.Errorf("postgres: search index state: %w", err)
	}
	return st, nil
}

func (t *tx) PutEmbedding(ctx context.Context, id string, e store.Embedding) error {
	// A vector of a model the index no longer uses is dropped: the
	// checkpoint stays queued for the current one. The share lock keeps
	// QueueEmbeddings from changing the model until this commits.
	var model string
	var dims int64
	err := t.q.QueryRowContext(ctx, `SELECT model, dims FROM search_state WHERE id = 1 FOR SHARE`).Scan(&model, &dims)
	if err != nil {
		return fmt.Errorf("postgres: put embedding: %w", err)
	}
	if e.Model != model || (dims != 0 && int(dims) != len(e.Vector)) {
		return nil
	}
	if _, err := t.q.ExecContext(ctx, `UPDATE checkpoint_search SET model = ?, dims = ?, vector = ? WHERE checkpoint_id = ?`,
		e.Model, len(e.Vector), encodeVector(e.Vector), id); err != nil {
		return fmt.Errorf("postgres: put embedding: %w", err)
	}
	if _, err := t.q.ExecContext(ctx, `DELETE FROM embedding_queue WHERE checkpoint_id = ?`, id); err != nil {
		return fmt.Errorf("postgres: dequeue embedding: %w", err)
	}
	return nil
}

func (t *tx) ClaimEmbeddings(ctx context.Context, now, until time.Time, limit int) ([]store.EmbeddingJob, error) {
	jobs, err := t.dueEmbeddings(ctx, now, limit, " FOR UPDATE OF q SKIP LOCKED")
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		if _, err := t.q.ExecContext(ctx, `UPDATE embedding_queue SET next_attempt_at = ? WHERE checkpoint_id = ?`, ts(until), j.Checkpoint.ID); err != nil {
			return nil, fmt.Errorf("postgres: claim embedding: %w", err)
		}
	}
	return jobs, nil
}

func (t *tx) RetryEmbedding(ctx context.Context, id string, attempts int, next time.Time, reason string) error {
	_, err := t.q.ExecContext(ctx, `UPDATE embedding_queue SET attempts = ?, next_attempt_at = ?, last_error = ?
		WHERE checkpoint_id = ?`, attempts, ts(next), reason, id)
	if err != nil {
		return fmt.Errorf("postgres: retry embedding: %w", err)
	}
	return nil
}

func (t *tx) QueueEmbeddings(ctx context.Context, m store.IndexModel, all bool, now time.Time) (int64, error) {
	if _, err := t.q.ExecContext(ctx, `UPDATE search_state SET model = ?, dims = ? WHERE id = 1`, m.Model, m.Dimensions); err != nil {
		return 0, fmt.Errorf("postgres: set index model: %w", err)
	}
	_, err := t.q.ExecContext(ctx, `INSERT INTO embedding_queue (checkpoint_id, queued_at)
		SELECT checkpoint_id, ? FROM checkpoint_search
		WHERE ? OR vector IS NULL OR model <> ? OR (? > 0 AND dims <> ?)
		ON CONFLICT (checkpoint_id) DO UPDATE SET attempts = 0, next_attempt_at = 0, last_error = ''`,
		ts(now), all, m.Model, m.Dimensions, m.Dimensions)
	if err != nil {
		return 0, fmt.Errorf("postgres: queue embeddings: %w", err)
	}
	var n int64
	if err := t.q.QueryRowContext(ctx, `SELECT COUNT(*) FROM embedding_queue`).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: count queued embeddings: %w", err)
	}
	return n, nil
}

func (t *tx) SetTokenCount(ctx context.Context, id string, count int, encoding string) error {
	res, err := t.q.ExecContext(ctx, `UPDATE checkpoints SET token_count = ?, token_encoding = ? WHERE id = ?`, count, encoding, id)
	if err != nil {
		return fmt.Errorf("postgres: set token count: %w", err)
	}
	return oneRow(res, func() error { return checkpointNotFound(id) })
}

// buildSearchDocs writes the full-text documents the migration to search
// left empty: those of checkpoints saved before it. Documents are built
// here, not in SQL, so that they split words as queries do.
func buildSearchDocs(ctx context.Context, db *sql.DB) error {
	q := rebinder{db}
	for {
		rows, err := q.QueryContext(ctx, `SELECT s.doc_id, c.name, c.summary, c.description, c.tags
			FROM checkpoint_search s JOIN checkpoints c ON c.id = s.checkpoint_id
			WHERE s.doc IS NULL ORDER BY s.doc_id LIMIT 500`)
		if err != nil {
			return fmt.Errorf("postgres: unindexed checkpoints: %w", err)
		}
		var ids []int64
		var docs []string
		for rows.Next() {
			var id int64
			var name, summary, description string
			var rawTags []byte
			if err := rows.Scan(&id, &name, &summary, &description, &rawTags); err != nil {
				rows.Close()
				return fmt.Errorf("postgres: scan unindexed checkpoint: %w", err)
			}
			var tags []string
			if err := decode(rawTags, &tags); err != nil {
				rows.Close()
				return err
			}
			ids, docs = append(ids, id), append(docs, searchDoc(name, summary, description, tags))
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("postgres: unindexed checkpoints: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		if _, err := q.ExecContext(ctx, `UPDATE checkpoint_search s SET doc = v.doc::tsvector
			FROM unnest(?::bigint[], ?::text[]) AS v(id, doc) WHERE s.doc_id = v.id`, ids, docs); err != nil {
			return fmt.Errorf("postgres: index checkpoints: %w", err)
		}
	}
}
