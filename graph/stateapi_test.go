package graph_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/graph"
	"github.com/belayhq/belay/internal/testclock"
	"github.com/belayhq/belay/store/sqlite"
)

func TestGetStateAndHistory(t *testing.T) {
	svc := newService(t)
	runs := 0
	c := reviewGraph(t, reviewNode(&runs, "Ship it?"))
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	st, err := c.GetState(ctx, svc, res.RunID)
	if err != nil {
		t.Fatalf("GetState: %v", err)
	}
	if !slices.Equal(st.Values.Steps, []string{"plan"}) || !slices.Equal(st.Next, []string{"review"}) || st.Step != 2 ||
		st.Status != belay.SessionAwaitingInput || st.Interrupt == nil || st.Interrupt.ID != res.Interrupt.ID || st.Interrupt.Node != "review" {
		t.Fatalf("GetState at the interrupt = %+v, want plan done, review next and pending", st)
	}
	if _, err := c.Resume(ctx, svc, res.RunID, graph.Command{Resume: "yes"}); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	st, err = c.GetState(ctx, svc, res.RunID)
	if err != nil || len(st.Next) != 0 || st.Status != belay.SessionCompleted || st.Interrupt != nil ||
		!slices.Equal(st.Values.Steps, []string{"plan", "review", "finalize"}) || st.Node != "finalize" {
		t.Fatalf("GetState at the end = %+v, %v; want completed with nothing next", st, err)
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		page, err := c.History(ctx, svc, res.RunID, graph.HistoryOptions{Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatalf("History: %v", err)
		}
		for _, s := range page.Items {
			line := s.Node + "→" + strings.Join(s.Next, ",")
			if s.Interrupt != nil {
				line += " (interrupt)"
			}
			got = append(got, line)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
		if pages > 5 {
			t.Fatal("History pages without end")
		}
	}
	want := []string{"finalize→", "review→finalize", "review→review (interrupt)", "plan→review", "__start__→plan"}
	if !slices.Equal(got, want) {
		t.Fatalf("History = %v, want newest first %v", got, want)
	}
}

func TestStaticBreakpoints(t *testing.T) {
	svc := newService(t)
	ran := map[string]int{}
	node := func(name string) graph.Node[doc] {
		return func(_ context.Context, s doc) (doc, error) {
			ran[name]++
			s.Steps = append(s.Steps, name)
			return s, nil
		}
	}
	g := func() *graph.Graph[doc] {
		return graph.New[doc]().AddNode("a", node("a")).AddNode("b", node("b")).AddNode("c", node("c")).
			AddEdge(graph.START, "a").AddEdge("a", "b").AddEdge("b", "c").AddEdge("c", graph.END)
	}
	if _, err := g().Compile(graph.InterruptBefore("nope")); !belay.IsCode(err, belay.CodeValidation) || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("Compile with a breakpoint at an unknown node = %v, want VALIDATION_ERROR naming it", err)
	}
	c := compile(t, g(), graph.InterruptAfter("a"), graph.InterruptBefore("c"))
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err != nil || res.Status != graph.Interrupted || res.Interrupt.Breakpoint != "after" || res.Interrupt.Node != "a" ||
		!slices.Equal(res.State.Steps, []string{"a"}) {
		t.Fatalf("Run = %+v, %v; want stopped after a", res, err)
	}
	if _, err := c.Resume(ctx, svc, res.RunID, graph.Command{Resume: "x"}); !belay.IsCode(err, belay.CodeValidation) {
		t.Fatalf("Resume of a breakpoint with a value = %v, want VALIDATION_ERROR", err)
	}
	res, err = c.Resume(ctx, svc, res.RunID, graph.Command{})
	if err != nil || res.Status != graph.Interrupted || res.Interrupt.Breakpoint != "before" || res.Interrupt.Node != "c" ||
		!slices.Equal(res.State.Steps, []string{"a", "b"}) {
		t.Fatalf("Resume = %+v, %v; want stopped before c", res, err)
	}
	// The state changes while the run waits; it still waits.
	st, err := c.UpdateState(ctx, svc, res.RunID, map[string]any{"notes": "edited"}, "")
	if err != nil || st.Values.Notes != "edited" || !slices.Equal(st.Next, []string{"c"}) || st.Interrupt == nil || st.Interrupt.ID != res.Interrupt.ID {
		t.Fatalf("UpdateState = %+v, %v; want the edit, still before c", st, err)
	}
	if s := sessionStatus(t, svc, res.RunID); s != belay.SessionAwaitingInput {
		t.Fatalf("session after UpdateState = %s, want awaiting_input", s)
	}
	// A person continues it with `belay decide`; Wait picks the decision up.
	if _, err := svc.Decide(ctx, belay.DecideInput{CheckpointID: res.Interrupt.ID, SelectedOption: "continue"}); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	res, err = c.Wait(ctx, svc, res.RunID)
	if err != nil || res.Status != graph.Completed || res.State.Notes != "edited" || !slices.Equal(res.State.Steps, []string{"a", "b", "c"}) {
		t.Fatalf("Wait = %+v, %v; want completed with the edit", res, err)
	}
	if ran["a"] != 1 || ran["b"] != 1 || ran["c"] != 1 {
		t.Fatalf("nodes ran %v, want each once", ran)
	}
}

func TestUpdateStateAsNode(t *testing.T) {
	svc := newService(t)
	runs := 0
	c := reviewGraph(t, reviewNode(&runs, "Ship it?"))
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := c.UpdateState(ctx, svc, res.RunID, map[string]any{"notes": "x"}, "nowhere"); !belay.IsCode(err, belay.CodeValidation) {
		t.Fatalf("UpdateState as an unknown node = %v, want VALIDATION_ERROR", err)
	}
	// The update stands in for review: the run goes on at finalize.
	st, err := c.UpdateState(ctx, svc, res.RunID, map[string]any{"answers": []string{"typed by hand"}}, "review")
	if err != nil || !slices.Equal(st.Next, []string{"finalize"}) || st.Interrupt != nil || st.Node != "review" || !st.Update {
		t.Fatalf("UpdateState as review = %+v, %v; want finalize next, no interrupt", st, err)
	}
	req, err := svc.GetCheckpoint(ctx, res.Interrupt.ID)
	if err != nil || req.Decision == nil {
		t.Fatalf("the interrupt's request after UpdateState = %+v, %v; want it answered", req, err)
	}
	res, err = c.Resume(ctx, svc, res.RunID, graph.Command{})
	if err != nil || res.Status != graph.Completed || !slices.Equal(res.State.Steps, []string{"plan", "finalize"}) ||
		!slices.Equal(res.State.Answers, []string{"typed by hand"}) {
		t.Fatalf("Resume = %+v, %v; want finalize after the update", res, err)
	}
	if runs != 1 {
		t.Fatalf("review ran %d times, want 1", runs)
	}
	if _, err := c.UpdateState(ctx, svc, res.RunID, map[string]any{"notes": "late"}, ""); !belay.IsCode(err, belay.CodeConflict) {
		t.Fatalf("UpdateState of a completed run = %v, want CONFLICT", err)
	}
}

// A timeout's default action decides the interrupt when no one does, and a
// runner waiting on the run resumes it with that decision.
func TestTimeoutDefaultActionResumesTheRun(t *testing.T) {
	clock := testclock.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), 0)
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	svc := core.New(core.Options{Store: db, Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() {
		svc.Close()
		db.Close()
	})
	var got graph.Decision
	c := reviewGraph(t, func(ctx context.Context, s doc) (doc, error) {
		d, err := graph.Interrupt[graph.Decision](ctx, graph.InterruptRequest{Title: "Ship it?", Timeout: time.Minute,
			DefaultAction: belay.ActionApprove, Options: []belay.HITLOption{
				{ID: "approved", Label: "Approve", Action: belay.ActionApprove, IsDefault: true},
				{ID: "refine", Label: "Refine", Action: belay.ActionRetry},
			}})
		if err != nil {
			return s, err
		}
		got = d
		return s, nil
	})
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err != nil || res.Status != graph.Interrupted {
		t.Fatalf("Run = %+v, %v; want interrupted", res, err)
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
		t.Fatalf("Wait returned %+v before the timeout", r)
	case <-time.After(50 * time.Millisecond):
	}
	clock.Advance(61 * time.Second)
	if n, err := svc.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want the timeout applied", n, err)
	}
	var r *graph.Result[doc]
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not resume the run after the timeout")
	}
	if r == nil || r.Status != graph.Completed || !got.Automatic || got.Action != belay.ActionApprove || got.Option != "approved" {
		t.Fatalf("Wait = %+v, node got %+v; want completed with the automatic approval", r, got)
	}
}

// A failed run forked back to the checkpoint before the failure runs again
// from there; the failed branch stays in its timeline.
func TestForkFromAPastCheckpoint(t *testing.T) {
	svc := newService(t)
	broken := true
	c := compile(t, graph.New[doc]().AddNode("plan", visit("plan")).
		AddNode("search", func(_ context.Context, s doc) (doc, error) {
			if broken {
				return s, errors.New("search is down")
			}
			s.Steps = append(s.Steps, "search")
			return s, nil
		}).AddNode("write", visit("write")).
		AddEdge(graph.START, "plan").AddEdge("plan", "search").AddEdge("search", "write").AddEdge("write", graph.END))
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err == nil || res.Status != graph.Failed {
		t.Fatalf("Run = %+v, %v; want failed in search", res, err)
	}
	page, err := c.History(ctx, svc, res.RunID, graph.HistoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var plan *graph.StateSnapshot[doc]
	for _, s := range page.Items {
		if s.Node == "plan" {
			plan = s
		}
	}
	if plan == nil || page.Items[0].Error == "" {
		t.Fatalf("History = %+v, want the error checkpoint first and plan's", page.Items)
	}
	broken = false
	st, err := c.Fork(ctx, svc, res.RunID, plan.CheckpointID)
	if err != nil || st.CheckpointID != plan.CheckpointID || !slices.Equal(st.Next, []string{"search"}) || st.Status != belay.SessionRunning {
		t.Fatalf("Fork = %+v, %v; want the run at plan, search next, running", st, err)
	}
	res, err = c.Resume(ctx, svc, res.RunID, graph.Command{})
	if err != nil || res.Status != graph.Completed || !slices.Equal(res.State.Steps, []string{"plan", "search", "write"}) {
		t.Fatalf("Resume after the fork = %+v, %v; want completed", res, err)
	}
	var search *belay.Checkpoint
	failures := 0
	for _, cp := range checkpoints(t, svc, res.RunID) {
		if cp.Name == "search" && cp.Type == belay.TypeAuto {
			search = cp
		}
		if cp.Type == belay.TypeError {
			failures++
		}
	}
	if search == nil || search.ParentID != plan.CheckpointID || failures != 1 {
		t.Fatalf("search's checkpoint = %+v with %d error checkpoints; want it on a branch from plan, the failure kept", search, failures)
	}
}

// Time travel from a completed run (LangGraph: invoke from a past
// checkpoint_id of a finished thread): forked back to its interrupt, the run
// is answered anew and runs on to END on a new branch; the first branch and
// its end are kept. An abandoned run is never forked.
func TestForkACompletedRun(t *testing.T) {
	svc := newService(t)
	flow := reviewFlow(t)
	res, err := flow.Run(ctx, svc, graph.RunInput[doc]{})
	if err != nil || res.Status != graph.Interrupted {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	ask := res.Interrupt.ID
	if res, err = flow.Resume(ctx, svc, res.RunID, graph.Command{Resume: "yes"}); err != nil || res.Status != graph.Completed {
		t.Fatalf("Resume = %+v, %v", res, err)
	}
	first := checkpoints(t, svc, res.RunID)

	st, err := flow.Fork(ctx, svc, res.RunID, ask)
	if err != nil || st.CheckpointID != ask || st.Status != belay.SessionRunning || st.Interrupt == nil || !slices.Equal(st.Next, []string{"review"}) {
		t.Fatalf("Fork = %+v, %v; want the run back at its interrupt, running", st, err)
	}
	again, err := flow.Resume(ctx, svc, res.RunID, graph.Command{Resume: "no"})
	if err != nil || again.Status != graph.Completed || !slices.Equal(again.State.Answers, []string{"no"}) ||
		!slices.Equal(again.State.Steps, []string{"plan", "finalize"}) {
		t.Fatalf("Resume after the fork = %+v, %v; want completed with the new answer", again, err)
	}
	if sess, err := svc.GetSession(ctx, res.RunID); err != nil || sess.Status != belay.SessionCompleted {
		t.Fatalf("session = %+v, %v; want completed again", sess, err)
	}
	all := checkpoints(t, svc, res.RunID)
	children := map[string][]string{}
	for _, cp := range all {
		children[cp.ParentID] = append(children[cp.ParentID], cp.Name)
	}
	// Both branches descend from the interrupt: the first run's review
	// step, and the fork's.
	if got := children[ask]; len(got) != 2 || got[0] != "review" || got[1] != "review" {
		t.Fatalf("children of the interrupt = %v, want two review steps; checkpoints %d before, %d after", got, len(first), len(all))
	}
	for _, cp := range first {
		if _, err := svc.GetCheckpoint(ctx, cp.ID); err != nil {
			t.Fatalf("checkpoint %s of the first branch: %v", cp.Name, err)
		}
	}

	dropped, err := flow.Run(ctx, svc, graph.RunInput[doc]{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.EndSession(ctx, belay.EndSessionInput{SessionID: dropped.RunID, Status: belay.SessionAbandoned}); err != nil {
		t.Fatal(err)
	}
	if _, err := flow.Fork(ctx, svc, dropped.RunID, dropped.Interrupt.ID); !belay.IsCode(err, belay.CodeConflict) {
		t.Fatalf("Fork of an abandoned run = %v, want CONFLICT", err)
	}
}

// review is a state with a tagged field, an untagged one and an embedded
// struct's promoted field.
type review struct {
	Verdict string `json:"verdict"`
	Count   int
	score
}

type score struct {
	Points int `json:"points"`
}

// Update keys are matched to the state's fields as encoding/json matches
// them, case-insensitively; a key that names no field is refused, naming
// it, and changes nothing.
func TestUpdateKeysMatchTheStateFields(t *testing.T) {
	svc := newService(t)
	flow, err := graph.New[review]().AddNode("ask", func(ctx context.Context, s review) (review, error) {
		_, err := graph.Interrupt[graph.Decision](ctx, graph.InterruptRequest{Title: "ok?"})
		return s, err
	}).AddEdge(graph.START, "ask").AddEdge("ask", graph.END).Compile()
	if err != nil {
		t.Fatal(err)
	}
	res, err := flow.Run(ctx, svc, graph.RunInput[review]{ProjectPath: t.TempDir(), State: review{Verdict: "orig"}})
	if err != nil || res.Status != graph.Interrupted {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	for _, tc := range []struct {
		name   string
		update any
		want   review
	}{
		{"the JSON name", map[string]any{"verdict": "lower"}, review{Verdict: "lower"}},
		{"the Go name", map[string]any{"Verdict": "Upper"}, review{Verdict: "Upper"}},
		{"another case", map[string]any{"VERDICT": "ALL"}, review{Verdict: "ALL"}},
		{"an untagged struct", struct{ Verdict string }{"x"}, review{Verdict: "x"}},
		{"an untagged field", map[string]any{"count": 2}, review{Verdict: "x", Count: 2}},
		{"a promoted field", map[string]any{"Points": 3}, review{Verdict: "x", Count: 2, score: score{Points: 3}}},
	} {
		st, err := flow.UpdateState(ctx, svc, res.RunID, tc.update, "")
		if err != nil || st.Values != tc.want {
			t.Fatalf("UpdateState with %s = %+v, %v; want %+v", tc.name, st, err, tc.want)
		}
	}
	kept := review{Verdict: "x", Count: 2, score: score{Points: 3}}
	for _, tc := range []struct {
		name   string
		update any
		key    string
	}{
		{"an unknown key", map[string]any{"nope": 1}, "nope"},
		{"one field twice", map[string]any{"verdict": "a", "Verdict": "b"}, "erdict"},
	} {
		_, err := flow.UpdateState(ctx, svc, res.RunID, tc.update, "")
		if !belay.IsCode(err, belay.CodeValidation) || !strings.Contains(err.Error(), tc.key) {
			t.Fatalf("UpdateState with %s = %v, want VALIDATION_ERROR naming %q", tc.name, err, tc.key)
		}
		if _, err := flow.Resume(ctx, svc, res.RunID, graph.Command{Resume: graph.Decision{Option: "approve"}, Update: tc.update}); !belay.IsCode(err, belay.CodeValidation) {
			t.Fatalf("Resume with an update of %s = %v, want VALIDATION_ERROR", tc.name, err)
		}
		if st, err := flow.GetState(ctx, svc, res.RunID); err != nil || st.Values != kept || st.Interrupt == nil {
			t.Fatalf("GetState after a refused update = %+v, %v; want %+v, still interrupted", st, err, kept)
		}
	}
	done, err := flow.Resume(ctx, svc, res.RunID, graph.Command{Resume: graph.Decision{Option: "approve"}, Update: map[string]any{"Verdict": "final"}})
	if err != nil || done.Status != graph.Completed || done.State.Verdict != "final" {
		t.Fatalf("Resume with an update = %+v, %v; want completed with verdict final", done, err)
	}
}

// A state that is a map takes any key.
func TestUpdateOfAMapStateTakesAnyKey(t *testing.T) {
	svc := newService(t)
	flow, err := graph.New[map[string]any]().AddNode("ask", func(ctx context.Context, s map[string]any) (map[string]any, error) {
		_, err := graph.Interrupt[graph.Decision](ctx, graph.InterruptRequest{Title: "ok?"})
		return s, err
	}).AddEdge(graph.START, "ask").AddEdge("ask", graph.END).Compile()
	if err != nil {
		t.Fatal(err)
	}
	res, err := flow.Run(ctx, svc, graph.RunInput[map[string]any]{ProjectPath: t.TempDir(), State: map[string]any{"verdict": "orig"}})
	if err != nil || res.Status != graph.Interrupted {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	st, err := flow.UpdateState(ctx, svc, res.RunID, map[string]any{"Verdict": "new", "anything": 1.0}, "")
	if err != nil || st.Values["verdict"] != "orig" || st.Values["Verdict"] != "new" || st.Values["anything"] != 1.0 {
		t.Fatalf("UpdateState = %+v, %v; want every key as given", st, err)
	}
}
