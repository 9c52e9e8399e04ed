package belay

import (
	"context"
	"encoding/json"
	"time"
)

// Service is everything an agent or a person can ask of belay. core.Service is
// the one implementation; client.Client speaks it over HTTP, so a caller sees
// the same behaviour and the same errors locally and remotely.
type Service interface {
	CreateSession(ctx context.Context, in CreateSessionInput) (*Session, error)
	GetSession(ctx context.Context, id string) (*Session, error)
	// ActiveSession returns the newest open session of a project path.
	ActiveSession(ctx context.Context, projectPath string) (*Session, error)
	ListSessions(ctx context.Context, in ListSessionsInput) (*SessionList, error)

	CreateCheckpoint(ctx context.Context, in CreateCheckpointInput) (*Checkpoint, error)
	GetCheckpoint(ctx context.Context, id string) (*Checkpoint, error)
	// GetCheckpointBySeq finds checkpoint number seq of a session.
	GetCheckpointBySeq(ctx context.Context, sessionID string, seq int64) (*Checkpoint, error)
	ListCheckpoints(ctx context.Context, in ListCheckpointsInput) (*CheckpointList, error)
	DeleteCheckpoint(ctx context.Context, id string) error

	HITLService
}

// Actor is who is calling: set by the transport after authentication.
type Actor struct {
	UserID string
	Admin  bool
}

type actorKey struct{}

// WithActor returns a context that carries the calling identity.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the identity in ctx, if any.
func ActorFrom(ctx context.Context) (Actor, bool) {
	a, ok := ctx.Value(actorKey{}).(Actor)
	return a, ok
}

// CreateSessionInput starts a session.
type CreateSessionInput struct {
	ProjectPath string          `json:"projectPath,omitempty"`
	Title       string          `json:"title,omitempty"`
	Phase       string          `json:"phase,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

// ListSessionsInput filters and pages sessions, newest first.
type ListSessionsInput struct {
	ProjectPath string        `json:"projectPath,omitempty"`
	Status      SessionStatus `json:"status,omitempty"`
	Cursor      string        `json:"cursor,omitempty"`
	Limit       int           `json:"limit,omitempty"`
}

// SessionList is one page of sessions.
type SessionList struct {
	Items      []*Session `json:"items"`
	NextCursor string     `json:"nextCursor,omitempty"`
	HasMore    bool       `json:"hasMore"`
	TotalCount int64      `json:"totalCount"`
}

// HITLInput asks for a human decision on a new checkpoint.
type HITLInput struct {
	Required           bool            `json:"required"`
	Title              string          `json:"title,omitempty"`
	Message            string          `json:"message,omitempty"`
	Options            []HITLOption    `json:"options,omitempty"`
	Context            json.RawMessage `json:"context,omitempty"`
	Timeout            *TimeoutInput   `json:"timeout,omitempty"`
	Approvers          []string        `json:"approvers,omitempty"`
	ForbidSelfApproval bool            `json:"forbidSelfApproval,omitempty"`
	OnReject           string          `json:"onReject,omitempty"`
}

// TimeoutInput is a HITL timeout as asked for: seconds and what happens then.
type TimeoutInput struct {
	Duration      int    `json:"duration"`
	DefaultAction Action `json:"defaultAction"`
}

// CreateCheckpointInput saves a checkpoint. Without SessionID the checkpoint
// goes to the active session of ProjectPath, created on demand.
type CreateCheckpointInput struct {
	SessionID    string            `json:"sessionId,omitempty"`
	ProjectPath  string            `json:"projectPath,omitempty"`
	Name         string            `json:"name,omitempty"`
	Type         CheckpointType    `json:"type,omitempty"`
	Trigger      Trigger           `json:"trigger,omitempty"`
	Summary      string            `json:"summary"`
	Description  string            `json:"description,omitempty"`
	WorkspaceRef string            `json:"workspaceRef,omitempty"`
	AgentState   json.RawMessage   `json:"agentState,omitempty"`
	Outputs      json.RawMessage   `json:"outputs,omitempty"`
	Metadata     json.RawMessage   `json:"metadata,omitempty"`
	Context      map[string]string `json:"context,omitempty"`
	Tags         []string          `json:"tags,omitempty"`
	Phase        string            `json:"phase,omitempty"`
	Step         int               `json:"step,omitempty"`
	ExpiresAt    *time.Time        `json:"expiresAt,omitempty"`
	HITL         *HITLInput        `json:"hitl,omitempty"`
}

// Orderings and directions of a checkpoint list.
const (
	OrderCreatedAt = "createdAt"
	OrderType      = "type"
	OrderAsc       = "asc"
	OrderDesc      = "desc"
)

// ListCheckpointsInput filters and pages checkpoints (seed 000's ListCheckpointsInput).
// Tags match with AND. Cursor comes from a previous page with the same order.
type ListCheckpointsInput struct {
	SessionID     string         `json:"sessionId,omitempty"`
	ProjectPath   string         `json:"projectPath,omitempty"`
	Type          CheckpointType `json:"type,omitempty"`
	HITLRequired  *bool          `json:"hitlRequired,omitempty"`
	HITLDecided   *bool          `json:"hitlDecided,omitempty"`
	CreatedAfter  *time.Time     `json:"createdAfter,omitempty"`
	CreatedBefore *time.Time     `json:"createdBefore,omitempty"`
	Tags          []string       `json:"tags,omitempty"`
	Cursor        string         `json:"cursor,omitempty"`
	Limit         int            `json:"limit,omitempty"`
	OrderBy       string         `json:"orderBy,omitempty"`
	OrderDir      string         `json:"orderDir,omitempty"`
}

// CheckpointList is one page of checkpoints.
type CheckpointList struct {
	Items      []*Checkpoint `json:"items"`
	NextCursor string        `json:"nextCursor,omitempty"`
	HasMore    bool          `json:"hasMore"`
	TotalCount int64         `json:"totalCount"`
}

// DecideInput is a human decision on a HITL checkpoint (seed 000's HITLDecisionInput).
type DecideInput struct {
	CheckpointID   string          `json:"checkpointId"`
	Action         Action          `json:"action"`
	SelectedOption string          `json:"selectedOption"`
	Feedback       string          `json:"feedback,omitempty"`
	Modifications  json.RawMessage `json:"modifications,omitempty"`
	// IdempotencyKey makes a retried decide return the first decision.
	IdempotencyKey string `json:"-"`
}

// DecideResult is the decided checkpoint, its session after the decision, and the decision.
type DecideResult struct {
	Checkpoint *Checkpoint `json:"checkpoint"`
	Session    *Session    `json:"session"`
	Decision   *Decision   `json:"decision"`
}

// PendingSession summarises the session of a pending request.
type PendingSession struct {
	ID     string        `json:"id"`
	Title  string        `json:"title"`
	Status SessionStatus `json:"status"`
	Phase  string        `json:"phase"`
}

// PendingHITL is an open request the caller may decide (seed 000's PendingHITL).
type PendingHITL struct {
	Checkpoint *Checkpoint    `json:"checkpoint"`
	Session    PendingSession `json:"session"`
	// TimeRemaining is seconds until the default action, when a timeout is pending.
	TimeRemaining *int64 `json:"timeRemaining,omitempty"`
}

// WaitResult is what a waiting agent gets: the decision once there is one.
type WaitResult struct {
	Decided    bool        `json:"decided"`
	Decision   *Decision   `json:"decision,omitempty"`
	Checkpoint *Checkpoint `json:"checkpoint"`
	Session    *Session    `json:"session,omitempty"`
}

// HITLService is the human-in-the-loop part of belay.
type HITLService interface {
	Decide(ctx context.Context, in DecideInput) (*DecideResult, error)
	PendingHITL(ctx context.Context, sessionID string) ([]PendingHITL, error)
	// WaitDecision returns as soon as checkpoint id is decided, or after wait
	// with Decided false.
	WaitDecision(ctx context.Context, id string, wait time.Duration) (*WaitResult, error)
}
