package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"time"

	"github.com/belayhq/belay"
)

// Resume continues an interrupted run as cmd says (see Command), from the
// state its interrupt checkpoint holds, in this process or any other, and
// returns like Run.
//
// Resume also continues a run whose process died (or whose context was
// cancelled) mid-node, as LangGraph's invoke(None) on a thread does: with no
// resume value, it goes on from the run's last checkpoint — the state after
// the last completed node — at the node that was to run next, which runs
// again from its start. One entry point serves both, so whoever restarts runs
// needs not know why one stopped. While the dead process's lease lasts (see
// WithLease) the run is still held: LEASE_LOST, try again when it lapses.
//
// A resume value never overturns a decision made through belay: once an
// interrupt's request is decided, the node gets that decision, and a value
// that says otherwise (another option, other feedback, a value that is no
// Decision) is HITL_ALREADY_DECIDED naming the request's checkpoint. The
// exception is time travel: after Fork took the run back to the interrupt
// past its decision, a value answers it anew — an answer the service takes
// only from someone who may decide the request (UNAUTHORIZED otherwise, as
// before any decision), and the request keeps its first decision.
//
// A resume value answers an open request as Decision says: with its option
// when it reads as a Decision, else with the request's default option and
// feedback quoting the value. A person who decides another option while the
// node runs with the value wins: the run's save is refused
// (HITL_ALREADY_DECIDED), and the run waits to be resumed with no value.
//
// A run that has ended (completed or failed), or a resume value for a run
// with no pending interrupt, is a CONFLICT;
// an InterruptID or Goto that names nothing pending or known is a
// VALIDATION_ERROR; a value that reads as a Decision naming an option the
// request does not offer, or an action not the option's, is INVALID_OPTION.
// None of these changes the run. One run is resumed from one place at a time.
func (c *Compiled[S]) Resume(ctx context.Context, svc belay.Service, runID string, cmd Command) (*Result[S], error) {
	return collect(c.StreamResume(ctx, svc, runID, cmd))
}

func (c *Compiled[S]) resume(ctx context.Context, svc belay.Service, runID string, cmd Command) (*Result[S], error) {
	p, head, err := headPoint(ctx, svc, runID)
	if err != nil {
		return nil, err
	}
	if p.Interrupt == nil {
		return c.recover(ctx, svc, runID, p, head, cmd)
	}
	pend := pendingOf(p)
	reqs := make([]*belay.Checkpoint, len(pend))
	ids := make([]string, len(pend))
	for i, ip := range pend {
		if reqs[i], err = request(ctx, svc, ip, head); err != nil {
			return nil, err
		}
		ids[i] = reqs[i].ID
	}
	bp := p.Interrupt.Breakpoint
	switch {
	case cmd.InterruptID != "" && !slices.Contains(ids, cmd.InterruptID):
		return nil, belay.Invalid("interruptId", "run %s has no pending interrupt %q; its pending interrupts are %v", runID, belay.Clip(cmd.InterruptID, 60), ids).
			With("pending", ids)
	case cmd.Goto != "" && !c.known(cmd.Goto):
		return nil, belay.Invalid("goto", "goto names unknown node %q", belay.Clip(cmd.Goto, 60))
	case cmd.Goto != "" && (cmd.Resume != nil || cmd.Resumes != nil):
		return nil, belay.Invalid("resume", "give Resume or Goto, not both: Goto leaves the interrupted node without running it again")
	case cmd.Resume != nil && cmd.Resumes != nil:
		return nil, belay.Invalid("resume", "give Resume or Resumes, not both")
	case bp != "" && (cmd.Resume != nil || cmd.Resumes != nil):
		return nil, belay.Invalid("resume", "run %s stopped at a breakpoint %s %q, which takes no resume value: resume with no value to go on", runID, bp, p.Interrupt.Node).
			With("breakpoint", bp)
	case cmd.Resume != nil && len(pend) > 1:
		return nil, belay.Invalid("resume", "run %s has %d pending interrupts %v: resume them with Resumes, a value by interrupt id", runID, len(pend), ids).
			With("pending", ids)
	}
	for id := range cmd.Resumes {
		if !slices.Contains(ids, id) {
			return nil, belay.Invalid("resumes", "run %s has no pending interrupt %q; its pending interrupts are %v", runID, belay.Clip(id, 60), ids).
				With("pending", ids)
		}
	}
	state, err := decodeState[S](head.AgentState)
	if err != nil {
		return nil, err
	}
	raw := head.AgentState
	if cmd.Update != nil {
		if state, raw, err = applyUpdate[S](raw, cmd.Update); err != nil {
			return nil, err
		}
	}
	r := &run[S]{svc: svc, id: runID, node: p.Next, also: p.Also, writes: p.Writes, keptFrom: head.AgentState,
		resumes: map[string][]json.RawMessage{}, step: p.Step, state: state, raw: raw, waiting: p.Waiting}
	switch {
	case cmd.Goto != "":
		if err := mayPass(ctx, svc, runID, reqs); err != nil {
			return nil, err
		}
		r.node, r.also, r.writes = cmd.Goto, nil, nil
		for _, cp := range reqs {
			r.answer(cp, defaultAnswer(cp, passed))
		}
	case bp != "":
		// A breakpoint goes on when resumed, decided or not; the node it
		// stopped before runs this time.
		if err := mayPass(ctx, svc, runID, reqs); err != nil {
			return nil, err
		}
		r.pass = bp == breakBefore
		r.answer(reqs[0], defaultAnswer(reqs[0], passed))
	default:
		for i, ip := range pend {
			cp, prior := reqs[i], ip.Resumes
			var v json.RawMessage
			given, ok := cmd.Resumes[cp.ID]
			if !ok && cmd.Resume != nil {
				given, ok = cmd.Resume, true
			}
			switch {
			case cp.Decision != nil && ok && !repeats(given, decisionOf(cp.Decision)):
				// A value that says otherwise than the decision would
				// overturn it — unless the run was forked back here after
				// the decision let it go on: then it answers anew.
				var forked bool
				if forked, err = rolledBackSince(ctx, svc, runID, cp.Decision.DecidedAt); err != nil {
					return nil, err
				}
				if !forked {
					return nil, belay.Errorf(belay.CodeHITLAlreadyDecided, "interrupt %s (%s) of run %s was already decided: %s by %s; resume it with no value to go on with that decision",
						cp.ID, ip.Node, runID, cp.Decision.SelectedOption, cp.Decision.UserID).With("checkpointId", cp.ID).With("decision", cp.Decision)
				}
				if err := mayAnswer(ctx, svc, runID, cp, "its resume value cannot answer it"); err != nil {
					return nil, err
				}
				var in belay.DecideInput
				if v, in, err = resumeValue(ctx, cp, given); err != nil {
					return nil, err
				}
				// The request keeps its first decision, so the answer is
				// dropped; it is sent for the service to refuse it to
				// whoever may not decide the request.
				in.RequireOpen = false
				r.answers = append(r.answers, in)
			case cp.Decision != nil:
				if v, err = json.Marshal(decisionOf(cp.Decision)); err != nil {
					return nil, err
				}
			case ok:
				if err := mayAnswer(ctx, svc, runID, cp, "its resume value cannot answer it"); err != nil {
					return nil, err
				}
				var in belay.DecideInput
				if v, in, err = resumeValue(ctx, cp, given); err != nil {
					return nil, err
				}
				r.answer(cp, in)
			default:
				return nil, belay.Errorf(belay.CodeConflict, "interrupt %s (%s) of run %s awaits a decision: decide it, resume with a value, or wait for one", cp.ID, ip.Node, runID).
					With("interruptId", cp.ID)
			}
			r.resumes[ip.Node] = append(prior[:len(prior):len(prior)], v)
		}
	}
	return c.take(ctx, r, true)
}

// pendingOf lists the interrupts the run waits at, in the order of its
// step's branches.
func pendingOf(p *point) []*interruptPoint {
	out := make([]*interruptPoint, 0, len(p.Others)+1)
	for i := range p.Others {
		out = append(out, &p.Others[i])
	}
	return append(out, p.Interrupt)
}

// request is the HITL checkpoint of interrupt ip: head itself, or the one ip
// names (an earlier branch's, or one an UpdateState came after).
func request(ctx context.Context, svc belay.Service, ip *interruptPoint, head *belay.Checkpoint) (*belay.Checkpoint, error) {
	cp := head
	if ip.Request != "" && ip.Request != head.ID {
		var err error
		if cp, err = svc.GetCheckpoint(ctx, ip.Request); err != nil {
			return nil, err
		}
	}
	if cp.HITL == nil {
		return nil, belay.Errorf(belay.CodeCheckpointCorrupt, "checkpoint %s records an interrupt but holds no request", cp.ID).With("checkpointId", cp.ID)
	}
	return cp, nil
}

// recover continues a run that stopped without ending and with no interrupt
// pending — its process died mid-node, or its context was cancelled — from
// its last checkpoint: the state after the last node that completed, at the
// node that was to run next. The node that was running when it stopped runs
// again from its start; no completed node runs twice.
func (c *Compiled[S]) recover(ctx context.Context, svc belay.Service, runID string, p *point, cp *belay.Checkpoint, cmd Command) (*Result[S], error) {
	switch {
	case cmd.Resume != nil || cmd.InterruptID != "":
		return nil, belay.Errorf(belay.CodeConflict, "run %s is not interrupted: it has no pending interrupt to answer (it stopped before %q, step %d); resume it with no resume value to continue there",
			runID, p.Next, p.Step).With("sessionId", runID).With("next", p.Next)
	case cmd.Goto != "" && !c.known(cmd.Goto):
		return nil, belay.Invalid("goto", "goto names unknown node %q", belay.Clip(cmd.Goto, 60))
	case !c.known(p.Next):
		return nil, belay.Errorf(belay.CodeConflict, "run %s stopped before node %q, which this graph does not have", runID, belay.Clip(p.Next, 60)).
			With("next", p.Next)
	}
	state, err := decodeState[S](cp.AgentState)
	if err != nil {
		return nil, err
	}
	raw := cp.AgentState
	if cmd.Update != nil {
		if state, raw, err = applyUpdate[S](raw, cmd.Update); err != nil {
			return nil, err
		}
	}
	r := &run[S]{svc: svc, id: runID, node: p.Next, also: p.Also, step: p.Step, state: state, raw: raw, waiting: p.Waiting}
	if cmd.Goto != "" {
		r.node, r.also = cmd.Goto, nil
	}
	return c.take(ctx, r, false)
}

// take takes the run's lease — refused with LEASE_LOST while a live process
// holds it — and runs it on. A run waiting at an interrupt is held by no
// one, and a heartbeat takes it; a run whose process stopped is interrupted,
// and is resumed.
func (c *Compiled[S]) take(ctx context.Context, r *run[S], waiting bool) (*Result[S], error) {
	lease := belay.LeaseInput{SessionID: r.id, Holder: newHolder(), Lease: c.lease}
	var err error
	if waiting {
		_, err = r.svc.Heartbeat(ctx, lease)
	}
	if !waiting || belay.IsCode(err, belay.CodeLeaseLost) {
		_, err = r.svc.ResumeSession(ctx, belay.ResumeInput{SessionID: r.id, Holder: lease.Holder, Lease: lease.Lease})
	}
	if err != nil {
		return nil, err
	}
	return c.drive(ctx, r, lease)
}

// Wait blocks until the run's pending interrupts are decided through belay
// (`belay decide`, the API, a timeout's default action), then resumes the
// run with that decision as the resume value (a Decision). It returns like
// Resume, or when ctx ends with its error.
func (c *Compiled[S]) Wait(ctx context.Context, svc belay.Service, runID string) (*Result[S], error) {
	for {
		p, head, err := headPoint(ctx, svc, runID)
		if err != nil {
			return nil, err
		}
		if p.Interrupt == nil {
			return c.Resume(ctx, svc, runID, Command{}) // nothing to wait for: continue
		}
		var open *belay.Checkpoint
		for _, ip := range pendingOf(p) {
			cp, err := request(ctx, svc, ip, head)
			if err != nil {
				return nil, err
			}
			if cp.Decision == nil {
				open = cp
				break
			}
		}
		if open == nil {
			return c.Resume(ctx, svc, runID, Command{})
		}
		if _, err := svc.WaitDecision(ctx, open.ID, belay.MaxWait); err != nil {
			return nil, err
		}
	}
}

// headPoint returns where run runID stands: its newest checkpoint, and the
// graph's point in it, when the run has not ended.
func headPoint(ctx context.Context, svc belay.Service, runID string) (*point, *belay.Checkpoint, error) {
	sess, err := svc.GetSession(ctx, runID)
	if err != nil {
		return nil, nil, err
	}
	notInterrupted := func(why string) error {
		return belay.Errorf(belay.CodeConflict, "run %s is not interrupted: %s", runID, why).
			With("sessionId", runID).With("status", sess.Status)
	}
	if !sess.Status.Open() {
		return nil, nil, notInterrupted("it has ended (" + string(sess.Status) + ")")
	}
	if sess.HeadCheckpointID == "" {
		return nil, nil, notInterrupted("it has no checkpoint")
	}
	cp, err := svc.GetCheckpoint(ctx, sess.HeadCheckpointID)
	if err != nil {
		return nil, nil, err
	}
	var meta struct {
		Graph *point `json:"graph"`
	}
	if json.Unmarshal(cp.Metadata, &meta) != nil || meta.Graph == nil {
		return nil, nil, notInterrupted("its newest checkpoint is not one of a graph run")
	}
	return meta.Graph, cp, nil
}

// resumeValue encodes resume value v of request cp, as the node's
// Interrupt returns it, and the answer it gives the request. A value that
// reads as a Decision — a Decision, or any value whose JSON asDecision reads
// as one, such as a map or the json.RawMessage of an API request — is one:
// its option must be offered and its action, when set, the option's
// (INVALID_OPTION otherwise), and the node gets it with the option's
// action and with By and Automatic as the request records them, whatever
// the value says: the caller (see decider), not a timeout. Any other value chooses no option: the
// request records its default option, with feedback that quotes the value.
// Either answer requires the request still open, so a person who decides
// otherwise while the node runs with the value fails the run's save
// (HITL_ALREADY_DECIDED) instead of being overridden.
func resumeValue(ctx context.Context, cp *belay.Checkpoint, v any) (json.RawMessage, belay.DecideInput, error) {
	var d Decision
	switch x := v.(type) {
	case Decision:
		d = x
	case *Decision:
		if x == nil {
			return nil, belay.DecideInput{}, belay.Invalid("resume", "a nil *Decision answers nothing: pass a Decision, or no value to take the recorded decision")
		}
		d = *x
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, belay.DecideInput{}, belay.Invalid("resume", "the resume value cannot be encoded as JSON: %v", err)
		}
		var ok bool
		if d, ok = asDecision(b); !ok {
			in := defaultAnswer(cp, "the run was resumed with a value that chose no option: "+belay.Clip(string(b), 200))
			in.RequireOpen = true
			return b, in, nil
		}
	}
	opt, ok := cp.HITL.Option(d.Option)
	if !ok {
		ids := make([]string, len(cp.HITL.Options))
		for i, o := range cp.HITL.Options {
			ids[i] = o.ID
		}
		return nil, belay.DecideInput{}, belay.Errorf(belay.CodeInvalidOption, "option %q is not offered; choose one of %v", d.Option, ids).
			With("selectedOption", d.Option).With("options", ids)
	}
	if d.Action != "" && d.Action != opt.Action {
		return nil, belay.DecideInput{}, belay.Errorf(belay.CodeInvalidOption, "option %q means %s, not %s", opt.ID, opt.Action, d.Action).
			With("selectedOption", opt.ID).With("action", d.Action).With("optionAction", opt.Action)
	}
	d.Action, d.By, d.Automatic = opt.Action, decider(ctx), false
	in := belay.DecideInput{CheckpointID: cp.ID, SelectedOption: d.Option, Action: d.Action, Feedback: d.Feedback,
		Modifications: d.Modifications, RequireOpen: true}
	// The service would refuse the answer only with the run's next save,
	// after the node acted on it.
	if err := in.Validate(); err != nil {
		return nil, belay.DecideInput{}, err
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, belay.DecideInput{}, belay.Invalid("resume", "the resume value cannot be encoded as JSON: %v", err)
	}
	return b, in, nil
}

// decider is who the service records as deciding a request that the
// caller answers, as far as the run can tell: the caller in ctx, which a
// service in this process records; "" when ctx names none, as a remote
// service records the user of its token, which it does not tell the run.
func decider(ctx context.Context) string {
	a, _ := belay.ActorFrom(ctx)
	return a.UserID
}

// asDecision reads the JSON b of a resume value as a Decision: it is one
// when it is an object of Decision's fields only (matched as encoding/json
// matches them), one of them its option.
func asDecision(b []byte) (Decision, bool) {
	var d Decision
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if dec.Decode(&d) != nil || d.Option == "" {
		return Decision{}, false
	}
	return d, true
}

// mayAnswer refuses an answer to request cp — a resume value, or the
// default option of a request the run moves past — from a caller who may
// not decide it (UNAUTHORIZED; what says what the answer cannot do), before
// any node runs: the run's next checkpoint carries the answer, and the
// service would refuse it only after the nodes' side effects. An open
// request is one of the caller's pending requests (the service's own rules:
// scope, owner, approvers, self-approval); a decided one, answered anew
// after a Fork, needs the decide scope when ctx carries the caller (a
// service in this process), and the save checks the rest.
func mayAnswer(ctx context.Context, svc belay.Service, runID string, cp *belay.Checkpoint, what string) error {
	refused := belay.Errorf(belay.CodeUnauthorized, "the caller may not decide interrupt %s of run %s, so %s: a person who may decides it, then resume with no value", cp.ID, runID, what).
		With("checkpointId", cp.ID)
	if cp.Decision != nil {
		if a, ok := belay.ActorFrom(ctx); ok && !a.Has(belay.ScopeDecide) {
			return refused
		}
		return nil
	}
	pending, err := svc.PendingHITL(ctx, runID)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(pending, func(p belay.PendingHITL) bool { return p.Checkpoint.ID == cp.ID }) {
		return refused
	}
	return nil
}

// mayPass refuses to move run runID past its requests reqs with no resume
// value — Goto, UpdateState as a node, going on from a breakpoint — when
// the caller may not decide one that is open: going past answers it with its
// default option, as a resume value would (see mayAnswer). A decided
// request is answered already and its decision stands whatever runs next,
// so anyone who may resume the run goes on after it, as Resume with no
// value does.
func mayPass(ctx context.Context, svc belay.Service, runID string, reqs []*belay.Checkpoint) error {
	for _, cp := range reqs {
		if cp.Decision != nil {
			continue
		}
		if err := mayAnswer(ctx, svc, runID, cp, "the run cannot go past it"); err != nil {
			return err
		}
	}
	return nil
}

// repeats says whether resume value v says what the decision d says: it
// reads as a Decision (asDecision) with d's option, and every other field
// it sets is d's.
func repeats(v any, d Decision) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	g, ok := asDecision(b)
	return ok && g.Option == d.Option &&
		(g.Action == "" || g.Action == d.Action) && (g.Feedback == "" || g.Feedback == d.Feedback) &&
		(g.By == "" || g.By == d.By) && (!g.Automatic || d.Automatic) &&
		(len(g.Modifications) == 0 || sameJSON(g.Modifications, d.Modifications))
}

// sameJSON says whether a and b are the same JSON value, whatever their
// spacing and key order.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// answer closes the interrupt's request with in, if it is still open,
// once the run goes on. The run's next checkpoint carries the answer — but
// for a rejection that fails the session, which is recorded before. A
// decision that lands meanwhile stands; one that chose another option fails
// the save when in requires the request open (a resume value: the node ran
// with it).
func (r *run[S]) answer(cp *belay.Checkpoint, in belay.DecideInput) {
	if cp.Decision != nil {
		return
	}
	if opt, ok := cp.HITL.Option(in.SelectedOption); ok && opt.Action == belay.ActionReject && cp.HITL.OnReject != belay.OnRejectContinue {
		r.decide = append(r.decide, in)
		return
	}
	r.answers = append(r.answers, in)
}

// passed is the feedback of the answer that closes an open request the run
// goes past with no resume value (Goto, a breakpoint, UpdateState as a node).
const passed = "answered by the run's Resume"

// defaultAnswer is the answer of request cp that chooses no option: the
// request's default option (its first when none is the default), with
// feedback saying why.
func defaultAnswer(cp *belay.Checkpoint, feedback string) belay.DecideInput {
	in := belay.DecideInput{CheckpointID: cp.ID, SelectedOption: cp.HITL.Options[0].ID, Feedback: feedback}
	for _, o := range cp.HITL.Options {
		if o.IsDefault {
			in.SelectedOption = o.ID
		}
	}
	return in
}

// rolledBackSince says whether run runID was rolled back (Fork) at or after
// t. A decision made before the run was forked back to its interrupt is the
// old branch's: a resume value answers the interrupt anew, sent with the
// run's next checkpoint as an answer — which keeps the decision but is
// refused, as any answer is, to whoever may not decide the request.
func rolledBackSince(ctx context.Context, svc belay.Service, runID string, t time.Time) (bool, error) {
	rbs, err := svc.ListRollbacks(ctx, runID)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(rbs, func(rb *belay.Rollback) bool { return !rb.CreatedAt.Before(t) }), nil
}

// decideAll records the answers ins, each in its own Decide; a request
// decided meanwhile keeps its decision.
func decideAll(ctx context.Context, svc belay.Service, ins []belay.DecideInput) error {
	for _, in := range ins {
		if _, err := svc.Decide(ctx, in); err != nil && !belay.IsCode(err, belay.CodeHITLAlreadyDecided) {
			return err
		}
	}
	return nil
}
