package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/belayhq/belay"
)

func sessionPath(id, rest string) (string, error) {
	if err := belay.ValidateID("sessionId", id); err != nil {
		return "", err
	}
	return "/v1/sessions/" + url.PathEscape(id) + rest, nil
}

// EndSession completes, fails or abandons a session.
func (c *Client) EndSession(ctx context.Context, in belay.EndSessionInput) (*belay.Session, error) {
	verb := map[belay.SessionStatus]string{belay.SessionCompleted: "/complete", belay.SessionFailed: "/fail",
		belay.SessionAbandoned: "/abandon"}[in.Status]
	if verb == "" {
		return nil, belay.Invalid("status", "a session ends completed, failed or abandoned, not %q", belay.Clip(string(in.Status), 40))
	}
	p, err := sessionPath(in.SessionID, verb)
	if err != nil {
		return nil, err
	}
	return call[belay.Session](ctx, c, http.MethodPost, p, nil, struct {
		Reason string              `json:"reason,omitempty"`
		Events []belay.EventRecord `json:"events,omitempty"`
	}{in.Reason, in.Events})
}

// leaseBody is the body of heartbeat and resume.
type leaseBody struct {
	Holder       string              `json:"holder"`
	LeaseSeconds int64               `json:"leaseSeconds,omitempty"`
	ProjectPath  string              `json:"projectPath,omitempty"`
	Release      bool                `json:"release,omitempty"`
	Events       []belay.EventRecord `json:"events,omitempty"`
}

// Heartbeat takes or renews a session's lease.
func (c *Client) Heartbeat(ctx context.Context, in belay.LeaseInput) (*belay.Session, error) {
	p, err := sessionPath(in.SessionID, "/heartbeat")
	if err != nil {
		return nil, err
	}
	lease, err := leaseSeconds(in.Lease)
	if err != nil {
		return nil, err
	}
	return call[belay.Session](ctx, c, http.MethodPost, p, nil, leaseBody{Holder: in.Holder, LeaseSeconds: lease, Release: in.Release,
		Events: in.Events})
}

// ResumeSession takes the lease of an interrupted session.
func (c *Client) ResumeSession(ctx context.Context, in belay.ResumeInput) (*belay.ResumeResult, error) {
	lease, err := leaseSeconds(in.Lease)
	if err != nil {
		return nil, err
	}
	body := leaseBody{Holder: in.Holder, LeaseSeconds: lease, ProjectPath: in.ProjectPath}
	if in.SessionID == "" {
		return call[belay.ResumeResult](ctx, c, http.MethodPost, "/v1/sessions/resume", nil, body)
	}
	body.ProjectPath = ""
	p, err := sessionPath(in.SessionID, "/resume")
	if err != nil {
		return nil, err
	}
	return call[belay.ResumeResult](ctx, c, http.MethodPost, p, nil, body)
}

// CleanupSessions deletes ended sessions and reports what it freed.
func (c *Client) CleanupSessions(ctx context.Context, in belay.CleanupInput) (*belay.CleanupResult, error) {
	body := map[string]any{"olderThanSeconds": wholeSeconds(in.OlderThan), "statuses": in.Statuses,
		"keepLast": in.KeepLast, "dryRun": in.DryRun}
	return call[belay.CleanupResult](ctx, c, http.MethodPost, "/v1/sessions/cleanup", nil, body)
}

// SetPlan gives a session its plan.
func (c *Client) SetPlan(ctx context.Context, in belay.SetPlanInput) (*belay.Session, error) {
	p, err := sessionPath(in.SessionID, "/plan")
	if err != nil {
		return nil, err
	}
	return call[belay.Session](ctx, c, http.MethodPut, p, nil, in)
}

// UpdateTask moves a task on.
func (c *Client) UpdateTask(ctx context.Context, in belay.TaskUpdate) (*belay.ProgressResult, error) {
	if in.TaskID == "" {
		return nil, belay.Invalid("taskId", "name the task")
	}
	p, err := sessionPath(in.SessionID, "/tasks/"+url.PathEscape(in.TaskID))
	if err != nil {
		return nil, err
	}
	return call[belay.ProgressResult](ctx, c, http.MethodPost, p, nil, in)
}

// AddCost records spending.
func (c *Client) AddCost(ctx context.Context, in belay.CostInput) (*belay.ProgressResult, error) {
	p, err := sessionPath(in.SessionID, "/cost")
	if err != nil {
		return nil, err
	}
	return call[belay.ProgressResult](ctx, c, http.MethodPost, p, nil, in)
}

// AdjustPlan drops, skips and reorders pending tasks.
func (c *Client) AdjustPlan(ctx context.Context, sessionID string, adj belay.PlanAdjustment) (*belay.Session, error) {
	p, err := sessionPath(sessionID, "/plan/adjust")
	if err != nil {
		return nil, err
	}
	return call[belay.Session](ctx, c, http.MethodPost, p, nil, adj)
}

// TaskContext returns the prior-task context for the next task.
func (c *Client) TaskContext(ctx context.Context, sessionID string) (*belay.TaskContext, error) {
	p, err := sessionPath(sessionID, "/context")
	if err != nil {
		return nil, err
	}
	return call[belay.TaskContext](ctx, c, http.MethodGet, p, nil, nil)
}

// retentionBody is a retention policy on the wire.
type retentionBody struct {
	ProjectPath   string `json:"projectPath"`
	KeepLast      int    `json:"keepLast,omitempty"`
	MaxAgeSeconds int64  `json:"maxAgeSeconds,omitempty"`
}

func (b retentionBody) policy() *belay.RetentionPolicy {
	return &belay.RetentionPolicy{ProjectPath: b.ProjectPath, KeepLast: b.KeepLast, MaxAge: time.Duration(b.MaxAgeSeconds) * time.Second}
}

// SetRetention sets a project's retention policy (admins) and returns it as
// the server stored it.
func (c *Client) SetRetention(ctx context.Context, p belay.RetentionPolicy) (*belay.RetentionPolicy, error) {
	var out retentionBody
	if err := c.do(ctx, http.MethodPut, "/v1/retention", nil,
		retentionBody{ProjectPath: p.ProjectPath, KeepLast: p.KeepLast, MaxAgeSeconds: wholeSeconds(p.MaxAge)}, &out); err != nil {
		return nil, err
	}
	return out.policy(), nil
}

// ListRetention lists the retention policies (admins).
func (c *Client) ListRetention(ctx context.Context) ([]belay.RetentionPolicy, error) {
	list, err := list[retentionBody](ctx, c, "/v1/retention", nil)
	if err != nil {
		return nil, err
	}
	out := make([]belay.RetentionPolicy, len(list))
	for i, p := range list {
		out[i] = *p.policy()
	}
	return out, nil
}
