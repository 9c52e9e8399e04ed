package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/belayhq/belay"
)

func (a *app) watchCommand() *cobra.Command {
	f := belay.EventFilter{}
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print events as they happen",
		Long: `Print events live: checkpoints, HITL requests and decisions, restores.
--after N replays the log from event N on (0 = from the beginning). Ctrl-C
stops (exit code 130).`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			if f.SessionID, err = a.sessionFlag(ctx, svc, f.SessionID); err != nil {
				return err
			}
			// The ids shown so far: each new one is made unique among them.
			sessions, checkpoints := newAbbrev(), newAbbrev()
			printEvent := func(e belay.Event) error {
				if a.json {
					b, err := json.Marshal(e)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintln(a.env.Stdout, string(b))
					return err
				}
				sessions.add(e.SessionID)
				checkpoints.add(e.CheckpointID)
				_, err := fmt.Fprintf(a.env.Stdout, "%-6d %s  %-24s %s %s\n", e.Seq, e.CreatedAt.Local().Format("15:04:05"),
					e.Type, sessions.of(e.SessionID), belay.Printable(describe(e, checkpoints.of(e.CheckpointID))))
				return err
			}
			// No proxy sits between a terminal and its stream: no heartbeat.
			err = svc.Follow(ctx, f, 0, func(_ int64, batch []belay.Event) error {
				for _, e := range batch {
					if err := printEvent(e); err != nil {
						return err
					}
				}
				return nil
			})
			if ctx.Err() != nil {
				return ctx.Err() // interrupted
			}
			return err
		},
	}
	cmd.Flags().StringVar(&f.SessionID, "session", "", "only this session (id or unique prefix)")
	cmd.Flags().StringArrayVar(&f.Types, "type", nil, "only this event type (repeatable)")
	cmd.Flags().Int64Var(&f.After, "after", belay.FromNow, "replay events after this sequence number")
	return cmd
}

// describe summarises an event's payload on one line; checkpoint is its
// checkpoint's id as shown.
func describe(e belay.Event, checkpoint string) string {
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
		return fmt.Sprintf("%s: %s", checkpoint, str("title"))
	case belay.EventHITLDecided:
		if dec, ok := d["decision"].(map[string]any); ok {
			return fmt.Sprintf("%s: %v by %v", checkpoint, dec["action"], dec["userId"])
		}
	case belay.EventHITLTimedOut:
		if str("reason") == belay.DeadlineExpired {
			return fmt.Sprintf("%s: expired, %s", checkpoint, str("defaultAction"))
		}
		return fmt.Sprintf("%s: default %s", checkpoint, str("defaultAction"))
	case belay.EventSessionStatusChanged:
		return fmt.Sprintf("%s → %s", str("from"), str("to"))
	case belay.EventSessionUpdated:
		return fmt.Sprintf("title %q", str("title"))
	case belay.EventGraphNodeStart, belay.EventGraphInterrupt:
		return fmt.Sprintf("%s (step %s)", str("node"), str("step"))
	case belay.EventGraphNodeEnd:
		return fmt.Sprintf("%s (step %s) → %s", str("node"), str("step"), str("next"))
	case belay.EventGraphCustom:
		return fmt.Sprintf("%s: %s", str("node"), str("name"))
	case belay.EventGraphTokens:
		return fmt.Sprintf("%s: %q", str("node"), belay.Clip(str("text"), 80))
	case belay.EventGraphResult:
		return str("status")
	}
	if e.CheckpointID != "" {
		return checkpoint
	}
	return ""
}
