package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/chunkstore"
)

// querier runs the driver's statements; its errors report storage faults as
// STORAGE_UNAVAILABLE (see storageFault).
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) scanner
}

// reader runs the queries, on the read pool or inside a write transaction.
// vectors is the read pool's in-memory copy of the vectors; nil in a transaction.
type reader struct {
	q       querier
	vectors *vectorIndex
}

// tx is a write transaction: the reader's querier runs inside it.
type tx struct {
	reader
	// kept is the last state of at least chunkstore.CompressMin bytes that
	// saveState stored in this transaction, and what it stored: a root, the
	// state compressed, or the state itself (see advancedState).
	kept struct {
		state  json.RawMessage
		stored []byte
	}
}

type scanner interface{ Scan(dest ...any) error }

const sessionCols = `id, project_path, title, owner, status, phase, current_step, state,
	head_checkpoint_id, last_seq, checkpoint_count, cost, metadata, created_at, updated_at,
	holder, lease_expires_at, end_reason, plan, cost_micros`

func scanSession(row scanner) (*belay.Session, error) {
	var s belay.Session
	var state, meta, plan []byte
	var created, updated int64
	var lease sql.NullInt64
	err := row.Scan(&s.ID, &s.ProjectPath, &s.Title, &s.Owner, &s.Status, &s.Phase, &s.CurrentStep,
		&state, &s.HeadCheckpointID, &s.LastSeq, &s.CheckpointCount, &s.Cost, &meta, &created, &updated,
		&s.Holder, &lease, &s.EndReason, &plan, &s.CostMicros)
	if err != nil {
		return nil, err
	}
	s.State, s.Metadata = fromRaw(state), fromRaw(meta)
	s.CreatedAt, s.UpdatedAt, s.LeaseExpiresAt = fromTS(created), fromTS(updated), fromNullTS(lease)
	if err := decode(plan, &s.Plan); err != nil {
		return nil, err
	}
	return &s, nil
}

func sessionNotFound(what string) error {
	return belay.Errorf(belay.CodeSessionNotFound, "session %s not found", what).With("id", what)
}

func (r reader) GetSession(ctx context.Context, id string) (*belay.Session, error) {
	s, err := scanSession(r.q.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, sessionNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get session: %w", err)
	}
	if err := r.loadSessionState(ctx, s); err != nil {
		return nil, err
	}
	return s, nil
}

// sessionHeadCols are the columns GetSessionHead reads.
const sessionHeadCols = `id, project_path, owner, status, phase, current_step, head_checkpoint_id, last_seq,
	checkpoint_count, holder, lease_expires_at`

func (r reader) GetSessionHead(ctx context.Context, id string) (*belay.Session, error) {
	heads := headsOf(r.q)
	if heads != nil {
		h, ok, err := heads.get(ctx, r.q, id)
		if err != nil {
			return nil, err
		}
		if ok {
			return h.session(id), nil
		}
	}
	var s belay.Session
	var lease sql.NullInt64
	err := r.q.QueryRowContext(ctx, `SELECT `+sessionHeadCols+` FROM sessions WHERE id = ?`, id).Scan(
		&s.ID, &s.ProjectPath, &s.Owner, &s.Status, &s.Phase, &s.CurrentStep, &s.HeadCheckpointID, &s.LastSeq,
		&s.CheckpointCount, &s.Holder, &lease)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, sessionNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get session head: %w", err)
	}
	s.LeaseExpiresAt = fromNullTS(lease)
	if heads != nil {
		if err := heads.put(ctx, r.q, id, headOf(&s)); err != nil {
			return nil, err
		}
	}
	return &s, nil
}

// closedStatuses is the SQL list of the statuses that are not SessionStatus.Open.
var closedStatuses = func() string {
	var out []string
	for _, st := range belay.SessionStatuses {
		if !st.Open() {
			out = append(out, "'"+string(st)+"'")
		}
	}
	return "(" + strings.Join(out, ", ") + ")"
}()

func (r reader) ActiveSession(ctx context.Context, projectPath string, scope store.Scope) (*belay.Session, error) {
	where, args := "project_path = ? AND status NOT IN "+closedStatuses, []any{projectPath}
	if cond, a := scopeFilter(scope, "id", "project_path", ""); cond != "" {
		where, args = where+" AND "+cond, append(args, a...)
	}
	s, err := scanSession(r.q.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions
		WHERE `+where+` ORDER BY created_at DESC, id DESC LIMIT 1`, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, belay.Errorf(belay.CodeSessionNotFound, "no active session for %s", projectPath).With("projectPath", projectPath)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: active session: %w", err)
	}
	if err := r.loadSessionState(ctx, s); err != nil {
		return nil, err
	}
	return s, nil
}

func (r reader) ListSessions(ctx context.Context, q store.SessionQuery) ([]*belay.Session, int64, bool, error) {
	var where []string
	var args []any
	if cond, a := scopeFilter(q.Scope, "id", "project_path", ""); cond != "" {
		where, args = append(where, cond), append(args, a...)
	}
	if q.ProjectPath != "" {
		where, args = append(where, "project_path = ?"), append(args, q.ProjectPath)
	}
	if q.Status != "" {
		where, args = append(where, "status = ?"), append(args, string(q.Status))
	}
	filter := ""
	if len(where) > 0 {
		filter = " WHERE " + strings.Join(where, " AND ")
	}
	var total int64
	if err := r.q.QueryRowContext(ctx, `SELECT COUNT(*) FROM sessions`+filter, args...).Scan(&total); err != nil {
		return nil, 0, false, fmt.Errorf("sqlite: count sessions: %w", err)
	}
	if q.After != nil {
		where = append(where, "(created_at, id) < (?, ?)")
		args = append(args, ts(q.After.CreatedAt), q.After.ID)
	}
	filter = ""
	if len(where) > 0 {
		filter = " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, q.Limit+1)
	rows, err := r.q.QueryContext(ctx, `SELECT `+sessionCols+` FROM sessions`+filter+` ORDER BY created_at DESC, id DESC LIMIT ?`, args...)
	if err != nil {
		return nil, 0, false, fmt.Errorf("sqlite: list sessions: %w", err)
	}
	defer rows.Close()
	out, more, err := store.ReadPage(rows, func() (*belay.Session, error) { return scanSession(rows) }, q.Limit, q.MaxBytes, store.SessionBytes)
	if err != nil {
		return nil, 0, false, fmt.Errorf("sqlite: scan session: %w", err)
	}
	out, err = r.loadSessions(ctx, rows, out)
	return out, total, more, err
}

func (t *tx) InsertSession(ctx context.Context, s *belay.Session) error {
	t.forgetHead(s.ID)
	plan, err := encode(s.Plan, s.Plan == nil)
	if err != nil {
		return err
	}
	state, err := t.saveState(ctx, s.State)
	if err != nil {
		return err
	}
	_, err = t.q.ExecContext(ctx, `INSERT INTO sessions (`+sessionCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		s.ID, s.ProjectPath, s.Title, s.Owner, string(s.Status), s.Phase, s.CurrentStep, state,
		s.HeadCheckpointID, s.LastSeq, s.CheckpointCount, s.Cost, raw(s.Metadata), ts(s.CreatedAt), ts(s.UpdatedAt),
		s.Holder, nullTS(s.LeaseExpiresAt), s.EndReason, plan, s.CostMicros)
	if err != nil {
		return fmt.Errorf("sqlite: insert session: %w", err)
	}
	return nil
}

func (t *tx) UpdateSession(ctx context.Context, s *belay.Session) error {
	t.forgetHead(s.ID)
	// project_path and owner never change: leaving them out spares the write
	// of the sessions_project index entry on every checkpoint.
	plan, err := encode(s.Plan, s.Plan == nil)
	if err != nil {
		return err
	}
	state, err := t.saveState(ctx, s.State)
	if err != nil {
		return err
	}
	res, err := t.q.ExecContext(ctx, `UPDATE sessions SET title = ?, status = ?,
		phase = ?, current_step = ?, state = ?, head_checkpoint_id = ?, last_seq = ?, checkpoint_count = ?,
		cost = ?, metadata = ?, updated_at = ?, holder = ?, lease_expires_at = ?, end_reason = ?, plan = ?,
		cost_micros = ? WHERE id = ?`,
		s.Title, string(s.Status), s.Phase, s.CurrentStep, state,
		s.HeadCheckpointID, s.LastSeq, s.CheckpointCount, s.Cost, raw(s.Metadata), ts(s.UpdatedAt),
		s.Holder, nullTS(s.LeaseExpiresAt), s.EndReason, plan, s.CostMicros, s.ID)
	if err != nil {
		return fmt.Errorf("sqlite: update session: %w", err)
	}
	return oneRow(res, func() error { return sessionNotFound(s.ID) })
}

func (t *tx) AdvanceSession(ctx context.Context, s *belay.Session) error {
	state, err := t.advancedState(ctx, s)
	if err != nil {
		return err
	}
	res, err := t.q.ExecContext(ctx, `UPDATE sessions SET status = ?, phase = ?, current_step = ?,
		state = COALESCE(?, state), head_checkpoint_id = ?, last_seq = ?, checkpoint_count = ?, updated_at = ?
		WHERE id = ?`,
		string(s.Status), s.Phase, s.CurrentStep, state, s.HeadCheckpointID, s.LastSeq, s.CheckpointCount,
		ts(s.UpdatedAt), s.ID)
	if err != nil {
		return fmt.Errorf("sqlite: advance session: %w", err)
	}
	if err := oneRow(res, func() error { return sessionNotFound(s.ID) }); err != nil {
		return err
	}
	if heads := headsOf(t.q); heads != nil {
		heads.advanced(s)
	}
	return nil
}

// forgetHead drops session id from the writer's head cache before its row
// changes otherwise than by AdvanceSession.
func (t *tx) forgetHead(id string) {
	if heads := headsOf(t.q); heads != nil {
		heads.forget(id)
	}
}

// advancedState is saveState for the state of a session a save advances,
// which is its head checkpoint's, stored a moment ago: a state kept in its
// row is taken as the checkpoint's row keeps it, and a large state's root as
// that row holds it, sparing the serialised write a second attempt at
// compressing the state, or a second chunking of it and lookup of its chunks
// (most of a large state's cost). The row vouches for the chunks: a
// transaction, or a savepoint, that lost the checkpoint lost its row too.
func (t *tx) advancedState(ctx context.Context, s *belay.Session) (any, error) {
	if kept := t.kept.stored; kept != nil && bytes.Equal(s.State, t.kept.state) {
		if !chunkstore.IsRoot(kept) {
			return kept, nil
		}
		var one int
		err := t.q.QueryRowContext(ctx, `SELECT 1 FROM checkpoints WHERE id = ? AND agent_state = ?`, s.HeadCheckpointID, kept).Scan(&one)
		if err == nil {
			return kept, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("sqlite: head checkpoint's state: %w", err)
		}
	}
	return t.saveState(ctx, s.State)
}

func (t *tx) DeleteSession(ctx context.Context, id string) error {
	t.forgetHead(id)
	res, err := t.q.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("sqlite: delete session: %w", err)
	}
	return oneRow(res, func() error { return sessionNotFound(id) })
}

func oneRow(res sql.Result, notFound func() error) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlite: rows affected: %w", err)
	}
	if n == 0 {
		return notFound()
	}
	return nil
}

func (r reader) DueLeases(ctx context.Context, now time.Time, limit int) ([]*belay.Session, error) {
	rows, err := r.q.QueryContext(ctx, `SELECT `+sessionCols+` FROM sessions
		WHERE lease_expires_at IS NOT NULL AND lease_expires_at <= ? AND status NOT IN `+closedStatuses+`
		ORDER BY lease_expires_at, id LIMIT ?`, ts(now), limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: due leases: %w", err)
	}
	defer rows.Close()
	var out []*belay.Session
	for rows.Next() {
		s, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: scan session: %w", err)
		}
		out = append(out, s)
	}
	return r.loadSessions(ctx, rows, out)
}
