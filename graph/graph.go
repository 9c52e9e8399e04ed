// Package graph runs Go workflows as graphs of nodes over a typed state,
// durably on a belay.Service: every step is saved as a checkpoint of the run's
// session, a node may pause the run for a person with Interrupt, and Resume
// continues it — in the same process or another, in-process on core or
// remotely through the Go client.
//
// A graph is built with New, AddNode, AddEdge and AddConditionalEdges, checked
// by Compile, and run with Compiled.Run (or Stream, which reports each node as
// it goes). The state S is stored as JSON after every step, so it must be
// serialisable, and travels between nodes as that JSON: every node gets the
// state decoded from the JSON of the step before it, as a run resumed from
// that checkpoint gets it — unexported fields and fields tagged "-" empty, a
// number in an any a float64 — so a run that stopped and was resumed goes
// on as one that never stopped. Several edges from one node
// run their targets in parallel; WithReducer merges what they write, and
// AddWaitingEdge joins them again.
//
// A run holds its session's lease while it runs: a process killed mid-node
// leaves it to lapse, and Resume continues the run from its last checkpoint
// in another process. GetState, History, UpdateState and Fork read and
// change a run between steps; InterruptBefore and InterruptAfter stop it at
// static breakpoints; WithRetry runs failing nodes again; WithDurability
// says when steps are saved. Every run also writes its events (see Event)
// to its session's event log, where `belay watch`, SSE, WebSocket and
// webhooks see it live.
package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/belayhq/belay"
)

// START and END are the graph's virtual entry and exit. An edge from START
// names the first node; reaching END completes the run.
const (
	START = "__start__"
	END   = "__end__"
)

// DefaultRecursionLimit is how many steps a run may take before it
// fails, unless WithRecursionLimit says otherwise (LangGraph's default).
const DefaultRecursionLimit = 25

// Node is one step of a graph: it gets the state and returns the new state.
// It gets the state as checkpointed, decoded from JSON (see the package
// comment), never the value the node before it returned.
// A node that calls Interrupt runs again from its start when the run resumes,
// so what it does before the interrupt happens once per resume.
type Node[S any] func(ctx context.Context, state S) (S, error)

// Router picks the next node from a node's result; it must return one of the
// targets given to AddConditionalEdges.
type Router[S any] func(state S) string

// Graph is a workflow under construction. Its methods record the first
// mistake, which Compile reports; they return the graph for chaining.
type Graph[S any] struct {
	nodes   map[string]Node[S]
	order   []string
	edges   map[string][]string
	routers map[string]conditional[S]
	joins   []join
	errs    []error
}

// join is a waiting edge: to runs once every one of sources has completed.
type join struct {
	sources []string
	to      string
}

// key names the join in a checkpoint's waiting sets.
func (j join) key() string {
	return strings.Join(j.sources, ",") + "->" + j.to
}

type conditional[S any] struct {
	route   Router[S]
	targets []string
}

// New returns an empty graph over state S.
func New[S any]() *Graph[S] {
	return &Graph[S]{nodes: map[string]Node[S]{}, edges: map[string][]string{}, routers: map[string]conditional[S]{}}
}

func (g *Graph[S]) fail(field, format string, args ...any) *Graph[S] {
	g.errs = append(g.errs, belay.Invalid(field, format, args...))
	return g
}

// AddNode adds a node. Names are unique, and START and END are reserved.
func (g *Graph[S]) AddNode(name string, fn Node[S]) *Graph[S] {
	switch {
	case name == "" || name == START || name == END:
		return g.fail("node", "a node needs a name other than %q and %q", START, END)
	case len(name) > belay.MaxNameLen:
		return g.fail("node", "node name %q is longer than %d characters", belay.Clip(name, 40), belay.MaxNameLen)
	case fn == nil:
		return g.fail("node", "node %q has no function", name)
	case g.nodes[name] != nil:
		return g.fail("node", "node %q is added twice", name)
	}
	g.nodes[name] = fn
	g.order = append(g.order, name)
	return g
}

// AddEdge makes to run after from. A node's way out is its edges or one set
// of conditional edges. Several edges from one node fan out: their targets
// run in parallel, as one step, each from a copy of the state, and their
// writes are merged (see WithReducer). A node that several parallel
// branches lead to (fan-in) runs once, in the step after them, with the
// merged state; branches of different lengths reach it in different steps,
// and it then runs once for each — AddWaitingEdge runs it once, after all.
func (g *Graph[S]) AddEdge(from, to string) *Graph[S] {
	_, routed := g.routers[from]
	old := g.edges[from]
	switch {
	case routed || len(old) > 0 && (to == END || slices.Contains(old, END)):
		return g.fail("edge", "node %q already has a way out; a node takes edges (none of several to END) or one set of conditional edges", from)
	case slices.Contains(old, to):
		return g.fail("edge", "the edge from %q to %q is added twice", from, to)
	}
	g.edges[from] = append(old, to)
	return g
}

// AddWaitingEdge makes to run once after all of sources have completed —
// LangGraph's add_edge(["a", "b"], "c"). Unlike edges from each source,
// which run to once per step a source completes in, to runs once, in the
// step after the last source completes, even when the sources complete in
// different steps (parallel branches of unequal length), with the state as
// it is then. Which sources have completed is saved with every checkpoint,
// so a run resumed after a crash or an interrupt still waits for the rest;
// once to is scheduled the wait starts over. A source may have other ways
// out as well; a node whose only way out is a waiting edge goes on to
// nothing until the last source completes, and a step after which nothing
// runs next ends the run.
func (g *Graph[S]) AddWaitingEdge(sources []string, to string) *Graph[S] {
	switch {
	case len(sources) == 0:
		return g.fail("edge", "the waiting edge to %q names no source", to)
	case slices.Contains(sources, START):
		return g.fail("edge", "the waiting edge to %q waits for START, which never completes", to)
	}
	for i, src := range sources {
		if slices.Contains(sources[:i], src) {
			return g.fail("edge", "the waiting edge to %q names %q twice", to, src)
		}
	}
	j := join{sources: slices.Sorted(slices.Values(sources)), to: to}
	for _, o := range g.joins {
		if o.key() == j.key() {
			return g.fail("edge", "the waiting edge from %v to %q is added twice", sources, to)
		}
	}
	g.joins = append(g.joins, j)
	return g
}

// AddConditionalEdges makes router pick, after from, which of targets runs
// next (END among them ends the run).
func (g *Graph[S]) AddConditionalEdges(from string, router Router[S], targets ...string) *Graph[S] {
	switch {
	case g.hasExit(from):
		return g.fail("edge", "node %q already has a way out; a node takes one edge or one set of conditional edges", from)
	case router == nil:
		return g.fail("edge", "the conditional edges from %q have no router", from)
	case len(targets) == 0:
		return g.fail("edge", "the conditional edges from %q name no target", from)
	}
	g.routers[from] = conditional[S]{route: router, targets: slices.Clone(targets)}
	return g
}

func (g *Graph[S]) hasExit(from string) bool {
	_, edge := g.edges[from]
	_, routed := g.routers[from]
	return edge || routed
}

// waits reports whether from is a source of a waiting edge.
func (g *Graph[S]) waits(from string) bool {
	for _, j := range g.joins {
		if slices.Contains(j.sources, from) {
			return true
		}
	}
	return false
}

// Option changes how a compiled graph runs.
type Option func(*options)

type options struct {
	recursionLimit int
	lease          time.Duration
	before, after  []string
	reducers       map[string]reducer
	retry          map[string]RetryPolicy
	durability     Durability
}

// Durability says when a run saves the checkpoint after each step.
type Durability string

// Durability modes, as LangGraph's.
const (
	// DurabilitySync saves each step before the next starts: a crash
	// loses at most the step in flight. The default.
	DurabilitySync Durability = "sync"
	// DurabilityAsync saves each step in the background while the next
	// runs, in order; the run waits for the saves when it pauses or ends,
	// and stops (resumable) at the first that fails. A crash may lose the
	// last steps, which then run again.
	DurabilityAsync Durability = "async"
	// DurabilityExit saves the steps only when the run stops — pauses,
	// fails or ends — and then only the last, with the input kept. A crash
	// loses every step since the last stop.
	DurabilityExit Durability = "exit"
)

// WithDurability sets when steps are saved (DurabilitySync when not set).
func WithDurability(d Durability) Option {
	return func(o *options) { o.durability = d }
}

// RetryPolicy says how often a failed node runs again, and after how long:
// InitialInterval, then each wait BackoffFactor times the last, at most
// MaxInterval, with up to a quarter more at random when Jitter is set.
// RetryOn picks the errors worth retrying (every error when nil); an
// interrupt, an error of the node's router or a cancelled run is never
// retried.
// A node that runs out of attempts fails the run with its last error.
type RetryPolicy struct {
	MaxAttempts     int
	InitialInterval time.Duration
	BackoffFactor   float64
	MaxInterval     time.Duration
	Jitter          bool
	RetryOn         func(error) bool
}

// DefaultRetryPolicy is LangGraph's: 3 attempts, waits of 0.5s, 1s (doubling
// up to 128s), with jitter.
var DefaultRetryPolicy = RetryPolicy{MaxAttempts: 3, InitialInterval: 500 * time.Millisecond, BackoffFactor: 2,
	MaxInterval: 128 * time.Second, Jitter: true}

// delay is the wait after attempt n (from 1).
func (p RetryPolicy) delay(n int) time.Duration {
	d := float64(p.InitialInterval)
	f := p.BackoffFactor
	if f < 1 {
		f = 1
	}
	for range n - 1 {
		d *= f
	}
	if p.MaxInterval > 0 && d > float64(p.MaxInterval) {
		d = float64(p.MaxInterval)
	}
	if p.Jitter {
		d += d / 4 * rand.Float64()
	}
	return time.Duration(d)
}

// WithRetry gives nodes (every node when none is named) a retry policy.
func WithRetry(policy RetryPolicy, nodes ...string) Option {
	return func(o *options) {
		if o.retry == nil {
			o.retry = map[string]RetryPolicy{}
		}
		if len(nodes) == 0 {
			nodes = []string{""}
		}
		for _, n := range nodes {
			o.retry[n] = policy
		}
	}
}

// reducer merges what a parallel branch wrote to a field into the field.
type reducer func(current, update json.RawMessage) (json.RawMessage, error)

// WithReducer declares how the writes of parallel branches to the state's
// field (its JSON name) are merged: each branch's update is folded in with
// reduce(current, update), in the order of the branches' edges, starting
// from the field's value before the step. For a list a branch extended, its
// update is the items it added, as a LangGraph node returns only its new
// items — Append is the usual reducer for a list. Two branches writing a
// field with no reducer fail the step. Sequential nodes write the state
// whole and take no reducer.
func WithReducer[T any](field string, reduce func(current, update T) T) Option {
	return func(o *options) {
		if o.reducers == nil {
			o.reducers = map[string]reducer{}
		}
		o.reducers[field] = func(cur, upd json.RawMessage) (json.RawMessage, error) {
			var a, b T
			if len(cur) > 0 {
				if err := json.Unmarshal(cur, &a); err != nil {
					return nil, belay.Invalid("state."+field, "the reducer of %q cannot read the current value: %v", field, err)
				}
			}
			if err := json.Unmarshal(upd, &b); err != nil {
				return nil, belay.Invalid("state."+field, "the reducer of %q cannot read a branch's update: %v", field, err)
			}
			return json.Marshal(reduce(a, b))
		}
	}
}

// Append is the reducer that appends a branch's new items to a list.
func Append[T any](current, update []T) []T {
	return append(current, update...)
}

// InterruptBefore sets static breakpoints: the run pauses before any of
// nodes runs, with a HITL request ("Breakpoint before <node>", one option,
// continue) that Resume with no value, or a decision through belay, goes on
// from; going on answers the request, so Resume takes a caller who may
// decide it until someone has. Command.Update and UpdateState change the
// state meanwhile.
func InterruptBefore(nodes ...string) Option {
	return func(o *options) { o.before = append(o.before, nodes...) }
}

// InterruptAfter sets static breakpoints after nodes: the run pauses once
// any of them completed (its checkpoint saved), before the next node.
func InterruptAfter(nodes ...string) Option {
	return func(o *options) { o.after = append(o.after, nodes...) }
}

// WithLease sets how long a run's lease lasts without renewal (1s to
// belay.MaxLease; belay.DefaultLease when not set): how soon after its
// process dies a run becomes interrupted and another process may resume it.
// The lease is renewed every third of it while nodes run.
func WithLease(d time.Duration) Option {
	return func(o *options) { o.lease = d }
}

// WithRecursionLimit sets how many steps (a node, or parallel nodes
// together) one run may take in all, resumes included, before it fails with
// BUDGET_EXCEEDED.
func WithRecursionLimit(n int) Option {
	return func(o *options) { o.recursionLimit = n }
}

// Compiled is a checked graph, ready to run. It holds no run state: one
// Compiled serves any number of concurrent runs.
type Compiled[S any] struct {
	nodes          map[string]Node[S]
	edges          map[string][]string
	routers        map[string]conditional[S]
	recursionLimit int
	lease          time.Duration
	before, after  map[string]bool
	reducers       map[string]reducer
	retry          map[string]RetryPolicy
	durability     Durability
	joins          []join
}

// Compile checks the graph and returns it ready to run. Every problem found
// is reported, each a VALIDATION_ERROR naming it: a mistake while building,
// an edge to or from an unknown node, a node with no way out, a node START
// does not reach, or an END that START does not reach.
func (g *Graph[S]) Compile(opts ...Option) (*Compiled[S], error) {
	o := options{recursionLimit: DefaultRecursionLimit, lease: belay.DefaultLease, durability: DurabilitySync}
	for _, opt := range opts {
		opt(&o)
	}
	errs := slices.Clone(g.errs)
	switch o.durability {
	case DurabilitySync, DurabilityAsync, DurabilityExit:
	default:
		errs = append(errs, belay.Invalid("durability", "durability is sync, async or exit, not %q", belay.Clip(string(o.durability), 40)))
	}
	if o.lease < time.Second || o.lease > belay.MaxLease {
		errs = append(errs, belay.Invalid("lease", "the lease must be between 1s and %s, got %s", belay.MaxLease, o.lease))
	}
	if o.recursionLimit < 1 {
		errs = append(errs, belay.Invalid("recursionLimit", "the recursion limit must be at least 1, got %d", o.recursionLimit))
	}
	known := func(name string) bool { return name == END || g.nodes[name] != nil }
	if !g.hasExit(START) {
		errs = append(errs, belay.Invalid("edge", "no edge from START: add one to the first node"))
	}
	for _, from := range g.sources() {
		if from != START && g.nodes[from] == nil {
			errs = append(errs, belay.Invalid("edge", "edge from unknown node %q", from))
		}
		for _, to := range g.targets(from) {
			if to == START {
				errs = append(errs, belay.Invalid("edge", "edge from %q to START: START is only a beginning", from))
			} else if !known(to) {
				kind := "edge"
				if _, ok := g.routers[from]; ok {
					kind = "router target"
				}
				errs = append(errs, belay.Invalid("edge", "%s from %q to unknown node %q", kind, from, to))
			}
		}
	}
	for _, j := range g.joins {
		for _, src := range j.sources {
			if g.nodes[src] == nil {
				errs = append(errs, belay.Invalid("edge", "waiting edge to %q from unknown node %q", j.to, belay.Clip(src, 60)))
			}
		}
		if j.to == START {
			errs = append(errs, belay.Invalid("edge", "waiting edge to START: START is only a beginning"))
		} else if !known(j.to) {
			errs = append(errs, belay.Invalid("edge", "waiting edge from %v to unknown node %q", j.sources, belay.Clip(j.to, 60)))
		}
	}
	for _, name := range g.order {
		if !g.hasExit(name) && !g.waits(name) {
			errs = append(errs, belay.Invalid("edge", "node %q has no way out: add an edge from it (to END when the run ends there)", name))
		}
	}
	reached := g.reach()
	for _, name := range g.order {
		if !reached[name] {
			errs = append(errs, belay.Invalid("node", "node %q cannot be reached from START", name))
		}
	}
	if g.hasExit(START) && !reached[END] {
		errs = append(errs, belay.Invalid("edge", "END cannot be reached from START: the run could never complete"))
	}
	breaks := func(kind string, nodes []string) map[string]bool {
		m := map[string]bool{}
		for _, n := range nodes {
			if g.nodes[n] == nil {
				errs = append(errs, belay.Invalid("breakpoint", "%s names unknown node %q", kind, belay.Clip(n, 60)))
			}
			m[n] = true
		}
		return m
	}
	before, after := breaks("InterruptBefore", o.before), breaks("InterruptAfter", o.after)
	retry := map[string]RetryPolicy{}
	for n, pol := range o.retry {
		switch {
		case pol.MaxAttempts < 1:
			errs = append(errs, belay.Invalid("retry", "a retry policy needs MaxAttempts of at least 1, got %d", pol.MaxAttempts))
		case pol.InitialInterval < 0 || pol.MaxInterval < 0:
			errs = append(errs, belay.Invalid("retry", "a retry policy's intervals cannot be negative"))
		case n == "": // every node without a policy of its own, below
		case g.nodes[n] == nil:
			errs = append(errs, belay.Invalid("retry", "WithRetry names unknown node %q", belay.Clip(n, 60)))
		default:
			retry[n] = pol
		}
	}
	if pol, ok := o.retry[""]; ok {
		for _, name := range g.order {
			if _, named := o.retry[name]; !named {
				retry[name] = pol
			}
		}
	}
	if len(o.reducers) > 0 {
		fields := stateFields(reflect.TypeFor[S]())
		for f := range o.reducers {
			if fields != nil && !slices.Contains(fields, f) {
				errs = append(errs, belay.Invalid("reducer", "WithReducer names %q, which is not a field of the state %s", belay.Clip(f, 60), reflect.TypeFor[S]()))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Compiled[S]{nodes: g.nodes, edges: g.edges, routers: g.routers, recursionLimit: o.recursionLimit, lease: o.lease,
		before: before, after: after, reducers: o.reducers, retry: retry,
		durability: o.durability, joins: slices.Clone(g.joins)}, nil
}

// sources lists every node with a way out, in a stable order.
func (g *Graph[S]) sources() []string {
	var out []string
	for from := range g.edges {
		out = append(out, from)
	}
	for from := range g.routers {
		out = append(out, from)
	}
	slices.Sort(out)
	return out
}

// targets lists where from may lead: its edges or its router's targets,
// and the targets of the waiting edges it is a source of.
func (g *Graph[S]) targets(from string) []string {
	out, ok := g.edges[from]
	if !ok {
		out = g.routers[from].targets
	}
	for _, j := range g.joins {
		if slices.Contains(j.sources, from) && !slices.Contains(out, j.to) {
			out = append(slices.Clip(out), j.to)
		}
	}
	return out
}

// reach returns the nodes reachable from START.
func (g *Graph[S]) reach() map[string]bool {
	seen := map[string]bool{START: true}
	queue := []string{START}
	for len(queue) > 0 {
		from := queue[0]
		queue = queue[1:]
		for _, to := range g.targets(from) {
			if !seen[to] {
				seen[to] = true
				queue = append(queue, to)
			}
		}
	}
	return seen
}

// next returns the nodes that run after from, given from's result: one, or
// several in parallel.
func (c *Compiled[S]) next(from string, state S) ([]string, error) {
	if to, ok := c.edges[from]; ok {
		return to, nil
	}
	cond, ok := c.routers[from]
	if !ok {
		return nil, nil // only waiting edges lead on (see arrive)
	}
	to := cond.route(state)
	if !slices.Contains(cond.targets, to) {
		return nil, belay.Errorf(belay.CodeValidation, "the router after %q returned %q, which is not one of its targets %v", from, to, cond.targets).
			With("node", from).With("target", to)
	}
	return []string{to}, nil
}

// first is the node (or the parallel nodes) the edges from START name.
func (c *Compiled[S]) first(state S) ([]string, error) {
	return c.next(START, state)
}

// arrive records that the nodes of a step completed, for the waiting edges
// they are sources of: it returns the waiting sets after the step and next
// with the targets whose sources have all completed now.
func (c *Compiled[S]) arrive(waiting map[string][]string, step, next []string) (map[string][]string, []string) {
	if len(c.joins) == 0 {
		return waiting, next
	}
	out := map[string][]string{}
	for k, v := range waiting {
		out[k] = v
	}
	for _, j := range c.joins {
		k := j.key()
		done := out[k]
		for _, n := range step {
			if slices.Contains(j.sources, n) && !slices.Contains(done, n) {
				done = append(slices.Clip(done), n)
			}
		}
		switch {
		case len(done) == len(j.sources):
			delete(out, k)
			if !slices.Contains(next, j.to) {
				next = append(slices.Clip(next), j.to)
			}
		case len(done) > 0:
			slices.Sort(done)
			out[k] = done
		}
	}
	if len(out) == 0 {
		out = nil
	}
	return out, next
}

func (c *Compiled[S]) known(name string) bool {
	return name == END || c.nodes[name] != nil
}

func nodeError(node string, step int, err error) error {
	return fmt.Errorf("graph: node %q (step %d): %w", node, step, err)
}
