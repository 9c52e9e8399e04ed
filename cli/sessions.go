package cli

import (
	"fmt"
	"text/tabwriter"

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
				fmt.Fprintln(tw, "ID\tSTATUS\tCHECKPOINTS\tPHASE\tPROJECT\tTITLE\tUPDATED")
				for _, s := range list.Items {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", s.ID, s.Status, s.CheckpointCount, dash(s.Phase),
						dash(s.ProjectPath), dash(clip(s.Title, 40)), ago(s.UpdatedAt))
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
		Args:  args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			var sess *belay.Session
			if len(argv) == 1 {
				sess, err = svc.GetSession(ctx, argv[0])
			} else {
				sess, err = a.activeSession(ctx, svc)
			}
			if err != nil {
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
			fmt.Fprintf(w, "  Owner:        %s\n", sess.Owner)
			fmt.Fprintf(w, "  Phase:        %s (step %d)\n", dash(sess.Phase), sess.CurrentStep)
			fmt.Fprintf(w, "  Checkpoints:  %d (last #%d)\n", sess.CheckpointCount, sess.LastSeq)
			fmt.Fprintf(w, "  Head:         %s\n", dash(sess.HeadCheckpointID))
			fmt.Fprintf(w, "  Created:      %s\n", ago(sess.CreatedAt))
			fmt.Fprintf(w, "  Updated:      %s\n", ago(sess.UpdatedAt))
			return nil
		},
	}
}
