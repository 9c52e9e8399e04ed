package graph

import (
	"context"
	"encoding/json"

	"github.com/belayhq/belay"
)

// Resume continues an interrupted run as cmd says (see Command), from the
// state its interrupt checkpoint holds, in this process or any other, and
// returns like Run. A run that is not interrupted (running, completed,
// failed, or whose newest checkpoint is not its interrupt) is a CONFLICT;
// an InterruptID or Goto that names nothing pending or known is a
// VALIDATION_ERROR; a Decision naming an option the request does not offer is
// INVALID_OPTION. None of these changes the run. One run is resumed from one
// place at a time.
func (c *Compiled[S]) Resume(ctx context.Context, svc belay.Service, runID string, cmd Command) (*Result[S], error) {
	p, cp, err := pendingInterrupt(ctx, svc, runID)
	if err != nil {
		return nil, err
	}
	switch {
	case cmd.InterruptID != "" && cmd.InterruptID != cp.ID:
		return nil, belay.Invalid("interruptId", "run %s has no pending interrupt %q; its pending interrupt is %s", runID, belay.Clip(cmd.InterruptID, 60), cp.ID).
			With("pending", cp.ID)
	case cmd.Goto != "" && !c.known(cmd.Goto):
		return nil, belay.Invalid("goto", "goto names unknown node %q", belay.Clip(cmd.Goto, 60))
	case cmd.Goto != "" && cmd.Resume != nil:
		return nil, belay.Invalid("resume", "give Resume or Goto, not both: Goto leaves the interrupted node without running it again")
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
	r := &run[S]{svc: svc, id: runID, node: p.Next, step: p.Step, state: state, raw: raw}
	prior := p.Interrupt.Resumes
	switch {
	case cmd.Goto != "":
		r.node = cmd.Goto
		r.settle = answer(svc, cp, nil)
	case cmd.Resume != nil:
		v, d, err := resumeValue(cp, cmd.Resume)
		if err != nil {
			return nil, err
		}
		r.resumes = append(prior[:len(prior):len(prior)], v)
		r.settle = answer(svc, cp, d)
	case cp.Decision == nil:
		return nil, belay.Errorf(belay.CodeConflict, "interrupt %s of run %s awaits a decision: decide it, resume with a value, or wait for one", cp.ID, runID).
			With("interruptId", cp.ID)
	default:
		v, err := json.Marshal(decisionOf(cp.Decision))
		if err != nil {
			return nil, err
		}
		r.resumes = append(prior[:len(prior):len(prior)], v)
	}
	return c.loop(ctx, r)
}

// Wait blocks until the run's pending interrupt is decided through belay
// (`belay decide`, the API, a timeout's default action), then resumes the
// run with that decision as the resume value (a Decision). It returns like
// Resume, or when ctx ends with its error.
func (c *Compiled[S]) Wait(ctx context.Context, svc belay.Service, runID string) (*Result[S], error) {
	for {
		_, cp, err := pendingInterrupt(ctx, svc, runID)
		if err != nil {
			return nil, err
		}
		if cp.Decision != nil {
			return c.Resume(ctx, svc, runID, Command{})
		}
		if _, err := svc.WaitDecision(ctx, cp.ID, belay.MaxWait); err != nil {
			return nil, err
		}
	}
}

// pendingInterrupt returns the interrupt run runID is paused at: its newest
// checkpoint, when that is an interrupt of the graph.
func pendingInterrupt(ctx context.Context, svc belay.Service, runID string) (*point, *belay.Checkpoint, error) {
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
	if cp.Type != belay.TypeHITL || cp.HITL == nil || json.Unmarshal(cp.Metadata, &meta) != nil ||
		meta.Graph == nil || meta.Graph.Interrupt == nil {
		return nil, nil, notInterrupted("its newest checkpoint is not a pending interrupt")
	}
	return meta.Graph, cp, nil
}

// resumeValue encodes a resume value. A Decision is checked against the
// request's options and completed with the option's action; it is returned
// to answer the request with.
func resumeValue(cp *belay.Checkpoint, v any) (json.RawMessage, *Decision, error) {
	var d *Decision
	switch x := v.(type) {
	case Decision:
		d = &x
	case *Decision:
		c := *x
		d = &c
	}
	if d != nil {
		opt, ok := cp.HITL.Option(d.Option)
		if !ok {
			ids := make([]string, len(cp.HITL.Options))
			for i, o := range cp.HITL.Options {
				ids[i] = o.ID
			}
			return nil, nil, belay.Errorf(belay.CodeInvalidOption, "option %q is not offered; choose one of %v", d.Option, ids).
				With("selectedOption", d.Option).With("options", ids)
		}
		if d.Action == "" {
			d.Action = opt.Action
		}
		v = d
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, nil, belay.Invalid("resume", "the resume value cannot be encoded as JSON: %v", err)
	}
	return b, d, nil
}

// answer returns what closes the interrupt's request, if it is still open,
// once the run goes on: with d, else with the request's default option (its
// first when none is the default). A decision that lands meanwhile stands.
func answer(svc belay.Service, cp *belay.Checkpoint, d *Decision) func(context.Context) error {
	if cp.Decision != nil {
		return nil
	}
	return func(ctx context.Context) error {
		in := belay.DecideInput{CheckpointID: cp.ID, Feedback: "answered by the run's Resume"}
		if d != nil {
			in.SelectedOption, in.Action, in.Feedback, in.Modifications = d.Option, d.Action, d.Feedback, d.Modifications
		} else {
			in.SelectedOption = cp.HITL.Options[0].ID
			for _, o := range cp.HITL.Options {
				if o.IsDefault {
					in.SelectedOption = o.ID
				}
			}
		}
		_, err := svc.Decide(ctx, in)
		if belay.IsCode(err, belay.CodeHITLAlreadyDecided) {
			return nil
		}
		return err
	}
}
