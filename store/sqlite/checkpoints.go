package sqlite

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
		return nil, fmt.Errorf("sqlite: get checkpoint: %w", err)
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
		return nil, false, fmt.Errorf("sqlite: query checkpoints: %w", err)
	}
	defer rows.Close()
	page, more, err := store.ReadPage(rows, func() (*belay.Checkpoint, error) { return scanCheckpoint(rows) }, limit, maxBytes, store.CheckpointBytes)
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: scan checkpoint: %w", err)
	}
	page, err = r.loadCheckpoints(ctx, rows, page)
	return page, more, err
}

func (r reader) ListCheckpoints(ctx context.Context, q store.CheckpointQuery) ([]*belay.Checkpoint, int64, bool, error) {
	var where []string
	var args []any
	add := func(cond string, a ...any) { where, args = append(where, cond), append(args, a...) }
	from, countFrom := "checkpoints", "checkpoints"
	// Of the lists' order (created_at, id), the columns of the rows read:
	// a tag's entries carry them too.
	created, id := "created_at", "id"
	if len(q.Tags) > 0 {
		// Driven from the tag index by the rarest tag, in the lists' order
		// (its entries are sorted by their checkpoint's created_at and id),
		// the others checked per entry: a page reads only its matches.
		// CROSS JOIN keeps SQLite from scanning every checkpoint in date
		// order instead.
		tags, err := r.rarestFirst(ctx, q.Tags)
		if err != nil {
			return nil, 0, false, err
		}
		from = "checkpoint_tags AS t0 CROSS JOIN checkpoints ON checkpoints.id = t0.checkpoint_id"
		countFrom = "checkpoint_tags AS t0"
		created, id = "t0.checkpoint_created_at", "t0.checkpoint_id"
		add("t0.tag = ?", tags[0])
		for _, tag := range tags[1:] {
			add(`EXISTS (SELECT 1 FROM checkpoint_tags t WHERE t.tag = ?
				AND t.checkpoint_created_at = t0.checkpoint_created_at AND t.checkpoint_id = t0.checkpoint_id)`, tag)
		}
	}
	tagsOnly := len(where)
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
		if q.SessionID != "" || q.ProjectPath != "" {
			// "+type" keeps SQLite off the type index: within one session or
			// project, walking its own index and checking the type is far
			// cheaper than walking every checkpoint of that type.
			add("+type = ?", string(q.Type))
		} else {
			add("type = ?", string(q.Type))
		}
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
	if len(where) > tagsOnly {
		// A filter on the checkpoints' columns: each match's row is read.
		countFrom = from
	}
	var total int64
	if err := r.q.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+countFrom+filter, args...).Scan(&total); err != nil {
		return nil, 0, false, fmt.Errorf("sqlite: count checkpoints: %w", err)
	}
	cmp, dir := ">", "ASC"
	if q.Desc {
		cmp, dir = "<", "DESC"
	}
	bySeq := q.SessionID != "" && !q.OrderByType && !q.OrderByUpdated
	// orderBy is the list's order over rows whose created_at and id the
	// columns created and id hold.
	orderBy := func(created, id string) string {
		byCreation := created + " " + dir + ", " + id + " " + dir
		switch {
		case q.OrderByType:
			return "type " + dir + ", " + byCreation
		case q.OrderByUpdated:
			return "updated_at " + dir + ", id " + dir
		case bySeq:
			return "seq " + dir
		}
		return byCreation
	}
	order := orderBy(created, id)
	if a := q.After; a != nil {
		switch {
		case bySeq:
			add("seq "+cmp+" ?", a.Seq)
		case q.OrderByType:
			add("(type, created_at, id) "+cmp+" (?, ?, ?)", string(a.Type), ts(a.CreatedAt), a.ID)
		case q.OrderByUpdated:
			add("(updated_at, id) "+cmp+" (?, ?)", ts(a.UpdatedAt), a.ID)
		default:
			add("("+created+", "+id+") "+cmp+" (?, ?)", ts(a.CreatedAt), a.ID)
		}
		filter = " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, q.Limit+1, q.Offset)
	query := `SELECT ` + checkpointCols + ` FROM ` + from + filter + ` ORDER BY ` + order + ` LIMIT ? OFFSET ?`
	if from != "checkpoints" {
		// The page's ids first, from the tag's entries (sorting just their
		// keys in another order than the lists'), then the rows of the page.
		query = `SELECT ` + checkpointCols + ` FROM checkpoints WHERE id IN (SELECT checkpoints.id FROM ` + from + filter +
			` ORDER BY ` + order + ` LIMIT ? OFFSET ?) ORDER BY ` + orderBy("created_at", "id")
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
			return nil, fmt.Errorf("sqlite: count tag: %w", err)
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
// unless it fired, and its checkpoint's expiry (SQLite's MIN of several
// values is NULL when one is).
const dueAt = `COALESCE(MIN(CASE WHEN timeout_fired = 0 THEN hitl_expires_at END, expires_at),
	CASE WHEN timeout_fired = 0 THEN hitl_expires_at END, expires_at)`

// DueHITL finds timeouts by the checkpoints_due index and expiries by
// checkpoints_expiring, one arm of the OR each.
func (r reader) DueHITL(ctx context.Context, now time.Time, limit int) ([]*belay.Checkpoint, error) {
	return r.queryCheckpoints(ctx, `SELECT `+checkpointCols+` FROM checkpoints
		WHERE (hitl_expires_at IS NOT NULL AND decided_at IS NULL AND timeout_fired = 0 AND hitl_expires_at <= ?)
			OR (expires_at IS NOT NULL AND hitl_required = 1 AND decided_at IS NULL AND expires_at <= ?)
		ORDER BY `+dueAt+`, id LIMIT ?`, ts(now), ts(now), limit)
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
		return time.Time{}, false, fmt.Errorf("sqlite: next deadline: %w", err)
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
	// doc_id, the row's key, names its full-text entry and vector: above the
	// highest and both marks of search_state, so a deleted checkpoint's
	// doc_id is never used again and a new one is always past the marks.
	_, err = t.q.ExecContext(ctx, `INSERT INTO checkpoints (`+checkpointCols+`, hitl_expires_at, decided_at, doc_id)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,
			(SELECT MAX(COALESCE((SELECT MAX(doc_id) FROM checkpoints), 0), indexed_through, queued_through) + 1
			FROM search_state WHERE id = 1))`,
		c.ID, c.SessionID, c.Seq, c.Name, string(c.Type), string(c.Trigger), c.Summary, c.Description,
		c.ProjectPath, c.WorkspaceRef, files, state, raw(c.Outputs), raw(c.Metadata), cx, tags,
		c.Phase, c.Step, c.ParentID, c.Checksum, boolInt(c.HITLRequired), hitl, boolInt(c.TimeoutFired),
		decision, decisionKey, c.CreatedBy, ts(c.CreatedAt), nullTS(c.ExpiresAt),
		ts(c.UpdatedAt), c.TokenCount, c.TokenEncoding, hitlExpires, decidedAt)
	if err != nil {
		return fmt.Errorf("sqlite: insert checkpoint: %w", err)
	}
	for _, tag := range c.Tags {
		if _, err := t.q.ExecContext(ctx, `INSERT OR IGNORE INTO checkpoint_tags (tag, checkpoint_created_at, checkpoint_id) VALUES (?, ?, ?)`,
			tag, ts(c.CreatedAt), c.ID); err != nil {
			return fmt.Errorf("sqlite: insert tag: %w", err)
		}
	}
	return nil
}

func (t *tx) DeleteCheckpoint(ctx context.Context, id string) error {
	res, err := t.q.ExecContext(ctx, `DELETE FROM checkpoints WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("sqlite: delete checkpoint: %w", err)
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
		return false, fmt.Errorf("sqlite: decide: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (t *tx) MarkTimeoutFired(ctx context.Context, id string) (bool, error) {
	res, err := t.q.ExecContext(ctx, `UPDATE checkpoints SET timeout_fired = 1 WHERE id = ? AND timeout_fired = 0 AND decided_at IS NULL`, id)
	if err != nil {
		return false, fmt.Errorf("sqlite: mark timeout: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
