package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/belayhq/belay"
)

const sessionLong = `Share a session with other users. A session belongs to the user who started
it; its owner (or an admin) may give another user one role in it:

  read     see the session, its checkpoints, diffs, decisions and events
  write    read, save checkpoints and roll back
  decide   read and decide its HITL requests

Only the owner and admins grant, delete checkpoints or the session, or export
it. A second grant to the same user replaces the first. A user's token scopes
still narrow what the role allows. Users are created with 'belay token create'.

A HITL request's approvers need no grant: they may decide that request and
read it, nothing more.`

func (a *app) sessionGrantCommand() *cobra.Command {
	var role string
	cmd := &cobra.Command{
		Use:   "grant SESSION USER --role read|write|decide",
		Short: "Give a user a role in a session (its owner or an admin may)",
		Long: `Give USER the role read, write or decide in session SESSION, replacing a role
given before. Only the session's owner or an admin may. See 'belay session --help'
for what each role allows.`,
		Example: `  belay session grant 0190c2a4-5e1b-7c3d-8a2f-3b4c5d6e7f80 bob --role read
  belay session grant 0190c2a4-5e1b-7c3d-8a2f-3b4c5d6e7f80 ci-reviewer --role decide`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if !belay.Role(role).Valid() {
				return usagef("--role must be read, write or decide, got %q", role)
			}
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			id, err := a.sessionFlag(ctx, svc, argv[0])
			if err != nil {
				return err
			}
			g, err := svc.GrantSession(ctx, belay.GrantInput{SessionID: id, User: argv[1], Role: belay.Role(role)})
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(g)
			}
			fmt.Fprintf(a.env.Stdout, "Granted %s the role %s in session %s.\n", g.User, g.Role, g.SessionID)
			return nil
		},
	}
	cmd.Flags().StringVar(&role, "role", "", "read, write or decide (required)")
	return cmd
}

func (a *app) sessionRevokeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke SESSION USER",
		Short: "Take a user's role in a session away (its owner or an admin may)",
		Long: `Take USER's role in session SESSION away at once. Only the session's owner or
an admin may. A user without a role in the session is NOT_FOUND.`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			id, err := a.sessionFlag(ctx, svc, argv[0])
			if err != nil {
				return err
			}
			if err := svc.RevokeGrant(ctx, id, argv[1]); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"sessionId": id, "user": argv[1], "revoked": true})
			}
			fmt.Fprintf(a.env.Stdout, "Revoked the role of %s in session %s.\n", argv[1], id)
			return nil
		},
	}
}

func (a *app) sessionGrantsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "grants SESSION",
		Short: "List who besides the owner may use a session",
		Long: `List the users given a role in session SESSION, oldest grant first. Anyone who
may read the session may list them; its owner and admins are not listed.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			id, err := a.sessionFlag(ctx, svc, argv[0])
			if err != nil {
				return err
			}
			list, err := svc.ListGrants(ctx, id)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(list)
			}
			if len(list) == 0 {
				fmt.Fprintf(a.env.Stdout, "No grants: only the owner and admins may use session %s.\n", id)
				return nil
			}
			tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "USER\tROLE\tGRANTED BY\tGRANTED")
			for _, g := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", dash(g.User), g.Role, dash(g.GrantedBy), ago(g.CreatedAt))
			}
			return tw.Flush()
		},
	}
}
