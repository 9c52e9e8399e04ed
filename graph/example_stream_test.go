package graph_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/graph"
	"github.com/belayhq/belay/store/sqlite"
)

// exampleService opens a throwaway belay in dir.
func exampleService(dir string) (context.Context, *core.Service, func()) {
	ctx := belay.WithActor(context.Background(), belay.Actor{UserID: "local", Admin: true})
	db, err := sqlite.Open(ctx, filepath.Join(dir, "belay.db"))
	if err != nil {
		log.Fatal(err)
	}
	svc := core.New(core.Options{Store: db})
	return ctx, svc, func() { svc.Close(); db.Close() }
}

// Research is the state of the parallel example.
type Research struct {
	Topic    string   `json:"topic"`
	Findings []string `json:"findings"`
	Summary  string   `json:"summary"`
}

// Two searches run in parallel after plan; WithReducer appends what each
// found, and summarize runs once both are done. Stream reports every node as
// it starts and ends.
func ExampleCompiled_Stream() {
	dir, _ := os.MkdirTemp("", "belay-graph-example-")
	defer os.RemoveAll(dir)
	ctx, svc, done := exampleService(dir)
	defer done()

	search := func(source string) graph.Node[Research] {
		return func(ctx context.Context, r Research) (Research, error) {
			graph.Emit(ctx, "progress", "searching "+source)
			r.Findings = append(r.Findings, source+" on "+r.Topic)
			return r, nil
		}
	}
	flow, err := graph.New[Research]().
		AddNode("plan", func(_ context.Context, r Research) (Research, error) { return r, nil }).
		AddNode("web", search("web")).
		AddNode("papers", search("papers")).
		AddNode("summarize", func(_ context.Context, r Research) (Research, error) {
			r.Summary = fmt.Sprintf("%d findings", len(r.Findings))
			return r, nil
		}).
		AddEdge(graph.START, "plan").
		AddEdge("plan", "web").AddEdge("plan", "papers").           // fan out
		AddEdge("web", "summarize").AddEdge("papers", "summarize"). // fan in
		AddEdge("summarize", graph.END).
		Compile(graph.WithReducer("findings", graph.Append[string]))
	if err != nil {
		log.Fatal(err)
	}
	for ev, err := range flow.Stream(ctx, svc, graph.RunInput[Research]{ProjectPath: dir, State: Research{Topic: "agents"}}) {
		if err != nil {
			log.Fatal(err)
		}
		switch ev.Type {
		case graph.EventNodeEnd:
			fmt.Println("done:", ev.Node)
		case graph.EventResult:
			fmt.Println(ev.Result.Status, ev.Result.State.Findings, ev.Result.State.Summary)
		}
	}
	// Output:
	// done: plan
	// done: web
	// done: papers
	// done: summarize
	// completed [web on agents papers on agents] 2 findings
}

// A static breakpoint stops the run before publish; UpdateState edits the
// state while it waits, and Resume goes on.
func ExampleCompiled_UpdateState() {
	dir, _ := os.MkdirTemp("", "belay-graph-example-")
	defer os.RemoveAll(dir)
	ctx, svc, done := exampleService(dir)
	defer done()

	flow, err := graph.New[Draft]().
		AddNode("plan", func(_ context.Context, d Draft) (Draft, error) {
			d.Plan = "outline for " + d.Topic
			return d, nil
		}).
		AddNode("publish", func(_ context.Context, d Draft) (Draft, error) {
			d.Final = d.Plan
			return d, nil
		}).
		AddEdge(graph.START, "plan").AddEdge("plan", "publish").AddEdge("publish", graph.END).
		Compile(graph.InterruptBefore("publish"))
	if err != nil {
		log.Fatal(err)
	}
	res, err := flow.Run(ctx, svc, graph.RunInput[Draft]{ProjectPath: dir, State: Draft{Topic: "belay"}})
	if err != nil {
		log.Fatal(err)
	}
	st, err := flow.GetState(ctx, svc, res.RunID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, "before", st.Next, "with plan:", st.Values.Plan)
	if _, err := flow.UpdateState(ctx, svc, res.RunID, map[string]any{"plan": "a shorter outline"}, ""); err != nil {
		log.Fatal(err)
	}
	res, err = flow.Resume(ctx, svc, res.RunID, graph.Command{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, "with final:", res.State.Final)
	// Output:
	// interrupted before [publish] with plan: outline for belay
	// completed with final: a shorter outline
}
