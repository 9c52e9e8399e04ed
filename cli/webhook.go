package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/belayhq/belay"
)

const webhookLong = `Webhooks receive belay's events as signed HTTP POSTs. Admins manage them, on
the local database or through a server (BELAY_URL); ` + "`belay serve`" + `
delivers the events.

Each event is POSTed as JSON, in order, with the headers X-Belay-Event,
X-Belay-Delivery, X-Belay-Timestamp and X-Belay-Signature:
sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>. A 2xx answer is
success; anything else is retried with backoff (1s, 2s, 4s…, 6 attempts), then
the webhook moves on. Every attempt is in ` + "`belay webhook deliveries`" + `.
Delivery is at least once: drop duplicates by the event's seq.`

func (a *app) webhookCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Send events to URLs as signed POSTs (admins)",
		Long:  webhookLong,
	}
	cmd.AddCommand(a.webhookAddCommand(), a.webhookListCommand(), a.webhookRemoveCommand(), a.webhookDeliveriesCommand())
	return cmd
}

// resolveWebhook turns a webhook id or a unique prefix of one into the id.
func resolveWebhook(ctx context.Context, svc belay.Service, ref string) (string, error) {
	if belay.IsUUID(ref) {
		return ref, nil
	}
	hooks, err := svc.ListWebhooks(ctx)
	if err != nil {
		return "", err
	}
	ids := make([]string, len(hooks))
	for i, w := range hooks {
		ids[i] = w.ID
	}
	return matchID("webhook", ref, ids)
}

// matchID turns an id or a unique prefix of one among ids into the id.
func matchID(kind, ref string, ids []string) (string, error) {
	var match []string
	for _, id := range ids {
		if ref != "" && strings.HasPrefix(id, strings.ToLower(ref)) {
			match = append(match, id)
		}
	}
	switch len(match) {
	case 0:
		return "", belay.Errorf(belay.CodeNotFound, "%s %s not found", kind, ref).With("id", ref)
	case 1:
		return match[0], nil
	}
	return "", usagef("%s %q is ambiguous: %s", kind, ref, strings.Join(match, ", "))
}

func webhookEventsText(events []string) string {
	if len(events) == 0 {
		return "all"
	}
	return strings.Join(events, ",")
}

func (a *app) webhookAddCommand() *cobra.Command {
	var events []string
	cmd := &cobra.Command{
		Use:   "add URL",
		Short: "Send future events to URL (prints the signing secret once)",
		Long: `Add a webhook: every event from now on (only the --event types, when given)
is POSTed to URL. The signing secret is printed once: copy it to the receiver.

Event types: ` + strings.Join(belay.EventTypes, ", ") + `.`,
		Example: `  belay webhook add https://hooks.example.com/belay
  belay webhook add https://hooks.example.com/belay --event hitl.required --event hitl.decided`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			w, err := svc.AddWebhook(ctx, argv[0], events)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(w)
			}
			fmt.Fprintf(a.env.Stdout, "Webhook %s\n  URL:    %s\n  Events: %s\n  Secret: %s\n", w.ID, w.URL, webhookEventsText(w.Events), w.Secret)
			fmt.Fprintln(a.env.Stderr, "Copy the secret now: it is not shown again. Events are delivered while `belay serve` runs.")
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&events, "event", nil, "only events of this type (repeatable or comma-separated; default all)")
	cmd.Flags().SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "events" {
			name = "event"
		}
		return pflag.NormalizedName(name)
	})
	return cmd
}

func (a *app) webhookListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List webhooks (without their secrets)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			hooks, err := svc.ListWebhooks(ctx)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(hooks)
			}
			if len(hooks) == 0 {
				fmt.Fprintln(a.env.Stdout, "No webhooks. `belay webhook add URL` adds one.")
				return nil
			}
			tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tURL\tEVENTS\tAT EVENT #\tCREATED")
			for _, w := range hooks {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", w.ID, w.URL, webhookEventsText(w.Events), w.LastSeq, ago(w.CreatedAt))
			}
			return tw.Flush()
		},
	}
}

func (a *app) webhookRemoveCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a webhook and its delivery log (ID or a unique prefix)",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			id, err := resolveWebhook(ctx, svc, argv[0])
			if err != nil {
				return err
			}
			if err := svc.RemoveWebhook(ctx, id); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]string{"removed": id})
			}
			fmt.Fprintf(a.env.Stdout, "Removed webhook %s\n", id)
			return nil
		},
	}
}

func (a *app) webhookDeliveriesCommand() *cobra.Command {
	var webhook string
	var limit int
	cmd := &cobra.Command{
		Use:   "deliveries",
		Short: "Show the delivery log, newest first",
		Long: `Show the newest delivery attempts, one line per attempt: a failed event is
retried with backoff, and given up after the last attempt.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := countFlag("limit", limit, belay.MaxDeliveryPage); err != nil {
				return err
			}
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			if webhook != "" {
				if webhook, err = resolveWebhook(ctx, svc, webhook); err != nil {
					return err
				}
			}
			list, err := svc.ListDeliveries(ctx, webhook, limit)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(list)
			}
			if len(list) == 0 {
				fmt.Fprintln(a.env.Stdout, "No deliveries yet. `belay serve` delivers events to webhooks.")
				return nil
			}
			// Shown as --webhook takes them: unique among all webhooks.
			all, err := svc.ListWebhooks(ctx)
			if err != nil {
				return err
			}
			hooks := newAbbrev()
			for _, w := range all {
				hooks.add(w.ID)
			}
			for _, d := range list {
				hooks.add(d.WebhookID)
			}
			tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tWEBHOOK\tEVENT\tATTEMPT\tSTATUS\tERROR\tDURATION")
			for _, d := range list {
				status := "-"
				if d.StatusCode != 0 {
					status = fmt.Sprint(d.StatusCode)
				}
				fmt.Fprintf(tw, "%s\t%s\t%d %s\t%d\t%s\t%s\t%dms\n", d.CreatedAt.Local().Format("2006-01-02 15:04:05"),
					hooks.of(d.WebhookID), d.EventSeq, d.EventType, d.Attempt, status, dash(belay.OneLine(d.Error, 60)), d.DurationMs)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&webhook, "webhook", "", "only this webhook (ID or a unique prefix)")
	cmd.Flags().IntVar(&limit, "limit", 20, fmt.Sprintf("how many attempts, 1-%d", belay.MaxDeliveryPage))
	return cmd
}
