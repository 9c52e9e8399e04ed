package postgres

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

const checkpointCols = `id, session_id, seq, name, type, trigger_kind, summary, description, project_path,
	workspace_ref, files, agent_state, outputs, metadata, context, tags, phase, step, parent_id, checksum,
	hitl_required, hitl, timeout_fired, decision, decision_key, created_by, created_at, expires_at,
	updated_at, token_count, token_encoding`

func scanCheckpoint(row scanner) (*belay.Checkpoint, error) {
	var c belay.Checkpoint
	var files, state, outputs, meta, ctxJSON, tags, hitl, decision []byte
	var hitlRequired, fired int
	var created, updated int64
	var decisionKey string
	var expires sql.NullInt64
	err := row.Scan(&c.ID, &c.SessionID, &c.Seq, &c.Name, &c.Type, &c.Trigger, &c.Summary, &c.Description,
		&c.ProjectPath, &c.WorkspaceRef, &files, &state, &outputs, &meta, &ctxJSON, &tags, &c.Phase, &c.Step,
		&c.ParentID, &c.Checksum, &hitlRequired, &hitl, &fired, &decision, &decisionKey, &c.CreatedBy, &created, &expires,
		&updated, &c.TokenCount, &c.TokenEncoding)
	if err != nil {
		return nil, err
	}
	c.AgentState, c.Outputs, c.Metadata = fromRaw(state), fromRaw(outputs), fromRaw(meta)
	c.HITLRequired, c.TimeoutFired = hitlRequired == 1, fired == 1
	c.CreatedAt, c.ExpiresAt, c.UpdatedAt = fromTS(created), fromNullTS(expires), fromTS(updated)
	if files != nil {
		c.Files = new(belay.FileChanges)
	}
	if hitl != nil {
		c.HITL = new(belay.HITLRequest)
	}
	if decision != nil {
		c.Decision = new(belay.Decision)
	}
	for _, err := range []error{decode(files, c.Files), decode(ctxJSON, &c.Context), decode(tags, &c.Tags),
		decode(hitl, c.HITL), decode(decision, c.Decision)} {
		if err != nil {
			return nil, err
		}
	}
	if c.Decision != nil {
		c.Decision.IdempotencyKey = decisionKey
	}
	return &c, nil
}

func checkpointNotFound(id string) error {
	return belay.Errorf(belay.CodeCheckpointNotFound, "checkpoint %s not found", id).With("id", id)
}

// getCheckpoint returns the checkpoint where selects, or notFound's error.
func (r reader) getCheckpoint(ctx context.Context, notFound func() error, where string, args ...any) (*belay.Checkpoint, error) {
	c, err := scanCheckpoint(r.q.QueryRowContext(ctx, `SELECT `+checkpointCols+` FROM checkpoints WHERE `+where, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound()
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: get checkpoint: %w", err)
	}
	if err := r.loadCheckpointState(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

func (r reader) GetCheckpoint(ctx context.Context, id string) (*belay.Checkpoint, error) {
	return r.getCheckpoint(ctx, func() error { return checkpointNotFound(id) }, `id = ?`, id)
}

func (r reader) GetCheckpointBySeq(ctx context.Context, sessionID string, seq int64) (*belay.Checkpoint, error) {
	return r.getCheckpoint(ctx, func() error { return store.CheckpointSeqNotFound(sessionID, seq) }, `session_id = ? AND seq = ?`, sessionID, seq)
}

func (r reader) queryCheckpoints(ctx context.Context, query string, args ...any) ([]*belay.Checkpoint, error) {
	page, _, err := r.checkpointPage(ctx, -1, 0, query, args...)
	return page, err
}

// checkpointPage reads a page of the checkpoints query selects (see
// store.ReadPage).
func (r reader) checkpointPage(ctx context.Context, limit int, maxBytes int64, query string, args ...any) ([]*belay.Checkpoint, bool, error) {
	rows, err := r.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, false, fmt.Errorf("postgres: query checkpoints: %w", err)
	}
	defer rows.Close()
	page, more, err := store.ReadPage(rows, func() (*belay.Checkpoint, error) { return scanCheckpoint(rows) }, limit, maxBytes, store.CheckpointBytes)
	if err != nil {
		return nil, false, fmt.Errorf("postgres: scan checkpoint: %w", err)
	}
	page, err = r.loadCheckpoints(ctx, rows, page)
	return page, more, err
}

func (r reader) ListCheckpoints(ctx context.Context, q store.CheckpointQuery) ([]*belay.Checkpoint, int64, bool, error) {
	var where []string
	var args []any
	add := func(cond string, a ...any) { where, args = append(where, cond), append(args, a...) }
	from := "checkpoints"
	if len(q.Tags) > 0 {
		// Driven from the tag index by the rarest tag, the others checked per
		// match: only the matches are looked up and sorted.
		tags, err := r.rarestFirst(ctx, q.Tags)
		if err != nil {
			return nil, 0, false, err
		}
		from = "checkpoint_tags AS t0 JOIN checkpoints ON checkpoints.id = t0.checkpoint_id"
		add("t0.tag = ?", tags[0])
		for _, tag := range tags[1:] {
			add("EXISTS (SELECT 1 FROM checkpoint_tags t WHERE t.tag = ? AND t.checkpoint_id = checkpoints.id)", tag)
		}
	}
	if cond, a := scopeFilter(q.Scope, "session_id", "project_path", ""); cond != "" {
		add(cond, a...)
	}
	if q.SessionID != "" {
		add("session_id = ?", q.SessionID)
	}
	if q.ProjectPath != "" {
		add("project_path = ?", q.ProjectPath)
	}
	if q.Name != "" {
		add("name = ?", q.Name)
	}
	if q.Step != 0 {
		add("step = ?", q.Step)
	}
	if q.Type != "" {
		add("type = ?", string(q.Type))
	}
	if q.HITLRequired != nil {
		// A literal, not a parameter, so the partial index on HITL checkpoints applies.
		add(fmt.Sprintf("hitl_required = %d", boolInt(*q.HITLRequired)))
	}
	if q.HITLDecided != nil {
		if *q.HITLDecided {
			add("decided_at IS NOT NULL")
		} else {
			add("hitl_required = 1 AND decided_at IS NULL")
		}
	}
	if q.CreatedAfter != nil {
		add("created_at > ?", ts(*q.CreatedAfter))
	}
	if q.CreatedBefore != nil {
		add("created_at < ?", ts(*q.CreatedBefore))
	}
	filter := ""
	if len(where) > 0 {
		filter = " WHERE " + strings.Join(where, " AND ")
	}
	var total int64
	if err := r.q.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+from+filter, args...).Scan(&total); err != nil {
		return nil, 0, false, fmt.Errorf("postgres: count checkpoints: %w", err)
	}
	cmp, dir := ">", "ASC"
	if q.Desc {
		cmp, dir = "<", "DESC"
	}
	order := "created_at " + dir + ", id " + dir
	bySeq := q.SessionID != "" && !q.OrderByType && !q.OrderByUpdated
	switch {
	case q.OrderByType:
		order = "type " + dir + ", " + order
	case q.OrderByUpdated:
		order = "updated_at " + dir + ", id " + dir
	case bySeq:
		order = "seq " + dir
	}
	if a := q.After; a != nil {
		switch {
		case bySeq:
			add("seq "+cmp+" ?", a.Seq)
		case q.OrderByType:
			add("(type, created_at, id) "+cmp+" (?, ?, ?)", string(a.Type), ts(a.CreatedAt), a.ID)
		case q.OrderByUpdated:
			add("(updated_at, id) "+cmp+" (?, ?)", ts(a.UpdatedAt), a.ID)
		default:
			add("(created_at, id) "+cmp+" (?, ?)", ts(a.CreatedAt), a.ID)
		}
		filter = " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, q.Limit+1, q.Offset)
	query := `SELECT ` + checkpointCols + ` FROM ` + from + filter + ` ORDER BY ` + order + ` LIMIT ? OFFSET ?`
	if from != "checkpoints" {
		// The tag matches are sorted, not read in index order: sort just
		// their keys, then read the rows of the one page.
		query = `SELECT ` + checkpointCols + ` FROM checkpoints WHERE id IN (SELECT checkpoints.id FROM ` + from + filter +
			` ORDER BY ` + order + ` LIMIT ? OFFSET ?) ORDER BY ` + order
	}
	items, more, err := r.checkpointPage(ctx, q.Limit, q.MaxBytes, query, args...)
	return items, total, more, err
}

// rarestFirst orders tags by how many checkpoints carry them, fewest first.
func (r reader) rarestFirst(ctx context.Context, tags []string) ([]string, error) {
	if len(tags) == 1 {
		return tags, nil
	}
	counts := make(map[string]int64, len(tags))
	for _, t := range tags {
		var n int64
		if err := r.q.QueryRowContext(ctx, `SELECT COUNT(*) FROM checkpoint_tags WHERE tag = ?`, t).Scan(&n); err != nil {
			return nil, fmt.Errorf("postgres: count tag: %w", err)
		}
		counts[t] = n
	}
	out := slices.Clone(tags)
	slices.SortStableFunc(out, func(a, b string) int { return cmp.Compare(counts[a], counts[b]) })
	return out, nil
}

func (r reader) PendingHITL(ctx context.Context, q store.PendingQuery) ([]*belay.Checkpoint, bool, error) {
	where, args := "hitl_required = 1 AND decided_at IS NULL", []any{}
	// Approvers see the requests that name them, in any session.
	if cond, a := scopeFilter(q.Scope, "session_id", "project_path", "hitl"); cond != "" {
		where += " AND " + cond
		args = append(args, a...)
	}
	if q.SessionID != "" {
		where += " AND session_id = ?"
		args = append(args, q.SessionID)
	}
	if q.After != nil {
		where += " AND (created_at, id) > (?, ?)"
		args = append(args, ts(q.After.CreatedAt), q.After.ID)
	}
	args = append(args, q.Limit+1)
	return r.checkpointPage(ctx, q.Limit, q.MaxBytes, `SELECT `+checkpointCols+` FROM checkpoints WHERE `+where+` ORDER BY created_at, id LIMIT ?`, args...)
}

// dueAt is the deadline of an open request: the earlier of its timeout,
// unless it fired, and its checkpoint's expiry (LEAST skips a NULL).
const dueAt = `LEAST(CASE WHEN timeout_fired = 0 THEN hitl_expires_at END, expires_at)`

// dueCols are checkpointCols of the checkpoints named c.
var dueCols = func() string {
	cols := strings.Split(checkpointCols, ",")
	for i, c := range cols {
		cols[i] = "c." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}()

// DueHITL finds timeouts by the checkpoints_due index and expiries by
// checkpoints_expiring, one arm of the OR each. Inside a transaction it
// claims each request with its session, the session first (rows are locked
// in the order the OF list names their tables), and passes over a request
// whose session another transaction holds: every writer takes a session
// before its requests (core's deciders lock the session, then decide), so a
// sweeper that held requests and then waited for their sessions could
// deadlock with one. Taking the session first, a sweeper that passes over a
// request holds no lock on it that would make another pass it over too.
func (r reader) DueHITL(ctx context.Context, now time.Time, limit int) ([]*belay.Checkpoint, error) {
	claim := ""
	if r.inTx {
		claim = " FOR UPDATE OF s, c SKIP LOCKED"
	}
	return r.queryCheckpoints(ctx, `SELECT `+dueCols+` FROM checkpoints AS c JOIN sessions AS s ON s.id = c.session_id
		WHERE (c.hitl_expires_at IS NOT NULL AND c.decided_at IS NULL AND c.timeout_fired = 0 AND c.hitl_expires_at <= ?)
			OR (c.expires_at IS NOT NULL AND c.hitl_required = 1 AND c.decided_at IS NULL AND c.expires_at <= ?)
		ORDER BY `+dueAt+`, c.id LIMIT ?`+claim, ts(now), ts(now), limit)
}

func (r reader) NextHITLDeadline(ctx context.Context) (time.Time, bool, error) {
	var next sql.NullInt64
	err := r.q.QueryRowContext(ctx, `SELECT MIN(deadline) FROM (
		SELECT MIN(hitl_expires_at) AS deadline FROM checkpoints
			WHERE hitl_expires_at IS NOT NULL AND decided_at IS NULL AND timeout_fired = 0
		UNION ALL
		SELECT MIN(expires_at) FROM checkpoints
			WHERE expires_at IS NOT NULL AND hitl_required = 1 AND decided_at IS NULL) AS deadlines`).Scan(&next)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("postgres: next deadline: %w", err)
	}
	if !next.Valid {
		return time.Time{}, false, nil
	}
	return fromTS(next.Int64), true, nil
}

func (t *tx) InsertCheckpoint(ctx context.Context, c *belay.Checkpoint) error {
	files, err := encode(c.Files, c.Files == nil)
	if err != nil {
		return err
	}
	state, err := t.saveState(ctx, c.AgentState)
	if err != nil {
		return err
	}
	cx, err := encode(c.Context, c.Context == nil)
	if err != nil {
		return err
	}
	tags, err := encode(c.Tags, c.Tags == nil)
	if err != nil {
		return err
	}
	hitl, err := encode(c.HITL, c.HITL == nil)
	if err != nil {
		return err
	}
	decision, err := encode(c.Decision, c.Decision == nil)
	if err != nil {
		return err
	}
	var hitlExpires, decidedAt any
	decisionKey := ""
	if c.HITL != nil && c.HITL.Timeout != nil {
		hitlExpires = ts(c.HITL.Timeout.ExpiresAt)
	}
	if c.Decision != nil {
		decidedAt, decisionKey = ts(c.Decision.DecidedAt), c.Decision.IdempotencyKey
	}
	_, err = t.q.ExecContext(ctx, `INSERT INTO checkpoints (`+checkpointCols+`, hitl_expires_at, decided_at)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		c.ID, c.SessionID, c.Seq, c.Name, string(c.Type), string(c.Trigger), c.Summary, c.Description,
		c.ProjectPath, c.WorkspaceRef, files, state, raw(c.Outputs), raw(c.Metadata), cx, tags,
		c.Phase, c.Step, c.ParentID, c.Checksum, boolInt(c.HITLRequired), hitl, boolInt(c.TimeoutFired),
		decision, decisionKey, c.CreatedBy, ts(c.CreatedAt), nullTS(c.ExpiresAt),
		ts(c.UpdatedAt), c.TokenCount, c.TokenEncoding, hitlExpires, decidedAt)
	if err != nil {
		return fmt.Errorf("postgres: insert checkpoint: %w", err)
	}
	for _, tag := range c.Tags {
		if _, err := t.q.ExecContext(ctx, `INSERT INTO checkpoint_tags (checkpoint_id, tag) VALUES (?, ?) ON CONFLICT DO NOTHING`, c.ID, tag); err != nil {
			return fmt.Errorf("postgres: insert tag: %w", err)
		}
	}
	// Searchable by text from this transaction on, and waiting for a vector.
	_, err = t.q.ExecContext(ctx, `WITH doc AS (INSERT INTO checkpoint_search (checkpoint_id, session_id, project_path, doc)
		VALUES (?, ?, ?, ?::tsvector))
		INSERT INTO embedding_queue (checkpoint_id, queued_at) VALUES (?, ?)`,
		c.ID, c.SessionID, c.ProjectPath, searchDoc(c.Name, c.Summary, c.Description, c.Tags), c.ID, ts(c.CreatedAt))
	if err != nil {
		return fmt.Errorf("postgres: index checkpoint: %w", err)
	}
	return nil
}

func (t *tx) DeleteCheckpoint(ctx context.Context, id string) error {
	res, err := t.q.ExecContext(ctx, `DELETE FROM checkpoints WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("postgres: delete checkpoint: %w", err)
	}
	return oneRow(res, func() error { return checkpointNotFound(id) })
}

func (t *tx) DecideIfPending(ctx context.Context, id string, d *belay.Decision) (bool, error) {
	b, err := encode(d, false)
	if err != nil {
		return false, err
	}
	res, err := t.q.ExecContext(ctx, `UPDATE checkpoints SET decision = ?, decided_at = ?, decision_key = ?, updated_at = ?
		WHERE id = ? AND hitl_required = 1 AND decided_at IS NULL`, b, ts(d.DecidedAt), d.IdempotencyKey, ts(d.DecidedAt), id)
	if err != nil {
		return false, fmt.Errorf("postgres: decide: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (t *tx) MarkTimeoutFired(ctx context.Context, id string) (bool, error) {
	res, err := t.q.ExecContext(ctx, `UPDATE checkpoints SET timeout_fired = 1 WHERE id = ? AND timeout_fired = 0 AND decided_at IS NULL`, id)
	if err != nil {
		return false, fmt.Errorf("postgres: mark timeout: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
