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

// Draft is the state of the example's workflow.
type Draft struct {
	Topic    string `json:"topic"`
	Plan     string `json:"plan"`
	Verdict  string `json:"verdict"`
	Feedback string `json:"feedback"`
	Final    string `json:"final"`
}

// A three-node workflow pauses at review for a person: the run stops with an
// interrupt, a person decides it (here through the service, as `belay decide`
// would), and the run resumes — review runs again from its start, this time
// getting the decision — and finishes.
func Example() {
	dir, err := os.MkdirTemp("", "belay-graph-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := belay.WithActor(context.Background(), belay.Actor{UserID: "local", Admin: true})
	db, err := sqlite.Open(ctx, filepath.Join(dir, "belay.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	svc := core.New(core.Options{Store: db})
	defer svc.Close()

	flow, err := graph.New[Draft]().
		AddNode("plan", func(_ context.Context, d Draft) (Draft, error) {
			d.Plan = "outline for " + d.Topic
			return d, nil
		}).
		AddNode("review", func(ctx context.Context, d Draft) (Draft, error) {
			fmt.Println("review runs")
			decision, err := graph.Interrupt[graph.Decision](ctx, graph.InterruptRequest{
				Title: "Approve the plan?", Message: d.Plan,
				Options: []belay.HITLOption{
					{ID: "approved", Label: "Approve", Action: belay.ActionApprove, IsDefault: true},
					{ID: "refine", Label: "Refine", Action: belay.ActionRetry},
				},
			})
			if err != nil {
				return d, err // graph.ErrInterrupted: the run pauses here
			}
			d.Verdict, d.Feedback = decision.Option, decision.Feedback
			return d, nil
		}).
		AddNode("finalize", func(_ context.Context, d Draft) (Draft, error) {
			d.Final = d.Plan + ", " + d.Feedback
			return d, nil
		}).
		AddEdge(graph.START, "plan").
		AddEdge("plan", "review").
		AddEdge("review", "finalize").
		AddEdge("finalize", graph.END).
		Compile()
	if err != nil {
		log.Fatal(err)
	}

	res, err := flow.Run(ctx, svc, graph.RunInput[Draft]{ProjectPath: dir, Title: "write a post", State: Draft{Topic: "belay"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, "at", res.Interrupt.Node+":", res.Interrupt.Checkpoint.HITL.Title)

	// A person decides, from the CLI, the API or here.
	if _, err := svc.Decide(ctx, belay.DecideInput{CheckpointID: res.Interrupt.ID, SelectedOption: "approved", Feedback: "short please"}); err != nil {
		log.Fatal(err)
	}
	res, err = flow.Wait(ctx, svc, res.RunID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.State.Verdict+":", res.State.Final)
	// Output:
	// review runs
	// interrupted at review: Approve the plan?
	// review runs
	// completed approved: outline for belay, short please
}
