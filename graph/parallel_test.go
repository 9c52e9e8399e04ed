package graph_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/graph"
)

// fanOut is plan → (b, c in parallel) → join → END, counting executions.
func fanOut(b, c graph.Node[doc]) (*graph.Graph[doc], map[string]int, *sync.Mutex) {
	ran := map[string]int{}
	var mu sync.Mutex
	count := func(name string, fn graph.Node[doc]) graph.Node[doc] {
		return func(ctx context.Context, s doc) (doc, error) {
			mu.Lock()
			ran[name]++
			mu.Unlock()
			return fn(ctx, s)
		}
	}
	g := graph.New[doc]().AddNode("plan", count("plan", visit("plan"))).AddNode("b", count("b", b)).AddNode("c", count("c", c)).
		AddNode("join", count("join", visit("join"))).
		AddEdge(graph.START, "plan").AddEdge("plan", "b").AddEdge("plan", "c").
		AddEdge("b", "join").AddEdge("c", "join").AddEdge("join", graph.END)
	return g, ran, &mu
}

func TestParallelBranchesRunTogetherAndMergeWithReducers(t *testing.T) {
	svc := newService(t)
	bIn, cIn := make(chan struct{}), make(chan struct{})
	// Each branch waits until the other has started: run one after the
	// other, they would never finish.
	meet := func(mine, theirs chan struct{}) error {
		close(mine)
		select {
		case <-theirs:
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("the sibling branch never started alongside")
		}
	}
	g, ran, _ := fanOut(func(_ context.Context, s doc) (doc, error) {
		if err := meet(bIn, cIn); err != nil {
			return s, err
		}
		s.Steps = append(s.Steps, "b")
		s.Notes = "from b"
		return s, nil
	}, func(_ context.Context, s doc) (doc, error) {
		if err := meet(cIn, bIn); err != nil {
			return s, err
		}
		s.Steps = append(s.Steps, "c")
		s.Count = 5
		return s, nil
	})
	c := compile(t, g, graph.WithReducer("steps", graph.Append[string]))
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Status != graph.Completed || !slices.Equal(res.State.Steps, []string{"plan", "b", "c", "join"}) ||
		res.State.Notes != "from b" || res.State.Count != 5 || res.Steps != 3 {
		t.Fatalf("Run = %+v, want both branches' writes merged, then join", res)
	}
	if ran["join"] != 1 {
		t.Fatalf("join ran %d times, want once after both branches", ran["join"])
	}
	var names []string
	for _, cp := range checkpoints(t, svc, res.RunID) {
		names = append(names, cp.Name)
	}
	if want := []string{"__start__", "plan", "b+c", "join"}; !slices.Equal(names, want) {
		t.Fatalf("checkpoints = %v, want %v", names, want)
	}
}

func TestParallelWritesWithoutAReducerFailTheStep(t *testing.T) {
	svc := newService(t)
	g, _, _ := fanOut(visit("b"), visit("c"))
	c := compile(t, g)
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if !belay.IsCode(err, belay.CodeValidation) || !strings.Contains(err.Error(), `both write "steps"`) ||
		!strings.Contains(err.Error(), "WithReducer") || res.Status != graph.Failed {
		t.Fatalf("Run = %+v, %v; want failed: two branches write steps with no reducer", res, err)
	}
	if _, err := graph.New[doc]().AddNode("a", visit("a")).AddEdge(graph.START, "a").AddEdge("a", graph.END).
		Compile(graph.WithReducer("nope", graph.Append[string])); !belay.IsCode(err, belay.CodeValidation) || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("Compile with a reducer of an unknown field = %v, want VALIDATION_ERROR", err)
	}
}

// A branch that pauses keeps its sibling's completed write: resuming runs
// only the paused branch again.
func TestInterruptInABranchKeepsTheSiblingsWrite(t *testing.T) {
	svc := newService(t)
	g, ran, mu := fanOut(func(ctx context.Context, s doc) (doc, error) {
		a, err := graph.Interrupt[string](ctx, graph.InterruptRequest{Title: "b?"})
		if err != nil {
			return s, err
		}
		s.Steps = append(s.Steps, "b:"+a)
		return s, nil
	}, func(_ context.Context, s doc) (doc, error) {
		s.Steps = append(s.Steps, "c")
		s.Count = 9
		return s, nil
	})
	c := compile(t, g, graph.WithReducer("steps", graph.Append[string]))
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err != nil || res.Status != graph.Interrupted || res.Interrupt.Node != "b" {
		t.Fatalf("Run = %+v, %v; want paused in b", res, err)
	}
	st, err := c.GetState(ctx, svc, res.RunID)
	if err != nil || !slices.Equal(st.Next, []string{"b", "c"}) {
		t.Fatalf("GetState = %+v, %v; want b and c next", st, err)
	}
	// The update applies under the kept write: c did not write notes.
	res, err = c.Resume(ctx, svc, res.RunID, graph.Command{Resume: "yes", Update: map[string]any{"notes": "edited"}})
	if err != nil || res.Status != graph.Completed || !slices.Equal(res.State.Steps, []string{"plan", "b:yes", "c", "join"}) ||
		res.State.Count != 9 || res.State.Notes != "edited" {
		t.Fatalf("Resume = %+v, %v; want completed with both branches and the update", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if ran["b"] != 2 || ran["c"] != 1 || ran["join"] != 1 {
		t.Fatalf("ran %v, want b twice (it paused), c and join once", ran)
	}
}

// Parallel branches that pause together are resumed with a value each, by
// interrupt id; a plain value or an unknown id is refused.
func TestParallelInterruptsResumedWithAMap(t *testing.T) {
	svc := newService(t)
	ask := func(name string) graph.Node[doc] {
		return func(ctx context.Context, s doc) (doc, error) {
			a, err := graph.Interrupt[string](ctx, graph.InterruptRequest{Title: name + "?"})
			if err != nil {
				return s, err
			}
			s.Steps = append(s.Steps, name+":"+a)
			return s, nil
		}
	}
	g, ran, mu := fanOut(ask("b"), ask("c"))
	c := compile(t, g, graph.WithReducer("steps", graph.Append[string]))
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err != nil || res.Status != graph.Interrupted || len(res.Interrupts) != 2 || res.Interrupts[0].Node != "b" || res.Interrupts[1].Node != "c" {
		t.Fatalf("Run = %+v, %v; want paused in b and c", res, err)
	}
	b, cc := res.Interrupts[0].ID, res.Interrupts[1].ID
	st, err := c.GetState(ctx, svc, res.RunID)
	if err != nil || len(st.Interrupts) != 2 || st.Interrupts[0].ID != b || st.Interrupts[1].ID != cc {
		t.Fatalf("GetState = %+v, %v; want both interrupts", st, err)
	}
	for _, tc := range []struct {
		name string
		cmd  graph.Command
		code belay.Code
	}{
		{"one plain value", graph.Command{Resume: "yes"}, belay.CodeValidation},
		{"unknown id", graph.Command{Resumes: map[string]any{b: "yes", "0195f0a0-0000-7000-8000-000000000000": "x"}}, belay.CodeValidation},
		{"one left undecided", graph.Command{Resumes: map[string]any{b: "yes"}}, belay.CodeConflict},
	} {
		if _, err := c.Resume(ctx, svc, res.RunID, tc.cmd); belay.ErrorCode(err) != tc.code {
			t.Fatalf("Resume with %s = %v, want %s", tc.name, err, tc.code)
		}
	}
	res, err = c.Resume(ctx, svc, res.RunID, graph.Command{Resumes: map[string]any{b: "yes", cc: "no"}})
	if err != nil || res.Status != graph.Completed || !slices.Equal(res.State.Steps, []string{"plan", "b:yes", "c:no", "join"}) {
		t.Fatalf("Resume = %+v, %v; want both answers merged, then join", res, err)
	}
	for _, id := range []string{b, cc} {
		if cp, err := svc.GetCheckpoint(ctx, id); err != nil || cp.Decision == nil {
			t.Fatalf("request %s after Resume = %+v, %v; want it answered", id, cp, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if ran["b"] != 2 || ran["c"] != 2 || ran["join"] != 1 {
		t.Fatalf("ran %v, want b and c twice, join once", ran)
	}
}
