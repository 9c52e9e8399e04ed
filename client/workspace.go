package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/belayhq/belay"
)

// RestoreCheckpoint rolls a session back to a checkpoint.
func (c *Client) RestoreCheckpoint(ctx context.Context, in belay.RestoreInput) (*belay.RestoreResult, error) {
	return call[belay.RestoreResult](ctx, c, http.MethodPost, "/v1/checkpoints/"+url.PathEscape(in.CheckpointID)+"/restore", nil, in)
}

// DiffCheckpoint compares a checkpoint's snapshot with another's or with the
// workspace as it is now.
func (c *Client) DiffCheckpoint(ctx context.Context, in belay.DiffInput) (*belay.DiffResult, error) {
	q := url.Values{}
	set(q, "to", in.To)
	return call[belay.DiffResult](ctx, c, http.MethodGet, "/v1/checkpoints/"+url.PathEscape(in.CheckpointID)+"/diff", q, nil)
}

// ListRollbacks returns a session's rollbacks, oldest first.
func (c *Client) ListRollbacks(ctx context.Context, sessionID string) ([]*belay.Rollback, error) {
	out, err := call[struct {
		Items []*belay.Rollback `json:"items"`
	}](ctx, c, http.MethodGet, "/v1/sessions/"+url.PathEscape(sessionID)+"/rollbacks", nil, nil)
	if err != nil {
		return nil, err
	}
	return out.Items, nil
}

// Validate checks checkpoints and, with in.Repair, rebuilds damaged ones.
func (c *Client) Validate(ctx context.Context, in belay.ValidateInput) (*belay.ValidationReport, error) {
	if in.Repair {
		return call[belay.ValidationReport](ctx, c, http.MethodPost, "/v1/validate", nil, in)
	}
	q := url.Values{}
	set(q, "session", in.SessionID)
	return call[belay.ValidationReport](ctx, c, http.MethodGet, "/v1/validate", q, nil)
}

// ExportSession writes a session's export archive to w.
func (c *Client) ExportSession(ctx context.Context, sessionID string, w io.Writer) error {
	resp, err := c.send(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(sessionID)+"/export", nil, nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("download export of session %s: %w", sessionID, err)
	}
	return nil
}

// ImportSession uploads an export archive and returns the session it created.
func (c *Client) ImportSession(ctx context.Context, in belay.ImportInput, r io.Reader) (*belay.ImportResult, error) {
	q := url.Values{}
	set(q, "projectPath", in.ProjectPath)
	resp, err := c.send(ctx, http.MethodPost, "/v1/sessions/import", q, http.Header{"Content-Type": {"application/gzip"}}, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return decodeBody[belay.ImportResult](resp)
}

// ExportBranch writes a session's snapshots as a branch of the workspace's
// git repository.
func (c *Client) ExportBranch(ctx context.Context, in belay.ExportBranchInput) (*belay.ExportBranchResult, error) {
	return call[belay.ExportBranchResult](ctx, c, http.MethodPost, "/v1/sessions/"+url.PathEscape(in.SessionID)+"/export-branch", nil, in)
}

// DiskUsage reports the space used per workspace and per session.
func (c *Client) DiskUsage(ctx context.Context) (*belay.DiskUsageReport, error) {
	return call[belay.DiskUsageReport](ctx, c, http.MethodGet, "/v1/usage", nil, nil)
}

// DeleteSession deletes a session and reclaims the space of its snapshots.
func (c *Client) DeleteSession(ctx context.Context, id string) (*belay.DeleteSessionResult, error) {
	return call[belay.DeleteSessionResult](ctx, c, http.MethodDelete, "/v1/sessions/"+url.PathEscape(id), nil, nil)
}

// CollectGarbage reclaims the space no snapshot needs (admins only).
func (c *Client) CollectGarbage(ctx context.Context, in belay.GCInput) (*belay.GCReport, error) {
	return call[belay.GCReport](ctx, c, http.MethodPost, "/v1/gc", nil, in)
}

// request builds and sends one request: the one place where the URL, the
// token and the headers are put together. Any status comes back as is.
func (c *Client) request(ctx context.Context, method, path string, q url.Values, hdr http.Header, body io.Reader) (*http.Response, error) {
	u := *c.base
	u.Path += path
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp, nil
}

// send sends a request and returns the response of a successful call, whose
// body the caller closes; an error status becomes the *belay.Error it carries.
func (c *Client) send(ctx context.Context, method, path string, q url.Values, hdr http.Header, body io.Reader) (*http.Response, error) {
	resp, err := c.request(ctx, method, path, q, hdr, body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

func decodeBody[T any](resp *http.Response) (*T, error) {
	var out T
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("decode %s response: %w", resp.Request.URL.Path, err)
	}
	return &out, nil
}
