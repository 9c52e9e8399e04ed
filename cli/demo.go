package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/belayhq/belay/examples/research"
	"github.com/belayhq/belay/graph"
)

func (a *app) demoCommand() *cobra.Command {
	var topic string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a research workflow that pauses for your decision",
		Long: `Run seed 001's research workflow (plan_research → search → synthesize →
await_approval → generate_ideas) on an offline model, as a session of the
current directory. It pauses at await_approval with the trends and three
options; decide in another terminal with 'belay decide' (or through the API):
approved goes on to the ideas, refine plans again with your --feedback,
restart starts over. The demo waits for each decision and ends when the
session is completed.`,
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
			res, err := flow.Run(ctx, svc, graph.RunInput[research.State]{ProjectPath: dir, Title: "research: " + topic,
				State: research.State{Topic: topic}})
			for err == nil && res.Status == graph.Interrupted {
				fmt.Fprintf(out, "Round %d: %d trends on %s\n", res.State.Rounds, len(res.State.Trends), topic)
				for _, t := range res.State.Trends {
					fmt.Fprintf(out, "  - %s (%s confidence)\n", t.Title, t.Confidence)
				}
				fmt.Fprintf(out, "Waiting for a decision on checkpoint #%d (session %s):\n", res.Interrupt.Checkpoint.Seq, res.RunID)
				for _, o := range research.Options {
					fmt.Fprintf(out, "  belay decide %s --option %s   %s\n", res.Interrupt.ID, o.ID, o.Description)
				}
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
