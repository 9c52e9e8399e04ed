package graph_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/graph"
)

func describe(ev graph.Event[doc]) string {
	s := string(ev.Type) + " " + ev.Node
	switch ev.Type {
	case graph.EventNodeEnd:
		s += fmt.Sprintf(" %v→%s", ev.State.Steps, ev.Next)
	case graph.EventCustom:
		s += fmt.Sprintf(" %s=%v", ev.Name, ev.Data)
	case graph.EventResult:
		s += string(ev.Result.Status)
	}
	return s
}

func TestStreamReportsEachNode(t *testing.T) {
	svc := newService(t)
	c := reviewGraph(t, func(ctx context.Context, s doc) (doc, error) {
		graph.Emit(ctx, "token", "thinking")
		a, err := graph.Interrupt[string](ctx, graph.InterruptRequest{Title: "ok?"})
		if err != nil {
			return s, err
		}
		s.Steps = append(s.Steps, "review:"+a)
		return s, nil
	})
	var got []string
	var runID string
	for ev, err := range c.Stream(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()}) {
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		if ev.Type == graph.EventNodeEnd && ev.CheckpointID == "" {
			t.Fatalf("node_end %+v names no checkpoint", ev)
		}
		runID = ev.RunID
		got = append(got, describe(ev))
	}
	want := []string{"node_start plan", "node_end plan [plan]→review", "node_start review", "custom review token=thinking",
		"interrupt review", "result interrupted"}
	if !slices.Equal(got, want) {
		t.Fatalf("events =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	got = nil
	for ev, err := range c.StreamResume(ctx, svc, runID, graph.Command{Resume: "yes"}) {
		if err != nil {
			t.Fatalf("StreamResume: %v", err)
		}
		got = append(got, describe(ev))
	}
	want = []string{"node_start review", "custom review token=thinking", "node_end review [plan review:yes]→finalize",
		"node_start finalize", "node_end finalize [plan review:yes finalize]→__end__", "result completed"}
	if !slices.Equal(got, want) {
		t.Fatalf("events after resume =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestStreamEndsWithTheRunsError(t *testing.T) {
	svc := newService(t)
	c := compile(t, graph.New[doc]().AddNode("boom", func(context.Context, doc) (doc, error) { return doc{}, fmt.Errorf("no model") }).
		AddEdge(graph.START, "boom").AddEdge("boom", graph.END))
	var last graph.Event[doc]
	var lastErr error
	for ev, err := range c.Stream(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()}) {
		last, lastErr = ev, err
	}
	if last.Type != graph.EventResult || last.Result == nil || last.Result.Status != graph.Failed || lastErr == nil ||
		!strings.Contains(lastErr.Error(), "no model") {
		t.Fatalf("last event = %+v, %v; want a failed result with the error", last, lastErr)
	}
}

// A consumer that stops reading cancels the run; it stays resumable and no
// completed node runs again.
func TestStoppingAStreamLeavesTheRunResumable(t *testing.T) {
	svc := newService(t)
	ran := map[string]int{}
	node := func(name string) graph.Node[doc] {
		return func(_ context.Context, s doc) (doc, error) {
			ran[name]++
			s.Steps = append(s.Steps, name)
			return s, nil
		}
	}
	c := compile(t, graph.New[doc]().AddNode("a", node("a")).AddNode("b", node("b")).
		AddEdge(graph.START, "a").AddEdge("a", "b").AddEdge("b", graph.END))
	var runID string
	for ev := range c.Stream(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()}) {
		runID = ev.RunID
		if ev.Type == graph.EventNodeEnd {
			break
		}
	}
	if st := sessionStatus(t, svc, runID); st != belay.SessionInterrupted {
		t.Fatalf("session after the consumer left = %s, want interrupted", st)
	}
	res, err := c.Resume(ctx, svc, runID, graph.Command{})
	if err != nil || res.Status != graph.Completed || !slices.Equal(res.State.Steps, []string{"a", "b"}) || ran["a"] != 1 || ran["b"] != 1 {
		t.Fatalf("Resume = %+v, %v, ran %v; want completed, each node once", res, err, ran)
	}
}
