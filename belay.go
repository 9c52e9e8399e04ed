// Package belay holds belay's domain: sessions, checkpoints, human-in-the-loop
// requests and decisions, events, the error type and the service interface.
// It imports no other package of the project; every layer speaks these types.
package belay

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// SessionStatus is where a session stands in its life.
type SessionStatus string

// Session statuses.
const (
	SessionRunning       SessionStatus = "running"
	SessionAwaitingInput SessionStatus = "awaiting_input"
	SessionPaused        SessionStatus = "paused"
	SessionCompleted     SessionStatus = "completed"
	SessionFailed        SessionStatus = "failed"
	SessionInterrupted   SessionStatus = "interrupted"
	SessionAbandoned     SessionStatus = "abandoned"
)

// SessionStatuses lists every session status.
var SessionStatuses = []SessionStatus{SessionRunning, SessionAwaitingInput, SessionPaused, SessionCompleted,
	SessionFailed, SessionInterrupted, SessionAbandoned}

// Valid reports whether s is a known status.
func (s SessionStatus) Valid() bool { return slices.Contains(SessionStatuses, s) }

// Open reports whether a session in status s can still take checkpoints as a
// project's active session.
func (s SessionStatus) Open() bool {
	switch s {
	case SessionCompleted, SessionFailed, SessionAbandoned:
		return false
	}
	return true
}

// Session is one run of an agent on one workspace.
type Session struct {
	ID          string        `json:"id"`
	ProjectPath string        `json:"projectPath,omitempty"`
	Title       string        `json:"title"`
	Owner       string        `json:"owner"`
	Status      SessionStatus `json:"status"`
	Phase       string        `json:"phase,omitempty"`
	CurrentStep int           `json:"currentStep"`
	// State is the agent state of the session's current position: the state of
	// the newest checkpoint, or of the checkpoint last rolled back to.
	State json.RawMessage `json:"state,omitempty"`
	// StateErr is set, with State nil, on a session a list returned whose
	// state could not be read back (a chunk of a large state missing or
	// damaged; CHECKPOINT_CORRUPTED), so one damaged state fails no list.
	// Reading the session itself returns the error. Never stored or sent.
	StateErr *Error `json:"-"`
	// HeadCheckpointID is the checkpoint the next one descends from.
	HeadCheckpointID string `json:"headCheckpointId,omitempty"`
	// LastSeq is the highest checkpoint sequence number handed out.
	LastSeq         int64 `json:"lastSeq"`
	CheckpointCount int64 `json:"checkpointCount"`
	// Cost is CostMicros in dollars, for display; CostMicros is exact.
	Cost       float64 `json:"cost"`
	CostMicros int64   `json:"costMicros"`
	// Holder is the process running the session, while its lease lasts
	// (LeaseExpiresAt); a lease that lapses makes the session interrupted.
	Holder         string     `json:"holder,omitempty"`
	LeaseExpiresAt *time.Time `json:"leaseExpiresAt,omitempty"`
	// EndReason says why a session failed, was abandoned or interrupted.
	EndReason string `json:"endReason,omitempty"`
	// Plan is the orchestrator's plan, when the session has one.
	Plan      *Plan           `json:"plan,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	CreatedAt time.Time       `json:"createdAt"`
	UpdatedAt time.Time       `json:"updatedAt"`
	// Access is what the caller may do in the session, set when it reads
	// the session itself (GetSession), so a UI offers only that. Never
	// stored.
	Access *Access `json:"access,omitempty"`
}

// Access is what one caller may do in a session besides reading it: Write
// (save, roll back, end it), Decide its requests, Own it (export, grant,
// delete), and use its Workspace here (snapshot, diff and restore its files:
// users who are not admins only under the server's workspace roots).
type Access struct {
	Write     bool `json:"write"`
	Decide    bool `json:"decide"`
	Own       bool `json:"own"`
	Workspace bool `json:"workspace"`
}

// CheckpointType classifies why a checkpoint exists.
type CheckpointType string

// Checkpoint types.
const (
	TypeAuto   CheckpointType = "auto"
	TypePhase  CheckpointType = "phase"
	TypeHITL   CheckpointType = "hitl"
	TypeError  CheckpointType = "error"
	TypeManual CheckpointType = "manual"
)

// CheckpointTypes lists every checkpoint type.
var CheckpointTypes = []CheckpointType{TypeAuto, TypePhase, TypeHITL, TypeError, TypeManual}

// Valid reports whether t is a known type.
func (t CheckpointType) Valid() bool { return slices.Contains(CheckpointTypes, t) }

// Trigger says what caused a checkpoint.
type Trigger string

// Checkpoint triggers.
const (
	TriggerPeriodic        Trigger = "periodic"
	TriggerPhaseChange     Trigger = "phase_change"
	TriggerSubtaskComplete Trigger = "subtask_complete"
	TriggerValidationFail  Trigger = "validation_fail"
	TriggerCostThreshold   Trigger = "cost_threshold"
	TriggerUserRequest     Trigger = "user_request"
)

// CheckpointTriggers lists every checkpoint trigger.
var CheckpointTriggers = []Trigger{TriggerPeriodic, TriggerPhaseChange, TriggerSubtaskComplete,
	TriggerValidationFail, TriggerCostThreshold, TriggerUserRequest}

// Valid reports whether t is a known trigger.
func (t Trigger) Valid() bool { return slices.Contains(CheckpointTriggers, t) }

// FileChanges lists the workspace paths changed since the parent checkpoint.
type FileChanges struct {
	Created  []string `json:"created"`
	Modified []string `json:"modified"`
	Deleted  []string `json:"deleted"`
}

// Checkpoint is an immutable record in a session. Only its HITL decision and
// timeout bookkeeping change after it is created.
type Checkpoint struct {
	ID           string          `json:"id"`
	SessionID    string          `json:"sessionId"`
	Seq          int64           `json:"seq"`
	Name         string          `json:"name,omitempty"`
	Type         CheckpointType  `json:"type"`
	Trigger      Trigger         `json:"trigger"`
	Summary      string          `json:"summary"`
	Description  string          `json:"description,omitempty"`
	ProjectPath  string          `json:"projectPath,omitempty"`
	WorkspaceRef string          `json:"workspaceRef,omitempty"`
	Files        *FileChanges    `json:"files,omitempty"`
	AgentState   json.RawMessage `json:"agentState,omitempty"`
	// StateErr is set, with AgentState nil, on a checkpoint a list returned
	// whose agent state could not be read back (a chunk of a large state
	// missing or damaged; CHECKPOINT_CORRUPTED), so one damaged state fails
	// only its checkpoint. VerifyChecksum returns it; reading the checkpoint
	// itself returns it as the error. Never stored or sent.
	StateErr     *Error            `json:"-"`
	Outputs      json.RawMessage   `json:"outputs,omitempty"`
	Metadata     json.RawMessage   `json:"metadata,omitempty"`
	Context      map[string]string `json:"context,omitempty"`
	Tags         []string          `json:"tags,omitempty"`
	Phase        string            `json:"phase,omitempty"`
	Step         int               `json:"step,omitempty"`
	ParentID     string            `json:"parentId,omitempty"`
	Checksum     string            `json:"checksum"`
	HITLRequired bool              `json:"hitlRequired"`
	HITL         *HITLRequest      `json:"hitlConfig,omitempty"`
	Decision     *Decision         `json:"hitlDecision,omitempty"`
	// TimeoutFired is set once the HITL timeout's default action has been applied.
	TimeoutFired bool       `json:"timeoutFired,omitempty"`
	CreatedBy    string     `json:"createdBy,omitempty"`
	CreatedAt    time.Time  `json:"createdAt"`
	ExpiresAt    *time.Time `json:"expiresAt,omitempty"`
	// UpdatedAt is when the checkpoint last changed: its decision, else its creation.
	UpdatedAt time.Time `json:"updatedAt"`
	// TokenCount is how many tokens of TokenEncoding its summary and
	// description make; derived, so the checksum does not cover it (nor
	// UpdatedAt). TokenEncoding is "" when they were never counted.
	TokenCount    int    `json:"tokenCount"`
	TokenEncoding string `json:"tokenEncoding,omitempty"`
	// StartedSession is set only on the checkpoint CreateCheckpoint returns,
	// when that call started a new session for it because the project's
	// session had ended (or was not the caller's to write to). It is not
	// stored: the checkpoint read back has none.
	StartedSession *SessionStart `json:"startedSession,omitempty"`
}

// SessionStart says that saving a checkpoint started a new session, and which
// of the project's sessions came before it.
type SessionStart struct {
	PreviousID     string        `json:"previousId"`
	PreviousStatus SessionStatus `json:"previousStatus"`
}

// HasSnapshot reports whether belay took a workspace snapshot for the
// checkpoint: WorkspaceRef names it and Files lists what it changed. A
// WorkspaceRef the caller named itself (a commit of the project's own git,
// say) comes without Files: a label, never resolved, that belay can neither
// diff nor restore.
func (c *Checkpoint) HasSnapshot() bool {
	return c.WorkspaceRef != "" && c.Files != nil
}

// Pending reports whether the checkpoint waits for a human decision.
func (c *Checkpoint) Pending() bool {
	return c.HITLRequired && c.Decision == nil
}

// Action is what a human (or a timeout) decides.
type Action string

// HITL actions. ActionPause is only a timeout default: it pauses the session
// and leaves the request open.
const (
	ActionApprove  Action = "approve"
	ActionReject   Action = "reject"
	ActionModify   Action = "modify"
	ActionRetry    Action = "retry"
	ActionSkip     Action = "skip"
	ActionEscalate Action = "escalate"
	ActionPause    Action = "pause"
)

// Valid reports whether a is an action a person can choose.
func (a Action) Valid() bool { return slices.Contains(Actions, a) }

// Actions lists the actions a person can choose (ActionPause is only a
// timeout's default).
var Actions = []Action{ActionApprove, ActionReject, ActionModify, ActionRetry, ActionSkip, ActionEscalate}

// HITLOption is one choice offered to the human.
type HITLOption struct {
	ID          string `json:"id"`
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
	Action      Action `json:"action"`
	IsDefault   bool   `json:"isDefault"`
}

// HITLTimeout applies DefaultAction when no one decides within Duration seconds.
type HITLTimeout struct {
	Duration      int       `json:"duration"`
	DefaultAction Action    `json:"defaultAction"`
	ExpiresAt     time.Time `json:"expiresAt"`
}

// Reject outcomes: what a rejection does to the session.
const (
	OnRejectFail     = "fail"
	OnRejectContinue = "continue"
)

// HITLRequest asks a human to decide before the agent goes on.
type HITLRequest struct {
	Title   string          `json:"title"`
	Message string          `json:"message,omitempty"`
	Options []HITLOption    `json:"options"`
	Context json.RawMessage `json:"context,omitempty"`
	Timeout *HITLTimeout    `json:"timeout,omitempty"`
	// Approvers may decide besides the session owner and admins.
	Approvers []string `json:"approvers,omitempty"`
	// ForbidSelfApproval stops the requester from deciding their own request.
	ForbidSelfApproval bool `json:"forbidSelfApproval,omitempty"`
	// OnReject is OnRejectFail (default) or OnRejectContinue.
	OnReject string `json:"onReject,omitempty"`
}

// Option returns the option with the given id.
func (r *HITLRequest) Option(id string) (HITLOption, bool) {
	for _, o := range r.Options {
		if o.ID == id {
			return o, true
		}
	}
	return HITLOption{}, false
}

// Decision is the outcome of a HITL request. A checkpoint is decided at most once.
type Decision struct {
	ID             string          `json:"id"`
	UserID         string          `json:"userId"`
	Action         Action          `json:"action"`
	SelectedOption string          `json:"selectedOption"`
	Feedback       string          `json:"feedback,omitempty"`
	Modifications  json.RawMessage `json:"modifications,omitempty"`
	DecidedAt      time.Time       `json:"decidedAt"`
	// ResponseTime is milliseconds from the request to the decision.
	ResponseTime  int64 `json:"responseTime"`
	AutoTriggered bool  `json:"autoTriggered"`
	// IdempotencyKey lets a retried decide return this decision instead of a conflict.
	IdempotencyKey string `json:"-"`
}

// Event types.
const (
	EventSessionCreated       = "session.created"
	EventSessionStatusChanged = "session.status_changed"
	EventCheckpointCreated    = "checkpoint.created"
	EventCheckpointDeleted    = "checkpoint.deleted"
	EventHITLRequired         = "hitl.required"
	EventHITLDecided          = "hitl.decided"
	EventHITLTimedOut         = "hitl.timed_out"
	EventWorkspaceRestored    = "workspace.restored"
	// EventSessionGranted and EventSessionRevoked: who may use a session changed.
	EventSessionGranted = "session.granted"
	EventSessionRevoked = "session.revoked"
	// EventPlanUpdated: a session's plan was set or adjusted.
	EventPlanUpdated = "plan.updated"
	// EventPlanProgress: a task moved on or cost was added; the data carries
	// the progress summary.
	EventPlanProgress = "plan.progress"
	// EventCostAdded: spending was recorded.
	EventCostAdded = "cost.added"
	// EventSessionUpdated: a session's title changed.
	EventSessionUpdated = "session.updated"
)

// EventTypes lists every event type, for filters and webhooks.
var EventTypes = []string{
	EventSessionCreated, EventSessionStatusChanged, EventSessionUpdated, EventSessionGranted, EventSessionRevoked,
	EventCheckpointCreated, EventCheckpointDeleted,
	EventHITLRequired, EventHITLDecided, EventHITLTimedOut,
	EventWorkspaceRestored, EventSessionDeleted, EventCheckpointRepaired,
	EventPlanUpdated, EventPlanProgress, EventCostAdded,
	EventGraphNodeStart, EventGraphNodeEnd, EventGraphCustom, EventGraphTokens, EventGraphInterrupt, EventGraphResult,
}

// ValidateEventTypes refuses an unknown event type, or more types than exist,
// as a VALIDATION_ERROR naming field and listing the known types
// (details.allowed).
func ValidateEventTypes(field string, types []string) error {
	if len(types) > len(EventTypes) {
		return Invalid(field, "at most %d event types may be given", len(EventTypes))
	}
	for _, t := range types {
		if !slices.Contains(EventTypes, t) {
			return Invalid(field, "unknown event type %q; known: %s", Clip(t, 100), strings.Join(EventTypes, ", ")).With("allowed", EventTypes)
		}
	}
	return nil
}

// Event records one state change. Seq is global and gap-free; events are
// appended in the same transaction as the change they describe.
type Event struct {
	Seq          int64           `json:"seq"`
	Type         string          `json:"type"`
	SessionID    string          `json:"sessionId,omitempty"`
	CheckpointID string          `json:"checkpointId,omitempty"`
	Data         json.RawMessage `json:"data,omitempty"`
	CreatedAt    time.Time       `json:"createdAt"`
}

// User is a person or agent identity that holds API tokens.
type User struct {
	Name      string    `json:"name"`
	Admin     bool      `json:"admin"`
	CreatedAt time.Time `json:"createdAt"`
}

// Clock tells the time. Core takes one so timeouts are testable without sleeping.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns the current time in UTC.
func (SystemClock) Now() time.Time { return time.Now().UTC() }

// Rollback records one restore of a session to a checkpoint.
type Rollback struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionId"`
	// FromCheckpointID is the automatic snapshot taken just before, so the
	// rollback itself can be undone.
	FromCheckpointID string    `json:"fromCheckpointId,omitempty"`
	TargetID         string    `json:"targetCheckpointId"`
	Reason           string    `json:"reason,omitempty"`
	UserID           string    `json:"userId"`
	RestoredFiles    []string  `json:"restoredFiles"`
	CreatedAt        time.Time `json:"createdAt"`
}

// Webhook receives every event of the listed types as a signed POST.
type Webhook struct {
	ID     string   `json:"id"`
	URL    string   `json:"url"`
	Secret string   `json:"secret,omitempty"`
	Events []string `json:"events,omitempty"`
	// LastSeq is the number (Event.Seq) of the last event the webhook is
	// done with (delivered, given up on, or of a type it does not take);
	// a new webhook starts at the newest event. It counts no deliveries.
	LastSeq   int64     `json:"lastSeq"`
	CreatedAt time.Time `json:"createdAt"`
}

// Delivery is one attempt to deliver an event to a webhook.
type Delivery struct {
	ID         string    `json:"id"`
	WebhookID  string    `json:"webhookId"`
	EventSeq   int64     `json:"eventSeq"`
	EventType  string    `json:"eventType"`
	Attempt    int       `json:"attempt"`
	StatusCode int       `json:"statusCode"`
	Error      string    `json:"error,omitempty"`
	DurationMs int64     `json:"durationMs"`
	CreatedAt  time.Time `json:"createdAt"`
}

// SkippedFile is a file a snapshot left out, as listed in the checkpoint's
// metadata under MetadataSkippedFiles.
type SkippedFile struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// MetadataSkippedFiles is the metadata key listing the files a snapshot left
// out; MetadataSkippedCount counts them when the list is cut short.
const (
	MetadataSkippedFiles = "skippedFiles"
	MetadataSkippedCount = "skippedCount"
)

// SkippedFiles returns the files the checkpoint's snapshot left out, as
// listed in its metadata.
func (c *Checkpoint) SkippedFiles() []SkippedFile {
	var m struct {
		Skipped []SkippedFile `json:"skippedFiles"`
	}
	if c.Metadata == nil || json.Unmarshal(c.Metadata, &m) != nil {
		return nil
	}
	return m.Skipped
}
