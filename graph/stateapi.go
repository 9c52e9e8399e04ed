package graph

import (
	"context"
	"encoding/json"
	"time"

	"github.com/belayhq/belay"
)

// StateSnapshot is a run as one of its checkpoints records it.
type StateSnapshot[S any] struct {
	// Values is the state: after Node completed, or the state an interrupted
	// node started from.
	Values S
	// Next lists the nodes to run next; empty once the run reached END.
	Next []string
	// Step is the step Next runs as (steps count from 1; parallel nodes share one).
	Step int
	// Node is what wrote the checkpoint: START for the input, a node, or
	// the node an UpdateState acted as.
	Node string
	// Interrupt is the interrupt or breakpoint the run waits at (in
	// History, the one it waited at then); the first of Interrupts when
	// parallel branches paused together.
	Interrupt  *Pending
	Interrupts []*Pending
	// Error is the failure an error checkpoint records.
	Error string
	// Update is set on a checkpoint written by UpdateState.
	Update       bool
	CheckpointID string
	// ParentID is the checkpoint before this one.
	ParentID  string
	CreatedAt time.Time
	// Status is the run's session status (GetState only).
	Status belay.SessionStatus
}

// GetState returns where run runID stands now: its newest checkpoint as a
// snapshot, with the session's status — what LangGraph's get_state gives.
func (c *Compiled[S]) GetState(ctx context.Context, svc belay.Service, runID string) (*StateSnapshot[S], error) {
	sess, err := svc.GetSession(ctx, runID)
	if err != nil {
		return nil, err
	}
	if sess.HeadCheckpointID == "" {
		return nil, belay.Errorf(belay.CodeConflict, "run %s has no checkpoint yet", runID).With("sessionId", runID)
	}
	cp, err := svc.GetCheckpoint(ctx, sess.HeadCheckpointID)
	if err != nil {
		return nil, err
	}
	snap, err := snapshot[S](ctx, svc, cp)
	if err != nil {
		return nil, err
	}
	if snap == nil {
		return nil, belay.Errorf(belay.CodeConflict, "the newest checkpoint of session %s is not one of a graph run", runID).
			With("sessionId", runID)
	}
	snap.Status = sess.Status
	return snap, nil
}

// HistoryOptions pages History: Limit snapshots (belay's default page when
// 0), after the page Cursor names.
type HistoryOptions struct {
	Limit  int
	Cursor string
}

// HistoryPage is one page of a run's checkpoints, newest first.
type HistoryPage[S any] struct {
	Items []*StateSnapshot[S]
	// NextCursor gets the next (older) page; empty on the last.
	NextCursor string
}

// History lists the run's checkpoints newest first, as snapshots — what
// LangGraph's get_state_history gives, paged. Checkpoints of the session
// that the graph did not write are left out.
func (c *Compiled[S]) History(ctx context.Context, svc belay.Service, runID string, opts HistoryOptions) (*HistoryPage[S], error) {
	list, err := svc.ListCheckpoints(ctx, belay.ListCheckpointsInput{SessionID: runID, Limit: opts.Limit, Cursor: opts.Cursor,
		OrderDir: belay.OrderDesc})
	if err != nil {
		return nil, err
	}
	page := &HistoryPage[S]{Items: []*StateSnapshot[S]{}, NextCursor: list.NextCursor}
	for _, cp := range list.Items {
		snap, err := snapshot[S](ctx, svc, cp)
		if err != nil {
			return nil, err
		}
		if snap != nil {
			page.Items = append(page.Items, snap)
		}
	}
	return page, nil
}

// snapshot reads a checkpoint of the graph; nil when the graph did not
// write it.
func snapshot[S any](ctx context.Context, svc belay.Service, cp *belay.Checkpoint) (*StateSnapshot[S], error) {
	p, ok := pointOf(cp)
	if !ok {
		return nil, nil
	}
	values, err := decodeState[S](cp.AgentState)
	if err != nil {
		return nil, err
	}
	snap := &StateSnapshot[S]{Values: values, Next: []string{}, Step: p.Step, Node: cp.Name, Update: p.Update,
		CheckpointID: cp.ID, ParentID: cp.ParentID, CreatedAt: cp.CreatedAt}
	if p.Next != END {
		snap.Next = append([]string{p.Next}, p.Also...)
	}
	if cp.Type == belay.TypeError {
		snap.Error = cp.Summary
	}
	if p.Interrupt != nil {
		for _, ip := range pendingOf(p) {
			req, err := request(ctx, svc, ip, cp)
			if err != nil {
				return nil, err
			}
			snap.Interrupts = append(snap.Interrupts, &Pending{ID: req.ID, Node: ip.Node, Index: ip.Index,
				Breakpoint: ip.Breakpoint, Checkpoint: req})
		}
		snap.Interrupt = snap.Interrupts[0]
	}
	return snap, nil
}

func pointOf(cp *belay.Checkpoint) (*point, bool) {
	var meta struct {
		Graph *point `json:"graph"`
	}
	if json.Unmarshal(cp.Metadata, &meta) != nil || meta.Graph == nil {
		return nil, false
	}
	return meta.Graph, true
}

// UpdateState writes update over the run's current state and saves the result
// as a new checkpoint — LangGraph's update_state. Update's JSON object's keys
// replace the values of the state's fields they name, as Command.Update does:
// matched as encoding/json matches them, to the field's JSON name whatever its
// case; the fields it leaves out stay. A key that names no field of a struct
// state, or a field another key names too, is a VALIDATION_ERROR naming it (a
// map state takes any key), and nothing is saved. With asNode empty the run
// stays where it was: at the same next node, or still waiting at its interrupt
// or breakpoint. With asNode, the update counts as that node's output: the run
// goes on at the node after it (its edge or router decides), and an interrupt
// it waited at is answered with its default option and left behind — an open
// request only by a caller who may decide it (UNAUTHORIZED otherwise, and
// nothing is saved), a decided one keeping its decision. Resume then
// continues the run.
//
// The run must not have ended (CONFLICT) nor be held by a live process
// (LEASE_LOST): UpdateState takes the run's lease while it writes.
func (c *Compiled[S]) UpdateState(ctx context.Context, svc belay.Service, runID string, update any, asNode string) (*StateSnapshot[S], error) {
	if asNode != "" && c.nodes[asNode] == nil {
		return nil, belay.Invalid("asNode", "asNode names unknown node %q", belay.Clip(asNode, 60))
	}
	p, head, err := headPoint(ctx, svc, runID)
	if err != nil {
		return nil, err
	}
	state, raw, err := applyUpdate[S](head.AgentState, update)
	if err != nil {
		return nil, err
	}
	np := *p
	np.Update = true
	name, step := asNode, p.Step
	var reqs []*belay.Checkpoint
	if p.Interrupt != nil {
		for _, ip := range pendingOf(p) {
			req, err := request(ctx, svc, ip, head)
			if err != nil {
				return nil, err
			}
			reqs = append(reqs, req)
		}
	}
	if asNode == "" {
		name = "__update__"
		if np.Interrupt != nil {
			ip := *np.Interrupt
			ip.Request = reqs[len(reqs)-1].ID
			np.Interrupt = &ip
		}
	} else {
		var next []string
		if err := protect(asNode, func() (err error) { next, err = c.next(asNode, state); return err }); err != nil {
			return nil, err
		}
		waiting, next := c.arrive(p.Waiting, []string{asNode}, next)
		if len(next) == 0 {
			next = []string{END}
		}
		np = nextPoint(next, p.Step+1)
		np.Update, np.Waiting = true, waiting
	}
	if asNode != "" {
		if err := mayPass(ctx, svc, runID, reqs); err != nil {
			return nil, err
		}
	}
	lease := belay.LeaseInput{SessionID: runID, Holder: newHolder(), Lease: c.lease}
	if _, err := svc.ResumeSession(ctx, belay.ResumeInput{SessionID: runID, Holder: lease.Holder, Lease: lease.Lease}); err != nil {
		return nil, err
	}
	h, hctx := hold(ctx, svc, lease)
	defer func() { _ = h.release(ctx) }()
	r := &run[S]{svc: svc, id: runID, hold: h}
	if asNode != "" {
		for _, req := range reqs {
			r.answer(req, defaultAnswer(req, passed))
		}
	}
	cp, err := r.save(hctx, belay.CreateCheckpointInput{Name: name, Type: belay.TypeAuto, Step: step,
		Summary: belay.Clip("state updated as "+name, belay.MaxSummary), AgentState: raw}, np, nil)
	if err != nil {
		return nil, err
	}
	snap, err := snapshot[S](ctx, svc, cp)
	if err != nil {
		return nil, err
	}
	snap.Values = state
	return snap, nil
}

// Fork moves run runID back to one of its checkpoints (checkpointID, from
// History) as a new branch of its timeline, LangGraph's time travel: the
// checkpoints after it are kept on the old branch (`belay checkpoints --tree`
// draws both), and the next checkpoint descends from it. Resume then continues
// the run from there — with a new resume value when it is an interrupt, from
// someone who may decide its request — and UpdateState changes it first if need
// be. A failed or a completed run can be forked too: it is running again, on
// the new branch, and the old branch keeps its end. An abandoned run cannot
// (CONFLICT).
// Fork refuses a run a live process holds (LEASE_LOST).
func (c *Compiled[S]) Fork(ctx context.Context, svc belay.Service, runID, checkpointID string) (*StateSnapshot[S], error) {
	sess, err := svc.GetSession(ctx, runID)
	if err != nil {
		return nil, err
	}
	switch {
	case sess.Status == belay.SessionAbandoned:
		return nil, belay.Errorf(belay.CodeConflict, "run %s was abandoned: it is never resumed", runID).
			With("sessionId", runID).With("status", sess.Status)
	case sess.Holder != "" && sess.LeaseExpiresAt != nil && time.Now().Before(*sess.LeaseExpiresAt):
		return nil, belay.Errorf(belay.CodeLeaseLost, "run %s is held by %s: it is running", runID, sess.Holder).
			With("sessionId", runID).With("holder", sess.Holder)
	}
	cp, err := svc.GetCheckpoint(ctx, checkpointID)
	if err != nil {
		return nil, err
	}
	if cp.SessionID != runID {
		return nil, belay.Invalid("checkpointId", "checkpoint %s is not one of run %s", checkpointID, runID)
	}
	if _, ok := pointOf(cp); !ok || cp.Type == belay.TypeError {
		return nil, belay.Invalid("checkpointId", "checkpoint %s is not a step of the graph to go on from", checkpointID)
	}
	if _, err := svc.RestoreCheckpoint(ctx, belay.RestoreInput{CheckpointID: checkpointID, Reason: "graph fork"}); err != nil {
		return nil, err
	}
	return c.GetState(ctx, svc, runID)
}
