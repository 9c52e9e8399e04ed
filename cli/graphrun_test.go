package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/graph"
)

// draft is the state of TestCheckpointsTreeShowsAForkedGraphRun's graph.
type draft struct {
	Steps  []string `json:"steps"`
	Answer string   `json:"answer,omitempty"`
}

// TestCheckpointsTreeShowsAForkedGraphRun: a graph run that completed,
// forked back to its interrupt and answered anew, completes again on a new
// branch; `belay checkpoints --tree` shows both branches under the
// interrupt.
func TestCheckpointsTreeShowsAForkedGraphRun(t *testing.T) {
	c := newHITLCLI(t)
	flow := draftFlow(t)
	res, err := flow.Run(hitlAgent, c.svc, graph.RunInput[draft]{ProjectPath: c.dir})
	if err != nil {
		t.Fatal(err)
	}
	ask := res.Interrupt.Checkpoint
	if res, err = flow.Resume(hitlAgent, c.svc, res.RunID, graph.Command{Resume: "yes"}); err != nil || res.Status != graph.Completed {
		t.Fatalf("Resume = %+v, %v", res, err)
	}
	if _, err := flow.Fork(hitlAgent, c.svc, res.RunID, ask.ID); err != nil {
		t.Fatal(err)
	}
	if res, err = flow.Resume(hitlAgent, c.svc, res.RunID, graph.Command{Resume: "no"}); err != nil || res.Status != graph.Completed || res.State.Answer != "no" {
		t.Fatalf("Resume after the fork = %+v, %v", res, err)
	}

	out := c.ok(t, nil, "checkpoints", "--tree", "--session", res.RunID)
	t.Logf("belay checkpoints --tree:\n%s", out)
	if !strings.Contains(out, "completed") {
		t.Errorf("the tree's session line does not say completed:\n%s", out)
	}
	type node struct {
		Seq      int64  `json:"seq"`
		Name     string `json:"name"`
		Head     bool   `json:"head"`
		Children []node `json:"children"`
	}
	var roots []node
	if err := json.Unmarshal([]byte(c.ok(t, nil, "checkpoints", "--tree", "--session", res.RunID, "--json")), &roots); err != nil {
		t.Fatal(err)
	}
	var find func([]node) *node
	find = func(ns []node) *node {
		for i := range ns {
			if ns[i].Seq == ask.Seq {
				return &ns[i]
			}
			if n := find(ns[i].Children); n != nil {
				return n
			}
		}
		return nil
	}
	at := find(roots)
	if at == nil || len(at.Children) != 2 {
		t.Fatalf("the interrupt #%d has %+v, want two branches", ask.Seq, at)
	}
	for i, b := range at.Children {
		if b.Name != "review" || len(b.Children) != 1 || b.Children[0].Name != "finalize" {
			t.Errorf("branch %d = %+v, want review then finalize", i, b)
		}
	}
	if !at.Children[1].Children[0].Head {
		t.Errorf("the head is not the new branch's finalize: %+v", at.Children[1])
	}
}

// draftFlow is plan → review (an interrupt) → finalize.
func draftFlow(t *testing.T) *graph.Compiled[draft] {
	step := func(name string) graph.Node[draft] {
		return func(_ context.Context, d draft) (draft, error) {
			d.Steps = append(d.Steps, name)
			return d, nil
		}
	}
	flow, err := graph.New[draft]().AddNode("plan", step("plan")).
		AddNode("review", func(ctx context.Context, d draft) (draft, error) {
			answer, err := graph.Interrupt[string](ctx, graph.InterruptRequest{Title: "Go on?"})
			if err != nil {
				return d, err
			}
			d.Answer = answer
			return d, nil
		}).
		AddNode("finalize", step("finalize")).
		AddEdge(graph.START, "plan").AddEdge("plan", "review").AddEdge("review", "finalize").AddEdge("finalize", graph.END).
		Compile()
	if err != nil {
		t.Fatal(err)
	}
	return flow
}

// TestWatchShowsAGraphRun: `belay watch` prints a graph run's events from
// its session's log as they come.
func TestWatchShowsAGraphRun(t *testing.T) {
	c := newHITLCLI(t)
	flow := draftFlow(t)
	res, err := flow.Run(hitlAgent, c.svc, graph.RunInput[draft]{ProjectPath: c.dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, done := c.start(ctx, nil, "watch", "--after", "0", "--session", res.RunID, "--type", belay.EventGraphNodeEnd,
		"--type", belay.EventGraphInterrupt, "--type", belay.EventGraphResult)
	r.stdout.waitFor(t, "graph.result")
	if _, err := flow.Resume(hitlAgent, c.svc, res.RunID, graph.Command{Resume: "yes"}); err != nil {
		t.Fatal(err)
	}
	r.stdout.waitFor(t, "completed")
	cancel()
	<-done
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(r.stdout.String()), "\n") {
		f := strings.Fields(l)
		lines = append(lines, f[2]+" "+strings.Join(f[4:], " "))
	}
	want := []string{
		"graph.node_end plan (step 1) → review",
		"graph.interrupt review (step 2)",
		"graph.result interrupted",
		"graph.node_end review (step 2) → finalize",
		"graph.node_end finalize (step 3) → __end__",
		"graph.result completed",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("belay watch printed\n%s\nwant (type, description)\n%s", r.stdout.String(), strings.Join(want, "\n"))
	}
}
