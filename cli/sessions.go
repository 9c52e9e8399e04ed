package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/belayhq/belay"
)

func (a *app) sessionsCommand() *cobra.Command {
	var in belay.ListSessionsInput
	var status string
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List sessions, newest first",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := countFlag("limit", in.Limit, belay.MaxListLimit); err != nil {
				return err
			}
			if err := a.projectPaths(&in.ProjectPath); err != nil {
				return err
			}
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			in.Status = belay.SessionStatus(status)
			list, err := svc.ListSessions(ctx, in)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(list)
			}
			if len(list.Items) == 0 {
				fmt.Fprintln(a.env.Stdout, "No sessions. `belay save -m SUMMARY` in a project starts one.")
				return nil
			}
			return a.paged(func(bool) error {
				tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tSTATUS\tCHECKPOINTS\tPROGRESS\tCOST\tPROJECT\tTITLE\tUPDATED")
				for _, s := range list.Items {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Status, s.CheckpointCount, progressCell(s),
						belay.FormatUSD(s.CostMicros), dash(s.ProjectPath), dash(belay.OneLine(s.Title, 40)), ago(s.UpdatedAt))
				}
				tw.Flush()
				if list.HasMore {
					fmt.Fprintf(a.env.Stdout, "%d of %d; next page: --cursor %s\n", len(list.Items), list.TotalCount, list.NextCursor)
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.ProjectPath, "project", "", "only sessions of this project path")
	f.StringVar(&status, "status", "", "only sessions in this status")
	f.IntVar(&in.Limit, "limit", 20, "page size, 1-100")
	f.StringVar(&in.Cursor, "cursor", "", "cursor of the next page")
	return cmd
}

func (a *app) sessionInfoCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "session-info [ID]",
		Short: "Show a session (default: the working directory's active session)",
		Long: `Show a session: by its id or a unique prefix of it (at least 4 characters),
or without one the working directory's current session: its newest open
session, unless one made after it has ended since (say, failed on a rejection);
else its newest.`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			ref := ""
			if len(argv) == 1 {
				ref = argv[0]
			}
			sess, err := a.namedSession(ctx, svc, ref, "name one: belay session-info ID (see `belay sessions`)")
			if err != nil {
				return err
			}
			// Read by its id: the answer says what the caller may do there.
			if sess, err = svc.GetSession(ctx, sess.ID); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(sess)
			}
			w := a.env.Stdout
			fmt.Fprintf(w, "Session %s\n", sess.ID)
			fmt.Fprintf(w, "  Status:       %s\n", sess.Status)
			fmt.Fprintf(w, "  Project:      %s\n", dash(sess.ProjectPath))
			fmt.Fprintf(w, "  Title:        %s\n", dash(sess.Title))
			fmt.Fprintf(w, "  Owner:        %s\n", dash(sess.Owner))
			fmt.Fprintf(w, "  Phase:        %s (step %d)\n", dash(sess.Phase), sess.CurrentStep)
			fmt.Fprintf(w, "  Checkpoints:  %d (last #%d)\n", sess.CheckpointCount, sess.LastSeq)
			fmt.Fprintf(w, "  Head:         %s\n", dash(sess.HeadCheckpointID))
			fmt.Fprintf(w, "  Cost:         %s\n", belay.FormatUSD(sess.CostMicros))
			if sess.Plan != nil {
				fmt.Fprintf(w, "  Progress:     %s\n", belay.FormatProgress(belay.ComputeProgress(sess.Plan, sess.CostMicros)))
			}
			if sess.Holder != "" && sess.LeaseExpiresAt != nil {
				fmt.Fprintf(w, "  Held by:      %s until %s\n", dash(sess.Holder), sess.LeaseExpiresAt.Local().Format(time.TimeOnly))
			}
			if sess.EndReason != "" {
				fmt.Fprintf(w, "  Reason:       %s\n", dash(sess.EndReason))
			}
			fmt.Fprintf(w, "  Created:      %s\n", ago(sess.CreatedAt))
			fmt.Fprintf(w, "  Updated:      %s\n", ago(sess.UpdatedAt))
			if ac := sess.Access; ac != nil {
				fmt.Fprintf(w, "  You may:      %s\n", accessWords(ac))
			}
			return nil
		},
	}
}

// accessWords says what access allows, besides reading.
func accessWords(ac *belay.Access) string {
	words := []string{"read"}
	for _, w := range []struct {
		ok   bool
		what string
	}{{ac.Write, "write"}, {ac.Decide, "decide"}, {ac.Own, "export, grant and delete"}, {ac.Workspace, "diff and restore its files here"}} {
		if w.ok {
			words = append(words, w.what)
		}
	}
	return strings.Join(words, ", ")
}

// progressCell is a session's plan progress for a table: done/total tasks.
func progressCell(s *belay.Session) string {
	if s.Plan == nil {
		return "-"
	}
	p := belay.ComputeProgress(s.Plan, s.CostMicros)
	return fmt.Sprintf("%d/%d", p.TasksCompleted, p.TasksCompleted+p.TasksRemaining+p.TasksSkipped+p.TasksFailed)
}

func (a *app) sessionCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Start, title, end a session, or grant others access to it",
		Long: `Start a session for the project, set a session's title, end it (complete,
fail or abandon), or grant, revoke and list who else may use it.
'belay sessions' lists sessions and 'belay session-info' shows one.

` + sessionLong,
		Args: args(cobra.NoArgs),
	}
	cmd.AddCommand(a.sessionNewCommand(), a.sessionTitleCommand(),
		a.endCommand(belay.SessionCompleted, "complete", "Mark a session completed (default: the current one)"),
		a.endCommand(belay.SessionFailed, "fail", "Mark a session failed, with --reason"),
		a.endCommand(belay.SessionAbandoned, "abandon", "Abandon a session: it is never resumed"),
		a.sessionGrantCommand(), a.sessionRevokeCommand(), a.sessionGrantsCommand())
	return cmd
}

func (a *app) sessionNewCommand() *cobra.Command {
	var in belay.CreateSessionInput
	cmd := &cobra.Command{
		Use:   "new",
		Short: "Start a new session for the project; its next checkpoints go to it",
		Long: `Start a new session for the project (found from the working directory as
git does, or --project): the project's next checkpoints go to it, numbered
from #1. A session still open keeps its checkpoints; 'belay checkpoints
--session ID' lists them.`,
		Example: `  belay session new --title "refactor billing"`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			if in.ProjectPath, err = a.project(ctx, svc); err != nil {
				return err
			}
			sess, err := svc.CreateSession(ctx, in)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(sess)
			}
			fmt.Fprintf(a.env.Stdout, "Started session %s in %s; the project's next checkpoints go to it.\n", sess.ID, dash(sess.ProjectPath))
			return nil
		},
	}
	cmd.Flags().StringVar(&in.Title, "title", "", "what the session is about, up to 500 characters")
	return cmd
}

func (a *app) sessionTitleCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "title [ID] TITLE",
		Short: "Set a session's title (default: the working directory's session)",
		Long: `Set the title of a session: the one ID names (an id or a unique prefix), or
the working directory's current session (see session-info). An empty TITLE
clears it. Lists show the title.`,
		Example: `  belay session title "refactor billing"
  belay session title 01a2f7 "refactor billing"`,
		Args: args(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			ref, title := "", argv[len(argv)-1]
			if len(argv) == 2 {
				ref = argv[0]
			}
			sess, err := a.namedSession(ctx, svc, ref, "name one: belay session title ID TITLE (see `belay sessions`)")
			if err != nil {
				return err
			}
			if sess, err = svc.UpdateSession(ctx, sess.ID, belay.UpdateSessionInput{Title: &title}); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(sess)
			}
			fmt.Fprintf(a.env.Stdout, "Session %s: %s\n", sess.ID, dash(sess.Title))
			return nil
		},
	}
}
