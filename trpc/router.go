package trpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/belayhq/belay"
)

// kind is a procedure's tRPC type.
type kind string

const (
	query        kind = "query"
	mutation     kind = "mutation"
	subscription kind = "subscription"
)

// procedure is one entry of the router. call answers a query or a mutation;
// subscribe streams a subscription's values to emit until ctx ends, calling
// ready once the subscription is accepted (an error before it is the
// answer to the request).
type procedure struct {
	kind kind
	// in and out are the input's and the output's types, for the
	// TypeScript definitions (nil in: no input).
	in, out   any
	call      func(ctx context.Context, svc belay.Service, input json.RawMessage) (any, error)
	subscribe func(ctx context.Context, svc belay.Service, input json.RawMessage, lastEventID string, s sink) error
}

// sink is where a subscription's values go.
type sink struct {
	// ready says the subscription is accepted; it is called once, first.
	ready func() error
	// emit sends one value, with its id ("" for none).
	emit func(id string, v any) error
}

// procedures is seed 000's router (checkpoints, stream.hitlRequired) and
// belay's additions (sessions, stream.events), by path.
var procedures = map[string]procedure{
	"checkpoints.get":            {kind: query, call: getCheckpoint, in: "", out: Checkpoint{}},
	"checkpoints.list":           {kind: query, call: listCheckpoints, in: listInput{}, out: CheckpointList{}},
	"checkpoints.getHITLPending": {kind: query, call: pendingHITL, in: taskFilter{}, out: []PendingHITL{}},
	"checkpoints.create":         {kind: mutation, call: createCheckpoint, in: createInput{}, out: Checkpoint{}},
	"checkpoints.decide":         {kind: mutation, call: decide, in: decideInput{}, out: DecideResult{}},
	"checkpoints.restore":        {kind: mutation, call: restore, in: restoreInput{}, out: RestoreResult{}},
	"checkpoints.delete":         {kind: mutation, call: deleteCheckpoint, in: "", out: Deleted{}},
	"sessions.create":            {kind: mutation, call: createSession, in: belay.CreateSessionInput{}, out: belay.Session{}},
	"sessions.list":              {kind: query, call: listSessions, in: sessionsInput{}, out: SessionList{}},
	"sessions.get":               {kind: query, call: getSession, in: "", out: belay.Session{}},
	"stream.hitlRequired":        {kind: subscription, subscribe: hitlRequired, in: taskFilter{}, out: HITLRequiredEvent{}},
	"stream.events":              {kind: subscription, subscribe: events, in: eventsInput{}, out: Tracked[belay.Event]{}},
}

// decodeInput reads a procedure's input strictly: unknown fields and wrong
// types are a VALIDATION_ERROR naming the field.
func decodeInput(raw json.RawMessage, dst any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("null")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var typ *json.UnmarshalTypeError
		var tm *time.ParseError
		switch {
		case errors.As(err, &typ):
			field := typ.Field
			if field == "" {
				field = "input"
			}
			return belay.Invalid(field, "%s has the wrong type: want %s", field, typ.Type)
		case errors.As(err, &tm):
			return belay.Invalid("input", "a date is not an ISO-8601 time: %q", tm.Value)
		}
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			field := strings.Trim(name, `"`)
			return belay.Invalid(field, "unknown field %s", name)
		}
		return belay.Invalid("input", "input is not valid JSON for this procedure: %v", err)
	}
	return belay.InvalidUTF8(raw, dst)
}

// uuidInput reads an input that is one id, as seed 000's z.string().uuid().
func uuidInput(raw json.RawMessage) (string, error) {
	var id string
	if err := decodeInput(raw, &id); err != nil {
		return "", belay.Invalid("input", "input must be a UUID string")
	}
	return id, belay.ValidateID("input", id)
}

func getCheckpoint(ctx context.Context, svc belay.Service, raw json.RawMessage) (any, error) {
	id, err := uuidInput(raw)
	if err != nil {
		return nil, err
	}
	cp, err := svc.GetCheckpoint(ctx, id)
	if err != nil {
		return nil, err
	}
	return toCheckpoint(cp), nil
}

// listInput is seed 000's ListCheckpointsInput.
type listInput struct {
	TaskID        string               `json:"taskId,omitempty"`
	Type          belay.CheckpointType `json:"type,omitempty"`
	HITLRequired  *bool                `json:"hitlRequired,omitempty"`
	HITLDecided   *bool                `json:"hitlDecided,omitempty"`
	CreatedAfter  *time.Time           `json:"createdAfter,omitempty"`
	CreatedBefore *time.Time           `json:"createdBefore,omitempty"`
	Cursor        *string              `json:"cursor,omitempty"`
	Limit         *int                 `json:"limit,omitempty"`
	OrderBy       string               `json:"orderBy,omitempty"`
	OrderDir      string               `json:"orderDir,omitempty"`
}

func listCheckpoints(ctx context.Context, svc belay.Service, raw json.RawMessage) (any, error) {
	var in listInput
	if err := decodeInput(raw, &in); err != nil {
		return nil, err
	}
	q := belay.ListCheckpointsInput{SessionID: in.TaskID, Type: in.Type, HITLRequired: in.HITLRequired, HITLDecided: in.HITLDecided,
		CreatedAfter: in.CreatedAfter, CreatedBefore: in.CreatedBefore, Limit: 20, OrderBy: in.OrderBy, OrderDir: in.OrderDir}
	if in.Cursor != nil {
		q.Cursor = *in.Cursor
	}
	if in.Limit != nil {
		if *in.Limit < 1 {
			return nil, belay.Invalid("limit", "limit must be 1-%d, got %d", belay.MaxListLimit, *in.Limit)
		}
		q.Limit = *in.Limit
	}
	list, err := svc.ListCheckpoints(ctx, q)
	if err != nil {
		return nil, err
	}
	out := CheckpointList{Items: []Checkpoint{}, NextCursor: cursorPtr(list.NextCursor), HasMore: list.HasMore, TotalCount: list.TotalCount}
	for _, cp := range list.Items {
		out.Items = append(out.Items, toCheckpoint(cp))
	}
	return out, nil
}

// taskFilter is an optional task to keep to.
type taskFilter struct {
	TaskID string `json:"taskId,omitempty"`
}

func pendingHITL(ctx context.Context, svc belay.Service, raw json.RawMessage) (any, error) {
	var in taskFilter
	if err := decodeInput(raw, &in); err != nil {
		return nil, err
	}
	list, err := svc.PendingHITL(ctx, in.TaskID)
	if err != nil {
		return nil, err
	}
	out := []PendingHITL{}
	for _, p := range list {
		out = append(out, PendingHITL{Checkpoint: toCheckpoint(p.Checkpoint),
			Task: PendingTask{Task: Task{ID: p.Session.ID, Prompt: p.Session.Title, Status: p.Session.Status, Phase: p.Session.Phase},
				Readable: p.Session.Readable},
			Deadline: p.Deadline, TimeRemaining: p.TimeRemaining})
	}
	return out, nil
}

// createInput is seed 000's CreateCheckpointInput.
type createInput struct {
	TaskID       string               `json:"taskId"`
	Type         belay.CheckpointType `json:"type"`
	Trigger      belay.Trigger        `json:"trigger"`
	Description  string               `json:"description"`
	WorkspaceRef string               `json:"workspaceRef"`
	AgentState   json.RawMessage      `json:"agentState,omitempty"`
	HITL         *belay.HITLInput     `json:"hitl,omitempty"`
	Metadata     json.RawMessage      `json:"metadata,omitempty"`
}

func createCheckpoint(ctx context.Context, svc belay.Service, raw json.RawMessage) (any, error) {
	var in createInput
	if err := decodeInput(raw, &in); err != nil {
		return nil, err
	}
	if in.TaskID == "" {
		return nil, belay.Invalid("taskId", "taskId is required")
	}
	if err := belay.ValidateID("taskId", in.TaskID); err != nil {
		return nil, err
	}
	if in.Type == "" {
		return nil, belay.Invalid("type", "type is required: auto, phase, hitl, error or manual")
	}
	if in.Trigger == "" {
		return nil, belay.Invalid("trigger", "trigger is required")
	}
	cp, err := svc.CreateCheckpoint(ctx, belay.CreateCheckpointInput{SessionID: in.TaskID, Type: in.Type, Trigger: in.Trigger,
		Summary: in.Description, WorkspaceRef: in.WorkspaceRef, AgentState: in.AgentState, HITL: in.HITL, Metadata: in.Metadata})
	if err != nil {
		return nil, renameField(err, map[string]string{"summary": "description", "sessionId": "taskId"})
	}
	return toCheckpoint(cp), nil
}

// decideInput is seed 000's HITLDecisionInput.
type decideInput = belay.DecideInput

func decide(ctx context.Context, svc belay.Service, raw json.RawMessage) (any, error) {
	var in decideInput
	if err := decodeInput(raw, &in); err != nil {
		return nil, err
	}
	if in.Action == "" {
		return nil, belay.Invalid("action", "action is required")
	}
	res, err := svc.Decide(ctx, in)
	if err != nil {
		return nil, err
	}
	return DecideResult{Checkpoint: toCheckpoint(res.Checkpoint), Task: toTask(res.Session), Decision: toDecision(res.Decision)}, nil
}

// restoreInput is checkpoints.restore's input.
type restoreInput struct {
	CheckpointID string `json:"checkpointId"`
	Reason       string `json:"reason,omitempty"`
}

func restore(ctx context.Context, svc belay.Service, raw json.RawMessage) (any, error) {
	var in restoreInput
	if err := decodeInput(raw, &in); err != nil {
		return nil, err
	}
	res, err := svc.RestoreCheckpoint(ctx, belay.RestoreInput{CheckpointID: in.CheckpointID, Reason: in.Reason})
	if err != nil {
		return nil, err
	}
	files := append(append([]string{}, res.RestoredFiles...), res.RemovedFiles...)
	return RestoreResult{Task: toTask(res.Session), Checkpoint: toCheckpoint(res.Checkpoint), RestoredFiles: files, StateOnly: res.StateOnly}, nil
}

func deleteCheckpoint(ctx context.Context, svc belay.Service, raw json.RawMessage) (any, error) {
	id, err := uuidInput(raw)
	if err != nil {
		return nil, err
	}
	if err := svc.DeleteCheckpoint(ctx, id); err != nil {
		return nil, err
	}
	return Deleted{ID: id, Deleted: true}, nil
}

func createSession(ctx context.Context, svc belay.Service, raw json.RawMessage) (any, error) {
	var in belay.CreateSessionInput
	if err := decodeInput(raw, &in); err != nil {
		return nil, err
	}
	return svc.CreateSession(ctx, in)
}

// sessionsInput is sessions.list's input.
type sessionsInput struct {
	ProjectPath string              `json:"projectPath,omitempty"`
	Status      belay.SessionStatus `json:"status,omitempty"`
	// Own keeps the sessions a save naming only its project may continue
	// (see belay.ListSessionsInput).
	Own    bool    `json:"own,omitempty"`
	Cursor *string `json:"cursor,omitempty"`
	Limit  int     `json:"limit,omitempty"`
}

func listSessions(ctx context.Context, svc belay.Service, raw json.RawMessage) (any, error) {
	var in sessionsInput
	if err := decodeInput(raw, &in); err != nil {
		return nil, err
	}
	q := belay.ListSessionsInput{ProjectPath: in.ProjectPath, Status: in.Status, Own: in.Own, Limit: in.Limit}
	if in.Cursor != nil {
		q.Cursor = *in.Cursor
	}
	list, err := svc.ListSessions(ctx, q)
	if err != nil {
		return nil, err
	}
	return SessionList{Items: list.Items, NextCursor: cursorPtr(list.NextCursor), HasMore: list.HasMore, TotalCount: list.TotalCount}, nil
}

func getSession(ctx context.Context, svc belay.Service, raw json.RawMessage) (any, error) {
	id, err := uuidInput(raw)
	if err != nil {
		return nil, err
	}
	return svc.GetSession(ctx, id)
}

// hitlRequired streams the requests the subscriber may decide: first those
// pending now (so a reconnect misses none), then each new one as it is made.
func hitlRequired(ctx context.Context, svc belay.Service, raw json.RawMessage, _ string, out sink) error {
	var in struct {
		taskFilter
		// LastEventID is sent by a reconnecting client; every pending
		// request is sent again anyway.
		LastEventID string `json:"lastEventId,omitempty"`
	}
	if err := decodeInput(raw, &in); err != nil {
		return err
	}
	sent := map[string]bool{}
	send := func(p belay.PendingHITL) error {
		if sent[p.Checkpoint.ID] {
			return nil
		}
		sent[p.Checkpoint.ID] = true
		h := p.Checkpoint.HITL
		return out.emit("", HITLRequiredEvent{CheckpointID: p.Checkpoint.ID, TaskID: p.Checkpoint.SessionID, Readable: p.Session.Readable, Title: h.Title,
			Message: h.Message, Options: h.Options, Deadline: p.Deadline, TimeRemaining: p.TimeRemaining})
	}
	f := belay.EventFilter{SessionID: in.TaskID, Types: []string{belay.EventHITLRequired}, After: belay.FromNow}
	// The opening call sends what is pending now; after each new request the
	// pending list is read again as the subscriber sees it, so only requests
	// it may decide are sent, each once.
	opened := false
	return svc.Follow(ctx, f, 0, func(int64, []belay.Event) error {
		if !opened {
			opened = true
			if err := out.ready(); err != nil {
				return err
			}
		}
		pending, err := svc.PendingHITL(ctx, in.TaskID)
		if err != nil {
			return err
		}
		for _, p := range pending {
			if err := send(p); err != nil {
				return err
			}
		}
		return nil
	})
}

// events streams the event log, each with its sequence number as its id, so
// a client resumes after the last one it saw.
// eventsInput is stream.events' input: the whole log by default, or a
// session's, of some types, after a sequence number.
type eventsInput struct {
	SessionID   string   `json:"sessionId,omitempty"`
	Types       []string `json:"types,omitempty"`
	After       *int64   `json:"after,omitempty"`
	LastEventID string   `json:"lastEventId,omitempty"`
}

func events(ctx context.Context, svc belay.Service, raw json.RawMessage, lastEventID string, out sink) error {
	var in eventsInput
	if err := decodeInput(raw, &in); err != nil {
		return err
	}
	f := belay.EventFilter{SessionID: in.SessionID, Types: in.Types, After: belay.FromNow}
	if in.After != nil {
		f.After = *in.After
	}
	if in.LastEventID != "" {
		lastEventID = in.LastEventID
	}
	if lastEventID != "" {
		if _, err := fmt.Sscanf(lastEventID, "%d", &f.After); err != nil {
			return belay.Invalid("lastEventId", "lastEventId must be an event sequence number, got %q", belay.Clip(lastEventID, 40))
		}
	}
	return svc.Follow(ctx, f, 0, func(_ int64, batch []belay.Event) error {
		if batch == nil {
			return out.ready()
		}
		for _, e := range batch {
			if err := out.emit(fmt.Sprint(e.Seq), e); err != nil {
				return err
			}
		}
		return nil
	})
}

// renameField renames details.field for the seed's names of belay's fields.
func renameField(err error, names map[string]string) error {
	var be *belay.Error
	if !errors.As(err, &be) {
		return err
	}
	if f, ok := be.Details["field"].(string); ok {
		if n, ok := names[f]; ok {
			return be.With("field", n)
		}
	}
	return err
}
