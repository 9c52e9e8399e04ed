package sqlite

import (
	"time"

	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

func (r reader) ListEvents(ctx context.Context, q store.EventQuery) ([]belay.Event, error) {
	where, args := []string{"seq > ?"}, []any{q.After}
	if !q.Scope.All || len(q.Scope.Projects) > 0 {
		// Events of no session are belay's own (webhooks, tokens): for All only.
		approvers := ""
		if q.Approvals {
			// Of a session that still exists, as the live feed tells them.
			approvers = "CASE WHEN events.type IN ('" + strings.Join(store.HITLEventTypes, "','") +
				"') AND EXISTS (SELECT 1 FROM sessions WHERE id = events.session_id) THEN events.data END"
		}
		cond, a := scopeFilter(q.Scope, "session_id", "(SELECT project_path FROM sessions WHERE id = events.session_id)", approvers)
		where, args = append(where, cond), append(args, a...)
	}
	if q.SessionID != "" {
		where, args = append(where, "session_id = ?"), append(args, q.SessionID)
	}
	if len(q.Types) > 0 {
		where = append(where, "type IN (?"+strings.Repeat(",?", len(q.Types)-1)+")")
		for _, t := range q.Types {
			args = append(args, t)
		}
	}
	args = append(args, q.Limit)
	rows, err := r.q.QueryContext(ctx, `SELECT seq, type, session_id, checkpoint_id, data, created_at FROM events
		WHERE `+strings.Join(where, " AND ")+` ORDER BY seq LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list events: %w", err)
	}
	defer rows.Close()
	var out []belay.Event
	for rows.Next() {
		var e belay.Event
		var data []byte
		var created int64
		if err := rows.Scan(&e.Seq, &e.Type, &e.SessionID, &e.CheckpointID, &data, &created); err != nil {
			return nil, fmt.Errorf("sqlite: scan event: %w", err)
		}
		e.Data, e.CreatedAt = fromRaw(data), fromTS(created)
		out = append(out, e)
	}
	return out, rows.Err()
}

func (r reader) LastEventSeq(ctx context.Context) (int64, error) {
	var seq sql.NullInt64
	if err := r.q.QueryRowContext(ctx, `SELECT MAX(seq) FROM events`).Scan(&seq); err != nil {
		return 0, fmt.Errorf("sqlite: last event: %w", err)
	}
	return seq.Int64, nil
}

func (t *tx) AppendEvent(ctx context.Context, e *belay.Event) error {
	// seq is the rowid: the last insert's id, with no result rows to read.
	res, err := t.q.ExecContext(ctx, `INSERT INTO events (type, session_id, checkpoint_id, data, created_at)
		VALUES (?, ?, ?, ?, ?)`, e.Type, e.SessionID, e.CheckpointID, raw(e.Data), ts(e.CreatedAt))
	if err == nil {
		e.Seq, err = res.LastInsertId()
	}
	if err != nil {
		return fmt.Errorf("sqlite: append event: %w", err)
	}
	return nil
}

func (r reader) ListRollbacks(ctx context.Context, sessionID string) ([]*belay.Rollback, error) {
	rows, err := r.q.QueryContext(ctx, `SELECT id, session_id, from_checkpoint_id, target_id, reason, user_id,
		restored_files, created_at FROM rollbacks WHERE session_id = ? ORDER BY created_at, id`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list rollbacks: %w", err)
	}
	defer rows.Close()
	var out []*belay.Rollback
	for rows.Next() {
		var rb belay.Rollback
		var files []byte
		var created int64
		if err := rows.Scan(&rb.ID, &rb.SessionID, &rb.FromCheckpointID, &rb.TargetID, &rb.Reason, &rb.UserID, &files, &created); err != nil {
			return nil, fmt.Errorf("sqlite: scan rollback: %w", err)
		}
		if err := decode(files, &rb.RestoredFiles); err != nil {
			return nil, err
		}
		rb.CreatedAt = fromTS(created)
		out = append(out, &rb)
	}
	return out, rows.Err()
}

func (t *tx) InsertRollback(ctx context.Context, rb *belay.Rollback) error {
	files, err := encode(rb.RestoredFiles, rb.RestoredFiles == nil)
	if err != nil {
		return err
	}
	_, err = t.q.ExecContext(ctx, `INSERT INTO rollbacks (id, session_id, from_checkpoint_id, target_id, reason,
		user_id, restored_files, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		rb.ID, rb.SessionID, rb.FromCheckpointID, rb.TargetID, rb.Reason, rb.UserID, files, ts(rb.CreatedAt))
	if err != nil {
		return fmt.Errorf("sqlite: insert rollback: %w", err)
	}
	return nil
}

func userNotFound(name string) error {
	return belay.Errorf(belay.CodeNotFound, "user %s not found", name).With("user", name)
}

func scanUser(row scanner, name string) (*belay.User, error) {
	var u belay.User
	var admin int
	var created int64
	err := row.Scan(&u.Name, &admin, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, userNotFound(name)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get user: %w", err)
	}
	u.Admin, u.CreatedAt = admin == 1, fromTS(created)
	return &u, nil
}

func (r reader) GetUser(ctx context.Context, name string) (*belay.User, error) {
	return scanUser(r.q.QueryRowContext(ctx, `SELECT name, admin, created_at FROM users WHERE name = ?`, name), name)
}

func (r reader) CountUsers(ctx context.Context) (int64, error) {
	var n int64
	if err := r.q.QueryRowContext(ctx, `SELECT COUNT(*) FROM users`).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: count users: %w", err)
	}
	return n, nil
}

func (t *tx) PutUser(ctx context.Context, u *belay.User) error {
	_, err := t.q.ExecContext(ctx, `INSERT INTO users (name, admin, created_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET admin = excluded.admin`, u.Name, boolInt(u.Admin), ts(u.CreatedAt))
	if err != nil {
		return fmt.Errorf("sqlite: put user: %w", err)
	}
	return nil
}

func (r reader) ListWebhooks(ctx context.Context) ([]*belay.Webhook, error) {
	rows, err := r.q.QueryContext(ctx, `SELECT id, url, secret, events, last_seq, created_at FROM webhooks ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list webhooks: %w", err)
	}
	defer rows.Close()
	var out []*belay.Webhook
	for rows.Next() {
		var w belay.Webhook
		var events []byte
		var created int64
		if err := rows.Scan(&w.ID, &w.URL, &w.Secret, &events, &w.LastSeq, &created); err != nil {
			return nil, fmt.Errorf("sqlite: scan webhook: %w", err)
		}
		if err := decode(events, &w.Events); err != nil {
			return nil, err
		}
		w.CreatedAt = fromTS(created)
		out = append(out, &w)
	}
	return out, rows.Err()
}

func (t *tx) InsertWebhook(ctx context.Context, w *belay.Webhook) error {
	events, err := encode(w.Events, w.Events == nil)
	if err != nil {
		return err
	}
	_, err = t.q.ExecContext(ctx, `INSERT INTO webhooks (id, url, secret, events, last_seq, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		w.ID, w.URL, w.Secret, events, w.LastSeq, ts(w.CreatedAt))
	if err != nil {
		return fmt.Errorf("sqlite: insert webhook: %w", err)
	}
	return nil
}

func webhookNotFound(id string) error {
	return belay.Errorf(belay.CodeNotFound, "webhook %s not found", id).With("id", id)
}

func (t *tx) DeleteWebhook(ctx context.Context, id string) error {
	res, err := t.q.ExecContext(ctx, `DELETE FROM webhooks WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("sqlite: delete webhook: %w", err)
	}
	return oneRow(res, func() error { return webhookNotFound(id) })
}

func (t *tx) AdvanceWebhook(ctx context.Context, id string, seq int64) error {
	if _, err := t.q.ExecContext(ctx, `UPDATE webhooks SET last_seq = ? WHERE id = ? AND last_seq < ?`, seq, id, seq); err != nil {
		return fmt.Errorf("sqlite: advance webhook: %w", err)
	}
	return nil
}

func (t *tx) ClaimWebhook(ctx context.Context, id, holder string, now, until time.Time) (bool, error) {
	res, err := t.q.ExecContext(ctx, `UPDATE webhooks SET claim_holder = ?, claim_until = ?
		WHERE id = ? AND (claim_holder = ? OR claim_holder = '' OR claim_until <= ?)`, holder, ts(until), id, holder, ts(now))
	if err != nil {
		return false, fmt.Errorf("sqlite: claim webhook: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqlite: claim webhook: %w", err)
	}
	return n == 1, nil
}

func (r reader) ListDeliveries(ctx context.Context, q store.DeliveryQuery) ([]*belay.Delivery, error) {
	where, args := "", []any{}
	if q.WebhookID != "" {
		where, args = " WHERE webhook_id = ?", append(args, q.WebhookID)
	}
	args = append(args, q.Limit)
	rows, err := r.q.QueryContext(ctx, `SELECT id, webhook_id, event_seq, event_type, attempt, status_code, error,
		duration_ms, created_at FROM webhook_deliveries`+where+` ORDER BY created_at DESC, id DESC LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list deliveries: %w", err)
	}
	defer rows.Close()
	var out []*belay.Delivery
	for rows.Next() {
		var d belay.Delivery
		var created int64
		if err := rows.Scan(&d.ID, &d.WebhookID, &d.EventSeq, &d.EventType, &d.Attempt, &d.StatusCode, &d.Error, &d.DurationMs, &created); err != nil {
			return nil, fmt.Errorf("sqlite: scan delivery: %w", err)
		}
		d.CreatedAt = fromTS(created)
		out = append(out, &d)
	}
	return out, rows.Err()
}

func (r reader) LastDelivery(ctx context.Context, webhookID string, seq int64) (*belay.Delivery, error) {
	var d belay.Delivery
	var created int64
	err := r.q.QueryRowContext(ctx, `SELECT id, webhook_id, event_seq, event_type, attempt, status_code, error,
		duration_ms, created_at FROM webhook_deliveries WHERE webhook_id = ? AND event_seq = ? ORDER BY attempt DESC LIMIT 1`,
		webhookID, seq).Scan(&d.ID, &d.WebhookID, &d.EventSeq, &d.EventType, &d.Attempt, &d.StatusCode, &d.Error, &d.DurationMs, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: last delivery: %w", err)
	}
	d.CreatedAt = fromTS(created)
	return &d, nil
}

func (t *tx) InsertDelivery(ctx context.Context, d *belay.Delivery) error {
	_, err := t.q.ExecContext(ctx, `INSERT INTO webhook_deliveries (id, webhook_id, event_seq, event_type, attempt,
		status_code, error, duration_ms, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		d.ID, d.WebhookID, d.EventSeq, d.EventType, d.Attempt, d.StatusCode, d.Error, d.DurationMs, ts(d.CreatedAt))
	if err != nil {
		return fmt.Errorf("sqlite: insert delivery: %w", err)
	}
	return nil
}
