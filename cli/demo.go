package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/examples/research"
	"github.com/belayhq/belay/graph"
)

func (a *app) demoCommand() *cobra.Command {
	var topic string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a research workflow that pauses for your decision",
		Long: `Run a research workflow (plan_research → search → synthesize →
await_approval → generate_ideas) on an offline model, as a session of the
current directory. It pauses at await_approval with the trends and three
options; decide in another terminal with 'belay decide' (or through the API):
approved goes on to the ideas, refine plans again with your --feedback,
restart starts over. The demo waits for each decision and ends when the
session is completed.

A demo stopped while it waited (Ctrl-C) is continued by the next 'belay demo'
of the same topic in the same directory, whether the decision was made
meanwhile or not.`,
		Example: `  belay demo --topic "AI coding agents"
  belay decide --option refine --feedback "open source only"   # in another terminal`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			dir, err := a.cwd()
			if err != nil {
				return err
			}
			flow, err := research.New(research.Offline{})
			if err != nil {
				return err
			}
			out := a.env.Stdout
			title := "research: " + topic
			runID, snap, err := stoppedDemo(ctx, svc, flow, dir, title)
			if err != nil {
				return err
			}
			var res *graph.Result[research.State]
			if runID != "" {
				fmt.Fprintf(out, "Continuing session %s, which stopped while it waited for a decision.\n", runID)
				if p := snap.Interrupt; p != nil && p.Checkpoint.Decision == nil {
					printDemoRound(out, topic, runID, snap.Values, p)
				}
				res, err = flow.Wait(ctx, svc, runID)
			} else {
				res, err = flow.Run(ctx, svc, graph.RunInput[research.State]{ProjectPath: dir, Title: title,
					State: research.State{Topic: topic}})
			}
			for err == nil && res.Status == graph.Interrupted {
				printDemoRound(out, topic, res.RunID, res.State, res.Interrupt)
				res, err = flow.Wait(ctx, svc, res.RunID)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "Session %s %s after %d steps. Ideas:\n", res.RunID, res.Status, res.Steps)
			for _, idea := range res.State.Ideas {
				fmt.Fprintf(out, "  - %s\n", idea)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "AI agents", "what to research")
	return cmd
}

// stoppedDemo finds the demo's run that a stopped 'belay demo' left in dir:
// the newest session there of the caller's own, titled as the demo
// titles a run of this topic, not ended, its newest checkpoint one of the
// workflow's — whatever other sessions began there since. It returns the
// run's id and where it stands, or "" when there is none.
func stoppedDemo(ctx context.Context, svc belay.Service, flow *graph.Compiled[research.State], dir, title string) (string, *graph.StateSnapshot[research.State], error) {
	in := belay.ListSessionsInput{ProjectPath: dir, Limit: belay.MaxListLimit}
	for {
		list, err := svc.ListSessions(ctx, in)
		if err != nil {
			return "", nil, err
		}
		for _, sess := range list.Items {
			if sess.Title != title || !sess.Status.Open() || sess.HeadCheckpointID == "" {
				continue
			}
			whole, err := svc.GetSession(ctx, sess.ID)
			if err != nil {
				return "", nil, err
			}
			if whole.Access == nil || !whole.Access.Own {
				continue // another's run, even one shared with the caller: not this demo's
			}
			snap, err := flow.GetState(ctx, svc, sess.ID)
			if belay.IsCode(err, belay.CodeConflict) {
				continue // not a run of the workflow
			}
			if err != nil {
				return "", nil, err
			}
			return sess.ID, snap, nil
		}
		if list.NextCursor == "" {
			return "", nil, nil
		}
		in.Cursor = list.NextCursor
	}
}

// printDemoRound shows a round's trends and how to decide on them.
func printDemoRound(out io.Writer, topic, runID string, state research.State, p *graph.Pending) {
	fmt.Fprintf(out, "Round %d: %d trends on %s\n", state.Rounds, len(state.Trends), topic)
	for _, t := range state.Trends {
		fmt.Fprintf(out, "  - %s (%s confidence)\n", t.Title, t.Confidence)
	}
	fmt.Fprintf(out, "Waiting for a decision on checkpoint #%d (session %s):\n", p.Checkpoint.Seq, runID)
	for _, o := range research.Options {
		fmt.Fprintf(out, "  belay decide %s --option %s   %s\n", p.ID, o.ID, o.Description)
	}
}
