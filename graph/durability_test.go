package graph_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/graph"
)

// brokenStore fails every checkpoint save after the first ok ones.
type brokenStore struct {
	belay.Service
	ok    int32
	saves atomic.Int32
}

var errStoreDown = errors.New("store is down")

func (b *brokenStore) CreateCheckpoint(ctx context.Context, in belay.CreateCheckpointInput) (*belay.Checkpoint, error) {
	if b.saves.Add(1) > b.ok {
		return nil, errStoreDown
	}
	return b.Service.CreateCheckpoint(ctx, in)
}

func threeSteps(tb testing.TB, ran *[]string, opts ...graph.Option) *graph.Compiled[doc] {
	node := func(name string) graph.Node[doc] {
		return func(_ context.Context, s doc) (doc, error) {
			*ran = append(*ran, name)
			s.Steps = append(s.Steps, name)
			return s, nil
		}
	}
	return compile(tb, graph.New[doc]().AddNode("a", node("a")).AddNode("b", node("b")).AddNode("c", node("c")).
		AddEdge(graph.START, "a").AddEdge("a", "b").AddEdge("b", "c").AddEdge("c", graph.END), opts...)
}

func checkpointNames(tb testing.TB, svc belay.Service, runID string) []string {
	var names []string
	for _, cp := range checkpoints(tb, svc, runID) {
		names = append(names, cp.Name)
	}
	return names
}

func TestDurabilityModes(t *testing.T) {
	for _, tc := range []struct {
		mode graph.Durability
		want []string
	}{
		{graph.DurabilitySync, []string{"__start__", "a", "b", "c"}},
		{graph.DurabilityAsync, []string{"__start__", "a", "b", "c"}},
		{graph.DurabilityExit, []string{"__start__", "c"}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			svc := newService(t)
			var ran []string
			c := threeSteps(t, &ran, graph.WithDurability(tc.mode))
			res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
			if err != nil || res.Status != graph.Completed || !slices.Equal(res.State.Steps, []string{"a", "b", "c"}) {
				t.Fatalf("Run = %+v, %v", res, err)
			}
			if got := checkpointNames(t, svc, res.RunID); !slices.Equal(got, tc.want) {
				t.Fatalf("checkpoints = %v, want %v", got, tc.want)
			}
			st, err := c.GetState(ctx, svc, res.RunID)
			if err != nil || !slices.Equal(st.Values.Steps, []string{"a", "b", "c"}) {
				t.Fatalf("GetState = %+v, %v; want the final state stored", st, err)
			}
		})
	}
	if _, err := graph.New[doc]().AddNode("a", visit("a")).AddEdge(graph.START, "a").AddEdge("a", graph.END).
		Compile(graph.WithDurability("sometimes")); !belay.IsCode(err, belay.CodeValidation) {
		t.Fatalf("Compile with an unknown durability = %v, want VALIDATION_ERROR", err)
	}
}

// In sync mode a store that fails stops the run at once with its error:
// no node runs without its predecessor saved.
func TestStoreDownStopsTheRun(t *testing.T) {
	for _, mode := range []graph.Durability{graph.DurabilitySync, graph.DurabilityAsync} {
		t.Run(string(mode), func(t *testing.T) {
			svc := newService(t)
			broken := &brokenStore{Service: svc, ok: 1} // a; the input is saved with the session
			var ran []string
			c := threeSteps(t, &ran, graph.WithDurability(mode))
			res, err := c.Run(ctx, broken, graph.RunInput[doc]{ProjectPath: t.TempDir()})
			if !errors.Is(err, errStoreDown) || res != nil {
				t.Fatalf("Run = %+v, %v; want the store's error", res, err)
			}
			if mode == graph.DurabilitySync && !slices.Equal(ran, []string{"a", "b"}) {
				t.Fatalf("ran %v, want a and b only: c never runs after b's save failed", ran)
			}
			list, _ := svc.ListSessions(ctx, belay.ListSessionsInput{Limit: 1})
			runID := list.Items[0].ID
			if st := sessionStatus(t, svc, runID); st != belay.SessionInterrupted {
				t.Fatalf("session = %s, want interrupted, to be resumed", st)
			}
			if got := checkpointNames(t, svc, runID); !slices.Equal(got, []string{"__start__", "a"}) {
				t.Fatalf("checkpoints = %v, want the input and a", got)
			}
			// The store is back: the run goes on from a.
			ran = nil
			res, err = c.Resume(ctx, svc, runID, graph.Command{})
			if err != nil || res.Status != graph.Completed || !slices.Equal(res.State.Steps, []string{"a", "b", "c"}) || !slices.Equal(ran, []string{"b", "c"}) {
				t.Fatalf("Resume = %+v, %v, ran %v; want b and c", res, err, ran)
			}
		})
	}
}
