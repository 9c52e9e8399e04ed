package trpc

import (
	"encoding/json"
	"time"

	"github.com/belayhq/belay"
)

// The shapes of seed 000's router: a task is a belay session (its prompt is
// the session's title), a checkpoint's 500-character description is belay's
// summary.

// Checkpoint is seed 000's Checkpoint.
type Checkpoint struct {
	ID           string               `json:"id"`
	TaskID       string               `json:"taskId"`
	Type         belay.CheckpointType `json:"type"`
	Trigger      belay.Trigger        `json:"trigger"`
	Description  string               `json:"description"`
	WorkspaceRef string               `json:"workspaceRef"`
	AgentState   json.RawMessage      `json:"agentState,omitempty"`
	HITLRequired bool                 `json:"hitlRequired"`
	HITLConfig   *HITLConfig          `json:"hitlConfig,omitempty"`
	// HITLDecision is null while undecided, as the seed shows.
	HITLDecision *HITLDecision   `json:"hitlDecision"`
	Metadata     json.RawMessage `json:"metadata"`
	CreatedAt    time.Time       `json:"createdAt"`
	ExpiresAt    *time.Time      `json:"expiresAt,omitempty"`
	// Beyond the seed: where it is in its task.
	Seq int64 `json:"seq"`
}

// HITLConfig is seed 000's HITLConfig.
type HITLConfig struct {
	Title   string             `json:"title"`
	Message string             `json:"message"`
	Options []belay.HITLOption `json:"options"`
	Context json.RawMessage    `json:"context,omitempty"`
	Timeout *Timeout           `json:"timeout,omitempty"`
}

// Timeout is a request's timeout with its deadline.
type Timeout struct {
	Duration      int          `json:"duration"`
	DefaultAction belay.Action `json:"defaultAction"`
	ExpiresAt     time.Time    `json:"expiresAt"`
}

// HITLDecision is seed 000's HITLDecision.
type HITLDecision struct {
	ID             string          `json:"id"`
	UserID         string          `json:"userId"`
	Action         belay.Action    `json:"action"`
	SelectedOption string          `json:"selectedOption"`
	Feedback       string          `json:"feedback,omitempty"`
	Modifications  json.RawMessage `json:"modifications,omitempty"`
	DecidedAt      time.Time       `json:"decidedAt"`
	ResponseTime   int64           `json:"responseTime"`
	AutoTriggered  bool            `json:"autoTriggered"`
}

// Task is seed 000's task: a belay session.
type Task struct {
	ID     string              `json:"id"`
	Prompt string              `json:"prompt"`
	Status belay.SessionStatus `json:"status"`
	Phase  string              `json:"phase"`
}

// PendingTask is the task of a pending request.
type PendingTask struct {
	Task
	// Readable says the caller may read the task, not only decide the
	// request as one of its approvers.
	Readable bool `json:"readable"`
}

// PendingHITL is seed 000's PendingHITL, with the request's next deadline.
type PendingHITL struct {
	Checkpoint Checkpoint  `json:"checkpoint"`
	Task       PendingTask `json:"task"`
	// Deadline is when and how the request is settled if no one decides it
	// first: its timeout or its checkpoint's expiry, whichever comes first.
	Deadline *belay.HITLDeadline `json:"deadline,omitempty"`
	// TimeRemaining is seconds until Deadline.
	TimeRemaining *int64 `json:"timeRemaining,omitempty"`
}

// CheckpointList is checkpoints.list's answer.
type CheckpointList struct {
	Items      []Checkpoint `json:"items"`
	NextCursor *string      `json:"nextCursor"`
	HasMore    bool         `json:"hasMore"`
	TotalCount int64        `json:"totalCount"`
}

// DecideResult is checkpoints.decide's answer.
type DecideResult struct {
	Checkpoint Checkpoint   `json:"checkpoint"`
	Task       Task         `json:"task"`
	Decision   HITLDecision `json:"decision"`
}

// RestoreResult is checkpoints.restore's answer.
type RestoreResult struct {
	Task          Task       `json:"task"`
	Checkpoint    Checkpoint `json:"checkpoint"`
	RestoredFiles []string   `json:"restoredFiles"`
	// StateOnly says the checkpoint had no snapshot of belay's (its
	// workspaceRef, if any, named a commit of the project's own git): the
	// task's state alone was restored, the files left as they are.
	StateOnly bool `json:"stateOnly,omitempty"`
}

// HITLRequiredEvent is what stream.hitlRequired sends for each request the
// subscriber may decide.
type HITLRequiredEvent struct {
	CheckpointID string             `json:"checkpointId"`
	TaskID       string             `json:"taskId"`
	Title        string             `json:"title"`
	Message      string             `json:"message"`
	Options      []belay.HITLOption `json:"options"`
	// Deadline and TimeRemaining are PendingHITL's.
	Deadline      *belay.HITLDeadline `json:"deadline,omitempty"`
	TimeRemaining *int64              `json:"timeRemaining,omitempty"`
	// Readable says the subscriber may read task TaskID, not only decide
	// the request as one of its approvers.
	Readable bool `json:"readable"`
}

// SessionList is sessions.list's answer.
type SessionList struct {
	Items      []*belay.Session `json:"items"`
	NextCursor *string          `json:"nextCursor"`
	HasMore    bool             `json:"hasMore"`
	TotalCount int64            `json:"totalCount"`
}

func toCheckpoint(cp *belay.Checkpoint) Checkpoint {
	out := Checkpoint{ID: cp.ID, TaskID: cp.SessionID, Type: cp.Type, Trigger: cp.Trigger, Description: cp.Summary,
		WorkspaceRef: cp.WorkspaceRef, AgentState: cp.AgentState, HITLRequired: cp.HITLRequired, Metadata: cp.Metadata,
		CreatedAt: cp.CreatedAt, ExpiresAt: cp.ExpiresAt, Seq: cp.Seq}
	if out.Metadata == nil {
		out.Metadata = json.RawMessage("{}")
	}
	if h := cp.HITL; h != nil {
		out.HITLConfig = &HITLConfig{Title: h.Title, Message: h.Message, Options: h.Options, Context: h.Context}
		if t := h.Timeout; t != nil {
			out.HITLConfig.Timeout = &Timeout{Duration: t.Duration, DefaultAction: t.DefaultAction, ExpiresAt: t.ExpiresAt}
		}
	}
	if d := cp.Decision; d != nil {
		dec := toDecision(d)
		out.HITLDecision = &dec
	}
	return out
}

func toDecision(d *belay.Decision) HITLDecision {
	return HITLDecision{ID: d.ID, UserID: d.UserID, Action: d.Action, SelectedOption: d.SelectedOption, Feedback: d.Feedback,
		Modifications: d.Modifications, DecidedAt: d.DecidedAt, ResponseTime: d.ResponseTime, AutoTriggered: d.AutoTriggered}
}

func toTask(s *belay.Session) Task {
	return Task{ID: s.ID, Prompt: s.Title, Status: s.Status, Phase: s.Phase}
}

func cursorPtr(c string) *string {
	if c == "" {
		return nil
	}
	return &c
}

// Deleted is checkpoints.delete's answer.
type Deleted struct {
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}

// Tracked is a value with the id a client resumes after: what a tRPC client
// hands a subscriber of a resumable stream.
type Tracked[T any] struct {
	ID   string `json:"id"`
	Data T      `json:"data"`
}
