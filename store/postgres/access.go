package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// scopeFilter returns the condition that keeps a query on the sessions (by
// their id column idCol and project column projectCol) that scope may read;
// "" when scope reads everything. With approvers (a HITL request column),
// requests that name the scope's user as an approver are in scope too.
func scopeFilter(scope store.Scope, idCol, projectCol, approvers string) (string, []any) {
	if !scope.All && scope.User == "" {
		return "FALSE", nil // the zero Scope reads nothing, not the sessions of owner ""
	}
	var conds []string
	var args []any
	if scope.OwnOrAdmin {
		// The owner of the session idCol names: the column itself when the
		// query is of the sessions table, so that no query reads them all.
		owner := "(SELECT owner FROM sessions AS o WHERE o.id = " + idCol + ")"
		if idCol == "id" {
			owner = "owner"
		}
		conds = append(conds, "("+owner+" = ? OR "+owner+" NOT IN (SELECT name FROM users WHERE admin = 0))")
		args = append(args, scope.User)
	}
	if !scope.All {
		member := idCol + " IN (SELECT id FROM sessions WHERE owner = ?) OR " +
			idCol + " IN (SELECT session_id FROM session_grants WHERE user_name = ?)"
		args = append(args, scope.User, scope.User)
		if approvers != "" {
			member += " OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(" + parsableJSON(approvers) +
				"::jsonb -> 'approvers') AS a(value) WHERE a.value = ?)"
			args = append(args, scope.User)
		}
		conds = append(conds, "("+member+")")
	}
	if len(scope.Projects) > 0 {
		var alts []string
		for _, p := range scope.Projects {
			p = strings.TrimSuffix(p, "/")
			// Below p: from p+"/" up to p+"0" ('0' follows '/'). Not LIKE,
			// which ignores ASCII case where paths do not.
			alts = append(alts, projectCol+" = ?", "("+projectCol+" >= ? AND "+projectCol+" < ?)")
			args = append(args, p, p+"/", p+"0")
		}
		conds = append(conds, "("+strings.Join(alts, " OR ")+")")
	}
	return strings.Join(conds, " AND "), args
}

// parsableJSON returns the text of the JSON document in the bytea column col
// without its \u0000 and surrogate escapes: PostgreSQL's JSON parser refuses
// the first and lone surrogates, and earlier versions stored both in a
// request's context, so one such row failed every read that looked for
// approvers. Escaped backslashes are matched as pairs and kept, so only real
// escapes go; a string stays a string, the document keeps its shape, and
// approvers (user names, never written with such escapes) their values.
// belay refuses these escapes in what it stores now.
func parsableJSON(col string) string {
	return `regexp_replace(convert_from(` + col + `, 'UTF8'), '(\\\\)|\\u(0000|[dD][89a-fA-F][0-9a-fA-F]{2})', '\1', 'g')`
}

// likePrefix escapes s for a LIKE pattern with '\' as the escape character.
func likePrefix(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

func (r reader) SessionGrants(ctx context.Context, sessionID string) ([]*belay.Grant, error) {
	rows, err := r.q.QueryContext(ctx, `SELECT session_id, user_name, role, granted_by, created_at FROM session_grants
		WHERE session_id = ? ORDER BY created_at, user_name`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("postgres: list grants: %w", err)
	}
	defer rows.Close()
	var out []*belay.Grant
	for rows.Next() {
		var g belay.Grant
		var created int64
		if err := rows.Scan(&g.SessionID, &g.User, &g.Role, &g.GrantedBy, &created); err != nil {
			return nil, fmt.Errorf("postgres: scan grant: %w", err)
		}
		g.CreatedAt = fromTS(created)
		out = append(out, &g)
	}
	return out, rows.Err()
}

func (t *tx) PutGrant(ctx context.Context, g *belay.Grant) error {
	_, err := t.q.ExecContext(ctx, `INSERT INTO session_grants (session_id, user_name, role, granted_by, created_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (user_name, session_id) DO UPDATE SET role = excluded.role,
		granted_by = excluded.granted_by, created_at = excluded.created_at`,
		g.SessionID, g.User, string(g.Role), g.GrantedBy, ts(g.CreatedAt))
	if err != nil {
		return fmt.Errorf("postgres: put grant: %w", err)
	}
	return nil
}

func (t *tx) DeleteGrant(ctx context.Context, sessionID, user string) error {
	res, err := t.q.ExecContext(ctx, `DELETE FROM session_grants WHERE session_id = ? AND user_name = ?`, sessionID, user)
	if err != nil {
		return fmt.Errorf("postgres: delete grant: %w", err)
	}
	return oneRow(res, func() error {
		return belay.Errorf(belay.CodeNotFound, "%s has no grant in session %s", user, sessionID).With("user", user)
	})
}

const tokenCols = `t.id, t.user_name, t.name, u.admin, t.scopes, t.projects, t.created_at, t.last_used_at, t.revoked_at`

func scanToken(row scanner) (*belay.Token, error) {
	var tk belay.Token
	var admin int
	var scopes, projects []byte
	var created int64
	var used, revoked sql.NullInt64
	if err := row.Scan(&tk.ID, &tk.User, &tk.Name, &admin, &scopes, &projects, &created, &used, &revoked); err != nil {
		return nil, err
	}
	if err := decode(scopes, &tk.Scopes); err != nil {
		return nil, err
	}
	if err := decode(projects, &tk.Projects); err != nil {
		return nil, err
	}
	tk.Admin, tk.CreatedAt, tk.LastUsedAt, tk.RevokedAt = admin == 1, fromTS(created), fromNullTS(used), fromNullTS(revoked)
	return &tk, nil
}

func (r reader) TokenByHash(ctx context.Context, tokenHash string) (*belay.Token, *belay.User, error) {
	tk, err := scanToken(r.q.QueryRowContext(ctx, `SELECT `+tokenCols+` FROM tokens t
		JOIN users u ON u.name = t.user_name WHERE t.hash = ?`, tokenHash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, belay.Errorf(belay.CodeNotFound, "token not found")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: get token: %w", err)
	}
	u, err := r.GetUser(ctx, tk.User)
	if err != nil {
		return nil, nil, err
	}
	return tk, u, nil
}

func (r reader) GetToken(ctx context.Context, id string) (*belay.Token, error) {
	tk, err := scanToken(r.q.QueryRowContext(ctx, `SELECT `+tokenCols+` FROM tokens t
		JOIN users u ON u.name = t.user_name WHERE t.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, belay.Errorf(belay.CodeNotFound, "token %s not found", id).With("id", id)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: get token: %w", err)
	}
	return tk, nil
}

func (r reader) ListTokens(ctx context.Context) ([]*belay.Token, error) {
	rows, err := r.q.QueryContext(ctx, `SELECT `+tokenCols+` FROM tokens t JOIN users u ON u.name = t.user_name
		ORDER BY t.created_at DESC, t.id DESC`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list tokens: %w", err)
	}
	defer rows.Close()
	var out []*belay.Token
	for rows.Next() {
		tk, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: scan token: %w", err)
		}
		out = append(out, tk)
	}
	return out, rows.Err()
}

func (t *tx) InsertToken(ctx context.Context, tk *belay.Token, tokenHash string) error {
	scopes, err := encode(tk.Scopes, tk.Scopes == nil)
	if err != nil {
		return err
	}
	projects, err := encode(tk.Projects, tk.Projects == nil)
	if err != nil {
		return err
	}
	_, err = t.q.ExecContext(ctx, `INSERT INTO tokens (hash, id, user_name, name, scopes, projects, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, tokenHash, tk.ID, tk.User, tk.Name, scopes, projects, ts(tk.CreatedAt))
	if err != nil {
		return fmt.Errorf("postgres: insert token: %w", err)
	}
	return nil
}

func tokenNotFound(id string) error {
	return belay.Errorf(belay.CodeNotFound, "token %s not found", id).With("id", id)
}

func (t *tx) RevokeToken(ctx context.Context, id string, at time.Time) error {
	res, err := t.q.ExecContext(ctx, `UPDATE tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, ts(at), id)
	if err != nil {
		return fmt.Errorf("postgres: revoke token: %w", err)
	}
	return oneRow(res, func() error { return tokenNotFound(id) })
}

func (t *tx) TouchToken(ctx context.Context, id string, at time.Time) error {
	res, err := t.q.ExecContext(ctx, `UPDATE tokens SET last_used_at = ? WHERE id = ?`, ts(at), id)
	if err != nil {
		return fmt.Errorf("postgres: touch token: %w", err)
	}
	return oneRow(res, func() error { return tokenNotFound(id) })
}

func (r reader) FindCheckpointIDs(ctx context.Context, prefix string, scope store.Scope, limit int) ([]string, error) {
	where, args := "id LIKE ? ESCAPE '\\'", []any{likePrefix(prefix) + "%"}
	if cond, a := scopeFilter(scope, "session_id", "project_path", ""); cond != "" {
		where, args = where+" AND "+cond, append(args, a...)
	}
	rows, err := r.q.QueryContext(ctx, `SELECT id FROM checkpoints WHERE `+where+` ORDER BY id LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("postgres: find checkpoints: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("postgres: scan checkpoint id: %w", err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}
