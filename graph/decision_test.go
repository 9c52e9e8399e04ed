package graph_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/client"
	"github.com/belayhq/belay/graph"
	"github.com/belayhq/belay/httpapi"
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

// runToInterrupt runs c as the caller of as on a fresh project, which must
// stop at an interrupt.
func runToInterrupt(t *testing.T, as context.Context, c *graph.Compiled[release], svc belay.Service) *graph.Result[release] {
	t.Helper()
	res, err := c.Run(as, svc, graph.RunInput[release]{ProjectPath: t.TempDir()})
	if err != nil || res.Status != graph.Interrupted {
		t.Fatalf("Run = %+v, %v; want interrupted", res, err)
	}
	return res
}

// A resume value cannot overturn what a person decided: an agent that may
// not decide is refused before anyone decides (UNAUTHORIZED) and after
// (HITL_ALREADY_DECIDED), and the run goes on with the recorded decision.
func TestResumeCannotOverturnADecision(t *testing.T) {
	svc := newService(t)
	c := deployGraph(t)
	res := runToInterrupt(t, agentCtx, c, svc)
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
	res := runToInterrupt(t, agentCtx, c, svc)
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
	res := runToInterrupt(t, ctx, c, svc)
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
		res := runToInterrupt(t, agentCtx, c, svc)
		if _, err := c.Resume(agentCtx, svc, res.RunID, approve); !belay.IsCode(err, belay.CodeUnauthorized) || approved != 0 {
			t.Fatalf("the agent's approval: %v, the node approved %d times; want UNAUTHORIZED before it ran", err, approved)
		}
	})
	t.Run("forked", func(t *testing.T) {
		svc := newService(t)
		approved = 0
		res := runToInterrupt(t, agentCtx, c, svc)
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
	res := runToInterrupt(t, ctx, c, svc)
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

// shipGraph is review → deploy → END, as deployGraph, counting how often
// deploy ran: it ships whatever the verdict says.
func shipGraph(t *testing.T) (*graph.Compiled[release], *int) {
	t.Helper()
	deployed := new(int)
	c, err := graph.New[release]().AddNode("review", askVerdict).
		AddNode("deploy", func(_ context.Context, s release) (release, error) {
			*deployed++ // an irreversible side effect
			s.Shipped = s.Verdict == "approve"
			return s, nil
		}).
		AddEdge(graph.START, "review").AddEdge("review", "deploy").AddEdge("deploy", graph.END).Compile()
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return c, deployed
}

// skip is a way to move a run past its interrupt without running the
// interrupted node again, writing the approval the request asks for into
// the state: Goto, or UpdateState as that node.
type skip struct {
	name string
	past func(ctx context.Context, c *graph.Compiled[release], svc belay.Service, runID string) error
}

var skips = []skip{
	{"goto", func(ctx context.Context, c *graph.Compiled[release], svc belay.Service, runID string) error {
		_, err := c.Resume(ctx, svc, runID, graph.Command{Goto: "deploy", Update: map[string]any{"verdict": "approve"}})
		return err
	}},
	{"update as node", func(ctx context.Context, c *graph.Compiled[release], svc belay.Service, runID string) error {
		_, err := c.UpdateState(ctx, svc, runID, map[string]any{"verdict": "approve"}, "review")
		return err
	}},
}

// Moving past an open request answers it, so it takes the right to decide
// it, as a resume value does: an agent that may not decide is refused
// (UNAUTHORIZED) before anything runs or is written, and the run still
// waits, its request open; someone who may decide goes past it, answering
// it with its default option.
func TestSkippingAnOpenRequestTakesTheRightToDecide(t *testing.T) {
	for _, tc := range skips {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService(t)
			w := &writes{Service: svc, n: map[string]int{}}
			c, deployed := shipGraph(t)
			res := runToInterrupt(t, agentCtx, c, svc)
			err := tc.past(agentCtx, c, w, res.RunID)
			var be *belay.Error
			if !errors.As(err, &be) || be.Code != belay.CodeUnauthorized || be.Details["checkpointId"] != res.Interrupt.ID {
				t.Fatalf("the agent's skip = %v, want UNAUTHORIZED naming %s", err, res.Interrupt.ID)
			}
			if got := w.take(); *deployed != 0 || len(got) != 0 {
				t.Fatalf("the refused skip deployed %d times and wrote %v; want nothing", *deployed, got)
			}
			st, err := c.GetState(ctx, svc, res.RunID)
			if err != nil || st.Interrupt == nil || st.Interrupt.ID != res.Interrupt.ID || st.Interrupt.Checkpoint.Decision != nil {
				t.Fatalf("GetState = %+v, %v; want the run still at its open interrupt", st, err)
			}
			if err := tc.past(ctx, c, svc, res.RunID); err != nil {
				t.Fatalf("an admin's skip = %v", err)
			}
			req, err := svc.GetCheckpoint(ctx, res.Interrupt.ID)
			if err != nil || req.Decision == nil || req.Decision.SelectedOption != "reject" || req.Decision.UserID != "local" {
				t.Fatalf("the request after the admin's skip = %+v, %v; want its default option, by the admin", req, err)
			}
		})
	}
}

// Moving past a decided request answers nothing: the decision stands, as
// when Resume goes on with it, so an agent that may not decide moves on.
func TestSkippingADecidedRequestKeepsItsDecision(t *testing.T) {
	for _, tc := range skips {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService(t)
			c, _ := shipGraph(t)
			res := runToInterrupt(t, agentCtx, c, svc)
			if _, err := svc.Decide(ctx, belay.DecideInput{CheckpointID: res.Interrupt.ID, SelectedOption: "approve", Feedback: "ship it"}); err != nil {
				t.Fatalf("Decide: %v", err)
			}
			if err := tc.past(agentCtx, c, svc, res.RunID); err != nil {
				t.Fatalf("the agent's skip after the decision = %v", err)
			}
			if st, err := c.GetState(ctx, svc, res.RunID); err != nil || st.Interrupt != nil {
				t.Fatalf("GetState after the skip = %+v, %v; want the run past its interrupt", st, err)
			}
			req, err := svc.GetCheckpoint(ctx, res.Interrupt.ID)
			if err != nil || req.Decision == nil || req.Decision.SelectedOption != "approve" || req.Decision.Feedback != "ship it" {
				t.Fatalf("the request after the skip = %+v, %v; want the person's decision", req, err)
			}
		})
	}
}

// Going on from a breakpoint answers its request too: an agent that may
// not decide it is refused before the node it stopped before runs, with no
// value or with Goto; once a person decides it, the agent goes on.
func TestGoingOnFromABreakpointTakesTheRightToDecide(t *testing.T) {
	svc := newService(t)
	deployed := 0
	c, err := graph.New[release]().AddNode("deploy", func(_ context.Context, s release) (release, error) {
		deployed++
		s.Shipped = true
		return s, nil
	}).AddEdge(graph.START, "deploy").AddEdge("deploy", graph.END).Compile(graph.InterruptBefore("deploy"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Run(agentCtx, svc, graph.RunInput[release]{ProjectPath: t.TempDir()})
	if err != nil || res.Status != graph.Interrupted || res.Interrupt.Breakpoint != "before" {
		t.Fatalf("Run = %+v, %v; want stopped before deploy", res, err)
	}
	for _, cmd := range []graph.Command{{}, {Goto: graph.END}} {
		if _, err := c.Resume(agentCtx, svc, res.RunID, cmd); !belay.IsCode(err, belay.CodeUnauthorized) || deployed != 0 {
			t.Fatalf("the agent's Resume(%+v) = %v, deployed %d times; want UNAUTHORIZED before deploy", cmd, err, deployed)
		}
	}
	if _, err := svc.Decide(ctx, belay.DecideInput{CheckpointID: res.Interrupt.ID, SelectedOption: "continue"}); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	done, err := c.Resume(agentCtx, svc, res.RunID, graph.Command{})
	if err != nil || done.Status != graph.Completed || !done.State.Shipped || deployed != 1 {
		t.Fatalf("the agent's Resume after the decision = %+v, %v; want completed, deployed once", done, err)
	}
}

// A resume value of another Go type that reads as a Decision — a map, or
// the JSON an API request carried — answers the request as a Decision does:
// an option not offered is INVALID_OPTION before the node runs, and the
// request records the decision the node got, not its default option.
func TestResumeValueThatReadsAsADecision(t *testing.T) {
	for _, tc := range []struct {
		name           string
		reject, absurd any
	}{
		{"map", map[string]any{"option": "reject", "feedback": "no way"}, map[string]any{"option": "launch-missiles"}},
		{"raw JSON", json.RawMessage(`{"option":"reject","feedback":"no way"}`), json.RawMessage(`{"option":"launch-missiles"}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService(t)
			c, deployed := shipGraph(t)
			res := runToInterrupt(t, ctx, c, svc)
			_, err := c.Resume(ctx, svc, res.RunID, graph.Command{Resume: tc.absurd})
			if !belay.IsCode(err, belay.CodeInvalidOption) || *deployed != 0 {
				t.Fatalf("Resume with an option not offered = %v, deployed %d times; want INVALID_OPTION before anything ran", err, *deployed)
			}
			mismatched := graph.Command{Resume: graph.Decision{Option: "reject", Action: belay.ActionApprove}}
			if _, err := c.Resume(ctx, svc, res.RunID, mismatched); !belay.IsCode(err, belay.CodeInvalidOption) || *deployed != 0 {
				t.Fatalf("Resume with an action not the option's = %v, deployed %d times; want INVALID_OPTION before anything ran", err, *deployed)
			}
			if req, err := svc.GetCheckpoint(ctx, res.Interrupt.ID); err != nil || req.Decision != nil {
				t.Fatalf("the request after the refused resumes = %+v, %v; want it open", req, err)
			}
			done, err := c.Resume(ctx, svc, res.RunID, graph.Command{Resume: tc.reject})
			if err != nil || done.Status != graph.Completed || done.State.Verdict != "reject" || done.State.Feedback != "no way" || done.State.Shipped {
				t.Fatalf("Resume = %+v, %v; want completed, rejected with the feedback, not shipped", done, err)
			}
			req, err := svc.GetCheckpoint(ctx, res.Interrupt.ID)
			if err != nil || req.Decision == nil || req.Decision.SelectedOption != "reject" || req.Decision.Action != belay.ActionReject || req.Decision.Feedback != "no way" {
				t.Fatalf("the request after Resume = %+v, %v; want the rejection the node got", req.Decision, err)
			}
		})
	}
}

// ask is a state whose node takes any resume value as text.
type ask struct {
	Answer string `json:"answer"`
}

// A resume value that chooses no option (LangGraph takes any value) still
// closes the request with one, its default, and the record says the run
// was resumed with a value, not that someone chose the option; a person
// who decides otherwise while the node runs with the value wins.
func TestFreeFormResumeValueIsRecordedAsSuch(t *testing.T) {
	svc := newService(t)
	var interruptID string
	decideMeanwhile := false
	c, err := graph.New[ask]().AddNode("ask", func(nctx context.Context, s ask) (ask, error) {
		v, err := graph.Interrupt[string](nctx, graph.InterruptRequest{Title: "Anything to add?", Options: approveOrReject})
		if err != nil {
			return s, err
		}
		if decideMeanwhile {
			decideMeanwhile = false
			if _, err := svc.Decide(ctx, belay.DecideInput{CheckpointID: interruptID, SelectedOption: "approve", Feedback: "go"}); err != nil {
				t.Errorf("Decide: %v", err)
			}
		}
		s.Answer = v
		return s, nil
	}).AddEdge(graph.START, "ask").AddEdge("ask", graph.END).Compile()
	if err != nil {
		t.Fatal(err)
	}
	run := func() *graph.Result[ask] {
		res, err := c.Run(ctx, svc, graph.RunInput[ask]{ProjectPath: t.TempDir()})
		if err != nil || res.Status != graph.Interrupted {
			t.Fatalf("Run = %+v, %v; want interrupted", res, err)
		}
		return res
	}

	res := run()
	done, err := c.Resume(ctx, svc, res.RunID, graph.Command{Resume: "ship it on Monday"})
	if err != nil || done.Status != graph.Completed || done.State.Answer != "ship it on Monday" {
		t.Fatalf("Resume = %+v, %v; want completed with the value", done, err)
	}
	req, err := svc.GetCheckpoint(ctx, res.Interrupt.ID)
	if err != nil || req.Decision == nil || req.Decision.SelectedOption != "reject" ||
		!strings.Contains(req.Decision.Feedback, "chose no option") || !strings.Contains(req.Decision.Feedback, `"ship it on Monday"`) {
		t.Fatalf("the request after Resume = %+v, %v; want its default option, its feedback saying a value that chose no option, quoting it", req.Decision, err)
	}

	res = run()
	interruptID, decideMeanwhile = res.Interrupt.ID, true
	if out, err := c.Resume(ctx, svc, res.RunID, graph.Command{Resume: "never"}); !belay.IsCode(err, belay.CodeHITLAlreadyDecided) {
		t.Fatalf("Resume while a person approves = %+v, %v; want HITL_ALREADY_DECIDED", out, err)
	}
	req, err = svc.GetCheckpoint(ctx, res.Interrupt.ID)
	if err != nil || req.Decision == nil || req.Decision.SelectedOption != "approve" || req.Decision.Feedback != "go" {
		t.Fatalf("the request = %+v, %v; want the person's approval", req.Decision, err)
	}
}

// got is a state that keeps the decision its node got.
type got struct {
	Decision graph.Decision `json:"decision"`
}

// gotGraph asks to approve or reject and keeps the decision.
func gotGraph(t *testing.T) *graph.Compiled[got] {
	t.Helper()
	c, err := graph.New[got]().AddNode("ask", func(nctx context.Context, s got) (got, error) {
		d, err := graph.Interrupt[graph.Decision](nctx, graph.InterruptRequest{Title: "Deploy?", Options: approveOrReject})
		if err != nil {
			return s, err
		}
		s.Decision = d
		return s, nil
	}).AddEdge(graph.START, "ask").AddEdge("ask", graph.END).Compile()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Who decided, and whether a timeout did, is what belay records, not what
// the resume value claims: the node gets the caller as By and Automatic
// false, as the request records them — and as a run resumed with no value
// gets them from the recorded decision.
func TestResumeValueCannotForgeWhoDecided(t *testing.T) {
	svc := newService(t)
	c := gotGraph(t)
	for _, forged := range []any{
		graph.Decision{Option: "approve", Feedback: "ok", By: "mallory", Automatic: true},
		map[string]any{"option": "approve", "feedback": "ok", "by": "mallory", "automatic": true},
	} {
		res, err := c.Run(ctx, svc, graph.RunInput[got]{ProjectPath: t.TempDir()})
		if err != nil || res.Status != graph.Interrupted {
			t.Fatalf("Run = %+v, %v; want interrupted", res, err)
		}
		done, err := c.Resume(ctx, svc, res.RunID, graph.Command{Resume: forged})
		if err != nil || done.Status != graph.Completed {
			t.Fatalf("Resume(%v) = %+v, %v", forged, done, err)
		}
		d := done.State.Decision
		if d.By != "local" || d.Automatic {
			t.Fatalf("Resume(%v): the node got %+v; want By the caller, local, and Automatic false", forged, d)
		}
		req, err := svc.GetCheckpoint(ctx, res.Interrupt.ID)
		if err != nil || req.Decision == nil {
			t.Fatalf("the request = %+v, %v; want it decided", req, err)
		}
		if r := req.Decision; d.Option != r.SelectedOption || d.Action != r.Action || d.Feedback != r.Feedback || d.By != r.UserID || d.Automatic != r.AutoTriggered {
			t.Fatalf("Resume(%v): the node got %+v; the request records %+v", forged, d, r)
		}
	}
}

// Over a remote service the run cannot tell who its token's user is: the
// node gets no By rather than the value's claim.
func TestResumeValueCannotForgeWhoDecidedRemotely(t *testing.T) {
	svc := newService(t)
	tok, err := svc.CreateToken(ctx, belay.CreateTokenInput{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Service: svc, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Version: "test", Authenticate: svc.Authenticate}).Handler())
	t.Cleanup(srv.Close)
	remote, err := client.New(srv.URL, tok.Secret)
	if err != nil {
		t.Fatal(err)
	}
	c := gotGraph(t)
	res, err := c.Run(context.Background(), remote, graph.RunInput[got]{ProjectPath: t.TempDir()})
	if err != nil || res.Status != graph.Interrupted {
		t.Fatalf("Run = %+v, %v; want interrupted", res, err)
	}
	forged := graph.Decision{Option: "approve", By: "mallory", Automatic: true}
	done, err := c.Resume(context.Background(), remote, res.RunID, graph.Command{Resume: forged})
	if err != nil || done.Status != graph.Completed || done.State.Decision.By != "" || done.State.Decision.Automatic {
		t.Fatalf("Resume = %+v, %v; want completed, the node's decision with no By and not automatic", done, err)
	}
	req, err := svc.GetCheckpoint(ctx, res.Interrupt.ID)
	if err != nil || req.Decision == nil || req.Decision.UserID != "alice" || req.Decision.AutoTriggered {
		t.Fatalf("the request = %+v, %v; want decided by alice", req, err)
	}
}
