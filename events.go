package belay

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Graph event types: what a run of the graph package reports to the event
// log of its session, as it goes (see EventService.AppendEvents). They are
// the only types a caller may append; every other type is belay's own.
const (
	// EventGraphNodeStart: a node starts (data: node, step).
	EventGraphNodeStart = "graph.node_start"
	// EventGraphNodeEnd: a node completed (data: node, step, next); the
	// event's checkpoint is the step's when it was saved by then.
	EventGraphNodeEnd = "graph.node_end"
	// EventGraphCustom: a node emitted something (data: node, step, name, data).
	EventGraphCustom = "graph.custom"
	// EventGraphTokens: text a node emitted as tokens, several coalesced
	// (data: node, step, text, count).
	EventGraphTokens = "graph.tokens"
	// EventGraphInterrupt: the run paused (data: node, step); the event's
	// checkpoint is the HITL request.
	EventGraphInterrupt = "graph.interrupt"
	// EventGraphResult: the run stopped (data: status, step).
	EventGraphResult = "graph.result"
)

// GraphEventTypes are the event types AppendEvents accepts.
var GraphEventTypes = []string{EventGraphNodeStart, EventGraphNodeEnd, EventGraphCustom, EventGraphTokens,
	EventGraphInterrupt, EventGraphResult}

// Limits of AppendEvents.
const (
	// MaxAppendEvents bounds the events of one AppendEvents call.
	MaxAppendEvents = 200
	// MaxEventData bounds one appended event's data, in bytes.
	MaxEventData = 64 << 10
)

// AppendEventsInput appends Events, in order, to the event log of session
// SessionID.
type AppendEventsInput struct {
	SessionID string        `json:"sessionId"`
	Events    []EventRecord `json:"events"`
}

// EventRecord is one event to append: Type is one of GraphEventTypes, Data
// a JSON object of at most MaxEventData bytes, CheckpointID (optional) a
// checkpoint of the same session.
type EventRecord struct {
	Type         string          `json:"type"`
	CheckpointID string          `json:"checkpointId,omitempty"`
	Data         json.RawMessage `json:"data,omitempty"`
	// ThisCheckpoint, in CreateCheckpointInput.Events only, makes the event
	// name the checkpoint being created (CheckpointID left empty).
	ThisCheckpoint bool `json:"thisCheckpoint,omitempty"`
}

// Validate checks the input's shape; core checks the session and the
// checkpoints.
func (in AppendEventsInput) Validate() error {
	if err := ValidateID("sessionId", in.SessionID); err != nil {
		return err
	}
	if len(in.Events) == 0 {
		return Invalid("events", "give 1 to %d events, got 0", MaxAppendEvents)
	}
	return ValidateEvents("events", in.Events, false)
}

// ValidateEvents checks events carried by a call that appends them to a
// session's event log (AppendEvents, and CreateCheckpoint, EndSession and a
// lease release in the same transaction as their own change): at most
// MaxAppendEvents, each of GraphEventTypes with data a JSON object of at most
// MaxEventData bytes. thisCheckpoint says whether an event may name the
// checkpoint the call creates.
func ValidateEvents(field string, events []EventRecord, thisCheckpoint bool) error {
	if len(events) > MaxAppendEvents {
		return Invalid(field, "give at most %d events, got %d", MaxAppendEvents, len(events))
	}
	for i, e := range events {
		field := fmt.Sprintf("%s[%d]", field, i)
		if e.ThisCheckpoint && (!thisCheckpoint || e.CheckpointID != "") {
			return Invalid(field+".thisCheckpoint", "thisCheckpoint names the checkpoint being created: only with a new checkpoint, and without checkpointId")
		}
		if !slices.Contains(GraphEventTypes, e.Type) {
			return Invalid(field+".type", "event type %q may not be appended: only %s", Clip(e.Type, 60), strings.Join(GraphEventTypes, ", ")).
				With("allowed", GraphEventTypes)
		}
		if e.CheckpointID != "" {
			if err := ValidateID(field+".checkpointId", e.CheckpointID); err != nil {
				return err
			}
		}
		if len(e.Data) > MaxEventData {
			return Invalid(field+".data", "event data is %d bytes, more than %d", len(e.Data), MaxEventData).With("max", MaxEventData)
		}
		if err := ValidateJSON(field+".data", e.Data); err != nil {
			return err
		}
		if len(e.Data) > 0 {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(e.Data, &obj); err != nil || obj == nil {
				return Invalid(field+".data", "event data must be a JSON object")
			}
		}
	}
	return nil
}
