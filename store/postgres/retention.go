package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/belayhq/belay"
)

func (r reader) ListRetention(ctx context.Context) ([]belay.RetentionPolicy, error) {
	rows, err := r.q.QueryContext(ctx, `SELECT project_path, keep_last, max_age FROM retention ORDER BY project_path`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list retention: %w", err)
	}
	defer rows.Close()
	var out []belay.RetentionPolicy
	for rows.Next() {
		var p belay.RetentionPolicy
		var age int64
		if err := rows.Scan(&p.ProjectPath, &p.KeepLast, &age); err != nil {
			return nil, fmt.Errorf("postgres: scan retention: %w", err)
		}
		p.MaxAge = time.Duration(age)
		out = append(out, p)
	}
	return out, rows.Err()
}

func (t *tx) PutRetention(ctx context.Context, p belay.RetentionPolicy) error {
	_, err := t.q.ExecContext(ctx, `INSERT INTO retention (project_path, keep_last, max_age) VALUES (?, ?, ?)
		ON CONFLICT (project_path) DO UPDATE SET keep_last = excluded.keep_last, max_age = excluded.max_age`,
		p.ProjectPath, p.KeepLast, int64(p.MaxAge))
	if err != nil {
		return fmt.Errorf("postgres: put retention: %w", err)
	}
	return nil
}

func (t *tx) DeleteRetention(ctx context.Context, projectPath string) error {
	if _, err := t.q.ExecContext(ctx, `DELETE FROM retention WHERE project_path = ?`, projectPath); err != nil {
		return fmt.Errorf("postgres: delete retention: %w", err)
	}
	return nil
}
