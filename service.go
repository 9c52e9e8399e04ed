package belay

import (
	"context"
	"encoding/json"
	"io"
	"time"
)

// Service is everything an agent or a person can ask of belay, as one
// interface made of role interfaces. core.Service is the one implementation;
// client.Client speaks it over HTTP, so a caller sees the same behaviour and the
// same errors locally and remotely, and a transport works on either.
type Service interface {
	SessionService
	CheckpointService
	HITLService
	WorkspaceService
	EventService
	AdminService
	LifeService
	PlanService
	SearchService
}

// LifeService ends, holds and resumes sessions (seed 004's session life).
type LifeService interface {
	// EndSession completes, fails or abandons a session and releases its
	// lease. An ended session takes no more checkpoints; an abandoned one is
	// never resumed.
	EndSession(ctx context.Context, in EndSessionInput) (*Session, error)
	// Heartbeat takes a session's lease for in.Holder, or renews it. A holder
	// whose lease was taken by another (or lapsed into interrupted) gets
	// LEASE_LOST: never two holders.
	Heartbeat(ctx context.Context, in LeaseInput) (*Session, error)
	// ResumeSession takes the lease of an interrupted session (the newest of
	// in.ProjectPath without SessionID) and returns what to continue from.
	ResumeSession(ctx context.Context, in ResumeInput) (*ResumeResult, error)
	// CleanupSessions deletes ended sessions matching in, with their
	// snapshots, and reports what it freed.
	CleanupSessions(ctx context.Context, in CleanupInput) (*CleanupResult, error)
	// SetRetention sets a project's retention policy (admins); a policy
	// with neither KeepLast nor MaxAge removes it. It returns the policy as
	// stored: under the project's path with its links resolved.
	SetRetention(ctx context.Context, p RetentionPolicy) (*RetentionPolicy, error)
	// ListRetention lists the retention policies (admins).
	ListRetention(ctx context.Context) ([]RetentionPolicy, error)
}

// EndSessionInput ends a session: Status is completed, failed or abandoned.
type EndSessionInput struct {
	SessionID string        `json:"sessionId"`
	Status    SessionStatus `json:"status"`
	Reason    string        `json:"reason,omitempty"`
	// Events are graph events (see ValidateEvents) appended to the
	// session's event log in the transaction that ends it.
	Events []EventRecord `json:"events,omitempty"`
}

// LeaseInput takes or renews a session's lease for Holder (a process's
// name, e.g. host:pid) for Lease (DefaultLease when 0, at most MaxLease).
type LeaseInput struct {
	SessionID string        `json:"sessionId"`
	Holder    string        `json:"holder"`
	Lease     time.Duration `json:"lease,omitempty"`
	// Release gives the lease up at once: the holder stops without ending
	// the session, which becomes interrupted, to be resumed — unless it
	// awaits input or is paused: then it keeps waiting for a person, held by
	// no one.
	Release bool `json:"release,omitempty"`
	// Events, with Release only, are graph events (see ValidateEvents)
	// appended to the session's event log in the transaction that releases
	// the lease.
	Events []EventRecord `json:"events,omitempty"`
}

// ResumeInput names the session to resume and who holds it from now on.
type ResumeInput struct {
	SessionID   string        `json:"sessionId,omitempty"`
	ProjectPath string        `json:"projectPath,omitempty"`
	Holder      string        `json:"holder"`
	Lease       time.Duration `json:"lease,omitempty"`
}

// ResumeResult is where a resumed session continues from.
type ResumeResult struct {
	Session *Session `json:"session"`
	// Head is the checkpoint the session continues from; State its agent state.
	Head  *Checkpoint     `json:"head,omitempty"`
	State json.RawMessage `json:"state,omitempty"`
	// NextTask is the plan's running or next pending task.
	NextTask *Task `json:"nextTask,omitempty"`
	// Pending are the session's open HITL requests, oldest first; with
	// MorePending there are more than one answer holds (list them with
	// PendingHITL).
	Pending     []*Checkpoint `json:"pending"`
	MorePending bool          `json:"morePending,omitempty"`
}

// CleanupInput selects ended sessions to delete: ended before OlderThan
// ago, with one of Statuses (default completed and abandoned), keeping the
// KeepLast newest per project. DryRun reports without deleting.
type CleanupInput struct {
	OlderThan time.Duration   `json:"olderThan,omitempty"`
	Statuses  []SessionStatus `json:"statuses,omitempty"`
	KeepLast  int             `json:"keepLast,omitempty"`
	DryRun    bool            `json:"dryRun,omitempty"`
}

// CleanupResult is what CleanupSessions deleted (or would).
type CleanupResult struct {
	Sessions    []string `json:"sessions"`
	Checkpoints int64    `json:"checkpoints"`
	Refs        int      `json:"refs"`
	// BytesFreed is how much the snapshot repositories shrank.
	BytesFreed int64 `json:"bytesFreed"`
	DryRun     bool  `json:"dryRun,omitempty"`
}

// PlanService keeps a session's plan, its tasks and its cost (seed 002).
type PlanService interface {
	// SetPlan gives a session its tasks (all pending) and when to stop for a person.
	SetPlan(ctx context.Context, in SetPlanInput) (*Session, error)
	// UpdateTask starts, completes, fails or skips a task; when a task ends,
	// the progress is computed and any trigger due makes a HITL checkpoint.
	UpdateTask(ctx context.Context, in TaskUpdate) (*ProgressResult, error)
	// AddCost records spending, exactly; at the budget's hard limit the
	// session is paused and further cost refused (BUDGET_EXCEEDED) until a
	// person decides.
	AddCost(ctx context.Context, in CostInput) (*ProgressResult, error)
	// AdjustPlan drops, skips and reorders pending tasks.
	AdjustPlan(ctx context.Context, sessionID string, adj PlanAdjustment) (*Session, error)
	// TaskContext returns the next task and the prior tasks' context.
	TaskContext(ctx context.Context, sessionID string) (*TaskContext, error)
}

// SetPlanInput is a plan for a session.
type SetPlanInput struct {
	SessionID string         `json:"sessionId"`
	Tasks     []Task         `json:"tasks"`
	Mode      CheckpointMode `json:"mode,omitempty"`
	Every     int            `json:"every,omitempty"`
	Budget    Budget         `json:"budget"`
}

// TaskUpdate moves task TaskID to Status (running, completed, failed,
// skipped) and records what it did. TestFailed forces a checkpoint.
type TaskUpdate struct {
	SessionID    string     `json:"sessionId"`
	TaskID       string     `json:"taskId"`
	Status       TaskStatus `json:"status"`
	ChangedFiles []string   `json:"changedFiles,omitempty"`
	CommitSHA    string     `json:"commitSha,omitempty"`
	FixCycles    int        `json:"fixCycles,omitempty"`
	Reason       string     `json:"reason,omitempty"`
	TestFailed   bool       `json:"testFailed,omitempty"`
}

// CostInput records spending: Micros millionths of a dollar, for TaskID (or
// the running task when empty).
type CostInput struct {
	SessionID string `json:"sessionId"`
	TaskID    string `json:"taskId,omitempty"`
	Micros    int64  `json:"micros"`
	TokensIn  int64  `json:"tokensIn,omitempty"`
	TokensOut int64  `json:"tokensOut,omitempty"`
	Model     string `json:"model,omitempty"`
}

// ProgressResult is a session after a task or cost change, its progress, and
// the checkpoint a trigger made (if one fired).
type ProgressResult struct {
	Session    *Session        `json:"session"`
	Progress   ProgressSummary `json:"progress"`
	Summary    string          `json:"summary"`
	Triggers   []TriggerKind   `json:"triggers,omitempty"`
	Checkpoint *Checkpoint     `json:"checkpoint,omitempty"`
}

// TaskContext is seed 002's prior-task context for the next task.
type TaskContext struct {
	Next  *Task       `json:"next,omitempty"`
	Prior []PriorTask `json:"prior"`
	// Prompt is the context ready to paste into a prompt.
	Prompt string `json:"prompt"`
}

// SessionService starts, finds and lists sessions.
type SessionService interface {
	CreateSession(ctx context.Context, in CreateSessionInput) (*Session, error)
	// GetSession returns a session the caller may read.
	GetSession(ctx context.Context, id string) (*Session, error)
	// ActiveSession returns the newest open session of a project path among
	// the caller's own and admins' that it may read: the one its saves by
	// project path go to. A session of another user who is not an admin, even
	// one the caller may write, is never a project's active or current
	// session for it.
	ActiveSession(ctx context.Context, projectPath string) (*Session, error)
	// CurrentSession returns the project's current session among those
	// ActiveSession looks at (for an admin who has none there, among all
	// the project's): its newest open session, unless a session made after it
	// ended since that one last moved (then the ended one), else its newest:
	// the session "checkpoint 3" of that project means.
	CurrentSession(ctx context.Context, projectPath string) (*Session, error)
	// ResolveSession finds the session a person names: its id or a unique
	// prefix of it (at least MinIDPrefix characters), among the sessions the
	// caller may read. An ambiguous prefix is a VALIDATION_ERROR that lists
	// the candidates.
	ResolveSession(ctx context.Context, ref string) (*Session, error)
	// UpdateSession changes what the session's writers may change (its
	// title) and returns the session.
	UpdateSession(ctx context.Context, id string, in UpdateSessionInput) (*Session, error)
	// ListSessions pages the sessions the caller may read; totals count only those.
	ListSessions(ctx context.Context, in ListSessionsInput) (*SessionList, error)

	// GrantSession gives a user a role in a session (its owner or an admin
	// may); a second grant to the same user replaces the first.
	GrantSession(ctx context.Context, in GrantInput) (*Grant, error)
	// RevokeGrant takes a user's role in a session away.
	RevokeGrant(ctx context.Context, sessionID, user string) error
	// ListGrants lists who besides the owner may use a session.
	ListGrants(ctx context.Context, sessionID string) ([]*Grant, error)
}

// GrantInput gives User the Role in session SessionID.
type GrantInput struct {
	SessionID string `json:"sessionId"`
	User      string `json:"user"`
	Role      Role   `json:"role"`
}

// CheckpointService saves, finds, lists and deletes checkpoints.
type CheckpointService interface {
	CreateCheckpoint(ctx context.Context, in CreateCheckpointInput) (*Checkpoint, error)
	// GetCheckpoint returns a checkpoint the caller may read.
	GetCheckpoint(ctx context.Context, id string) (*Checkpoint, error)
	// GetCheckpointBySeq finds checkpoint number seq of a session.
	GetCheckpointBySeq(ctx context.Context, sessionID string, seq int64) (*Checkpoint, error)
	// ResolveCheckpoint finds the checkpoint a person names: a number in a
	// session, an id, a unique id prefix or a checkpoint name (see CheckpointRef).
	ResolveCheckpoint(ctx context.Context, in CheckpointRef) (*Checkpoint, error)
	// ListCheckpoints pages the checkpoints the caller may read; totals count only those.
	ListCheckpoints(ctx context.Context, in ListCheckpointsInput) (*CheckpointList, error)
	DeleteCheckpoint(ctx context.Context, id string) error
}

// MinIDPrefix is the shortest id prefix that names a checkpoint or a session.
const MinIDPrefix = 4

// CheckpointRef names a checkpoint the way a person does. Ref is a checkpoint
// number (in SessionID's session, else in ProjectPath's current session), a
// checkpoint id or a unique prefix of one (at least MinIDPrefix characters).
// Ambiguous prefixes are a VALIDATION_ERROR that lists the candidates.
type CheckpointRef struct {
	Ref string `json:"ref,omitempty"`
	// Step, instead of Ref, names the newest checkpoint of that step.
	Step        int    `json:"step,omitempty"`
	SessionID   string `json:"sessionId,omitempty"`
	ProjectPath string `json:"projectPath,omitempty"`
}

// FromNow, as EventFilter.After, starts a stream at the newest event.
const FromNow int64 = -1

// EventFilter selects events of the log.
type EventFilter struct {
	SessionID string   `json:"sessionId,omitempty"`
	Types     []string `json:"types,omitempty"`
	// After is the sequence number to resume after: 0 replays the whole log,
	// FromNow starts with the next event.
	After int64 `json:"after"`
}

// EventService streams the event log.
type EventService interface {
	// Follow calls emit with every event matching f that the caller may read,
	// from f.After on: each once, in order, in batches, until ctx ends (then it
	// returns nil) or emit fails (that error). after is the position to resume
	// from once the batch is handled. emit is called once at the start with no
	// events (after is then the starting position, FromNow resolved) and, when
	// heartbeat > 0, again with no events after that long without any, so a
	// transport can keep an idle connection open. An After beyond the newest
	// event is a VALIDATION_ERROR.
	Follow(ctx context.Context, f EventFilter, heartbeat time.Duration, emit func(after int64, batch []Event) error) error
	// AppendEvents appends in.Events to the log of a session the caller may
	// write to, in order, in one transaction, and returns them numbered.
	// Only the graph event types (GraphEventTypes) may be appended; a bad
	// input is a VALIDATION_ERROR and appends nothing.
	AppendEvents(ctx context.Context, in AppendEventsInput) ([]Event, error)
}

// DefaultSavesPerMinute is seed 003's rate of checkpoint saves per project
// on a server; bursts may be twice as many.
const DefaultSavesPerMinute = 10

// MaxDeliveryPage bounds one read of the webhook delivery log.
const MaxDeliveryPage = 1000

// AdminService manages tokens and webhooks (admins only) and reports health.
type AdminService interface {
	// CreateToken creates user in.User when new and returns a new API token
	// for it, shown once: only its hash is stored.
	CreateToken(ctx context.Context, in CreateTokenInput) (*NewToken, error)
	// ListTokens lists tokens (never their secrets), newest first.
	ListTokens(ctx context.Context) ([]*Token, error)
	// RevokeToken makes a token unusable at once.
	RevokeToken(ctx context.Context, id string) error

	// AddWebhook registers url to receive events (all when events is empty).
	AddWebhook(ctx context.Context, url string, events []string) (*Webhook, error)
	// ListWebhooks lists webhooks without their secrets.
	ListWebhooks(ctx context.Context) ([]*Webhook, error)
	RemoveWebhook(ctx context.Context, id string) error
	// ListDeliveries returns the newest delivery attempts, of one webhook or all.
	ListDeliveries(ctx context.Context, webhookID string, limit int) ([]*Delivery, error)

	// Health returns nil when the service can read and write its data, else
	// a coded error saying what is wrong. It needs no identity.
	Health(ctx context.Context) error
}

// CreateSessionInput starts a session.
type CreateSessionInput struct {
	ProjectPath string          `json:"projectPath,omitempty"`
	Title       string          `json:"title,omitempty"`
	Phase       string          `json:"phase,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
	// Holder, when set, takes the new session's lease for Lease (as
	// LifeService.Heartbeat would) in the transaction that creates it. /v1
	// carries them as "holder" and "leaseSeconds".
	Holder string        `json:"-"`
	Lease  time.Duration `json:"-"`
	// Checkpoint, when set, is the session's first checkpoint, saved in the
	// transaction that creates it: its session is the new one (SessionID
	// and ProjectPath left empty), with no snapshot, holder, release, end or
	// answers. /v1 carries it as "checkpoint".
	Checkpoint *CreateCheckpointInput `json:"-"`
}

// UpdateSessionInput changes a session: each field that is set.
type UpdateSessionInput struct {
	Title *string `json:"title,omitempty"`
}

// ListSessionsInput filters and pages sessions, newest first.
type ListSessionsInput struct {
	ProjectPath string        `json:"projectPath,omitempty"`
	Status      SessionStatus `json:"status,omitempty"`
	// Own keeps the sessions a save naming only its project may continue:
	// the caller's own and admins', never another user's who is not an admin.
	Own    bool   `json:"own,omitempty"`
	Cursor string `json:"cursor,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// SessionList is one page of sessions.
type SessionList struct {
	Items      []*Session `json:"items"`
	NextCursor string     `json:"nextCursor,omitempty"`
	HasMore    bool       `json:"hasMore"`
	TotalCount int64      `json:"totalCount"`
}

// HITLInput asks for a human decision on a new checkpoint. Without Options it
// offers approve and reject, the default reject when the timeout rejects,
// else approve.
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
// goes to the active session of ProjectPath, created on demand. WorkspaceRef,
// when given instead of Snapshot, is a git commit id: 4 to 40 hexadecimal
// digits (abbreviated, or a full SHA-1) or 64 (SHA-256), never a branch or HEAD.
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
	// Snapshot records the session's workspace (its project path) as a git
	// commit in belay's own repository and sets WorkspaceRef and Files.
	// Files that cannot be stored are listed in metadata key "skippedFiles".
	Snapshot bool `json:"snapshot,omitempty"`
	// Paths, with Snapshot, lists the paths (relative to the workspace) the
	// agent touched: only those are looked at. Empty means the whole workspace.
	Paths []string `json:"paths,omitempty"`
	// MaxFileSize, with Snapshot, is the size in bytes above which a file is
	// left out of the snapshot (and listed as skipped), at most
	// MaxFileSizeLimit; 0 means the default of 50 MiB.
	MaxFileSize int64 `json:"maxFileSize,omitempty"`
	// Events are graph events (see ValidateEvents) appended to the
	// session's event log in the transaction that saves the checkpoint,
	// after its own events; not with Snapshot.
	Events []EventRecord `json:"events,omitempty"`
	// Holder, when set, saves the checkpoint only while Holder may hold the
	// session's lease (LEASE_LOST otherwise, as LifeService.Heartbeat): a
	// process another has taken the session over from writes nothing.
	Holder string `json:"holder,omitempty"`
	// Release, with Holder, gives the lease up once the checkpoint is saved,
	// in the same transaction, as Heartbeat's Release does.
	Release bool `json:"release,omitempty"`
	// End, when set, ends the session once the checkpoint is saved, in the
	// same transaction, as EndSession does: completed, failed or abandoned,
	// for EndReason.
	End       SessionStatus `json:"end,omitempty"`
	EndReason string        `json:"endReason,omitempty"`
	// Answers decide open HITL requests of the session before the
	// checkpoint is saved, in its transaction, as Decide does: the caller
	// needs the decide scope and the right to decide each. A request
	// decided already keeps its decision, and its answer is dropped (unless
	// RequireOpen says otherwise).
	Answers []DecideInput `json:"answers,omitempty"`
}

// Orderings and directions of a checkpoint list.
const (
	OrderCreatedAt = "createdAt"
	OrderType      = "type"
	OrderUpdatedAt = "updatedAt"
	OrderAsc       = "asc"
	OrderDesc      = "desc"
)

// ListCheckpointsInput filters and pages checkpoints (seed 000's ListCheckpointsInput).
// Tags match with AND. Cursor comes from a previous page with the same order.
// One session's checkpoints in createdAt order come in the order they were
// saved, by Seq, which their CreatedAt may not follow when saves ran
// concurrently.
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
	// Offset skips that many matches (seed 003's offset paging); a cursor
	// is the better way to walk a long list.
	Offset   int    `json:"offset,omitempty"`
	Limit    int    `json:"limit,omitempty"`
	OrderBy  string `json:"orderBy,omitempty"`
	OrderDir string `json:"orderDir,omitempty"`
}

// CheckpointList is one page of checkpoints.
type CheckpointList struct {
	Items      []*Checkpoint `json:"items"`
	NextCursor string        `json:"nextCursor,omitempty"`
	HasMore    bool          `json:"hasMore"`
	TotalCount int64         `json:"totalCount"`
	// Corrupted says why the checkpoints of the page that could not be
	// read whole (CHECKPOINT_CORRUPTED: a damaged agent state, a checksum
	// mismatch) are left out of Items; `belay validate` says how to recover.
	Corrupted []*Error `json:"corrupted,omitempty"`
}

// NextOffset is where the page after l begins, for a caller paging by
// offset that asked for l at offset: l's items and the corrupted ones it
// left out. A page may hold fewer than its limit (see store.PageBytes).
func (l *CheckpointList) NextOffset(offset int) int {
	return offset + len(l.Items) + len(l.Corrupted)
}

// DecideInput is a human decision on a HITL checkpoint (seed 000's HITLDecisionInput).
type DecideInput struct {
	CheckpointID string `json:"checkpointId"`
	// Action, when empty, is the chosen option's own action.
	Action         Action          `json:"action,omitempty"`
	SelectedOption string          `json:"selectedOption"`
	Feedback       string          `json:"feedback,omitempty"`
	Modifications  json.RawMessage `json:"modifications,omitempty"`
	// IdempotencyKey makes a retried decide return the first decision.
	IdempotencyKey string `json:"-"`
	// RequireOpen, in CreateCheckpointInput.Answers, refuses the save
	// (HITL_ALREADY_DECIDED) when the request was decided otherwise before
	// it, instead of dropping the answer: a run that went on with this
	// answer must not be saved against a person's other decision.
	RequireOpen bool `json:"requireOpen,omitempty"`
}

// DecideResult is the decided checkpoint, its session after the decision, and the decision.
type DecideResult struct {
	Checkpoint *Checkpoint `json:"checkpoint"`
	// Session is the whole session for a caller who may read it; for an
	// approver who may not, only its id, title, status and phase.
	Session  *Session  `json:"session"`
	Decision *Decision `json:"decision"`
}

// PendingSession summarises the session of a pending request.
type PendingSession struct {
	ID     string        `json:"id"`
	Title  string        `json:"title"`
	Status SessionStatus `json:"status"`
	Phase  string        `json:"phase"`
	// Readable says the caller may read the session, not only decide the
	// request as one of its approvers.
	Readable bool `json:"readable"`
}

// PendingHITL is an open request the caller may decide (seed 000's PendingHITL).
type PendingHITL struct {
	Checkpoint *Checkpoint    `json:"checkpoint"`
	Session    PendingSession `json:"session"`
	// Deadline is when and how the request is settled if no one decides it
	// first, when it has a deadline.
	Deadline *HITLDeadline `json:"deadline,omitempty"`
	// TimeRemaining is seconds until Deadline, when there is one.
	TimeRemaining *int64 `json:"timeRemaining,omitempty"`
}

// The deadlines of an open request (HITLDeadline.Reason), as its
// hitl.timed_out event's reason names them.
const (
	// DeadlineTimeout is the request's timeout (HITLRequest.Timeout).
	DeadlineTimeout = "timeout"
	// DeadlineExpired is its checkpoint's expiresAt, after which no one may
	// decide it.
	DeadlineExpired = "expired"
)

// HITLDeadline is the next deadline of an open request: its timeout unless
// applied, or its checkpoint's expiry, whichever comes first (the expiry
// when both fall at once), and what it does.
type HITLDeadline struct {
	At time.Time `json:"at"`
	// Reason is DeadlineTimeout or DeadlineExpired.
	Reason string `json:"reason"`
	// Action is what the deadline does: approve or reject decide the
	// request; pause (a timeout's only) pauses the session and leaves the
	// request open. The expiry decides with the timeout's default action
	// when that approves or rejects, else rejects.
	Action Action `json:"action"`
	// Option is the option the decision picks; empty for a pause, or when
	// no option offered has Action.
	Option string `json:"option,omitempty"`
}

// WaitResult is what a waiting agent gets: the decision once there is one.
type WaitResult struct {
	Decided    bool        `json:"decided"`
	Decision   *Decision   `json:"decision,omitempty"`
	Checkpoint *Checkpoint `json:"checkpoint"`
	// Session, once decided, is as DecideResult's.
	Session *Session `json:"session,omitempty"`
}

// MaxWait bounds one WaitDecision call: a long poll; a waiter asks again.
const MaxWait = 5 * time.Minute

// HITLService is the human-in-the-loop part of belay.
type HITLService interface {
	Decide(ctx context.Context, in DecideInput) (*DecideResult, error)
	PendingHITL(ctx context.Context, sessionID string) ([]PendingHITL, error)
	// WaitDecision returns as soon as checkpoint id is decided, or after wait
	// (at most MaxWait) with Decided false.
	WaitDecision(ctx context.Context, id string, wait time.Duration) (*WaitResult, error)
}

// Events of the workspace service.
const (
	// EventSessionDeleted: a session and its checkpoints were deleted.
	EventSessionDeleted = "session.deleted"
	// EventCheckpointRepaired: Validate rebuilt a damaged or missing
	// checkpoint from its snapshot commit.
	EventCheckpointRepaired = "checkpoint.repaired"
)

// WorkspaceService is the workspace part of belay. CreateCheckpoint takes the
// snapshots (CreateCheckpointInput.Snapshot); these methods roll a session
// back to one, compare them, check them, move sessions between machines and
// reclaim the space they use.
type WorkspaceService interface {
	// RestoreCheckpoint rolls a session back to one of its checkpoints: the
	// workspace files (after an automatic "pre-rollback" checkpoint of the
	// current state, so the rollback can be undone, unless the head
	// checkpoint already holds that state) and the agent state.
	RestoreCheckpoint(ctx context.Context, in RestoreInput) (*RestoreResult, error)
	// DiffCheckpoint compares a checkpoint's snapshot with another's or with
	// the workspace as it is now.
	DiffCheckpoint(ctx context.Context, in DiffInput) (*DiffResult, error)
	// ListRollbacks returns a session's rollbacks, oldest first.
	ListRollbacks(ctx context.Context, sessionID string) ([]*Rollback, error)
	// Validate checks checkpoints against their checksums and snapshots and,
	// with Repair, rebuilds damaged or missing ones from their commits.
	Validate(ctx context.Context, in ValidateInput) (*ValidationReport, error)
	// ExportSession writes a session, its rollback history and its snapshots
	// to w as a gzipped tar archive that ImportSession reads. Files named
	// *ArchiveSuffix are never snapshotted.
	ExportSession(ctx context.Context, sessionID string, w io.Writer) error
	// ImportSession reads an archive written by ExportSession.
	ImportSession(ctx context.Context, in ImportInput, r io.Reader) (*ImportResult, error)
	// ExportBranch writes a session's snapshots as a branch of the user's git
	// repository, one commit per checkpoint.
	ExportBranch(ctx context.Context, in ExportBranchInput) (*ExportBranchResult, error)
	// DiskUsage reports the space used per workspace and per session.
	DiskUsage(ctx context.Context) (*DiskUsageReport, error)
	// DeleteSession deletes a session with its checkpoints and rollbacks and
	// reclaims the space only its snapshots used.
	DeleteSession(ctx context.Context, id string) (*DeleteSessionResult, error)
	// CollectGarbage reclaims the space no snapshot needs, in every
	// workspace, and removes the snapshots of workspaces no session refers
	// to (admins only).
	CollectGarbage(ctx context.Context, in GCInput) (*GCReport, error)
}

// ArchiveSuffix ends the name of an export archive. Snapshots never hold a
// file so named, so an archive written into a workspace is neither saved by
// the next snapshot nor removed by a rollback.
const ArchiveSuffix = ".belay.tar.gz"

// RestoreInput asks to roll a session back to a checkpoint (seed 000's restore).
type RestoreInput struct {
	CheckpointID string `json:"checkpointId"`
	Reason       string `json:"reason,omitempty"`
	// DryRun lists what would change and changes nothing.
	DryRun bool `json:"dryRun,omitempty"`
}

// RestoreResult is a session after a rollback (seed 000's restore response).
type RestoreResult struct {
	Session    *Session    `json:"session"`
	Checkpoint *Checkpoint `json:"checkpoint"`
	// RestoredFiles were written back with the checkpoint's content;
	// RemovedFiles, created since the checkpoint, were removed.
	RestoredFiles []string `json:"restoredFiles"`
	RemovedFiles  []string `json:"removedFiles"`
	// KeptFiles were left as they are: the checkpoint's snapshot left them
	// out (see Checkpoint.SkippedFiles), so they were there, with content
	// belay never had, and removing them would make a state that never was.
	KeptFiles []string `json:"keptFiles,omitempty"`
	// SafetyCheckpoint holds the state from before the rollback: rolling back
	// to it undoes the rollback. When nothing changed since the session's
	// head checkpoint, it is that checkpoint and no new one was saved. Absent
	// for a dry run.
	SafetyCheckpoint *Checkpoint `json:"safetyCheckpoint,omitempty"`
	Rollback         *Rollback   `json:"rollback,omitempty"`
	DryRun           bool        `json:"dryRun,omitempty"`
	// StateOnly is set when the checkpoint has no snapshot of belay's (none,
	// or a commit its caller named: see Checkpoint.HasSnapshot): the agent
	// state alone was rolled back, and the files were left as they are.
	StateOnly bool `json:"stateOnly,omitempty"`
}

// DiffCurrent names the workspace as it is now in DiffInput.To.
const DiffCurrent = "current"

// DiffInput compares checkpoint CheckpointID with checkpoint To, or with the
// workspace as it is now when To is "" or DiffCurrent.
type DiffInput struct {
	CheckpointID string `json:"checkpointId"`
	To           string `json:"to,omitempty"`
}

// File statuses in a FileDiff.
const (
	FileAdded    = "added"
	FileModified = "modified"
	FileDeleted  = "deleted"
	FileRenamed  = "renamed"
)

// FileDiff is one changed file.
type FileDiff struct {
	// Path is the file's path in the newer state; for a deleted file, in the older.
	Path string `json:"path"`
	// OldPath is the older path of a renamed file.
	OldPath   string `json:"oldPath,omitempty"`
	Status    string `json:"status"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Binary    bool   `json:"binary,omitempty"`
}

// DiffResult is the difference between two states of a workspace.
type DiffResult struct {
	From *Checkpoint `json:"from"`
	// To is nil when the comparison is with the workspace as it is now.
	To        *Checkpoint `json:"to,omitempty"`
	Files     []FileDiff  `json:"files"`
	Additions int         `json:"additions"`
	Deletions int         `json:"deletions"`
	// Patch is a unified diff; binary files are named, not encoded.
	Patch string `json:"patch"`
}

// ValidateInput asks for an integrity check of one session, or of all.
type ValidateInput struct {
	SessionID string `json:"sessionId,omitempty"`
	// Repair rebuilds damaged or missing checkpoints from their snapshot commits.
	Repair bool `json:"repair,omitempty"`
}

// Kinds of ValidationProblem.
const (
	// ProblemChecksum: a checkpoint does not match its checksum.
	ProblemChecksum = "checksum"
	// ProblemMissingCommit: a checkpoint's snapshot commit is gone or incomplete.
	ProblemMissingCommit = "missing_commit"
	// ProblemMissingRef: a checkpoint's snapshot commit is there but its ref
	// is gone, so gc would delete it; a repair makes the ref again.
	ProblemMissingRef = "missing_ref"
	// ProblemMissingRow: a snapshot commit has no checkpoint although it was
	// never deleted.
	ProblemMissingRow = "missing_row"
	// ProblemWorkspace: a workspace's snapshot repository is damaged.
	ProblemWorkspace = "workspace"
)

// RecoveryOption is one way out of a problem (seed 004's recovery options).
type RecoveryOption struct {
	// Action is one of the Recover… actions; SessionID and Seq say on what.
	Action      string `json:"action"`
	SessionID   string `json:"sessionId,omitempty"`
	Seq         int64  `json:"seq,omitempty"`
	Description string `json:"description"`
}

// Recovery actions.
const (
	// RecoverRollback rolls the session back to checkpoint Seq.
	RecoverRollback = "rollback"
	// RecoverRepair rebuilds the session's damaged checkpoints from git (or,
	// without SessionID, the workspace's snapshot repository).
	RecoverRepair = "repair"
	// RecoverFinish lets the next save or rollback of the workspace finish
	// what a crash interrupted.
	RecoverFinish = "finish"
	// RecoverContinue goes on without the damaged checkpoint.
	RecoverContinue = "continue"
	// RecoverDeleteSession deletes the session.
	RecoverDeleteSession = "delete_session"
)

// ValidationProblem is one thing Validate found wrong.
type ValidationProblem struct {
	Kind         string `json:"kind"`
	SessionID    string `json:"sessionId,omitempty"`
	CheckpointID string `json:"checkpointId,omitempty"`
	Seq          int64  `json:"seq,omitempty"`
	ProjectPath  string `json:"projectPath,omitempty"`
	Message      string `json:"message"`
	// Repaired is set when Repair rebuilt the checkpoint.
	Repaired bool             `json:"repaired"`
	Recovery []RecoveryOption `json:"recovery,omitempty"`
}

// ValidationReport is the outcome of Validate.
type ValidationReport struct {
	Sessions    int                 `json:"sessions"`
	Checkpoints int                 `json:"checkpoints"`
	Workspaces  int                 `json:"workspaces"`
	Problems    []ValidationProblem `json:"problems"`
	// OK is true when no problem is left unrepaired.
	OK bool `json:"ok"`
}

// ImportInput says where an imported session's workspace is: ProjectPath
// replaces the exported one when set.
type ImportInput struct {
	ProjectPath string `json:"projectPath,omitempty"`
}

// ImportResult is the session ImportSession created.
type ImportResult struct {
	Session     *Session `json:"session"`
	Checkpoints int      `json:"checkpoints"`
	Rollbacks   int      `json:"rollbacks"`
	// Snapshots is the number of snapshot commits imported.
	Snapshots int `json:"snapshots"`
}

// ExportBranchInput asks for a session's snapshots as a git branch of the
// workspace's own repository; Branch defaults to belay/<session id>.
type ExportBranchInput struct {
	SessionID string `json:"sessionId"`
	Branch    string `json:"branch,omitempty"`
}

// ExportBranchResult names the branch written.
type ExportBranchResult struct {
	Branch      string `json:"branch"`
	ProjectPath string `json:"projectPath"`
	Commits     int    `json:"commits"`
}

// WorkspaceUsage is the space a workspace's snapshots use.
type WorkspaceUsage struct {
	ProjectPath string `json:"projectPath"`
	Bytes       int64  `json:"bytes"`
	Sessions    int    `json:"sessions"`
	// Orphaned snapshots belong to a workspace no session refers to any
	// more (ProjectPath is empty when even that is unknown); `belay gc`
	// removes them. Only admins see them.
	Orphaned bool `json:"orphaned,omitempty"`
	// Error says why Bytes is unknown.
	Error string `json:"error,omitempty"`
}

// SessionUsage is the space a session's checkpoints use in the database.
type SessionUsage struct {
	ID          string        `json:"id"`
	Title       string        `json:"title,omitempty"`
	ProjectPath string        `json:"projectPath,omitempty"`
	Status      SessionStatus `json:"status"`
	Checkpoints int64         `json:"checkpoints"`
	// StateBytes sums the agent state, outputs and metadata of its checkpoints.
	StateBytes int64 `json:"stateBytes"`
}

// DiskUsageReport is the outcome of DiskUsage.
type DiskUsageReport struct {
	Workspaces     []WorkspaceUsage `json:"workspaces"`
	Sessions       []SessionUsage   `json:"sessions"`
	WorkspaceBytes int64            `json:"workspaceBytes"`
	StateBytes     int64            `json:"stateBytes"`
	// DatabaseBytes is the size of the database's files, for admins of a
	// store that can tell.
	DatabaseBytes int64 `json:"databaseBytes,omitempty"`
	// StateChunkBytes is what the chunks of large agent states take in the
	// database, each stored once however many checkpoints share it (for
	// admins): StateBytes counts every checkpoint's state whole.
	StateChunkBytes int64 `json:"stateChunkBytes,omitempty"`
}

// DeleteSessionResult reports a deleted session.
type DeleteSessionResult struct {
	SessionID   string `json:"sessionId"`
	Checkpoints int64  `json:"checkpoints"`
	// SnapshotsPruned is false when the session's snapshots could not be
	// dropped (Warning says why); they then keep using space.
	SnapshotsPruned bool   `json:"snapshotsPruned"`
	Warning         string `json:"warning,omitempty"`
	// FreedBytes is the space given back on disk.
	FreedBytes int64 `json:"freedBytes"`
}

// GCInput asks CollectGarbage to reclaim space, or with DryRun only to say
// how much it would.
type GCInput struct {
	DryRun bool `json:"dryRun,omitempty"`
}

// GCWorkspace is what CollectGarbage did in one workspace's snapshots.
type GCWorkspace struct {
	// ProjectPath is empty for a snapshot directory left over from an
	// interrupted creation or removal.
	ProjectPath string `json:"projectPath"`
	// Orphaned is set when no session refers to the workspace.
	Orphaned bool `json:"orphaned"`
	// Removed is set when all its snapshots went.
	Removed bool `json:"removed"`
	// DeletedSessions counts deleted sessions whose snapshots were still
	// there, DeletedCheckpoints the snapshots of deleted checkpoints (and of
	// saves that never became a checkpoint) of sessions that remain.
	DeletedSessions    int   `json:"deletedSessions,omitempty"`
	DeletedCheckpoints int   `json:"deletedCheckpoints,omitempty"`
	BytesBefore        int64 `json:"bytesBefore"`
	// BytesFreed is exact, except in a dry run for a workspace that stays,
	// where it is an estimate.
	BytesFreed int64  `json:"bytesFreed"`
	Error      string `json:"error,omitempty"`
}

// GCReport is the outcome of CollectGarbage.
type GCReport struct {
	Workspaces []GCWorkspace `json:"workspaces"`
	// StateChunks counts the chunks of large agent states that no
	// checkpoint or session refers to any more, deleted (or in a dry run to
	// be deleted), and StateBytes their bytes. The database reuses that
	// space for later writes; SQLite's file does not shrink.
	StateChunks int64 `json:"stateChunks,omitempty"`
	StateBytes  int64 `json:"stateBytes,omitempty"`
	// FreedBytes adds up the workspaces' BytesFreed and StateBytes.
	FreedBytes int64 `json:"freedBytes"`
	DryRun     bool  `json:"dryRun,omitempty"`
}

// RetentionPolicy bounds how many checkpoints a project keeps: beyond the
// KeepLast newest of each session, checkpoints older than MaxAge (any age
// when MaxAge is 0) are deleted with their snapshots by the sweeper. HITL and
// phase checkpoints, a session's head, and every checkpoint a branch starts
// from (a rollback's target or its pre-rollback snapshot, a parent of two)
// are always kept.
type RetentionPolicy struct {
	ProjectPath string        `json:"projectPath"`
	KeepLast    int           `json:"keepLast,omitempty"`
	MaxAge      time.Duration `json:"maxAge,omitempty"`
}
