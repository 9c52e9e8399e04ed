package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/belayhq/belay"
)

const tokenLong = `Manage API tokens. Admins only: on the local database (where the server's
data directory is) or through a server with BELAY_URL and an admin's BELAY_TOKEN.

A token acts for its user. Scopes narrow it: read, write (save, roll back),
decide (answer HITL requests), admin (only for admin users). --project limits
it to sessions of those project paths. Give an agent its own token with
--scope read --scope write so it cannot approve its own requests.

Lost the admin token? On the machine with the data directory, run
'belay token create --user admin --admin' without BELAY_URL: the local
database trusts its operating-system user.`

func (a *app) tokenCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke API tokens",
		Long:  tokenLong,
	}
	cmd.AddCommand(a.tokenCreateCommand(), a.tokenListCommand(), a.tokenRevokeCommand())
	return cmd
}

func (a *app) tokenCreateCommand() *cobra.Command {
	var in belay.CreateTokenInput
	var scopes []string
	cmd := &cobra.Command{
		Use:   "create --user NAME",
		Short: "Create an API token for a user (shown once)",
		Long: `Create an API token for a user, creating the user when new. Only the token's
hash is stored: copy the token now, it is not shown again.`,
		Example: `  belay token create --user alice
  belay token create --user ci-agent --scope read --scope write --project ~/work/app`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if in.User == "" {
				return usagef("--user is required")
			}
			for _, s := range scopes {
				in.Scopes = append(in.Scopes, belay.Scope(s))
			}
			for i := range in.Projects {
				if err := a.projectPaths(&in.Projects[i]); err != nil {
					return err
				}
			}
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			tk, err := svc.CreateToken(ctx, in)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(tk)
			}
			fmt.Fprintln(a.env.Stdout, tk.Secret)
			fmt.Fprintf(a.env.Stderr, "Token %s for %s (scopes %s). Copy it now: it is not shown again. Use it as BELAY_TOKEN.\n",
				tk.ID, belay.Printable(tk.User), scopeList(tk.Scopes))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.User, "user", "", "user name")
	f.BoolVar(&in.Admin, "admin", false, "make a new user an admin (may decide any request and manage tokens)")
	f.StringArrayVar(&scopes, "scope", nil, "limit the token to a scope: read, write, decide, admin (repeatable; default all the user has)")
	f.StringArrayVar(&in.Projects, "project", nil, "limit the token to sessions of this project path (repeatable)")
	f.StringVar(&in.Name, "name", "", "what the token is for")
	return cmd
}

func scopeList(scopes []belay.Scope) string {
	out := make([]string, len(scopes))
	for i, s := range scopes {
		out[i] = string(s)
	}
	return strings.Join(out, ",")
}

func (a *app) tokenListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List API tokens (never their secrets)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			list, err := svc.ListTokens(ctx)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(list)
			}
			ids := newAbbrev()
			for _, tk := range list {
				ids.add(tk.ID)
			}
			tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tUSER\tSCOPES\tPROJECTS\tCREATED\tLAST USED\tNAME")
			for _, tk := range list {
				used := "never"
				if tk.LastUsedAt != nil {
					used = tk.LastUsedAt.Local().Format(time.DateTime)
				}
				if tk.RevokedAt != nil {
					used = "revoked " + tk.RevokedAt.Local().Format(time.DateTime)
				}
				projects := "-"
				if len(tk.Projects) > 0 {
					projects = strings.Join(tk.Projects, ",")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ids.of(tk.ID), dash(tk.User), scopeList(tk.Scopes), dash(projects),
					tk.CreatedAt.Local().Format(time.DateTime), used, dash(tk.Name))
			}
			return tw.Flush()
		},
	}
}

func (a *app) tokenRevokeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an API token at once",
		Long:  "Revoke an API token by its id (or a unique prefix of it, as `belay token list` shows).",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			list, err := svc.ListTokens(ctx)
			if err != nil {
				return err
			}
			ids := make([]string, len(list))
			for i, tk := range list {
				ids[i] = tk.ID
			}
			id, err := matchID("token", argv[0], ids)
			if err != nil {
				return err
			}
			if err := svc.RevokeToken(ctx, id); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"id": id, "revoked": true})
			}
			fmt.Fprintf(a.env.Stdout, "Revoked token %s.\n", id)
			return nil
		},
	}
}
