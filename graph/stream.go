package graph

import (
	"context"
	"iter"
	"sync"

	"github.com/belayhq/belay"
)

// EventType says what an Event reports.
type EventType string

// Event types, in the order a run produces them: for each node a start, any
// custom events it emits, and an end with the state it wrote; then, when the
// run pauses, an interrupt; last, always, a result.
//
// The same events go to the event log of the run's session, whether the run
// is streamed or not, as graph.* events (belay.GraphEventTypes) with a
// sequence number, where `belay watch`, SSE and WebSocket clients follow
// them: graph.node_start, graph.node_end, graph.custom (graph.tokens for
// TokenEvent, coalesced), graph.interrupt and graph.result. The log holds
// no state (the checkpoints do); it is written every TokenFlushInterval and
// when the run stops, so it trails the stream by at most that long.
const (
	EventNodeStart EventType = "node_start"
	EventCustom    EventType = "custom"
	EventNodeEnd   EventType = "node_end"
	EventInterrupt EventType = "interrupt"
	EventResult    EventType = "result"
)

// Event is one thing a streamed run reports.
type Event[S any] struct {
	Type  EventType
	RunID string
	// Node and Step are the node the event is about and its step.
	Node string
	Step int
	// State is the state a node starts from (node_start) or wrote
	// (node_end), and the run's state at an interrupt or result.
	State S
	// CheckpointID is the checkpoint of the node_end's step. It is set
	// only with DurabilitySync, where the step is saved before the event;
	// with DurabilityAsync and DurabilityExit the save comes later (or, for
	// exit, not at all but for the last step), so it is empty here. The
	// graph.node_end event of the session's log names the checkpoint once
	// saved: every step's in sync and async, the last step's in exit.
	CheckpointID string
	// Next is the node that runs after Node (node_end).
	Next string
	// Name and Data are what a node passed to Emit (custom).
	Name string
	Data any
	// Interrupt is the pending interrupt (interrupt, and result when the
	// run paused).
	Interrupt *Pending
	// Result is where the run stands (result): Status, final state, steps.
	Result *Result[S]
}

type emitterKey struct{}

// emitter passes a run's events to a stream's consumer, from one goroutine
// at a time, until the consumer stops reading.
type emitter struct {
	mu      sync.Mutex
	yield   func(any) bool
	stopped bool
	stop    context.CancelFunc
}

func (e *emitter) send(ev any) bool {
	if e == nil {
		return true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return false
	}
	if !e.yield(ev) {
		e.stopped = true
		e.stop()
		return false
	}
	return true
}

// close ends the sends and reports whether the consumer had stopped.
func (e *emitter) close() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	was := e.stopped
	e.stopped = true
	return was
}

func emitterOf(ctx context.Context) *emitter {
	e, _ := ctx.Value(emitterKey{}).(*emitter)
	return e
}

// Emit sends a custom event (name and data: tokens, progress, a plan) from
// inside a node to whoever streams the run; outside a stream it does
// nothing. It reports false when the stream's consumer stopped reading: the
// run is then cancelled and the node should return.
func Emit(ctx context.Context, name string, data any) bool {
	nr, _ := ctx.Value(nodeRunKey{}).(*nodeRun)
	if nr == nil || nr.emit == nil {
		return true
	}
	return nr.emit(name, data)
}

// collect runs a stream to its result.
func collect[S any](events iter.Seq2[Event[S], error]) (*Result[S], error) {
	for ev, err := range events {
		if ev.Type == EventResult {
			return ev.Result, err
		}
	}
	return nil, context.Canceled // not reached: a stream read to its end ends with a result
}

// Stream starts a run like Run and reports it as it goes: see Event for what
// and in which order. The last event is a result, with Run's error alongside
// when Run would return one. A consumer that stops reading early cancels
// the run, which is left interrupted, to be resumed like a crashed one.
func (c *Compiled[S]) Stream(ctx context.Context, svc belay.Service, in RunInput[S]) iter.Seq2[Event[S], error] {
	return c.stream(ctx, func(ctx context.Context) (*Result[S], error) { return c.start(ctx, svc, in) })
}

// StreamResume resumes a run like Resume and reports it as Stream does.
func (c *Compiled[S]) StreamResume(ctx context.Context, svc belay.Service, runID string, cmd Command) iter.Seq2[Event[S], error] {
	return c.stream(ctx, func(ctx context.Context) (*Result[S], error) { return c.resume(ctx, svc, runID, cmd) })
}

func (c *Compiled[S]) stream(ctx context.Context, body func(context.Context) (*Result[S], error)) iter.Seq2[Event[S], error] {
	return func(yield func(Event[S], error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		e := &emitter{stop: cancel, yield: func(v any) bool { return yield(v.(Event[S]), nil) }}
		res, err := body(context.WithValue(ctx, emitterKey{}, e))
		if e.close() { // the consumer is gone
			return
		}
		ev := Event[S]{Type: EventResult, Result: res}
		if res != nil {
			ev.RunID, ev.State, ev.Interrupt, ev.Step = res.RunID, res.State, res.Interrupt, res.Steps
		}
		yield(ev, err)
	}
}
