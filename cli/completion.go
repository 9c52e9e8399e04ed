package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/belayhq/belay"
)

// completions makes the shell complete checkpoints, sessions and the values
// of enumerated flags (the completion command itself is cobra's).
func (a *app) completions(root *cobra.Command) {
	find := func(path string) *cobra.Command {
		cmd, _, err := root.Find(strings.Fields(path))
		if err != nil {
			panic("completion for a missing command: " + path)
		}
		return cmd
	}
	for _, path := range []string{"show", "delete", "diff", "rollback", "wait", "decide"} {
		find(path).ValidArgsFunction = a.completeCheckpoints
	}
	for _, path := range []string{"sessions delete", "session-info", "export"} {
		find(path).ValidArgsFunction = a.completeSessions
	}
	types, triggers, statuses := strs(belay.CheckpointTypes), strs(belay.CheckpointTriggers), strs(belay.SessionStatuses)
	completeValues(find("save"), "type", types)
	completeValues(find("save"), "trigger", triggers)
	completeValues(find("checkpoints"), "type", types)
	completeValues(find("checkpoints"), "order-by", []string{belay.OrderCreatedAt, belay.OrderType})
	completeValues(find("sessions"), "status", statuses)
}

func strs[T ~string](values []T) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

// completeValues makes the shell complete flag with one of values.
func completeValues(cmd *cobra.Command, flag string, values []string) {
	cmd.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
}

// completeCheckpoints completes a checkpoint argument with the numbers,
// names and ids of the project's current session (or --session's), each
// with its summary, newest first.
func (a *app) completeCheckpoints(cmd *cobra.Command, argv []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(argv) > 0 && cmd.Name() != "diff" || len(argv) > 1 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, svc, err := a.open(cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	sessionID, _ := cmd.Flags().GetString("session")
	if sessionID == "" {
		sess, err := a.activeSession(ctx, svc)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		sessionID = sess.ID
	}
	list, err := svc.ListCheckpoints(ctx, belay.ListCheckpointsInput{SessionID: sessionID, Limit: belay.MaxListLimit})
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var out []cobra.Completion
	for _, cp := range list.Items {
		desc := belay.OneLine(cp.Summary, 60)
		out = append(out, cobra.CompletionWithDesc(strconv.FormatInt(cp.Seq, 10), desc))
		if cp.Name != "" {
			out = append(out, cobra.CompletionWithDesc(cp.Name, fmt.Sprintf("#%d %s", cp.Seq, desc)))
		}
		out = append(out, cobra.CompletionWithDesc(cp.ID, fmt.Sprintf("#%d %s", cp.Seq, desc)))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeSessions completes a session argument with the ids of the newest
// sessions, each with its project and title.
func (a *app) completeSessions(cmd *cobra.Command, argv []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(argv) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, svc, err := a.open(cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	list, err := svc.ListSessions(ctx, belay.ListSessionsInput{Limit: belay.MaxListLimit})
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var out []cobra.Completion
	for _, s := range list.Items {
		out = append(out, cobra.CompletionWithDesc(s.ID, belay.OneLine(s.ProjectPath+" "+s.Title, 60)))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
