package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"charm.land/huh/v2"
	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"github.com/belayhq/belay"
)

// Exit codes of `belay wait`, one per decision, so scripts can branch.
const (
	ExitNoDecision = 3
	ExitRejected   = 10
	ExitModify     = 11
	ExitRetry      = 12
	ExitSkip       = 13
	ExitEscalate   = 14
)

var waitExit = map[belay.Action]int{
	belay.ActionApprove:  ExitOK,
	belay.ActionReject:   ExitRejected,
	belay.ActionModify:   ExitModify,
	belay.ActionRetry:    ExitRetry,
	belay.ActionSkip:     ExitSkip,
	belay.ActionEscalate: ExitEscalate,
}

// exitCode ends the command with a chosen exit status and no error message.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

func (a *app) pendingCommand() *cobra.Command {
	var sessionID string
	cmd := &cobra.Command{
		Use:   "pending",
		Short: "List the decisions waiting for you",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			if sessionID, err = a.sessionFlag(ctx, svc, sessionID); err != nil {
				return err
			}
			list, err := svc.PendingHITL(ctx, sessionID)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(list)
			}
			if len(list) == 0 {
				fmt.Fprintln(a.env.Stdout, "Nothing waits for a decision.")
				return nil
			}
			sessions := newAbbrev()
			for _, p := range list {
				sessions.add(p.Session.ID)
			}
			tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "CHECKPOINT\tSEQ\tSESSION\tTITLE\tOPTIONS\tTIME LEFT\tASKED")
			for _, p := range list {
				opts := make([]string, len(p.Checkpoint.HITL.Options))
				for i, o := range p.Checkpoint.HITL.Options {
					opts[i] = o.ID
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", p.Checkpoint.ID, p.Checkpoint.Seq, sessions.of(p.Session.ID),
					belay.OneLine(p.Checkpoint.HITL.Title, 40), belay.OneLine(strings.Join(opts, ","), 80), remaining(p), ago(p.Checkpoint.CreatedAt))
			}
			tw.Flush()
			fmt.Fprintln(a.env.Stdout, "Decide with: belay decide CHECKPOINT")
			return nil
		},
	}
	cmd.Flags().StringVar(&sessionID, "session", "", "only this session (id or unique prefix)")
	return cmd
}

// remaining is the time left of a pending request and what its next
// deadline then does, e.g. "59m0s → approve" or "59m0s → reject (expires)".
func remaining(p belay.PendingHITL) string {
	var parts []string
	if p.Checkpoint.TimeoutFired {
		parts = append(parts, "paused")
	}
	if d := p.Deadline; d != nil && p.TimeRemaining != nil {
		left := fmt.Sprintf("%s → %s", time.Duration(max(*p.TimeRemaining, 0))*time.Second, d.Action)
		if d.Reason == belay.DeadlineExpired {
			left += " (expires)"
		}
		parts = append(parts, left)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func (a *app) decideCommand() *cobra.Command {
	var in belay.DecideInput
	var modifyFile string
	var sessionID string
	cmd := &cobra.Command{
		Use:   "decide [CHECKPOINT]",
		Short: "Decide a pending request, interactively or with --option",
		Long: `Decide a pending human-in-the-loop request. CHECKPOINT is a checkpoint number
in the active session (or --session), an id or a unique id prefix; without
it, the only pending request (or a choice among them).

With --option it runs without questions, for scripts; otherwise it shows the
request and asks on the terminal (without one it refuses). --option takes the id of one of the request's options, as
'belay pending' and 'belay show' list them (e.g. yes, no), not an action; the
decision's action is that option's own.`,
		Example: `  belay decide                                   # interactive
  belay decide 01a1f --option yes --feedback "looks good"
  belay decide 3 --option change --modify-file changes.json`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			var cp *belay.Checkpoint
			if len(argv) == 1 {
				if cp, err = a.resolveCheckpoint(ctx, svc, argv[0], sessionID); err != nil {
					return err
				}
			} else if cp, err = a.choosePending(ctx, svc, sessionID, in.SelectedOption == ""); err != nil {
				return err
			}
			if cp.HITL == nil {
				return belay.Errorf(belay.CodeHITLNotRequired, "checkpoint %s does not ask for a decision", cp.ID)
			}
			in.CheckpointID = cp.ID
			if in.Modifications, err = a.readJSONFile(modifyFile); err != nil {
				return err
			}
			if in.SelectedOption == "" {
				if err := a.askDecision(ctx, svc, cp, &in); err != nil {
					return err
				}
			}
			res, err := svc.Decide(ctx, in)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(res)
			}
			fmt.Fprintf(a.env.Stdout, "Decided %s (%s). Session %s is %s.\n", belay.Printable(res.Decision.SelectedOption), res.Decision.Action, res.Session.ID, res.Session.Status)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.SelectedOption, "option", "", "id of the option to choose, as 'belay pending' lists them (no questions asked)")
	f.StringVar((*string)(&in.Action), "action", "", "action of the option (default: the option's own)")
	f.StringVar(&in.Feedback, "feedback", "", "feedback for the agent, up to 2,000 characters")
	f.StringVar(&modifyFile, "modify-file", "", "modifications as a JSON object file (with a modify option), or - for standard input")
	f.StringVar(&in.IdempotencyKey, "idempotency-key", "", "retrying with the same key returns the first decision")
	f.StringVar(&sessionID, "session", "", "session of checkpoint number N, or to choose pending requests from")
	return cmd
}

// choosePending picks the request to decide when none was named.
func (a *app) choosePending(ctx context.Context, svc belay.Service, sessionID string, interactive bool) (*belay.Checkpoint, error) {
	sessionID, err := a.sessionFlag(ctx, svc, sessionID)
	if err != nil {
		return nil, err
	}
	list, err := svc.PendingHITL(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	switch {
	case len(list) == 0:
		return nil, belay.Errorf(belay.CodeNotFound, "nothing waits for a decision")
	case len(list) == 1:
		return list[0].Checkpoint, nil
	case !interactive:
		return nil, usagef("%d requests are pending: name one (see `belay pending`)", len(list))
	}
	var id string
	sel := huh.NewSelect[string]().Title("Which request?").Value(&id)
	opts := make([]huh.Option[string], len(list))
	ids := newAbbrev()
	for _, p := range list {
		ids.add(p.Checkpoint.ID)
	}
	for i, p := range list {
		opts[i] = huh.NewOption(fmt.Sprintf("%s  (%s, %s)", belay.OneLine(p.Checkpoint.HITL.Title, 60), ids.of(p.Checkpoint.ID), remaining(p)), p.Checkpoint.ID)
	}
	if err := a.prompt(ctx, fmt.Sprintf("%d requests are pending: name one and pass --option (see `belay pending`)", len(list)),
		huh.NewGroup(sel.Options(opts...))); err != nil {
		return nil, err
	}
	for _, p := range list {
		if p.Checkpoint.ID == id {
			return p.Checkpoint, nil
		}
	}
	return nil, belay.Errorf(belay.CodeNotFound, "no pending request %s", id)
}

// deadlineOf is the next deadline of cp, a pending request, as the caller's
// pending list gives it: nil when it has none, or the caller may not decide
// it (which the decision then says).
func deadlineOf(ctx context.Context, svc belay.Service, cp *belay.Checkpoint) (*belay.HITLDeadline, error) {
	list, err := svc.PendingHITL(ctx, cp.SessionID)
	if err != nil {
		return nil, err
	}
	for _, p := range list {
		if p.Checkpoint.ID == cp.ID {
			return p.Deadline, nil
		}
	}
	return nil, nil
}

// askDecision shows a request as seed 000's CLI flow does and asks for the
// option, feedback and (for modify) modifications.
func (a *app) askDecision(ctx context.Context, svc belay.Service, cp *belay.Checkpoint, in *belay.DecideInput) error {
	h := cp.HITL
	ids := make([]string, len(h.Options))
	for i, o := range h.Options {
		ids[i] = o.ID
	}
	instead := fmt.Sprintf("decide with `belay decide %s --option OPTION`, OPTION one of %s", cp.ID, strings.Join(ids, ", "))
	if err := a.needTerminal(instead); err != nil {
		return err
	}
	deadline, err := deadlineOf(ctx, svc, cp)
	if err != nil {
		return err
	}
	w := a.env.Stdout
	fmt.Fprintf(w, "\n%s\n", belay.Printable(h.Title))
	if h.Message != "" {
		fmt.Fprintln(w, belay.Printable(h.Message))
	}
	if len(h.Context) > 0 {
		fmt.Fprintf(w, "\nContext:\n%s\n", indentJSON(h.Context, 4000, "belay show "+cp.ID+" --json"))
	}
	dflt := ""
	for _, o := range h.Options {
		if o.IsDefault {
			dflt = o.ID
		}
	}
	if d := deadline; d != nil {
		when := d.At.Local().Format(time.Kitchen)
		if d.Reason == belay.DeadlineExpired {
			when += ", when the checkpoint expires"
		}
		fmt.Fprintf(w, "\nIf nobody decides by %s: %s.\n", when, d.Action)
		if d.Option != "" {
			dflt = d.Option // what happens if nobody decides (a pause picks none)
		}
	}
	fmt.Fprintln(w)
	opts := make([]huh.Option[string], len(h.Options))
	for i, o := range h.Options {
		label := fmt.Sprintf("[%s] %s", o.ID, o.Label)
		if o.ID == dflt {
			label += " (default)"
			in.SelectedOption = o.ID
		}
		if o.Description != "" {
			label += " - " + o.Description
		}
		opts[i] = huh.NewOption(belay.Printable(label), o.ID)
	}
	if in.SelectedOption == "" {
		in.SelectedOption = h.Options[0].ID
	}
	if err := a.prompt(ctx, instead, huh.NewGroup(
		huh.NewSelect[string]().Title("Select option").Options(opts...).Value(&in.SelectedOption),
		huh.NewText().Title("Feedback (optional)").CharLimit(belay.MaxFeedback).Value(&in.Feedback),
	)); err != nil {
		return err
	}
	opt, _ := h.Option(in.SelectedOption)
	in.Action = opt.Action
	in.Feedback = strings.TrimSpace(in.Feedback)
	if in.Action == belay.ActionModify && len(in.Modifications) == 0 {
		var mods string
		if err := a.prompt(ctx, "pass --modify-file", huh.NewGroup(huh.NewText().Title("Modifications as a JSON object (optional)").Value(&mods).
			Validate(func(s string) error {
				if strings.TrimSpace(s) == "" || json.Valid([]byte(s)) {
					return nil
				}
				return errors.New("not valid JSON")
			}))); err != nil {
			return err
		}
		if strings.TrimSpace(mods) != "" {
			in.Modifications = json.RawMessage(mods)
		}
	}
	return nil
}

// needTerminal refuses to ask when nobody can answer: standard input or
// output is not a terminal (a pipe, a file, /dev/null, a script). A blank
// line from a script must never pick a default or confirm a deletion, so
// every question belay asks goes through here; instead names the flags that
// answer it on the command line.
func (a *app) needTerminal(instead string) error {
	if isTerminal(a.env.Stdin) && writerIsTerminal(a.env.Stdout) {
		return nil
	}
	return usagef("no terminal to ask on (standard input or output is not one): %s", instead)
}

// prompt asks the questions of groups on the terminal (see needTerminal for
// instead) and returns once they are answered, or with ctx's error as soon
// as ctx ends: a line prompt (accessible mode) cannot be interrupted, so it
// is left behind. Ctrl-C inside a full-screen prompt ends the command as an
// interrupt.
func (a *app) prompt(ctx context.Context, instead string, groups ...*huh.Group) error {
	if err := a.needTerminal(instead); err != nil {
		return err
	}
	form := a.form(groups...)
	done := make(chan error, 1)
	go func() { done <- form.RunWithContext(ctx) }()
	select {
	case err := <-done:
		switch {
		case err == nil:
			return nil
		case errors.Is(err, huh.ErrUserAborted):
			return errInterrupted
		}
		return fmt.Errorf("prompt: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// form builds a prompt on the command's terminal: full-screen, or with
// BELAY_ACCESSIBLE (a screen reader) huh's accessible mode of plain line
// prompts.
func (a *app) form(groups ...*huh.Group) *huh.Form {
	if a.env.Getenv("BELAY_ACCESSIBLE") == "" {
		return huh.NewForm(groups...).WithInput(a.env.Stdin).WithOutput(a.env.Stdout)
	}
	return huh.NewForm(groups...).WithInput(a.env.Stdin).WithOutput(a.env.Stdout).WithAccessible(true)
}

// isTerminal reports whether r is a terminal. A character device is not
// enough: /dev/null is one too. It asks through SyscallConn, not Fd, which
// would put the file in blocking mode: a prompt left behind reading it
// could then never be unblocked by closing it.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	conn, err := f.SyscallConn()
	if err != nil {
		return false
	}
	tty := false
	if err := conn.Control(func(fd uintptr) { tty = term.IsTerminal(fd) }); err != nil {
		return false
	}
	return tty
}

// writerIsTerminal reports whether w is a terminal.
func writerIsTerminal(w io.Writer) bool {
	r, ok := w.(io.Reader)
	return ok && isTerminal(r)
}

func (a *app) waitCommand() *cobra.Command {
	var timeout time.Duration
	var sessionID string
	cmd := &cobra.Command{
		Use:   "wait CHECKPOINT",
		Short: "Wait for the decision on a checkpoint and exit with a code per action",
		Long: `Wait until the checkpoint's request is decided (returns at once when it already
is) and print the decision. The exit code tells the action, so scripts can branch:

  0 approve   10 reject   11 modify   12 retry   13 skip   14 escalate
  3 no decision within --timeout      1 error   2 wrong usage
  130 interrupted (Ctrl-C)`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if timeout < 0 {
				return usagef("--timeout must not be negative (0 waits forever), got %s", timeout)
			}
			ctx, svc, cp, err := a.openCheckpoint(cmd, argv, 0, sessionID)
			if err != nil {
				return err
			}
			return a.waitDecision(ctx, svc, cp, timeout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long with exit code 3; 0 waits forever")
	cmd.Flags().StringVar(&sessionID, "session", "", "session of checkpoint number N")
	return cmd
}

// waitDecision waits for the decision on cp, at most timeout when it is not
// zero, prints it, and ends with the exit code of its action (see waitExit).
func (a *app) waitDecision(ctx context.Context, svc belay.Service, cp *belay.Checkpoint, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		chunk := 30 * time.Second
		if timeout > 0 {
			chunk = min(chunk, max(time.Until(deadline), 0))
		}
		res, err := svc.WaitDecision(ctx, cp.ID, chunk)
		if err != nil {
			return err
		}
		if res.Decided {
			if a.json {
				if err := a.printJSON(res); err != nil {
					return err
				}
			} else {
				d := res.Decision
				fmt.Fprintf(a.env.Stdout, "%s (option %s) by %s", d.Action, belay.Printable(d.SelectedOption), belay.Printable(d.UserID))
				if d.Feedback != "" {
					fmt.Fprintf(a.env.Stdout, ": %s", belay.Printable(d.Feedback))
				}
				fmt.Fprintln(a.env.Stdout)
			}
			if code := waitExit[res.Decision.Action]; code != ExitOK {
				return exitCode(code)
			}
			return nil
		}
		if timeout > 0 && !time.Now().Before(deadline) {
			if a.json {
				_ = a.printJSON(res)
			} else {
				fmt.Fprintln(a.env.Stderr, "belay: no decision yet")
			}
			return exitCode(ExitNoDecision)
		}
	}
}
