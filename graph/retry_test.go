package graph_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/graph"
)

func flaky(fails int, attempts *int, waits *[]time.Time) graph.Node[doc] {
	return func(_ context.Context, s doc) (doc, error) {
		*attempts++
		*waits = append(*waits, time.Now())
		s.Steps = append(s.Steps, "flaky") // discarded when the attempt fails
		if *attempts <= fails {
			return s, errors.New("model overloaded")
		}
		return s, nil
	}
}

func TestRetryPolicyRunsAFailedNodeAgainWithBackoff(t *testing.T) {
	svc := newService(t)
	attempts := 0
	var at []time.Time
	pol := graph.RetryPolicy{MaxAttempts: 3, InitialInterval: 20 * time.Millisecond, BackoffFactor: 3}
	c := compile(t, graph.New[doc]().AddNode("flaky", flaky(2, &attempts, &at)).AddNode("next", visit("next")).
		AddEdge(graph.START, "flaky").AddEdge("flaky", "next").AddEdge("next", graph.END), graph.WithRetry(pol, "flaky"))
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err != nil || res.Status != graph.Completed || !slices.Equal(res.State.Steps, []string{"flaky", "next"}) || attempts != 3 {
		t.Fatalf("Run = %+v, %v after %d attempts; want completed on the third, each attempt from a fresh state", res, err, attempts)
	}
	if first, second := at[1].Sub(at[0]), at[2].Sub(at[1]); first < 20*time.Millisecond || second < 60*time.Millisecond {
		t.Fatalf("waits %s then %s, want at least 20ms then 60ms", first, second)
	}

	attempts, at = 0, nil
	c = compile(t, graph.New[doc]().AddNode("flaky", flaky(5, &attempts, &at)).
		AddEdge(graph.START, "flaky").AddEdge("flaky", graph.END), graph.WithRetry(graph.RetryPolicy{MaxAttempts: 2}))
	res, err = c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "model overloaded") || res.Status != graph.Failed || attempts != 2 {
		t.Fatalf("Run = %+v, %v after %d attempts; want failed after 2", res, err, attempts)
	}

	attempts, at = 0, nil
	c = compile(t, graph.New[doc]().AddNode("flaky", flaky(5, &attempts, &at)).
		AddEdge(graph.START, "flaky").AddEdge("flaky", graph.END),
		graph.WithRetry(graph.RetryPolicy{MaxAttempts: 5, RetryOn: func(err error) bool { return false }}))
	if _, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()}); err == nil || attempts != 1 {
		t.Fatalf("Run with RetryOn refusing = %v after %d attempts; want 1", err, attempts)
	}
	if _, err := graph.New[doc]().AddNode("a", visit("a")).AddEdge(graph.START, "a").AddEdge("a", graph.END).
		Compile(graph.WithRetry(graph.RetryPolicy{MaxAttempts: 0}), graph.WithRetry(graph.DefaultRetryPolicy, "zz")); !belay.IsCode(err, belay.CodeValidation) ||
		!strings.Contains(err.Error(), "MaxAttempts") || !strings.Contains(err.Error(), `"zz"`) {
		t.Fatalf("Compile with bad retry policies = %v, want both named", err)
	}
}
