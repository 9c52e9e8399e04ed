package postgres

import (
	"context"
	"fmt"
	"time"
)

func (t *tx) InitSetting(ctx context.Context, name string, value []byte) ([]byte, error) {
	if _, err := t.q.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, name, value); err != nil {
		return nil, fmt.Errorf("postgres: init setting: %w", err)
	}
	var stored []byte
	if err := t.q.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = ?`, name).Scan(&stored); err != nil {
		return nil, fmt.Errorf("postgres: read setting: %w", err)
	}
	return stored, nil
}

func (t *tx) AddSignout(ctx context.Context, id string, until, now time.Time) error {
	if _, err := t.q.ExecContext(ctx, `DELETE FROM signouts WHERE until <= ?`, ts(now)); err != nil {
		return fmt.Errorf("postgres: forget signouts: %w", err)
	}
	if _, err := t.q.ExecContext(ctx, `INSERT INTO signouts (id, until) VALUES (?, ?) ON CONFLICT (id) DO NOTHING`, id, ts(until)); err != nil {
		return fmt.Errorf("postgres: add signout: %w", err)
	}
	return nil
}

func (r reader) SignedOut(ctx context.Context, id string) (bool, error) {
	var n int64
	if err := r.q.QueryRowContext(ctx, `SELECT COUNT(*) FROM signouts WHERE id = ?`, id).Scan(&n); err != nil {
		return false, fmt.Errorf("postgres: read signouts: %w", err)
	}
	return n > 0, nil
}

func (t *tx) PutSetting(ctx context.Context, name string, value []byte) error {
	if _, err := t.q.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value`, name, value); err != nil {
		return fmt.Errorf("postgres: put setting: %w", err)
	}
	return nil
}
