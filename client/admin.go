package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/belayhq/belay"
)

// items is the envelope of list answers that carry no paging.
type items[T any] struct {
	Items []T `json:"items"`
}

func list[T any](ctx context.Context, c *Client, path string, q url.Values) ([]T, error) {
	out, err := call[items[T]](ctx, c, http.MethodGet, path, q, nil)
	if err != nil {
		return nil, err
	}
	if out.Items == nil {
		out.Items = []T{}
	}
	return out.Items, nil
}

// CurrentSession returns the project's current session (see
// belay.Service.CurrentSession).
func (c *Client) CurrentSession(ctx context.Context, projectPath string) (*belay.Session, error) {
	return call[belay.Session](ctx, c, http.MethodGet, "/v1/sessions/current", url.Values{"projectPath": {projectPath}}, nil)
}

// ResolveSession finds the session a person names: its id or a unique prefix.
func (c *Client) ResolveSession(ctx context.Context, ref string) (*belay.Session, error) {
	return call[belay.Session](ctx, c, http.MethodGet, "/v1/sessions/resolve", url.Values{"ref": {ref}}, nil)
}

// UpdateSession changes a session's title.
func (c *Client) UpdateSession(ctx context.Context, id string, in belay.UpdateSessionInput) (*belay.Session, error) {
	if err := belay.ValidateID("id", id); err != nil {
		return nil, err
	}
	return call[belay.Session](ctx, c, http.MethodPatch, "/v1/sessions/"+url.PathEscape(id), nil, in)
}

// ResolveCheckpoint finds the checkpoint a person names.
func (c *Client) ResolveCheckpoint(ctx context.Context, in belay.CheckpointRef) (*belay.Checkpoint, error) {
	q := url.Values{}
	set(q, "ref", in.Ref)
	if in.Step != 0 {
		q.Set("step", strconv.Itoa(in.Step))
	}
	set(q, "sessionId", in.SessionID)
	set(q, "projectPath", in.ProjectPath)
	return call[belay.Checkpoint](ctx, c, http.MethodGet, "/v1/checkpoints/resolve", q, nil)
}

// GrantSession gives a user a role in a session.
func (c *Client) GrantSession(ctx context.Context, in belay.GrantInput) (*belay.Grant, error) {
	if err := belay.ValidateID("sessionId", in.SessionID); err != nil {
		return nil, err
	}
	return call[belay.Grant](ctx, c, http.MethodPost, "/v1/sessions/"+url.PathEscape(in.SessionID)+"/grants", nil, in)
}

// RevokeGrant takes a user's role in a session away.
func (c *Client) RevokeGrant(ctx context.Context, sessionID, user string) error {
	if err := belay.ValidateID("sessionId", sessionID); err != nil {
		return err
	}
	if user == "" {
		return belay.Invalid("user", "user must be 1-100 characters")
	}
	return c.do(ctx, http.MethodDelete, "/v1/sessions/"+url.PathEscape(sessionID)+"/grants/"+url.PathEscape(user), nil, nil, nil)
}

// ListGrants lists who besides the owner may use a session.
func (c *Client) ListGrants(ctx context.Context, sessionID string) ([]*belay.Grant, error) {
	if err := belay.ValidateID("sessionId", sessionID); err != nil {
		return nil, err
	}
	return list[*belay.Grant](ctx, c, "/v1/sessions/"+url.PathEscape(sessionID)+"/grants", nil)
}

// CreateToken creates a token (admins only).
func (c *Client) CreateToken(ctx context.Context, in belay.CreateTokenInput) (*belay.NewToken, error) {
	return call[belay.NewToken](ctx, c, http.MethodPost, "/v1/tokens", nil, in)
}

// ListTokens lists tokens without their secrets (admins only).
func (c *Client) ListTokens(ctx context.Context) ([]*belay.Token, error) {
	return list[*belay.Token](ctx, c, "/v1/tokens", nil)
}

// RevokeToken revokes a token (admins only).
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	if err := belay.ValidateID("id", id); err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, "/v1/tokens/"+url.PathEscape(id), nil, nil, nil)
}

// AddWebhook registers a webhook (admins only); the answer carries its secret.
func (c *Client) AddWebhook(ctx context.Context, u string, events []string) (*belay.Webhook, error) {
	return call[belay.Webhook](ctx, c, http.MethodPost, "/v1/webhooks", nil, map[string]any{"url": u, "events": events})
}

// ListWebhooks lists webhooks without their secrets (admins only).
func (c *Client) ListWebhooks(ctx context.Context) ([]*belay.Webhook, error) {
	return list[*belay.Webhook](ctx, c, "/v1/webhooks", nil)
}

// RemoveWebhook deletes a webhook (admins only).
func (c *Client) RemoveWebhook(ctx context.Context, id string) error {
	if err := belay.ValidateID("id", id); err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, "/v1/webhooks/"+url.PathEscape(id), nil, nil, nil)
}

// ListDeliveries returns the newest delivery attempts (admins only).
func (c *Client) ListDeliveries(ctx context.Context, webhookID string, limit int) ([]*belay.Delivery, error) {
	q := url.Values{}
	set(q, "webhookId", webhookID)
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return list[*belay.Delivery](ctx, c, "/v1/webhooks/deliveries", q)
}

// Health asks the server's /healthz; nil when it is healthy.
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil, nil)
}
