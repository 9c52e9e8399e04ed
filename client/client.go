// Package client is belay's Go SDK: it implements belay.Service over the HTTP
// API and maps error bodies back to *belay.Error, so a caller sees the same
// behaviour and errors as with the local service.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/belayhq/belay"
)

// Client talks to a belay server.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

var _ belay.Service = (*Client)(nil)

// New returns a client for the server at baseURL (e.g. http://127.0.0.1:7420)
// that authenticates with token when it is not empty.
func New(baseURL, token string) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, belay.Invalid("url", "server URL must look like http://host:port, got %q", baseURL)
	}
	return &Client{base: u, token: token, http: &http.Client{}}, nil
}

// WithHTTPClient replaces the underlying *http.Client (timeouts, transport).
func (c *Client) WithHTTPClient(h *http.Client) *Client {
	c.http = h
	return c
}

// do sends a request and decodes a JSON response into out (when not nil).
func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any) error {
	return c.doHeaders(ctx, method, path, q, nil, in, out)
}

func (c *Client) doHeaders(ctx context.Context, method, path string, q url.Values, hdr http.Header, in, out any) error {
	h := http.Header{"Accept": {"application/json"}}
	for k, v := range hdr {
		h[k] = v
	}
	var body io.Reader
	if in != nil {
		// Refused as the server refuses the bytes: encoding/json would
		// send them as U+FFFD, and the server store that.
		if err := belay.InvalidText(in); err != nil {
			return err
		}
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
		h.Set("Content-Type", "application/json")
	}
	resp, err := c.send(ctx, method, path, q, h, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s %s response: %w", method, path, err)
	}
	return nil
}

// call sends a request and returns the decoded response, or nil and the error.
func call[T any](ctx context.Context, c *Client, method, path string, q url.Values, in any) (*T, error) {
	var out T
	if err := c.do(ctx, method, path, q, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// decodeError maps an error response back to *belay.Error.
func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var body struct {
		Error *belay.Error `json:"error"`
	}
	if err := json.Unmarshal(b, &body); err == nil && body.Error != nil && body.Error.Code != "" {
		return body.Error
	}
	return belay.Errorf(belay.CodeInternal, "server answered %s: %s", resp.Status, strings.TrimSpace(string(b)))
}

// IsConnectionError reports whether err means the server could not be reached.
func IsConnectionError(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // the caller gave up; the server may be fine
	}
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF)
}

// CreateSession starts a session on the server, owned by the token's user.
func (c *Client) CreateSession(ctx context.Context, in belay.CreateSessionInput) (*belay.Session, error) {
	lease, err := leaseSeconds(in.Lease)
	if err != nil {
		return nil, err
	}
	return call[belay.Session](ctx, c, http.MethodPost, "/v1/sessions", nil, struct {
		belay.CreateSessionInput
		Holder       string                       `json:"holder,omitempty"`
		LeaseSeconds int64                        `json:"leaseSeconds,omitempty"`
		Checkpoint   *belay.CreateCheckpointInput `json:"checkpoint,omitempty"`
	}{in, in.Holder, lease, in.Checkpoint})
}

// leaseSeconds is a lease in the whole seconds the API takes, rounded up so
// that a lease is never shorter than asked. A lease the service refuses is
// refused here, with the service's error: rounded, one under a second
// would pass.
func leaseSeconds(d time.Duration) (int64, error) {
	if err := belay.ValidateLease("lease", d); err != nil {
		return 0, err
	}
	return wholeSeconds(d), nil
}

// wholeSeconds is d in whole seconds, rounded away from zero: never shorter
// than d, and a negative d stays negative, for the server to refuse.
func wholeSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	switch r := d % time.Second; {
	case r > 0:
		s++
	case r < 0:
		s--
	}
	return s
}

// GetSession asks for a session the token may read; SESSION_NOT_FOUND otherwise.
func (c *Client) GetSession(ctx context.Context, id string) (*belay.Session, error) {
	if err := belay.ValidateID("id", id); err != nil {
		return nil, err
	}
	return call[belay.Session](ctx, c, http.MethodGet, "/v1/sessions/"+url.PathEscape(id), nil, nil)
}

// ActiveSession asks for the session the token's saves by project path go to:
// the newest open one there of its user or of an admin (see belay.Service).
func (c *Client) ActiveSession(ctx context.Context, projectPath string) (*belay.Session, error) {
	return call[belay.Session](ctx, c, http.MethodGet, "/v1/sessions/active", url.Values{"projectPath": {projectPath}}, nil)
}

// ListSessions asks for one page of the sessions the token may read.
func (c *Client) ListSessions(ctx context.Context, in belay.ListSessionsInput) (*belay.SessionList, error) {
	q := url.Values{}
	set(q, "projectPath", in.ProjectPath)
	set(q, "status", string(in.Status))
	if in.Own {
		set(q, "own", "true")
	}
	set(q, "cursor", in.Cursor)
	setInt(q, "limit", in.Limit)
	return call[belay.SessionList](ctx, c, http.MethodGet, "/v1/sessions", q, nil)
}

// CreateCheckpoint saves a checkpoint on the server (with a snapshot of the
// server's view of ProjectPath when in.Snapshot is set).
func (c *Client) CreateCheckpoint(ctx context.Context, in belay.CreateCheckpointInput) (*belay.Checkpoint, error) {
	// Invalid raw JSON cannot even be encoded into the request: report it as
	// the server would.
	for name, raw := range map[string]json.RawMessage{"agentState": in.AgentState, "outputs": in.Outputs, "metadata": in.Metadata} {
		if raw != nil && !json.Valid(raw) {
			return nil, belay.Invalid(name, "%s is not valid JSON", name)
		}
	}
	return call[belay.Checkpoint](ctx, c, http.MethodPost, "/v1/checkpoints", nil, in)
}

// GetCheckpoint asks for a checkpoint the token may read, checksum verified.
func (c *Client) GetCheckpoint(ctx context.Context, id string) (*belay.Checkpoint, error) {
	if err := belay.ValidateID("id", id); err != nil {
		return nil, err
	}
	return call[belay.Checkpoint](ctx, c, http.MethodGet, "/v1/checkpoints/"+url.PathEscape(id), nil, nil)
}

// GetCheckpointBySeq asks for checkpoint number seq of a session the token may read.
func (c *Client) GetCheckpointBySeq(ctx context.Context, sessionID string, seq int64) (*belay.Checkpoint, error) {
	if err := belay.ValidateID("sessionId", sessionID); err != nil {
		return nil, err
	}
	return call[belay.Checkpoint](ctx, c, http.MethodGet, "/v1/sessions/"+url.PathEscape(sessionID)+"/checkpoints/"+strconv.FormatInt(seq, 10), nil, nil)
}

// ListCheckpoints asks for one page of the checkpoints the token may read.
func (c *Client) ListCheckpoints(ctx context.Context, in belay.ListCheckpointsInput) (*belay.CheckpointList, error) {
	if err := belay.ValidateTags("tags", in.Tags); err != nil {
		return nil, err
	}
	q := url.Values{}
	set(q, "sessionId", in.SessionID)
	set(q, "projectPath", in.ProjectPath)
	set(q, "type", string(in.Type))
	setBool(q, "hitlRequired", in.HITLRequired)
	setBool(q, "hitlDecided", in.HITLDecided)
	setTime(q, "createdAfter", in.CreatedAfter)
	setTime(q, "createdBefore", in.CreatedBefore)
	for _, t := range in.Tags {
		q.Add("tags", t)
	}
	set(q, "cursor", in.Cursor)
	setInt(q, "offset", in.Offset)
	setInt(q, "limit", in.Limit)
	set(q, "orderBy", in.OrderBy)
	set(q, "orderDir", in.OrderDir)
	return call[belay.CheckpointList](ctx, c, http.MethodGet, "/v1/checkpoints", q, nil)
}

// DeleteCheckpoint deletes a checkpoint of a session the token's user owns (or any, for an admin).
func (c *Client) DeleteCheckpoint(ctx context.Context, id string) error {
	if err := belay.ValidateID("id", id); err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, "/v1/checkpoints/"+url.PathEscape(id), nil, nil, nil)
}

func set(q url.Values, k, v string) {
	if v != "" {
		q.Set(k, v)
	}
}

func setInt(q url.Values, k string, v int) {
	if v != 0 {
		q.Set(k, strconv.Itoa(v))
	}
}

func setBool(q url.Values, k string, v *bool) {
	if v != nil {
		q.Set(k, strconv.FormatBool(*v))
	}
}

func setTime(q url.Values, k string, v *time.Time) {
	if v != nil {
		q.Set(k, v.UTC().Format(time.RFC3339Nano))
	}
}

// Decide records a decision on a HITL checkpoint. A non-empty
// in.IdempotencyKey is sent as the Idempotency-Key header.
func (c *Client) Decide(ctx context.Context, in belay.DecideInput) (*belay.DecideResult, error) {
	if err := belay.ValidateID("checkpointId", in.CheckpointID); err != nil {
		return nil, err
	}
	var hdr http.Header
	if in.IdempotencyKey != "" {
		hdr = http.Header{"Idempotency-Key": {in.IdempotencyKey}}
	}
	var out belay.DecideResult
	if err := c.doHeaders(ctx, http.MethodPost, "/v1/checkpoints/"+url.PathEscape(in.CheckpointID)+"/decide", nil, hdr, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PendingHITL returns the open requests the caller may decide.
func (c *Client) PendingHITL(ctx context.Context, sessionID string) ([]belay.PendingHITL, error) {
	q := url.Values{}
	set(q, "session", sessionID)
	out, err := call[struct {
		Items []belay.PendingHITL `json:"items"`
	}](ctx, c, http.MethodGet, "/v1/hitl/pending", q, nil)
	if err != nil {
		return nil, err
	}
	return out.Items, nil
}

// WaitDecision long-polls for the decision of checkpoint id, for up to wait.
func (c *Client) WaitDecision(ctx context.Context, id string, wait time.Duration) (*belay.WaitResult, error) {
	if err := belay.ValidateID("id", id); err != nil {
		return nil, err
	}
	q := url.Values{"wait": {wait.String()}}
	return call[belay.WaitResult](ctx, c, http.MethodGet, "/v1/checkpoints/"+url.PathEscape(id)+"/decision", q, nil)
}
