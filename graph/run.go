package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/belayhq/belay"
)

// Status is how a call to Run, Resume or Wait left the run.
type Status string

// Run statuses.
const (
	Completed   Status = "completed"
	Interrupted Status = "interrupted"
	Failed      Status = "failed"
)

// RunInput starts a run: a new session of ProjectPath titled Title, from State.
type RunInput[S any] struct {
	ProjectPath string
	Title       string
	State       S
}

// Result is where a run stands after Run, Resume or Wait.
type Result[S any] struct {
	// RunID is the run's session id: what Resume and Wait take.
	RunID  string
	Status Status
	// State is the state at END, or the state the interrupted or failed node
	// started from.
	State S
	// Steps counts the node executions that completed, resumes included.
	Steps int
	// Interrupt is the pending interrupt of an interrupted run.
	Interrupt *Pending
}

// Pending is an interrupt that waits for its resume value.
type Pending struct {
	// ID is the id of the interrupt's HITL checkpoint, which a person decides.
	ID   string
	Node string
	// Index is the position of the Interrupt call among the node's, from 0.
	Index int
	// Breakpoint is "before" or "after" when the run stopped at a static
	// breakpoint (InterruptBefore, InterruptAfter) rather than an Interrupt.
	Breakpoint string
	Checkpoint *belay.Checkpoint
}

// point is what every checkpoint of a run records (metadata key "graph"):
// the node that runs next, as step Step.
type point struct {
	Next string `json:"next"`
	Step int    `json:"step"`
	// Update marks a checkpoint written by UpdateState.
	Update    bool            `json:"update,omitempty"`
	Interrupt *interruptPoint `json:"interrupt,omitempty"`
}

type interruptPoint struct {
	Node  string `json:"node"`
	Index int    `json:"index"`
	// Breakpoint is "before" or "after" for a static breakpoint at Node.
	Breakpoint string `json:"breakpoint,omitempty"`
	// Request is the id of the interrupt's HITL checkpoint when another
	// checkpoint (an UpdateState) came after it; empty when it is this one.
	Request string `json:"request,omitempty"`
	// Resumes are the values of the node's earlier interrupts.
	Resumes []json.RawMessage `json:"resumes,omitempty"`
}

// run is one run in progress.
type run[S any] struct {
	svc     belay.Service
	id      string
	node    string
	step    int
	state   S
	raw     json.RawMessage
	resumes []json.RawMessage
	// settle answers the interrupt being resumed, before the run records
	// anything else; nil when there is nothing to answer.
	settle func(context.Context) error
	hold   *holding
	em     *emitter
	// pass lets the run through the breakpoint before its first node once:
	// it is resuming from there.
	pass bool
}

// Run starts a run: it creates a session, saves the input as checkpoint
// "__start__" and runs the graph from START, saving an auto checkpoint after
// every node (named after it, with the state and the step number). It returns
// when the run completes at END (the session completed), pauses at an
// Interrupt (status Interrupted, the session awaiting input) or fails. A node
// that returns an error or panics, a router that returns an unknown target, a
// state JSON cannot hold or a run longer than the recursion limit fails it:
// an "error" checkpoint records the message (and a panic's stack), the
// session fails and Run returns the error with a Failed result. An error of
// the service itself is returned as is and the run goes no further.
func (c *Compiled[S]) Run(ctx context.Context, svc belay.Service, in RunInput[S]) (*Result[S], error) {
	return collect(c.Stream(ctx, svc, in))
}

func (c *Compiled[S]) start(ctx context.Context, svc belay.Service, in RunInput[S]) (*Result[S], error) {
	raw, err := encodeState(in.State)
	if err != nil {
		return nil, err
	}
	var first string
	if err := protect(START, func() (err error) { first, err = c.first(in.State); return err }); err != nil {
		return nil, err
	}
	sess, err := svc.CreateSession(ctx, belay.CreateSessionInput{ProjectPath: in.ProjectPath, Title: in.Title})
	if err != nil {
		return nil, err
	}
	lease := belay.LeaseInput{SessionID: sess.ID, Holder: newHolder(), Lease: c.lease}
	if _, err := svc.Heartbeat(ctx, lease); err != nil {
		return nil, err
	}
	r := &run[S]{svc: svc, id: sess.ID, node: first, step: 1, state: in.State, raw: raw}
	return c.drive(ctx, r, lease, func(ctx context.Context) error {
		_, err := r.save(ctx, belay.CreateCheckpointInput{Name: START, Type: belay.TypeAuto, Summary: "input",
			AgentState: raw}, point{Next: first, Step: 1})
		return err
	})
}

// drive runs r while holding its lease (taken already): it renews the lease
// as nodes run and gives it up as the run stops. A run stopped by an error of
// the service, a lost lease or a cancelled context is left interrupted, to be
// resumed from its last checkpoint.
func (c *Compiled[S]) drive(ctx context.Context, r *run[S], lease belay.LeaseInput, first func(context.Context) error) (*Result[S], error) {
	h, hctx := hold(ctx, r.svc, lease)
	defer h.stop()
	r.hold, r.em = h, emitterOf(ctx)
	var res *Result[S]
	err := first(hctx)
	if err == nil {
		res, err = c.loop(hctx, r)
	}
	switch {
	case res != nil && res.Status == Interrupted:
		r.em.send(Event[S]{Type: EventInterrupt, RunID: r.id, Node: res.Interrupt.Node, Step: r.step, State: res.State, Interrupt: res.Interrupt})
		// The interrupt is saved; should the release fail, the lease lapses
		// and the run is resumed all the same.
		_ = h.release(ctx)
	case res != nil:
		h.stop() // ending the session released the lease
	default:
		if lost := h.lost(); lost != nil && err != nil {
			err = lost
		}
		_ = h.release(ctx)
	}
	return res, err
}

// loop runs nodes until END, an interrupt or a failure.
func (c *Compiled[S]) loop(ctx context.Context, r *run[S]) (*Result[S], error) {
	for {
		if r.node == END {
			if err := r.settleFirst(ctx); err != nil {
				return nil, err
			}
			if _, err := r.svc.EndSession(ctx, belay.EndSessionInput{SessionID: r.id, Status: belay.SessionCompleted}); err != nil {
				return nil, err
			}
			return &Result[S]{RunID: r.id, Status: Completed, State: r.state, Steps: r.step - 1}, nil
		}
		if r.step > c.recursionLimit {
			err := belay.Errorf(belay.CodeBudgetExceeded, "the run reached its recursion limit of %d steps without reaching END", c.recursionLimit).
				With("recursionLimit", c.recursionLimit)
			return r.fail(ctx, err)
		}
		if c.before[r.node] && !r.pass {
			return r.breakpoint(ctx, breakBefore, r.node, point{Next: r.node, Step: r.step})
		}
		r.pass = false
		if !r.em.send(Event[S]{Type: EventNodeStart, RunID: r.id, Node: r.node, Step: r.step, State: r.state}) {
			return nil, context.Canceled
		}
		nr := &nodeRun{node: r.node, resumes: r.resumes}
		if r.em != nil {
			node, step := r.node, r.step
			nr.emit = func(name string, data any) bool {
				return r.em.send(Event[S]{Type: EventCustom, RunID: r.id, Node: node, Step: step, Name: name, Data: data})
			}
		}
		nodeCtx := context.WithValue(ctx, nodeRunKey{}, nr)
		var out S
		var next string
		err := protect(r.node, func() (err error) {
			if out, err = c.nodes[r.node](nodeCtx, r.state); err != nil {
				return err
			}
			next, err = c.next(r.node, out)
			return err
		})
		if nr.badResume != nil {
			return nil, nr.badResume
		}
		if nr.pending != nil {
			return r.interrupt(ctx, nr)
		}
		if err != nil && ctx.Err() != nil {
			// Cancelled, or the lease is lost: the run stops where it is,
			// resumable, rather than failing.
			return nil, err
		}
		if err != nil {
			return r.fail(ctx, err)
		}
		raw, err := encodeState(out)
		if err != nil {
			return r.fail(ctx, err)
		}
		cp, err := r.save(ctx, belay.CreateCheckpointInput{Name: r.node, Type: belay.TypeAuto, Step: r.step,
			Summary: fmt.Sprintf("step %d: %s", r.step, r.node), AgentState: raw}, point{Next: next, Step: r.step + 1})
		if err != nil {
			return nil, err
		}
		if !r.em.send(Event[S]{Type: EventNodeEnd, RunID: r.id, Node: r.node, Step: r.step, State: out, CheckpointID: cp.ID, Next: next}) {
			r.node, r.step = next, r.step+1
			return nil, context.Canceled
		}
		done := r.node
		r.node, r.step, r.state, r.raw, r.resumes = next, r.step+1, out, raw, nil
		if c.after[done] {
			return r.breakpoint(ctx, breakAfter, done, point{Next: next, Step: r.step})
		}
	}
}

// Static breakpoints (see InterruptBefore and InterruptAfter).
const (
	breakBefore = "before"
	breakAfter  = "after"
)

// breakpoint pauses the run at a static breakpoint: a HITL checkpoint of the
// current state with one option, "continue", that `belay decide` or Resume
// answers.
func (r *run[S]) breakpoint(ctx context.Context, where, node string, p point) (*Result[S], error) {
	p.Interrupt = &interruptPoint{Node: node, Breakpoint: where}
	title := fmt.Sprintf("Breakpoint %s %s", where, node)
	cp, err := r.save(ctx, belay.CreateCheckpointInput{Name: node, Type: belay.TypeHITL, Step: p.Step,
		Summary: belay.Clip(title, belay.MaxSummary), AgentState: r.raw, HITL: &belay.HITLInput{Required: true, Title: title,
			Message: fmt.Sprintf("The run stopped %s node %q; continue when ready.", where, node), OnReject: belay.OnRejectContinue,
			Options: []belay.HITLOption{{ID: "continue", Label: "Continue", Action: belay.ActionApprove, IsDefault: true}}}}, p)
	if err != nil {
		return nil, err
	}
	return &Result[S]{RunID: r.id, Status: Interrupted, State: r.state, Steps: r.step - 1,
		Interrupt: &Pending{ID: cp.ID, Node: node, Breakpoint: where, Checkpoint: cp}}, nil
}

// protect runs fn and turns a panic into an INTERNAL_ERROR that carries the
// stack (details "stack").
func protect(node string, fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = belay.Errorf(belay.CodeInternal, "node %q panicked: %v", node, v).
				With("node", node).With("stack", string(debug.Stack()))
		}
	}()
	return fn()
}

func (r *run[S]) settleFirst(ctx context.Context) error {
	if r.settle == nil {
		return nil
	}
	if err := r.settle(ctx); err != nil {
		return err
	}
	r.settle = nil
	return nil
}

// save records a checkpoint of the run at p.
func (r *run[S]) save(ctx context.Context, in belay.CreateCheckpointInput, p point) (*belay.Checkpoint, error) {
	if r.hold != nil {
		if err := r.hold.lost(); err != nil {
			return nil, err // another process holds the run now: write nothing
		}
	}
	if err := r.settleFirst(ctx); err != nil {
		return nil, err
	}
	meta, err := json.Marshal(map[string]point{"graph": p})
	if err != nil {
		return nil, err
	}
	in.SessionID, in.Metadata = r.id, meta
	return r.svc.CreateCheckpoint(ctx, in)
}

// interrupt pauses the run at nr's pending interrupt: a HITL checkpoint of
// the state the node started from.
func (r *run[S]) interrupt(ctx context.Context, nr *nodeRun) (*Result[S], error) {
	summary := nr.pending.Title
	if summary == "" {
		summary = fmt.Sprintf("%s asks for a decision", r.node)
	}
	p := point{Next: r.node, Step: r.step, Interrupt: &interruptPoint{Node: r.node, Index: nr.index, Resumes: nr.resumes[:nr.index]}}
	cp, err := r.save(ctx, belay.CreateCheckpointInput{Name: r.node, Type: belay.TypeHITL, Step: r.step,
		Summary: belay.Clip(summary, belay.MaxSummary), AgentState: r.raw, HITL: nr.pending}, p)
	if err != nil {
		return nil, err
	}
	return &Result[S]{RunID: r.id, Status: Interrupted, State: r.state, Steps: r.step - 1,
		Interrupt: &Pending{ID: cp.ID, Node: r.node, Index: nr.index, Checkpoint: cp}}, nil
}

// fail records err as an error checkpoint of the node that was to run and
// fails the session.
func (r *run[S]) fail(ctx context.Context, err error) (*Result[S], error) {
	err = nodeError(r.node, r.step, err)
	desc := err.Error()
	if be := (*belay.Error)(nil); errors.As(err, &be) {
		if stack, ok := be.Details["stack"].(string); ok {
			desc += "\n\n" + stack
		}
	}
	if _, serr := r.save(ctx, belay.CreateCheckpointInput{Name: r.node, Type: belay.TypeError, Step: r.step,
		Summary: belay.Clip(err.Error(), belay.MaxSummary), Description: belay.Clip(desc, belay.MaxDescription),
		AgentState: r.raw}, point{Next: r.node, Step: r.step}); serr != nil {
		return nil, serr
	}
	if _, serr := r.svc.EndSession(ctx, belay.EndSessionInput{SessionID: r.id, Status: belay.SessionFailed,
		Reason: belay.Clip(err.Error(), 200)}); serr != nil {
		return nil, serr
	}
	return &Result[S]{RunID: r.id, Status: Failed, State: r.state, Steps: r.step - 1}, err
}
