package graph_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/graph"
)

// unequal is START → a and START → b1 → b2, in parallel; then c after
// both branches, by a waiting edge from a and b2 (wait) or by an edge from
// each. review, when set, makes b2 ask a person first.
func unequal(wait, review bool) (*graph.Graph[doc], map[string]int) {
	ran := map[string]int{}
	var mu sync.Mutex
	count := func(name string) graph.Node[doc] {
		return func(ctx context.Context, s doc) (doc, error) {
			mu.Lock()
			ran[name]++
			mu.Unlock()
			if name == "b2" && review {
				answer, err := graph.Interrupt[string](ctx, graph.InterruptRequest{Title: "b2?"})
				if err != nil {
					return s, err
				}
				s.Answers = append(s.Answers, answer)
			}
			s.Steps = append(s.Steps, name)
			return s, nil
		}
	}
	g := graph.New[doc]().AddNode("a", count("a")).AddNode("b1", count("b1")).AddNode("b2", count("b2")).AddNode("c", count("c")).
		AddEdge(graph.START, "a").AddEdge(graph.START, "b1").AddEdge("b1", "b2").AddEdge("c", graph.END)
	if wait {
		g.AddWaitingEdge([]string{"a", "b2"}, "c")
	} else {
		g.AddEdge("a", "c").AddEdge("b2", "c")
	}
	return g, ran
}

// LangGraph: add_edge(["a", "b2"], "c") runs c once, after both a and b2,
// however many steps apart they complete; an edge from each runs c once per
// step either completes in.
func TestWaitingEdgeRunsItsTargetOnceAfterAllSources(t *testing.T) {
	svc := newService(t)
	g, ran := unequal(true, false)
	res, err := compile(t, g, graph.WithReducer("steps", graph.Append[string])).Run(ctx, svc, graph.RunInput[doc]{})
	if err != nil || res.Status != graph.Completed {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if want := []string{"a", "b1", "b2", "c"}; !slices.Equal(res.State.Steps, want) || ran["c"] != 1 || res.Steps != 3 {
		t.Fatalf("steps %v in %d steps, c ran %d times; want %v in 3, c once", res.State.Steps, res.Steps, ran["c"], want)
	}
	var names []string
	for _, cp := range checkpoints(t, svc, res.RunID) {
		names = append(names, cp.Name)
	}
	if want := []string{"__start__", "a+b1", "b2", "c"}; !slices.Equal(names, want) {
		t.Fatalf("checkpoints %v, want %v", names, want)
	}

	g, ran = unequal(false, false)
	res, err = compile(t, g, graph.WithReducer("steps", graph.Append[string])).Run(ctx, svc, graph.RunInput[doc]{})
	if err != nil || res.Status != graph.Completed || ran["c"] != 2 {
		t.Fatalf("with an edge from each source: %+v, %v, c ran %d times; want twice", res, err, ran["c"])
	}
}

// The sources that completed are saved with the run: a run that pauses
// between them, resumed by another process (another Compiled), still runs
// the target once the last source completes — and only then.
func TestWaitingEdgeSurvivesAnInterrupt(t *testing.T) {
	svc := newService(t)
	g, _ := unequal(true, true)
	res, err := compile(t, g, graph.WithReducer("steps", graph.Append[string])).Run(ctx, svc, graph.RunInput[doc]{})
	if err != nil || res.Status != graph.Interrupted || res.Interrupt.Node != "b2" {
		t.Fatalf("Run = %+v, %v; want interrupted at b2", res, err)
	}
	g, ran := unequal(true, true)
	other := compile(t, g, graph.WithReducer("steps", graph.Append[string]))
	res, err = other.Resume(ctx, svc, res.RunID, graph.Command{Resume: "ok"})
	if err != nil || res.Status != graph.Completed {
		t.Fatalf("Resume = %+v, %v", res, err)
	}
	if want := []string{"a", "b1", "b2", "c"}; !slices.Equal(res.State.Steps, want) || ran["c"] != 1 || ran["a"] != 0 {
		t.Fatalf("after the resume: steps %v, ran %v; want %v, c once, a not again", res.State.Steps, ran, want)
	}
}

func TestWaitingEdgeIsValidated(t *testing.T) {
	base := func() *graph.Graph[doc] {
		return graph.New[doc]().AddNode("a", visit("a")).AddNode("b", visit("b")).AddNode("c", visit("c")).
			AddEdge(graph.START, "a").AddEdge(graph.START, "b").AddEdge("c", graph.END)
	}
	for _, c := range []struct {
		name  string
		g     *graph.Graph[doc]
		inErr string
	}{
		{"unknown source", base().AddWaitingEdge([]string{"a", "b", "x"}, "c"), `waiting edge to "c" from unknown node "x"`},
		{"unknown target", base().AddWaitingEdge([]string{"a", "b"}, "y").AddEdge("a", "c"), `waiting edge from [a b] to unknown node "y"`},
		{"START as a source", base().AddWaitingEdge([]string{graph.START, "a"}, "c"), "never completes"},
		{"a source twice", base().AddWaitingEdge([]string{"a", "a"}, "c"), `names "a" twice`},
		{"added twice", base().AddWaitingEdge([]string{"a", "b"}, "c").AddWaitingEdge([]string{"b", "a"}, "c"), "added twice"},
		{"no source", base().AddWaitingEdge(nil, "c"), "names no source"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.g.Compile()
			if !belay.IsCode(err, belay.CodeValidation) || !strings.Contains(err.Error(), c.inErr) {
				t.Fatalf("Compile = %v, want a VALIDATION_ERROR with %q", err, c.inErr)
			}
		})
	}
	if _, err := base().AddWaitingEdge([]string{"a", "b"}, "c").Compile(); err != nil {
		t.Fatalf("a node whose only way out is a waiting edge: %v", err)
	}
}
