package graph_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/graph"
)

// release is the state of a deployment a person approves or rejects.
type release struct {
	Verdict  string `json:"verdict"`
	Feedback string `json:"feedback,omitempty"`
	Shipped  bool   `json:"shipped"`
}

// agentCtx is an agent that may read and write but not decide.
var agentCtx = belay.WithActor(context.Background(), belay.Actor{UserID: "agent", Scopes: []belay.Scope{belay.ScopeRead, belay.ScopeWrite}})

var approveOrReject = []belay.HITLOption{
	{ID: "approve", Label: "Approve", Action: belay.ActionApprove},
	{ID: "reject", Label: "Reject", Action: belay.ActionReject, IsDefault: true},
}

// askVerdict asks whether to deploy and records the verdict.
func askVerdict(ctx context.Context, s release) (release, error) {
	d, err := graph.Interrupt[graph.Decision](ctx, graph.InterruptRequest{Title: "Deploy?", Options: approveOrReject})
	if err != nil {
		return s, err
	}
	s.Verdict, s.Feedback = d.Option, d.Feedback
	return s, nil
}

// deployGraph is review → deploy → END: deploy ships only what was approved.
func deployGraph(t *testing.T) *graph.Compiled[release] {
	t.Helper()
	c, err := graph.New[release]().AddNode("review", askVerdict).
		AddNode("deploy", func(_ context.Context, s release) (release, error) {
			s.Shipped = s.Verdict == "approve"
			return s, nil
		}).
		AddEdge(graph.START, "review").AddEdge("review", "deploy").AddEdge("deploy", graph.END).Compile()
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return c
}

// A resume value cannot overturn what a person decided: an agent that may
// not decide is refused before anyone decides (UNAUTHORIZED) and after
// (HITL_ALREADY_DECIDED), and the run goes on with the recorded decision.
func TestResumeCannotOverturnADecision(t *testing.T) {
	svc := newService(t)
	c := deployGraph(t)
	res, err := c.Run(agentCtx, svc, graph.RunInput[release]{ProjectPath: t.TempDir()})
	if err != nil || res.Status != graph.Interrupted {
		t.Fatalf("Run = %+v, %v; want interrupted at review", res, err)
	}
	approve := graph.Command{Resume: graph.Decision{Option: "approve"}}
	if _, err := c.Resume(agentCtx, svc, res.RunID, approve); !belay.IsCode(err, belay.CodeUnauthorized) {
		t.Fatalf("the agent's approval before any decision = %v, want UNAUTHORIZED", err)
	}
	if _, err := svc.Decide(ctx, belay.DecideInput{CheckpointID: res.Interrupt.ID, SelectedOption: "reject", Feedback: "NO"}); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	before := sessionStatus(t, svc, res.RunID)
	for _, tc := range []struct {
		name string
		cmd  graph.Command
	}{
		{"another option", approve},
		{"another option by pointer", graph.Command{Resume: &graph.Decision{Option: "approve"}}},
		{"another option as a map", graph.Command{Resume: map[string]any{"option": "approve"}}},
		{"by interrupt id", graph.Command{Resumes: map[string]any{res.Interrupt.ID: graph.Decision{Option: "approve"}}}},
		{"other feedback", graph.Command{Resume: graph.Decision{Option: "reject", Feedback: "fine by me"}}},
		{"not a decision", graph.Command{Resume: "approve"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Resume(agentCtx, svc, res.RunID, tc.cmd)
			var be *belay.Error
			if !errors.As(err, &be) || be.Code != belay.CodeHITLAlreadyDecided || be.Details["checkpointId"] != res.Interrupt.ID {
				t.Fatalf("Resume = %v, want HITL_ALREADY_DECIDED naming checkpoint %s", err, res.Interrupt.ID)
			}
			if st := sessionStatus(t, svc, res.RunID); st != before {
				t.Fatalf("session status after a refused resume = %s, want %s", st, before)
			}
		})
	}
	// A value that repeats the decision goes on with it, as no value does.
	done, err := c.Resume(agentCtx, svc, res.RunID, graph.Command{Resume: graph.Decision{Option: "reject", Action: belay.ActionReject}})
	if err != nil || done.Status != graph.Completed || done.State.Verdict != "reject" || done.State.Feedback != "NO" || done.State.Shipped {
		t.Fatalf("Resume with the decision = %+v, %v; want completed, rejected with the person's feedback, not shipped", done, err)
	}
	req, err := svc.GetCheckpoint(ctx, res.Interrupt.ID)
	if err != nil || req.Decision == nil || req.Decision.SelectedOption != "reject" || req.Decision.UserID != "local" {
		t.Fatalf("the request after Resume = %+v, %v; want the person's rejection", req, err)
	}
}

// Parallel branches that paused together: a branch a person decided keeps
// that decision, whether Resumes leaves it out or repeats it, and a value
// that differs from it is refused.
func TestResumesCannotOverturnADecision(t *testing.T) {
	svc := newService(t)
	g, _, _ := fanOut(decideStep("b"), decideStep("c"))
	c := compile(t, g, graph.WithReducer("steps", graph.Append[string]))
	res, err := c.Run(agentCtx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err != nil || res.Status != graph.Interrupted || len(res.Interrupts) != 2 {
		t.Fatalf("Run = %+v, %v; want paused in b and c", res, err)
	}
	b, cc := res.Interrupts[0].ID, res.Interrupts[1].ID
	if _, err := svc.Decide(ctx, belay.DecideInput{CheckpointID: b, SelectedOption: "reject", Feedback: "NO"}); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	if _, err := svc.Decide(ctx, belay.DecideInput{CheckpointID: cc, SelectedOption: "approve"}); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	overturn := graph.Command{Resumes: map[string]any{b: graph.Decision{Option: "approve"}}}
	_, err = c.Resume(agentCtx, svc, res.RunID, overturn)
	var be *belay.Error
	if !errors.As(err, &be) || be.Code != belay.CodeHITLAlreadyDecided || be.Details["checkpointId"] != b {
		t.Fatalf("Resume overturning b = %v, want HITL_ALREADY_DECIDED naming %s", err, b)
	}
	res, err = c.Resume(agentCtx, svc, res.RunID, graph.Command{Resumes: map[string]any{cc: graph.Decision{Option: "approve"}}})
	if err != nil || res.Status != graph.Completed || !slices.Equal(res.State.Steps, []string{"plan", "b:reject", "c:approve", "join"}) {
		t.Fatalf("Resume = %+v, %v; want b rejected and c approved, as decided", res, err)
	}
}

// decideStep is a branch that asks to approve or reject and records the answer.
func decideStep(name string) graph.Node[doc] {
	return func(ctx context.Context, s doc) (doc, error) {
		d, err := graph.Interrupt[graph.Decision](ctx, graph.InterruptRequest{Title: name + "?", Options: approveOrReject})
		if err != nil {
			return s, err
		}
		s.Steps = append(s.Steps, name+":"+d.Option)
		return s, nil
	}
}

// A run forked back to an interrupt whose decision it went on with is
// answered anew (time travel), but only by someone who may decide: the
// agent that may not is refused, and nothing ships.
func TestForkedInterruptIsAnsweredAnewOnlyByADecider(t *testing.T) {
	svc := newService(t)
	c := deployGraph(t)
	res, err := c.Run(agentCtx, svc, graph.RunInput[release]{ProjectPath: t.TempDir()})
	if err != nil || res.Status != graph.Interrupted {
		t.Fatalf("Run = %+v, %v; want interrupted at review", res, err)
	}
	ask := res.Interrupt.ID
	if _, err := svc.Decide(ctx, belay.DecideInput{CheckpointID: ask, SelectedOption: "reject", Feedback: "NO"}); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	done, err := c.Resume(agentCtx, svc, res.RunID, graph.Command{})
	if err != nil || done.Status != graph.Completed || done.State.Shipped {
		t.Fatalf("Resume = %+v, %v; want completed, rejected", done, err)
	}
	if _, err := c.Fork(agentCtx, svc, res.RunID, ask); err != nil {
		t.Fatalf("Fork: %v", err)
	}
	approve := graph.Command{Resume: graph.Decision{Option: "approve"}}
	if _, err := c.Resume(agentCtx, svc, res.RunID, approve); !belay.IsCode(err, belay.CodeUnauthorized) {
		t.Fatalf("the agent's new answer after the fork = %v, want UNAUTHORIZED", err)
	}
	st, err := c.GetState(ctx, svc, res.RunID)
	if err != nil || st.Values.Shipped || st.Interrupt == nil || st.Interrupt.ID != ask {
		t.Fatalf("GetState = %+v, %v; want the run still at its interrupt, nothing shipped", st, err)
	}
	again, err := c.Resume(ctx, svc, res.RunID, approve)
	if err != nil || again.Status != graph.Completed || !again.State.Shipped {
		t.Fatalf("an admin's new answer after the fork = %+v, %v; want completed and shipped", again, err)
	}
}

// A nil *Decision is a VALIDATION_ERROR, not a panic, and the run still
// waits.
func TestResumeWithANilDecision(t *testing.T) {
	svc := newService(t)
	c := deployGraph(t)
	res, err := c.Run(ctx, svc, graph.RunInput[release]{ProjectPath: t.TempDir()})
	if err != nil || res.Status != graph.Interrupted {
		t.Fatalf("Run = %+v, %v; want interrupted at review", res, err)
	}
	if _, err := c.Resume(ctx, svc, res.RunID, graph.Command{Resume: (*graph.Decision)(nil)}); !belay.IsCode(err, belay.CodeValidation) {
		t.Fatalf("Resume with a nil *Decision = %v, want VALIDATION_ERROR", err)
	}
	done, err := c.Resume(ctx, svc, res.RunID, graph.Command{Resume: graph.Decision{Option: "approve"}})
	if err != nil || done.Status != graph.Completed || !done.State.Shipped {
		t.Fatalf("Resume after = %+v, %v; want completed and shipped", done, err)
	}
}

// A resume value from a caller who may not decide is refused before the
// interrupted node runs with it, the request open or decided and forked
// back to: the node's side effects never see the refused answer.
func TestRefusedResumeValueNeverReachesTheNode(t *testing.T) {
	var approved int
	c, err := graph.New[release]().AddNode("review", func(nctx context.Context, s release) (release, error) {
		d, err := graph.Interrupt[graph.Decision](nctx, graph.InterruptRequest{Title: "Deploy?", Options: approveOrReject})
		if err != nil {
			return s, err
		}
		if d.Option == "approve" {
			approved++ // an irreversible side effect
		}
		s.Verdict = d.Option
		return s, nil
	}).AddEdge(graph.START, "review").AddEdge("review", graph.END).Compile()
	if err != nil {
		t.Fatal(err)
	}
	approve := graph.Command{Resume: graph.Decision{Option: "approve"}}
	t.Run("open", func(t *testing.T) {
		svc := newService(t)
		approved = 0
		res, err := c.Run(agentCtx, svc, graph.RunInput[release]{ProjectPath: t.TempDir()})
		if err != nil || res.Status != graph.Interrupted {
			t.Fatalf("Run = %+v, %v", res, err)
		}
		if _, err := c.Resume(agentCtx, svc, res.RunID, approve); !belay.IsCode(err, belay.CodeUnauthorized) || approved != 0 {
			t.Fatalf("the agent's approval: %v, the node approved %d times; want UNAUTHORIZED before it ran", err, approved)
		}
	})
	t.Run("forked", func(t *testing.T) {
		svc := newService(t)
		approved = 0
		res, err := c.Run(agentCtx, svc, graph.RunInput[release]{ProjectPath: t.TempDir()})
		if err != nil || res.Status != graph.Interrupted {
			t.Fatalf("Run = %+v, %v", res, err)
		}
		if _, err := svc.Decide(ctx, belay.DecideInput{CheckpointID: res.Interrupt.ID, SelectedOption: "reject", Feedback: "NO"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Resume(agentCtx, svc, res.RunID, graph.Command{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Fork(agentCtx, svc, res.RunID, res.Interrupt.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Resume(agentCtx, svc, res.RunID, approve); !belay.IsCode(err, belay.CodeUnauthorized) || approved != 0 {
			t.Fatalf("the agent's approval after a fork: %v, the node approved %d times; want UNAUTHORIZED before it ran", err, approved)
		}
	})
}

// A person who decides while the resumed node runs with another answer
// wins: the run's save is refused (HITL_ALREADY_DECIDED) and nothing
// ships; resumed with no value, the run goes on with the person's decision.
func TestDecisionDuringAResumedNodeWins(t *testing.T) {
	svc := newService(t)
	var interruptID string
	decided := false
	c, err := graph.New[release]().AddNode("review", func(nctx context.Context, s release) (release, error) {
		d, err := graph.Interrupt[graph.Decision](nctx, graph.InterruptRequest{Title: "Deploy?", Options: approveOrReject})
		if err != nil {
			return s, err
		}
		if !decided { // a person decides while the node runs
			decided = true
			if _, err := svc.Decide(ctx, belay.DecideInput{CheckpointID: interruptID, SelectedOption: "reject", Feedback: "NO"}); err != nil {
				t.Errorf("Decide: %v", err)
			}
		}
		s.Verdict = d.Option
		return s, nil
	}).AddNode("deploy", func(_ context.Context, s release) (release, error) {
		s.Shipped = s.Verdict == "approve"
		return s, nil
	}).AddEdge(graph.START, "review").AddEdge("review", "deploy").AddEdge("deploy", graph.END).Compile()
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Run(ctx, svc, graph.RunInput[release]{ProjectPath: t.TempDir()})
	if err != nil || res.Status != graph.Interrupted {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	interruptID = res.Interrupt.ID
	out, err := c.Resume(ctx, svc, res.RunID, graph.Command{Resume: graph.Decision{Option: "approve"}})
	if !belay.IsCode(err, belay.CodeHITLAlreadyDecided) {
		t.Fatalf("Resume = %+v, %v; want HITL_ALREADY_DECIDED", out, err)
	}
	out, err = c.Resume(ctx, svc, res.RunID, graph.Command{})
	if err != nil || out.Status != graph.Completed || out.State.Shipped || out.State.Verdict != "reject" {
		t.Fatalf("Resume with no value = %+v, %v; want completed on the person's reject", out, err)
	}
}
