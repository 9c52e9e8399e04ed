package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

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
	// Steps counts the steps that completed (parallel nodes make one step), resumes included.
	Steps int
	// Interrupt is the pending interrupt of an interrupted run: the first
	// when several parallel branches paused, all of which Interrupts lists.
	Interrupt  *Pending
	Interrupts []*Pending
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
	// Also are the nodes that run in parallel with Next.
	Also []string `json:"also,omitempty"`
	Step int      `json:"step"`
	// Writes are the states of the parallel branches of the step that
	// completed before a sibling paused or failed, by node.
	Writes map[string]json.RawMessage `json:"writes,omitempty"`
	// Update marks a checkpoint written by UpdateState.
	Update    bool            `json:"update,omitempty"`
	Interrupt *interruptPoint `json:"interrupt,omitempty"`
	// Others are the step's other pending interrupts, when parallel
	// branches paused together, each naming its Request.
	Others []interruptPoint `json:"others,omitempty"`
	// Waiting are the sources of each waiting edge (AddWaitingEdge) that
	// have completed while its target waits for the rest.
	Waiting map[string][]string `json:"waiting,omitempty"`
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
	svc   belay.Service
	id    string
	node  string
	step  int
	state S
	raw   json.RawMessage
	// resumes are the resume values of the nodes being resumed.
	resumes map[string][]json.RawMessage
	// answers answer the interrupts being resumed, recorded with the run's
	// next checkpoint; decide those recorded before it, each on its own.
	answers, decide []belay.DecideInput
	// also are the parallel siblings of node; writes the states of those
	// that completed already.
	also   []string
	writes map[string]json.RawMessage
	// keptFrom is the state the kept writes started from.
	keptFrom json.RawMessage
	// waiting are the waiting edges' completed sources (point.Waiting).
	waiting map[string][]string
	hold    *holding
	// durability says when steps are saved; writing is the newest
	// background save (async), asyncErr the first that failed, and
	// unsaved the step held back (exit).
	durability Durability
	writing    chan struct{}
	mu         sync.Mutex
	asyncErr   error
	unsaved    *stepSave
	em         *emitter
	// log writes the run's events to its session's event log.
	log *eventLog
	// pass lets the run through the breakpoint before its first node once:
	// it is resuming from there.
	pass bool
	// closed says the run's last save stopped it: released the lease or
	// ended the session, with the run's last events (see stopWith).
	closed bool
}

// Run starts a run: it creates a session, saves the input as checkpoint
// "__start__" and runs the graph from START, saving an auto checkpoint after
// every node (named after it, with the state and the step number). It returns
// when the run completes at END (the session completed), pauses at an
// Interrupt (status Interrupted, the session awaiting input) or fails. A node
// that returns an error or panics, a router that returns an unknown target, a
// state JSON cannot hold (or that is larger than belay.MaxStateBytes as JSON,
// or whose JSON does not decode back into S),
// parallel branches whose completed states together are too large to keep
// while a sibling pauses, or a run longer than the recursion limit fails it:
// an "error" checkpoint records the message (and a panic's stack), the
// session fails and Run returns the error with a Failed result. An error of
// the service itself is returned as is and the run goes no further.
func (c *Compiled[S]) Run(ctx context.Context, svc belay.Service, in RunInput[S]) (*Result[S], error) {
	return collect(c.Stream(ctx, svc, in))
}

func (c *Compiled[S]) start(ctx context.Context, svc belay.Service, in RunInput[S]) (*Result[S], error) {
	state, raw, err := checkpointed(in.State)
	if err != nil {
		return nil, err
	}
	var first []string
	if err := protect(START, func() (err error) { first, err = c.first(state); return err }); err != nil {
		return nil, err
	}
	meta, err := pointMeta(nextPoint(first, 1))
	if err != nil {
		return nil, err
	}
	// The session is created held, with the input as checkpoint "__start__".
	lease := belay.LeaseInput{Holder: newHolder(), Lease: c.lease}
	sess, err := svc.CreateSession(ctx, belay.CreateSessionInput{ProjectPath: in.ProjectPath, Title: in.Title,
		Holder: lease.Holder, Lease: lease.Lease, Checkpoint: &belay.CreateCheckpointInput{Name: START, Type: belay.TypeAuto,
			Summary: "input", AgentState: raw, Metadata: meta}})
	if err != nil {
		return nil, err
	}
	lease.SessionID = sess.ID
	r := &run[S]{svc: svc, id: sess.ID, node: first[0], also: first[1:], step: 1, state: state, raw: raw}
	return c.drive(ctx, r, lease)
}

// drive runs r while holding its lease (taken already): it renews the lease
// as nodes run and gives it up as the run stops — by ending the session at
// END or on a failure, or by releasing it — in a call that carries the run's
// last events. A run stopped by an error of the service, a lost lease or a
// cancelled context is left interrupted, to be resumed from its last
// checkpoint.
func (c *Compiled[S]) drive(ctx context.Context, r *run[S], lease belay.LeaseInput) (*Result[S], error) {
	h, hctx := hold(ctx, r.svc, lease)
	defer h.stop()
	r.hold, r.em, r.durability, r.log = h, emitterOf(ctx), c.durability, newEventLog(ctx, r.svc, r.id)
	res, err := c.loop(hctx, r)
	if ferr := r.flush(hctx); ferr != nil && err == nil {
		res, err = nil, ferr
	}
	if res != nil && res.Status == Interrupted {
		ev := Event[S]{Type: EventInterrupt, RunID: r.id, Node: res.Interrupt.Node, Step: r.step, State: res.State, Interrupt: res.Interrupt}
		if r.closed {
			r.em.send(ev) // the log has it from the save
		} else {
			r.publish(ev, nil)
		}
	}
	events, lerr := r.log.stop()
	if !r.closed {
		events = append(events, belay.EventRecord{Type: belay.EventGraphResult, Data: resultData(r.step, res, err)})
	}
	switch {
	case r.closed:
		h.stop()
		r.log.appendNow(events) // what came after the last save
	case res != nil && res.Status != Interrupted:
		end := belay.EndSessionInput{SessionID: r.id, Status: belay.SessionCompleted, Events: events}
		if res.Status == Failed {
			end.Status, end.Reason = belay.SessionFailed, belay.Clip(err.Error(), 200)
		}
		if _, eerr := r.svc.EndSession(hctx, end); eerr != nil {
			res, err = nil, eerr
			events[len(events)-1].Data = resultData(r.step, res, err)
			r.log.appendNow(events)
			_ = h.release(ctx)
			break
		}
		h.stop() // ending the session released the lease
	case res != nil:
		// The interrupt is saved; should the release fail, the lease lapses
		// and the run is resumed all the same.
		if h.release(ctx, events...) != nil {
			r.log.appendNow(events)
		}
	default:
		if lost := h.lost(); lost != nil && err != nil {
			err = lost
		}
		r.log.appendNow(events)
		_ = h.release(ctx)
	}
	if lerr == nil {
		lerr = r.log.failed()
	}
	if lerr != nil && err == nil {
		err = fmt.Errorf("graph: writing the event log of run %s: %w", r.id, lerr)
	}
	return res, err
}

// loop runs steps until END, an interrupt or a failure. A step is one node,
// or several parallel branches (see AddEdge) merged as WithReducer says.
func (c *Compiled[S]) loop(ctx context.Context, r *run[S]) (*Result[S], error) {
	for {
		if r.node == END {
			if err := r.flush(ctx); err != nil {
				return nil, err
			}
			if err := r.settle(ctx, false); err != nil {
				return nil, err
			}
			return &Result[S]{RunID: r.id, Status: Completed, State: r.state, Steps: r.step - 1}, nil
		}
		if r.step > c.recursionLimit {
			err := belay.Errorf(belay.CodeBudgetExceeded, "the run reached its recursion limit of %d steps without reaching END", c.recursionLimit).
				With("recursionLimit", c.recursionLimit)
			return r.fail(ctx, r.node, err)
		}
		step := r.frontier()
		if !r.pass {
			for _, n := range step {
				if c.before[n] {
					return r.breakpoint(ctx, breakBefore, n, r.at())
				}
			}
		}
		r.pass = false
		var out S
		var raw json.RawMessage
		var next []string
		var res *Result[S]
		var err error
		if len(step) == 1 {
			out, raw, next, res, err = c.single(ctx, r)
		} else {
			out, raw, next, res, err = c.parallel(ctx, r, step)
		}
		if res != nil || err != nil {
			return res, err
		}
		name := belay.Clip(strings.Join(step, "+"), belay.MaxNameLen)
		waiting, next := c.arrive(r.waiting, step, next)
		if len(next) == 0 {
			next = []string{END} // nothing runs next: the run ends
		} else if len(next) > 1 {
			next = slices.DeleteFunc(next, func(n string) bool { return n == END })
		}
		np := nextPoint(next, r.step+1)
		np.Waiting = waiting
		// The node_end events go to the log before the save, which carries
		// them naming its checkpoint; to the stream once it is saved.
		ref := newCheckpointRef()
		ends := make([]Event[S], len(step))
		for i, n := range step {
			ends[i] = Event[S]{Type: EventNodeEnd, RunID: r.id, Node: n, Step: r.step, State: out, Next: np.Next}
			r.logEvent(ends[i], ref)
		}
		in := belay.CreateCheckpointInput{Name: name, Type: belay.TypeAuto, Step: r.step,
			Summary: belay.Clip(fmt.Sprintf("step %d: %s", r.step, strings.Join(step, ", ")), belay.MaxSummary), AgentState: raw}
		if np.Next == END && len(np.Also) == 0 && r.durability == DurabilitySync && !slices.ContainsFunc(step, func(n string) bool { return c.after[n] }) {
			// The run ends with this step: its save ends the session.
			r.stopWith(&in, ref, &Result[S]{Status: Completed, Steps: r.step}, r.step+1, nil)
		}
		cp, err := r.saveStep(ctx, in, np, ref)
		if err != nil {
			return nil, err
		}
		r.node, r.also, r.step, r.state, r.raw, r.waiting = np.Next, np.Also, r.step+1, out, raw, waiting
		r.resumes, r.writes = nil, nil
		for _, ev := range ends {
			if cp != nil {
				ev.CheckpointID = cp.ID
			}
			if !r.em.send(ev) && !r.closed {
				return nil, context.Canceled
			}
		}
		for _, n := range step {
			if c.after[n] {
				return r.breakpoint(ctx, breakAfter, n, r.at())
			}
		}
	}
}

// nextPoint is a checkpoint's point when next runs as step.
func nextPoint(next []string, step int) point {
	return point{Next: next[0], Also: next[1:], Step: step}
}

// frontier lists the nodes of the run's next step.
func (r *run[S]) frontier() []string {
	return append([]string{r.node}, r.also...)
}

// at is the point of the run's next step.
func (r *run[S]) at() point {
	return point{Next: r.node, Also: r.also, Step: r.step, Waiting: r.waiting}
}

// nodeRun starts an execution of node: with the resume values of the
// interrupt being resumed when it is that node's.
func (r *run[S]) nodeRun(node string) *nodeRun {
	nr := &nodeRun{node: node}
	nr.resumes = r.resumes[node]
	step := r.step
	nr.emit = func(name string, data any) bool {
		return r.publish(Event[S]{Type: EventCustom, RunID: r.id, Node: node, Step: step, Name: name, Data: data}, nil)
	}
	return nr
}

// single runs a step of one node. A result or an error ends the run there.
func (c *Compiled[S]) single(ctx context.Context, r *run[S]) (S, json.RawMessage, []string, *Result[S], error) {
	var zero S
	if !r.publish(Event[S]{Type: EventNodeStart, RunID: r.id, Node: r.node, Step: r.step, State: r.state}, nil) {
		return zero, nil, nil, nil, context.Canceled
	}
	nr := r.nodeRun(r.node)
	out, raw, next, err := c.call(ctx, r.node, nr, r.state, r.raw)
	if nr.badResume != nil {
		return zero, nil, nil, nil, nr.badResume
	}
	if nr.pending != nil {
		res, err := r.interrupt(ctx, []*nodeRun{nr}, nil)
		return zero, nil, nil, res, err
	}
	if err != nil && ctx.Err() != nil {
		// Cancelled, or the lease is lost: the run stops where it is,
		// resumable, rather than failing.
		return zero, nil, nil, nil, err
	}
	if err != nil {
		res, err := r.fail(ctx, r.node, err)
		return zero, nil, nil, res, err
	}
	return out, raw, next, nil, nil
}

// call runs node from state in (raw encoded), then its edges, retrying a
// failed node as its RetryPolicy says — each attempt from a fresh copy of the
// state; never after an interrupt or when ctx ends. It returns the node's
// state as checkpointed: its JSON, and the state decoded from it, which the
// edges route on.
func (c *Compiled[S]) call(ctx context.Context, node string, nr *nodeRun, in S, raw json.RawMessage) (S, json.RawMessage, []string, error) {
	pol, retries := c.retry[node]
	for attempt := 1; ; attempt++ {
		nodeCtx := context.WithValue(ctx, nodeRunKey{}, nr)
		var out S
		var outRaw json.RawMessage
		var next []string
		nodeFailed := false
		err := protect(node, func() (err error) {
			if out, err = c.nodes[node](nodeCtx, in); err != nil {
				nodeFailed = true
				return err
			}
			if nr.pending != nil {
				return nil // what a node returns after an unanswered interrupt is discarded
			}
			if out, outRaw, err = checkpointed(out); err != nil {
				return err
			}
			next, err = c.next(node, out)
			return err
		})
		if err == nil || !retries || !nodeFailed || nr.pending != nil || nr.badResume != nil || ctx.Err() != nil ||
			attempt >= pol.MaxAttempts || errors.Is(err, ErrInterrupted) || pol.RetryOn != nil && !pol.RetryOn(err) {
			return out, outRaw, next, err
		}
		t := time.NewTimer(pol.delay(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return out, outRaw, next, err
		case <-t.C:
		}
		if fresh, derr := decodeState[S](raw); derr == nil {
			in = fresh
		}
		nr.calls = 0
	}
}

// branch is one node of a parallel step.
type branch[S any] struct {
	nr   *nodeRun
	out  S
	raw  json.RawMessage
	next []string
	err  error
}

// parallel runs a step of several nodes at once, each from its own copy of
// the state, and merges what they wrote. The writes of branches that
// completed are kept when a sibling pauses or fails: resuming re-runs only
// the branches that did not complete.
func (c *Compiled[S]) parallel(ctx context.Context, r *run[S], names []string) (S, json.RawMessage, []string, *Result[S], error) {
	var zero S
	bs := make([]branch[S], len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		b := &bs[i]
		if w, ok := r.writes[name]; ok {
			out, err := decodeState[S](w)
			if err != nil {
				return zero, nil, nil, nil, err
			}
			b.out, b.raw = out, w
			b.err = protect(name, func() (err error) { b.next, err = c.next(name, out); return err })
			continue
		}
		in, err := decodeState[S](r.raw)
		if err != nil {
			return zero, nil, nil, nil, err
		}
		if !r.publish(Event[S]{Type: EventNodeStart, RunID: r.id, Node: name, Step: r.step, State: in}, nil) {
			wg.Wait()
			return zero, nil, nil, nil, context.Canceled
		}
		b.nr = r.nodeRun(name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.out, b.raw, b.next, b.err = c.call(ctx, name, b.nr, in, r.raw)
		}()
	}
	wg.Wait()
	writes := map[string]json.RawMessage{}
	for i := range bs {
		b := &bs[i]
		if b.nr != nil && b.nr.badResume != nil {
			return zero, nil, nil, nil, b.nr.badResume
		}
		if b.raw != nil && b.err == nil {
			writes[names[i]] = b.raw
		}
	}
	for i := range bs {
		if b := &bs[i]; b.err != nil && (b.nr == nil || b.nr.pending == nil) {
			if ctx.Err() != nil {
				return zero, nil, nil, nil, b.err
			}
			r.writes = writes
			res, err := r.fail(ctx, names[i], b.err)
			return zero, nil, nil, res, err
		}
	}
	var paused []*nodeRun
	for i := range bs {
		if b := &bs[i]; b.nr != nil && b.nr.pending != nil {
			paused = append(paused, b.nr)
		}
	}
	if len(paused) > 0 {
		if size, ok := keepable(writes); !ok {
			res, err := r.fail(ctx, strings.Join(names, "+"), writesTooLarge(writes, size, paused))
			return zero, nil, nil, res, err
		}
		r.writes = writes
		res, err := r.interrupt(ctx, paused, writes)
		return zero, nil, nil, res, err
	}
	raws := make([]json.RawMessage, len(bs))
	var next []string
	for i := range bs {
		raws[i] = bs[i].raw
		for _, n := range bs[i].next {
			if !slices.Contains(next, n) {
				next = append(next, n)
			}
		}
	}
	if len(next) > 1 {
		// A branch that reaches END ends; the others go on.
		next = slices.DeleteFunc(next, func(n string) bool { return n == END })
	}
	starts := make([]json.RawMessage, len(names))
	for i, name := range names {
		if _, kept := r.writes[name]; kept {
			starts[i] = r.keptFrom
		}
	}
	out, raw, err := c.merge(r.raw, starts, names, raws)
	if err != nil {
		res, err := r.fail(ctx, strings.Join(names, "+"), err)
		return zero, nil, nil, res, err
	}
	return out, raw, next, nil, nil
}

// maxWrites bounds the states of a step's completed branches kept while a
// sibling pauses or fails (point.Writes, as JSON): they ride in the metadata
// of one checkpoint, which holds belay.MaxStateBytes, with the rest of the
// point. Each branch's state fits a checkpoint; several together may not.
const maxWrites = belay.MaxStateBytes - 1<<20

// keepable says whether a checkpoint can keep writes, the states of a
// step's completed branches, and returns their size as JSON.
func keepable(writes map[string]json.RawMessage) (int, bool) {
	b, err := json.Marshal(writes)
	return len(b), err == nil && len(b) <= maxWrites
}

// writesTooLarge is the error of a pause whose completed branches' writes,
// of size bytes, no checkpoint can keep for the resume: a VALIDATION_ERROR
// naming the branches, the size and the limit, which fails the run, as a
// state over belay.MaxStateBytes does, rather than stop it at a save that
// fails the same way on every Resume.
func writesTooLarge(writes map[string]json.RawMessage, size int, paused []*nodeRun) error {
	waiting := make([]string, len(paused))
	for i, nr := range paused {
		waiting[i] = nr.node
	}
	done := slices.Sorted(maps.Keys(writes))
	return belay.Invalid("writes", "parallel branches %q completed with states of %d bytes in all as JSON while %q paused: more than the %d a checkpoint keeps for the resume (belay.MaxStateBytes less room for the rest)",
		done, size, waiting, maxWrites).With("bytes", size).With("limit", maxWrites).With("nodes", done)
}

// merge folds the branches' states into base: a field one branch changed
// takes its value; a field several changed needs a reducer (WithReducer).
//
// starts[i], when set, is the state branch i started from, if not base: a
// branch kept from before a resume whose Command.Update changed base.
func (c *Compiled[S]) merge(base json.RawMessage, starts []json.RawMessage, names []string, raws []json.RawMessage) (S, json.RawMessage, error) {
	var zero S
	var start map[string]json.RawMessage
	if err := json.Unmarshal(base, &start); err != nil || start == nil {
		return zero, nil, belay.Invalid("state", "parallel branches need a state that encodes as a JSON object")
	}
	acc := maps.Clone(start)
	writer := map[string]string{}
	for i, raw := range raws {
		before := start
		if starts[i] != nil {
			before = nil
			if err := json.Unmarshal(starts[i], &before); err != nil {
				return zero, nil, err
			}
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
			return zero, nil, belay.Invalid("state", "parallel branches need a state that encodes as a JSON object")
		}
		changed := map[string]json.RawMessage{}
		for k, v := range fields {
			if !bytes.Equal(v, before[k]) {
				changed[k] = v
			}
		}
		for k := range before {
			if _, ok := fields[k]; !ok {
				changed[k] = nil // the branch cleared it
			}
		}
		for _, k := range slices.Sorted(maps.Keys(changed)) {
			v := changed[k]
			if red := c.reducers[k]; red != nil {
				if v == nil {
					continue
				}
				merged, err := red(acc[k], added(before[k], v))
				if err != nil {
					return zero, nil, err
				}
				acc[k] = merged
				continue
			}
			if w, ok := writer[k]; ok {
				return zero, nil, belay.Invalid("state."+k, "parallel branches %q and %q both write %q in one step: declare how to merge them with graph.WithReducer(%q, …)", w, names[i], k, k).
					With("field", k).With("nodes", []string{w, names[i]})
			}
			writer[k] = names[i]
			if v == nil {
				delete(acc, k)
			} else {
				acc[k] = v
			}
		}
	}
	b, err := json.Marshal(acc)
	if err != nil {
		return zero, nil, err
	}
	out, err := decodeState[S](b)
	if err != nil {
		return zero, nil, err
	}
	return checkpointed(out)
}

// added is what a branch wrote to a field: the items it appended when the
// field is a list it extended, else its whole value.
func added(before, after json.RawMessage) json.RawMessage {
	var old, cur []json.RawMessage
	if json.Unmarshal(before, &old) != nil || json.Unmarshal(after, &cur) != nil || old == nil || len(cur) < len(old) {
		return after
	}
	for i := range old {
		if !bytes.Equal(old[i], cur[i]) {
			return after
		}
	}
	b, err := json.Marshal(cur[len(old):])
	if err != nil {
		return after
	}
	return b
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
	in := belay.CreateCheckpointInput{Name: node, Type: belay.TypeHITL, Step: p.Step,
		Summary: belay.Clip(title, belay.MaxSummary), AgentState: r.raw, HITL: &belay.HITLInput{Required: true, Title: title,
			Message: fmt.Sprintf("The run stopped %s node %q; continue when ready.", where, node), OnReject: belay.OnRejectContinue,
			Options: []belay.HITLOption{{ID: "continue", Label: "Continue", Action: belay.ActionApprove, IsDefault: true}}}}
	ref := newCheckpointRef()
	r.log.add(belay.EventGraphInterrupt, node, map[string]any{"node": node, "step": r.step}, "", ref)
	r.stopWith(&in, ref, &Result[S]{Status: Interrupted, Steps: r.step - 1}, r.step, nil)
	cp, err := r.save(ctx, in, p, ref)
	if err != nil {
		return nil, err
	}
	pend := &Pending{ID: cp.ID, Node: node, Breakpoint: where, Checkpoint: cp}
	return &Result[S]{RunID: r.id, Status: Interrupted, State: r.state, Steps: r.step - 1,
		Interrupt: pend, Interrupts: []*Pending{pend}}, nil
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

// settle records the answers to the interrupts being resumed that the next
// checkpoint does not carry: all of them when carry is false (there is none).
func (r *run[S]) settle(ctx context.Context, carry bool) error {
	ins := r.decide
	if !carry {
		ins, r.answers = append(ins, r.answers...), nil
	}
	if err := decideAll(ctx, r.svc, ins); err != nil {
		return err
	}
	r.decide = nil
	return nil
}

// save records a checkpoint of the run at p; ref, if any, is the
// checkpoint's for the events that name it.
func (r *run[S]) save(ctx context.Context, in belay.CreateCheckpointInput, p point, ref *checkpointRef) (*belay.Checkpoint, error) {
	err := r.flush(ctx)
	var cp *belay.Checkpoint
	if err == nil {
		cp, err = r.saveNow(ctx, in, p, ref)
	}
	if err != nil {
		ref.resolve("")
		return nil, err
	}
	ref.resolve(cp.ID)
	return cp, nil
}

// stepSave is a step's checkpoint not written yet.
type stepSave struct {
	in  belay.CreateCheckpointInput
	p   point
	ref *checkpointRef
}

// saveStep records the checkpoint after a step as the durability mode says:
// now (sync), in the background while the next step runs (async), or not
// until the run stops, and then only the last (exit).
//
// ref gets the checkpoint's id once it is saved, or "" when it never is (a
// step exit durability replaced, a save that failed).
func (r *run[S]) saveStep(ctx context.Context, in belay.CreateCheckpointInput, p point, ref *checkpointRef) (*belay.Checkpoint, error) {
	switch r.durability {
	case DurabilityExit:
		if r.unsaved != nil {
			r.unsaved.ref.resolve("")
		}
		r.unsaved = &stepSave{in, p, ref}
		return nil, nil
	case DurabilityAsync:
		if err := r.asyncError(); err != nil {
			ref.resolve("")
			return nil, err
		}
		prev, done := r.writing, make(chan struct{})
		r.writing = done
		go func() {
			defer close(done)
			defer ref.resolve("") // when not saved
			if prev != nil {
				<-prev
			}
			if r.asyncError() != nil {
				return
			}
			cp, err := r.saveNow(ctx, in, p, ref)
			if err != nil {
				r.mu.Lock()
				r.asyncErr = err
				r.mu.Unlock()
				return
			}
			ref.resolve(cp.ID)
		}()
		return nil, nil
	}
	cp, err := r.saveNow(ctx, in, p, ref)
	if err == nil {
		ref.resolve(cp.ID)
	} else {
		ref.resolve("")
	}
	return cp, err
}

func (r *run[S]) asyncError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asyncErr
}

// flush writes what the durability mode held back: it waits for the
// background saves (async) or saves the last step (exit).
func (r *run[S]) flush(ctx context.Context) error {
	if r.writing != nil {
		<-r.writing
		r.writing = nil
	}
	if err := r.asyncError(); err != nil {
		return err
	}
	if u := r.unsaved; u != nil {
		r.unsaved = nil
		cp, err := r.saveNow(ctx, u.in, u.p, u.ref)
		if err != nil {
			u.ref.resolve("")
			return err
		}
		u.ref.resolve(cp.ID)
	}
	return nil
}

// saveNow writes a checkpoint of the run, with the events queued for the
// log; those of ref name it.
func (r *run[S]) saveNow(ctx context.Context, in belay.CreateCheckpointInput, p point, ref *checkpointRef) (*belay.Checkpoint, error) {
	if r.hold != nil {
		if err := r.hold.lost(); err != nil {
			return nil, err // another process holds the run now: write nothing
		}
	}
	if err := r.settle(ctx, true); err != nil {
		return nil, err
	}
	meta, err := pointMeta(p)
	if err != nil {
		return nil, err
	}
	in.SessionID, in.Metadata = r.id, meta
	closing := in.Release || in.End != ""
	if r.hold != nil {
		in.Holder = r.hold.in.Holder
		if closing {
			// No renewal may take the lease again once this save gives it up.
			r.hold.stopRenewing()
		}
	}
	in.Answers = r.answers
	var cp *belay.Checkpoint
	err = r.log.carry(ref, func(events []belay.EventRecord) error {
		in.Events = events
		cp, err = r.svc.CreateCheckpoint(ctx, in)
		return err
	})
	if err != nil {
		return nil, err
	}
	r.answers, r.closed = nil, closing
	return cp, nil
}

// pointMeta is the metadata of a checkpoint of a run at p.
func pointMeta(p point) (json.RawMessage, error) {
	return json.Marshal(map[string]point{"graph": p})
}

// stopWith makes in, the run's last save, stop the run as res says in the
// same transaction — release the lease at an interrupt, end the session at
// END or on a failure — and carry the graph.result event (of step, err);
// ref is the save's.
func (r *run[S]) stopWith(in *belay.CreateCheckpointInput, ref *checkpointRef, res *Result[S], step int, err error) {
	switch res.Status {
	case Interrupted:
		in.Release = true
	case Completed:
		in.End = belay.SessionCompleted
	case Failed:
		in.End, in.EndReason = belay.SessionFailed, belay.Clip(err.Error(), 200)
	}
	r.log.own(belay.EventGraphResult, resultData(step, res, err), ref)
}

// interrupt pauses the run at the pending interrupts of nrs (one, or one
// per parallel branch that paused): a HITL checkpoint each, of the state the
// step started from. The last one records them all.
func (r *run[S]) interrupt(ctx context.Context, nrs []*nodeRun, writes map[string]json.RawMessage) (*Result[S], error) {
	res := &Result[S]{RunID: r.id, Status: Interrupted, State: r.state, Steps: r.step - 1}
	var others []interruptPoint
	for i, nr := range nrs {
		summary := nr.pending.Title
		if summary == "" {
			summary = fmt.Sprintf("%s asks for a decision", nr.node)
		}
		p := r.at()
		p.Writes = writes
		p.Interrupt = &interruptPoint{Node: nr.node, Index: nr.index, Resumes: nr.resumes[:nr.index]}
		p.Others = others
		in := belay.CreateCheckpointInput{Name: nr.node, Type: belay.TypeHITL, Step: r.step,
			Summary: belay.Clip(summary, belay.MaxSummary), AgentState: r.raw, HITL: nr.pending}
		var ref *checkpointRef
		if i == len(nrs)-1 {
			// The last request stops the run: the graph.interrupt event
			// names the first.
			ref = newCheckpointRef()
			at := map[string]any{"node": nrs[0].node, "step": r.step}
			if i == 0 {
				r.log.add(belay.EventGraphInterrupt, nr.node, at, "", ref)
			} else {
				r.log.add(belay.EventGraphInterrupt, nrs[0].node, at, res.Interrupts[0].ID, nil)
			}
			r.stopWith(&in, ref, res, r.step, nil)
		}
		cp, err := r.save(ctx, in, p, ref)
		if err != nil {
			return nil, err
		}
		ip := *p.Interrupt
		ip.Request = cp.ID
		others = append(slices.Clip(others), ip)
		res.Interrupts = append(res.Interrupts, &Pending{ID: cp.ID, Node: nr.node, Index: nr.index, Checkpoint: cp})
	}
	res.Interrupt = res.Interrupts[0]
	return res, nil
}

// fail records err as an error checkpoint of the node that was to run, which
// fails the session.
func (r *run[S]) fail(ctx context.Context, node string, err error) (*Result[S], error) {
	err = nodeError(node, r.step, err)
	desc := err.Error()
	if be := (*belay.Error)(nil); errors.As(err, &be) {
		if stack, ok := be.Details["stack"].(string); ok {
			desc += "\n\n" + stack
		}
	}
	p := r.at()
	if _, ok := keepable(r.writes); ok {
		// The branches of the step that completed, when a checkpoint can
		// hold them: the run fails on err all the same.
		p.Writes = r.writes
	}
	res := &Result[S]{RunID: r.id, Status: Failed, State: r.state, Steps: r.step - 1}
	in := belay.CreateCheckpointInput{Name: belay.Clip(node, belay.MaxNameLen), Type: belay.TypeError, Step: r.step,
		Summary: belay.Clip(err.Error(), belay.MaxSummary), Description: belay.Clip(desc, belay.MaxDescription), AgentState: r.raw}
	ref := newCheckpointRef()
	r.stopWith(&in, ref, res, r.step, err)
	if _, serr := r.save(ctx, in, p, ref); serr != nil {
		return nil, serr
	}
	return res, err
}

// publish reports ev to the run's stream, if any, and to its session's
// event log. It reports false when the stream's consumer stopped reading.
func (r *run[S]) publish(ev Event[S], ref *checkpointRef) bool {
	r.logEvent(ev, ref)
	return r.em.send(ev)
}

// logEvent queues ev for the session's event log; ref names the checkpoint
// of a node_end not saved yet.
func (r *run[S]) logEvent(ev Event[S], ref *checkpointRef) {
	if text, ok := ev.Data.(string); ok && ev.Type == EventCustom && ev.Name == TokenEvent {
		r.log.token(ev.Node, ev.Step, text)
		return
	}
	at := map[string]any{"node": ev.Node, "step": ev.Step}
	switch ev.Type {
	case EventNodeStart:
		r.log.add(belay.EventGraphNodeStart, ev.Node, at, "", nil)
	case EventNodeEnd:
		at["next"] = ev.Next
		r.log.add(belay.EventGraphNodeEnd, ev.Node, at, ev.CheckpointID, ref)
	case EventCustom:
		at["name"], at["data"] = ev.Name, ev.Data
		r.log.add(belay.EventGraphCustom, ev.Node, at, "", nil)
	case EventInterrupt:
		r.log.add(belay.EventGraphInterrupt, ev.Node, at, ev.Interrupt.ID, nil)
	}
}

// resultData is the data of the graph.result event that records how the
// run stopped at step: completed, interrupted or failed, or interrupted with
// the error that stopped it (to be resumed).
func resultData[S any](step int, res *Result[S], err error) json.RawMessage {
	data := map[string]any{"step": step}
	switch {
	case res != nil:
		data["status"], data["steps"] = res.Status, res.Steps
	default:
		data["status"] = Interrupted
	}
	if err != nil {
		data["error"] = belay.Clip(err.Error(), 500)
	}
	return eventData(data)
}
