package graph_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/graph"
	"github.com/belayhq/belay/store/sqlite"
)

var ctx = belay.WithActor(context.Background(), belay.Actor{UserID: "local", Admin: true})

func newService(tb testing.TB) *core.Service {
	tb.Helper()
	db, err := sqlite.Open(ctx, filepath.Join(tb.TempDir(), "belay.db"))
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	svc := core.New(core.Options{Store: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	tb.Cleanup(func() {
		svc.Close()
		db.Close()
	})
	return svc
}

// doc is the state of the tests' graphs.
type doc struct {
	Steps   []string `json:"steps"`
	Answers []string `json:"answers,omitempty"`
	Notes   string   `json:"notes,omitempty"`
	Count   int      `json:"count"`
	Extra   any      `json:"extra,omitempty"`
}

func visit(name string) graph.Node[doc] {
	return func(_ context.Context, s doc) (doc, error) {
		s.Steps = append(s.Steps, name)
		return s, nil
	}
}

func compile(tb testing.TB, g *graph.Graph[doc], opts ...graph.Option) *graph.Compiled[doc] {
	tb.Helper()
	c, err := g.Compile(opts...)
	if err != nil {
		tb.Fatalf("Compile: %v", err)
	}
	return c
}

func checkpoints(tb testing.TB, svc belay.Service, runID string) []*belay.Checkpoint {
	tb.Helper()
	list, err := svc.ListCheckpoints(ctx, belay.ListCheckpointsInput{SessionID: runID, Limit: belay.MaxListLimit, OrderDir: belay.OrderAsc})
	if err != nil {
		tb.Fatalf("ListCheckpoints: %v", err)
	}
	return list.Items
}

func sessionStatus(tb testing.TB, svc belay.Service, runID string) belay.SessionStatus {
	tb.Helper()
	sess, err := svc.GetSession(ctx, runID)
	if err != nil {
		tb.Fatalf("GetSession: %v", err)
	}
	return sess.Status
}

func TestCompileReportsEachProblem(t *testing.T) {
	noop := visit("x")
	for _, tc := range []struct {
		name  string
		build func() *graph.Graph[doc]
		want  string
	}{
		{"unknown target", func() *graph.Graph[doc] {
			return graph.New[doc]().AddNode("a", noop).AddEdge(graph.START, "a").AddEdge("a", "b")
		}, `edge from "a" to unknown node "b"`},
		{"unknown source", func() *graph.Graph[doc] {
			return graph.New[doc]().AddNode("a", noop).AddEdge(graph.START, "a").AddEdge("a", graph.END).AddEdge("z", "a")
		}, `edge from unknown node "z"`},
		{"router target missing", func() *graph.Graph[doc] {
			return graph.New[doc]().AddNode("a", noop).AddEdge(graph.START, "a").
				AddConditionalEdges("a", func(doc) string { return graph.END }, graph.END, "review")
		}, `router target from "a" to unknown node "review"`},
		{"END unreachable", func() *graph.Graph[doc] {
			return graph.New[doc]().AddNode("a", noop).AddNode("b", noop).AddEdge(graph.START, "a").AddEdge("a", "b").AddEdge("b", "a")
		}, "END cannot be reached from START"},
		{"no entry", func() *graph.Graph[doc] {
			return graph.New[doc]().AddNode("a", noop).AddEdge("a", graph.END)
		}, "no edge from START"},
		{"dead end", func() *graph.Graph[doc] {
			return graph.New[doc]().AddNode("a", noop).AddNode("b", noop).AddEdge(graph.START, "a").
				AddConditionalEdges("a", func(doc) string { return "b" }, "b", graph.END)
		}, `node "b" has no way out`},
		{"unreachable node", func() *graph.Graph[doc] {
			return graph.New[doc]().AddNode("a", noop).AddNode("b", noop).AddEdge(graph.START, "a").AddEdge("a", graph.END).AddEdge("b", graph.END)
		}, `node "b" cannot be reached from START`},
		{"duplicate node", func() *graph.Graph[doc] {
			return graph.New[doc]().AddNode("a", noop).AddNode("a", noop).AddEdge(graph.START, "a").AddEdge("a", graph.END)
		}, `node "a" is added twice`},
		{"two ways out", func() *graph.Graph[doc] {
			return graph.New[doc]().AddNode("a", noop).AddEdge(graph.START, "a").AddEdge("a", graph.END).AddEdge("a", "a")
		}, `node "a" already has a way out`},
		{"reserved name", func() *graph.Graph[doc] {
			return graph.New[doc]().AddNode(graph.END, noop).AddEdge(graph.START, graph.END)
		}, "a node needs a name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.build().Compile()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Compile error = %v, want it to say %q", err, tc.want)
			}
			if !belay.IsCode(err, belay.CodeValidation) {
				t.Fatalf("Compile error code = %s, want VALIDATION_ERROR", belay.ErrorCode(err))
			}
		})
	}
	if _, err := graph.New[doc]().AddNode("a", noop).AddEdge(graph.START, "a").AddEdge("a", graph.END).
		Compile(graph.WithRecursionLimit(0)); err == nil || !strings.Contains(err.Error(), "recursion limit") {
		t.Fatalf("Compile with limit 0 = %v, want a recursion limit error", err)
	}
}

func TestRunSavesACheckpointAfterEveryStep(t *testing.T) {
	svc := newService(t)
	c := compile(t, graph.New[doc]().AddNode("plan", visit("plan")).AddNode("write", visit("write")).
		AddEdge(graph.START, "plan").AddEdge("plan", "write").AddEdge("write", graph.END))
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir(), Title: "two steps"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Status != graph.Completed || res.Steps != 2 || !slices.Equal(res.State.Steps, []string{"plan", "write"}) {
		t.Fatalf("Run = %+v, want completed after plan and write", res)
	}
	if st := sessionStatus(t, svc, res.RunID); st != belay.SessionCompleted {
		t.Fatalf("session status = %s, want completed", st)
	}
	cps := checkpoints(t, svc, res.RunID)
	var got []string
	for _, cp := range cps {
		got = append(got, cp.Name+"|"+string(cp.Type)+"|"+string(cp.AgentState)+"|"+strconv.Itoa(cp.Step))
	}
	want := []string{
		`__start__|auto|{"steps":null,"count":0}|0`,
		`plan|auto|{"steps":["plan"],"count":0}|1`,
		`write|auto|{"steps":["plan","write"],"count":0}|2`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("checkpoints =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// review counts its executions and asks for as many answers as prompts has.
func reviewNode(runs *int, prompts ...string) graph.Node[doc] {
	return func(ctx context.Context, s doc) (doc, error) {
		*runs++
		for _, p := range prompts {
			answer, err := graph.Interrupt[string](ctx, graph.InterruptRequest{Title: p})
			if err != nil {
				return s, err
			}
			s.Answers = append(s.Answers, answer)
		}
		s.Steps = append(s.Steps, "review")
		return s, nil
	}
}

func reviewGraph(t *testing.T, review graph.Node[doc]) *graph.Compiled[doc] {
	return compile(t, graph.New[doc]().AddNode("plan", visit("plan")).AddNode("review", review).AddNode("finalize", visit("finalize")).
		AddEdge(graph.START, "plan").AddEdge("plan", "review").AddEdge("review", "finalize").AddEdge("finalize", graph.END))
}

func TestNodeRunsAgainOnResume(t *testing.T) {
	svc := newService(t)
	runs := 0
	c := reviewGraph(t, reviewNode(&runs, "Ship it?"))
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Status != graph.Interrupted || res.Interrupt == nil || res.Interrupt.Node != "review" || res.Interrupt.Index != 0 {
		t.Fatalf("Run = %+v, want interrupted at review", res)
	}
	if st := sessionStatus(t, svc, res.RunID); st != belay.SessionAwaitingInput {
		t.Fatalf("session status = %s, want awaiting_input", st)
	}
	cp := res.Interrupt.Checkpoint
	if cp.Type != belay.TypeHITL || !cp.Pending() || cp.HITL.Title != "Ship it?" || string(cp.AgentState) != `{"steps":["plan"],"count":0}` {
		t.Fatalf("interrupt checkpoint = %+v, want a pending HITL request with the state before review", cp)
	}
	res, err = c.Resume(ctx, svc, res.RunID, graph.Command{Resume: "yes"})
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if res.Status != graph.Completed || !slices.Equal(res.State.Answers, []string{"yes"}) ||
		!slices.Equal(res.State.Steps, []string{"plan", "review", "finalize"}) {
		t.Fatalf("Resume = %+v, want completed with the answer", res)
	}
	if runs != 2 {
		t.Fatalf("review ran %d times, want 2: once to the interrupt, once again on resume", runs)
	}
	got, err := svc.GetCheckpoint(ctx, cp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Decision == nil || got.Decision.SelectedOption != "approve" {
		t.Fatalf("request after Resume = %+v, want it answered with its default option", got.Decision)
	}
}

func TestInterruptsInOneNodeReturnResumeValuesInOrder(t *testing.T) {
	svc := newService(t)
	runs := 0
	c := reviewGraph(t, reviewNode(&runs, "first?", "second?", "third?"))
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	for i, answer := range []string{"one", "two", "three"} {
		if res.Status != graph.Interrupted || res.Interrupt.Index != i || res.Interrupt.Checkpoint.HITL.Title != []string{"first?", "second?", "third?"}[i] {
			t.Fatalf("before answer %d: %+v, want interrupt %d", i+1, res, i)
		}
		if res, err = c.Resume(ctx, svc, res.RunID, graph.Command{Resume: answer}); err != nil {
			t.Fatalf("Resume %d: %v", i+1, err)
		}
	}
	if res.Status != graph.Completed || !slices.Equal(res.State.Answers, []string{"one", "two", "three"}) {
		t.Fatalf("final = %+v, want the answers in order", res)
	}
	if runs != 4 {
		t.Fatalf("review ran %d times, want 4", runs)
	}
}

func TestDecisionMadeElsewhereResumes(t *testing.T) {
	svc := newService(t)
	var got graph.Decision
	c := reviewGraph(t, func(ctx context.Context, s doc) (doc, error) {
		d, err := graph.Interrupt[graph.Decision](ctx, graph.InterruptRequest{Title: "Review", Options: []belay.HITLOption{
			{ID: "approved", Label: "Approve", Action: belay.ActionApprove, IsDefault: true},
			{ID: "refine", Label: "Refine", Action: belay.ActionRetry},
		}})
		if err != nil {
			return s, err
		}
		got = d
		s.Notes = d.Feedback
		return s, nil
	})
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := c.Resume(ctx, svc, res.RunID, graph.Command{}); !belay.IsCode(err, belay.CodeConflict) {
		t.Fatalf("Resume before any decision = %v, want CONFLICT", err)
	}
	if _, err := svc.Decide(ctx, belay.DecideInput{CheckpointID: res.Interrupt.ID, SelectedOption: "refine", Feedback: "more sources"}); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	res, err = c.Resume(ctx, svc, res.RunID, graph.Command{})
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	want := graph.Decision{Option: "refine", Action: belay.ActionRetry, Feedback: "more sources", By: "local"}
	if res.Status != graph.Completed || res.State.Notes != "more sources" || got.Option != want.Option ||
		got.Action != want.Action || got.Feedback != want.Feedback || got.By != want.By {
		t.Fatalf("Resume = %+v, node got %+v; want completed with %+v", res, got, want)
	}
}

func TestWaitResumesWhenSomeoneDecides(t *testing.T) {
	svc := newService(t)
	c := reviewGraph(t, func(ctx context.Context, s doc) (doc, error) {
		d, err := graph.Interrupt[graph.Decision](ctx, graph.InterruptRequest{Title: "Review"})
		if err != nil {
			return s, err
		}
		s.Notes = d.Option
		return s, nil
	})
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	done := make(chan *graph.Result[doc], 1)
	go func() {
		r, err := c.Wait(ctx, svc, res.RunID)
		if err != nil {
			t.Errorf("Wait: %v", err)
		}
		done <- r
	}()
	select {
	case r := <-done:
		t.Fatalf("Wait returned %+v before any decision", r)
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := svc.Decide(ctx, belay.DecideInput{CheckpointID: res.Interrupt.ID, SelectedOption: "reject"}); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	r := <-done
	if r == nil || r.Status != graph.Completed || r.State.Notes != "reject" {
		t.Fatalf("Wait = %+v, want completed with the rejection as the resume value", r)
	}
	if st := sessionStatus(t, svc, res.RunID); st != belay.SessionCompleted {
		t.Fatalf("session status = %s, want completed: a rejection is the node's to interpret", st)
	}
}

func TestResumeRefusesWhatItCannotDo(t *testing.T) {
	svc := newService(t)
	runs := 0
	c := reviewGraph(t, reviewNode(&runs, "Ship it?"))
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, tc := range []struct {
		name string
		cmd  graph.Command
		code belay.Code
	}{
		{"unknown interrupt id", graph.Command{Resume: "yes", InterruptID: "0195f0a0-0000-7000-8000-000000000000"}, belay.CodeValidation},
		{"unknown goto", graph.Command{Goto: "nowhere"}, belay.CodeValidation},
		{"goto with a value", graph.Command{Goto: "finalize", Resume: "yes"}, belay.CodeValidation},
		{"wrong type", graph.Command{Resume: 42}, belay.CodeValidation},
		{"option not offered", graph.Command{Resume: graph.Decision{Option: "maybe"}}, belay.CodeInvalidOption},
		{"update not an object", graph.Command{Resume: "yes", Update: []int{1}}, belay.CodeValidation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.Resume(ctx, svc, res.RunID, tc.cmd); belay.ErrorCode(err) != tc.code {
				t.Fatalf("Resume = %v, want %s", err, tc.code)
			}
			if st := sessionStatus(t, svc, res.RunID); st != belay.SessionAwaitingInput {
				t.Fatalf("session status after a refused resume = %s, want awaiting_input", st)
			}
		})
	}
	done, err := c.Resume(ctx, svc, res.RunID, graph.Command{Resume: "yes", InterruptID: res.Interrupt.ID})
	if err != nil || done.Status != graph.Completed {
		t.Fatalf("Resume after refusals = %+v, %v; want completed", done, err)
	}
	if _, err := c.Resume(ctx, svc, res.RunID, graph.Command{Resume: "again"}); !belay.IsCode(err, belay.CodeConflict) ||
		!strings.Contains(err.Error(), "not interrupted") {
		t.Fatalf("Resume of a completed run = %v, want CONFLICT: not interrupted", err)
	}
	if _, err := c.Resume(ctx, svc, "0195f0a0-0000-7000-8000-000000000000", graph.Command{Resume: "x"}); !belay.IsCode(err, belay.CodeSessionNotFound) {
		t.Fatalf("Resume of an unknown run = %v, want SESSION_NOT_FOUND", err)
	}
}

func TestCommandGotoAndUpdate(t *testing.T) {
	svc := newService(t)
	runs := 0
	c := reviewGraph(t, reviewNode(&runs, "Ship it?"))

	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	res, err = c.Resume(ctx, svc, res.RunID, graph.Command{Goto: "finalize", Update: map[string]any{"notes": "skipped review"}})
	if err != nil {
		t.Fatalf("Resume with goto: %v", err)
	}
	if res.Status != graph.Completed || res.State.Notes != "skipped review" || !slices.Equal(res.State.Steps, []string{"plan", "finalize"}) {
		t.Fatalf("Resume with goto = %+v, want finalize after plan with the update", res)
	}
	if runs != 1 {
		t.Fatalf("review ran %d times, want 1: goto leaves it", runs)
	}

	res, err = c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	res, err = c.Resume(ctx, svc, res.RunID, graph.Command{Resume: "ok", Update: map[string]any{"count": 7}})
	if err != nil {
		t.Fatalf("Resume with update: %v", err)
	}
	if res.State.Count != 7 || !slices.Equal(res.State.Steps, []string{"plan", "review", "finalize"}) {
		t.Fatalf("Resume with update = %+v, want count 7 seen by review and kept", res)
	}
}

func counter(_ context.Context, s doc) (doc, error) {
	s.Count++
	s.Steps = append(s.Steps, "count")
	return s, nil
}

func TestConditionalRouting(t *testing.T) {
	svc := newService(t)
	c := compile(t, graph.New[doc]().AddNode("count", counter).AddNode("done", visit("done")).
		AddEdge(graph.START, "count").
		AddConditionalEdges("count", func(s doc) string {
			if s.Count < 3 {
				return "count"
			}
			return "done"
		}, "count", "done").
		AddEdge("done", graph.END))
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !slices.Equal(res.State.Steps, []string{"count", "count", "count", "done"}) || res.Steps != 4 {
		t.Fatalf("Run = %+v, want three counts then done", res)
	}
}

func TestRouterTargetNotDeclaredFailsTheRun(t *testing.T) {
	svc := newService(t)
	c := compile(t, graph.New[doc]().AddNode("a", visit("a")).AddEdge(graph.START, "a").
		AddConditionalEdges("a", func(doc) string { return "elsewhere" }, graph.END))
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), `returned "elsewhere"`) || res.Status != graph.Failed {
		t.Fatalf("Run = %+v, %v; want failed naming the target", res, err)
	}
}

func TestRecursionLimit(t *testing.T) {
	svc := newService(t)
	c := compile(t, graph.New[doc]().AddNode("count", counter).AddEdge(graph.START, "count").
		AddConditionalEdges("count", func(s doc) string {
			if s.Count < 100 {
				return "count"
			}
			return graph.END
		}, "count", graph.END), graph.WithRecursionLimit(5))
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if !belay.IsCode(err, belay.CodeBudgetExceeded) || res == nil || res.Status != graph.Failed || res.Steps != 5 || res.State.Count != 5 {
		t.Fatalf("Run = %+v, %v; want BUDGET_EXCEEDED after 5 steps", res, err)
	}
	if st := sessionStatus(t, svc, res.RunID); st != belay.SessionFailed {
		t.Fatalf("session status = %s, want failed", st)
	}
	cps := checkpoints(t, svc, res.RunID)
	last := cps[len(cps)-1]
	if len(cps) != 7 || last.Type != belay.TypeError || last.Step != 6 || !strings.Contains(last.Summary, "recursion limit of 5") {
		t.Fatalf("last of %d checkpoints = %+v, want an error checkpoint at step 6", len(cps), last)
	}
}

func TestPanickingNodeFailsTheRunWithItsStack(t *testing.T) {
	svc := newService(t)
	c := compile(t, graph.New[doc]().AddNode("plan", visit("plan")).
		AddNode("boom", func(context.Context, doc) (doc, error) { panic("model returned nothing") }).
		AddEdge(graph.START, "plan").AddEdge("plan", "boom").AddEdge("boom", graph.END))
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if !belay.IsCode(err, belay.CodeInternal) || !strings.Contains(err.Error(), `node "boom" panicked: model returned nothing`) {
		t.Fatalf("Run error = %v, want the panic as INTERNAL_ERROR", err)
	}
	if res.Status != graph.Failed || !slices.Equal(res.State.Steps, []string{"plan"}) {
		t.Fatalf("Run = %+v, want failed with the state before boom", res)
	}
	if st := sessionStatus(t, svc, res.RunID); st != belay.SessionFailed {
		t.Fatalf("session status = %s, want failed", st)
	}
	cps := checkpoints(t, svc, res.RunID)
	last := cps[len(cps)-1]
	if last.Type != belay.TypeError || last.Name != "boom" || !strings.Contains(last.Description, "graph_test.TestPanickingNode") ||
		!strings.Contains(last.Summary, "model returned nothing") {
		t.Fatalf("error checkpoint = %+v, want the message and the stack", last)
	}
}

func TestNodeErrorFailsTheRun(t *testing.T) {
	svc := newService(t)
	cause := errors.New("search is down")
	c := compile(t, graph.New[doc]().AddNode("search", func(context.Context, doc) (doc, error) { return doc{}, cause }).
		AddEdge(graph.START, "search").AddEdge("search", graph.END))
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if !errors.Is(err, cause) || res.Status != graph.Failed {
		t.Fatalf("Run = %+v, %v; want failed wrapping the node's error", res, err)
	}
	if _, err := c.Resume(ctx, svc, res.RunID, graph.Command{Resume: "x"}); !belay.IsCode(err, belay.CodeConflict) {
		t.Fatalf("Resume of a failed run = %v, want CONFLICT", err)
	}
}

func TestStateThatJSONCannotHoldNamesThePath(t *testing.T) {
	svc := newService(t)
	c := compile(t, graph.New[doc]().AddNode("tool", func(_ context.Context, s doc) (doc, error) {
		s.Extra = map[string]any{"sources": []any{"a", func() {}}}
		return s, nil
	}).AddEdge(graph.START, "tool").AddEdge("tool", graph.END))
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if !belay.IsCode(err, belay.CodeValidation) || !strings.Contains(err.Error(), "state.extra[sources][1]: func value") {
		t.Fatalf("Run error = %v, want the path of the func value", err)
	}
	if res.Status != graph.Failed {
		t.Fatalf("Run = %+v, want failed", res)
	}
	if _, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir(), State: doc{Extra: struct{ C chan int }{}}}); err == nil ||
		!strings.Contains(err.Error(), "state.extra.C: chan value") {
		t.Fatalf("Run with a bad input = %v, want the path of the chan", err)
	}
}

func TestInterruptOutsideANode(t *testing.T) {
	if _, err := graph.Interrupt[string](ctx, graph.InterruptRequest{}); !belay.IsCode(err, belay.CodeValidation) {
		t.Fatalf("Interrupt outside a node = %v, want VALIDATION_ERROR", err)
	}
}

func TestInvalidInterruptRequestFailsTheNode(t *testing.T) {
	svc := newService(t)
	c := reviewGraph(t, func(ctx context.Context, s doc) (doc, error) {
		_, err := graph.Interrupt[string](ctx, graph.InterruptRequest{Title: "late", DefaultAction: belay.ActionApprove})
		return s, err
	})
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if !belay.IsCode(err, belay.CodeValidation) || !strings.Contains(err.Error(), "needs a timeout") || res.Status != graph.Failed {
		t.Fatalf("Run = %+v, %v; want failed: a default action needs a timeout", res, err)
	}
}
