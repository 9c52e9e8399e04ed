package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/belayhq/belay"
)

func (a *app) askCommand() *cobra.Command {
	var in belay.CreateCheckpointInput
	hitl := &belay.HITLInput{Required: true}
	var options []string
	var timeout time.Duration
	var defaultAction string
	var wait, noSnapshot bool
	cmd := &cobra.Command{
		Use:   "ask QUESTION",
		Short: "Ask a person to decide: save a checkpoint that waits for a decision",
		Long: `Save a checkpoint in the current project's active session (or --session)
that asks QUESTION and waits for a human decision, as 'belay save' does for
its files. People answer with 'belay decide'; 'belay pending' lists what waits.

Each --option is ID:ACTION or ID:ACTION:LABEL, where ACTION is approve,
reject, modify, retry, skip or escalate; without --option the choices are
approve and reject. --timeout (1m to 24h) applies --default (approve, reject
or pause) when nobody decides in time; --default also marks the first option
with that action as the default choice.

With --wait, ask blocks until the decision and exits as 'belay wait' does:
0 approve, 10 reject, 11 modify, 12 retry, 13 skip, 14 escalate.`,
		Example: `  belay ask "Deploy to prod?" --option yes:approve --option no:reject
  belay ask "Deploy to prod?" --option yes:approve:Deploy --option no:reject --timeout 10m --default reject --wait
  belay ask "Which database?" --option pg:approve:PostgreSQL --option lite:modify:SQLite --message "see docs/db.md"`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			in.Summary, hitl.Title = argv[0], argv[0]
			if strings.TrimSpace(argv[0]) == "" {
				return usagef("a question is required: belay ask QUESTION")
			}
			for _, o := range options {
				opt, err := parseOption(o)
				if err != nil {
					return err
				}
				hitl.Options = append(hitl.Options, opt)
			}
			if cmd.Flags().Changed("timeout") && timeout <= 0 {
				return usagef("--timeout must be 1m to 24h, got %s", timeout)
			}
			if err := applyDefault(hitl, timeout, belay.Action(defaultAction)); err != nil {
				return err
			}
			in.HITL, in.Snapshot = hitl, !noSnapshot
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			if in.SessionID, err = a.sessionFlag(ctx, svc, in.SessionID); err != nil {
				return err
			}
			if in.SessionID == "" || a.projectFlag != "" {
				if in.ProjectPath, err = a.project(ctx, svc); err != nil {
					return err
				}
			}
			cp, err := svc.CreateCheckpoint(ctx, in)
			if err != nil {
				return err
			}
			if wait {
				// Standard output is for the decision, as with belay wait.
				fmt.Fprintf(a.env.Stderr, "Asked as checkpoint #%d %s in session %s; waiting for a decision (belay decide %s).\n",
					cp.Seq, cp.ID, cp.SessionID, cp.ID)
				a.printStarted(cp)
				return a.waitDecision(ctx, svc, cp, 0)
			}
			if a.json {
				return a.printJSON(cp)
			}
			fmt.Fprintf(a.env.Stdout, "Asked as checkpoint #%d %s in session %s. Decide with: belay decide %s\n",
				cp.Seq, cp.ID, cp.SessionID, cp.ID)
			a.printSnapshot(cp)
			a.printStarted(cp)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&options, "option", nil, "a choice as ID:ACTION or ID:ACTION:LABEL, repeatable (default approve and reject)")
	f.DurationVar(&timeout, "timeout", 0, "decide --default when nobody decides within this long (1m to 24h)")
	f.StringVar(&defaultAction, "default", "", "approve, reject or pause: what the timeout decides; marks that option the default")
	f.StringVar(&hitl.Message, "message", "", "more for the person deciding, up to 2,000 characters")
	f.BoolVar(&wait, "wait", false, "wait for the decision and exit as belay wait does")
	f.StringVar(&in.Name, "name", "", "step name of the checkpoint")
	f.StringArrayVar(&in.Tags, "tag", nil, "tag, repeatable")
	f.StringVar(&in.SessionID, "session", "", "session id or unique prefix (default: the project's active session)")
	f.BoolVar(&noSnapshot, "no-snapshot", false, "do not snapshot the project's files")
	return cmd
}

// parseOption reads --option ID:ACTION[:LABEL]; the label defaults to the id.
func parseOption(s string) (belay.HITLOption, error) {
	parts := strings.SplitN(s, ":", 3)
	if len(parts) < 2 || parts[0] == "" {
		return belay.HITLOption{}, usagef("--option wants ID:ACTION or ID:ACTION:LABEL (e.g. yes:approve), got %q", s)
	}
	o := belay.HITLOption{ID: parts[0], Label: parts[0], Action: belay.Action(parts[1])}
	if len(parts) == 3 && parts[2] != "" {
		o.Label = parts[2]
	}
	return o, nil
}

// applyDefault sets the request's timeout and marks its default option.
func applyDefault(h *belay.HITLInput, timeout time.Duration, def belay.Action) error {
	if timeout > 0 {
		if def == "" {
			return usagef("--timeout needs --default: approve, reject or pause, what happens when nobody decides in time")
		}
		h.Timeout = &belay.TimeoutInput{Duration: int(timeout.Round(time.Second) / time.Second), DefaultAction: def}
	}
	for i := range h.Options {
		if def != "" && h.Options[i].Action == def {
			h.Options[i].IsDefault = true
			break
		}
	}
	return nil
}
