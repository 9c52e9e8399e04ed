package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/client"
	"github.com/belayhq/belay/store"
)

func (a *app) watchCommand() *cobra.Command {
	var f client.EventFilter
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print events as they happen",
		Long: `Print events live: checkpoints, HITL requests and decisions, restores.
--after N replays the log from event N on (0 = from the beginning). Ctrl-C stops.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := a.ctx(cmd)
			print := func(e belay.Event) error {
				if a.json {
					b, err := json.Marshal(e)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintln(a.env.Stdout, string(b))
					return err
				}
				_, err := fmt.Fprintf(a.env.Stdout, "%-6d %s  %-24s %s %s\n", e.Seq, e.CreatedAt.Local().Format("15:04:05"),
					e.Type, short(e.SessionID), describe(e))
				return err
			}
			var err error
			if u := a.env.Getenv("BELAY_URL"); u != "" {
				var c *client.Client
				if c, err = client.New(u, a.env.Getenv("BELAY_TOKEN")); err != nil {
					return err
				}
				err = c.Events(ctx, f, print)
			} else {
				err = a.followLocal(ctx, f, print)
			}
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
	cmd.Flags().StringVar(&f.SessionID, "session", "", "only this session")
	cmd.Flags().StringArrayVar(&f.Types, "type", nil, "only this event type (repeatable)")
	cmd.Flags().Int64Var(&f.After, "after", -1, "replay events after this sequence number")
	return cmd
}

// followLocal tails the local event log (core.Service.Follow polls it for
// the changes other processes make).
func (a *app) followLocal(ctx context.Context, f client.EventFilter, fn func(belay.Event) error) error {
	svc, err := a.openLocal(ctx)
	if err != nil {
		return err
	}
	q := store.EventQuery{SessionID: f.SessionID, Types: f.Types, After: f.After}
	if q.After < 0 {
		if q.After, err = svc.Store().LastEventSeq(ctx); err != nil {
			return err
		}
	}
	emit := func(evs []belay.Event) error {
		for _, e := range evs {
			if err := fn(e); err != nil {
				return err
			}
		}
		return nil
	}
	// No proxy sits between a terminal and a local database: no heartbeat.
	if err := svc.Follow(ctx, q, time.Hour, emit, func() error { return nil }); err != nil {
		return err
	}
	return ctx.Err()
}

// describe summarises an event's payload on one line.
func describe(e belay.Event) string {
	var d map[string]any
	_ = json.Unmarshal(e.Data, &d)
	str := func(k string) string {
		if v, ok := d[k]; ok && v != nil {
			return fmt.Sprint(v)
		}
		return ""
	}
	switch e.Type {
	case belay.EventCheckpointCreated:
		return fmt.Sprintf("#%s %s", str("seq"), str("summary"))
	case belay.EventHITLRequired:
		return fmt.Sprintf("%s: %s", short(e.CheckpointID), str("title"))
	case belay.EventHITLDecided:
		if dec, ok := d["decision"].(map[string]any); ok {
			return fmt.Sprintf("%s: %v by %v", short(e.CheckpointID), dec["action"], dec["userId"])
		}
	case belay.EventHITLTimedOut:
		return fmt.Sprintf("%s: default %s", short(e.CheckpointID), str("defaultAction"))
	case belay.EventSessionStatusChanged:
		return fmt.Sprintf("%s → %s", str("from"), str("to"))
	}
	if e.CheckpointID != "" {
		return short(e.CheckpointID)
	}
	return ""
}

func (a *app) tokenCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Manage API tokens (on the local database)",
	}
	var user string
	var admin bool
	create := &cobra.Command{
		Use:   "create --user NAME",
		Short: "Create an API token for a user (shown once)",
		Long: `Create an API token for a user, creating the user when new. Only the token's
hash is stored: copy the token now, it is not shown again.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if user == "" {
				return usagef("--user is required")
			}
			if a.env.Getenv("BELAY_URL") != "" {
				return usagef("token create works on the local database: unset BELAY_URL and run it where the server's data directory is")
			}
			ctx := a.ctx(cmd)
			svc, err := a.openLocal(ctx)
			if err != nil {
				return err
			}
			token, err := svc.CreateToken(ctx, user, admin)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"user": user, "admin": admin, "token": token})
			}
			fmt.Fprintln(a.env.Stdout, token)
			fmt.Fprintln(a.env.Stderr, "Copy this token now: it is not shown again. Use it as BELAY_TOKEN.")
			return nil
		},
	}
	create.Flags().StringVar(&user, "user", "", "user name")
	create.Flags().BoolVar(&admin, "admin", false, "the user may decide any request and manage tokens")
	cmd.AddCommand(create)
	return cmd
}
