package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/belayhq/belay"
)

func (a *app) planCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Give a session a plan of tasks, show it, or revise it in your editor",
	}
	cmd.AddCommand(a.planSetCommand(), a.planShowCommand(), a.planEditCommand())
	return cmd
}

// sessionFlag adds --session to cmd.
func sessionFlag(cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "session", "", "session (default: $BELAY_SESSION, else the working directory's current one)")
}

func (a *app) planSetCommand() *cobra.Command {
	var sessionID, mode, warnAt, hardLimit string
	var every int
	cmd := &cobra.Command{
		Use:   "set FILE|-",
		Short: "Set the plan: one task a line (ID: title), or JSON",
		Long: `Set a session's plan from FILE (- for standard input): one task a line as
"ID: title" (lines starting with # are comments), or a JSON array of
{"id","title","description"}. --mode says when to stop for a person:
every_task (default), every_n (with --every N) or triggers (test failures and
the budget only). --warn-at and --hard-limit set the budget in dollars.`,
		Example: `  printf 'design: Design the API\nimpl: Implement it\ntests: Write tests\n' | belay plan set - --warn-at 10 --hard-limit 50`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			in := belay.SetPlanInput{Mode: belay.CheckpointMode(mode), Every: every}
			var err error
			if in.Tasks, err = a.readTasks(argv[0]); err != nil {
				return err
			}
			if warnAt != "" {
				if in.Budget.WarnAtMicros, err = belay.ParseUSD("warn-at", warnAt); err != nil {
					return err
				}
			}
			if hardLimit != "" {
				if in.Budget.HardLimitMicros, err = belay.ParseUSD("hard-limit", hardLimit); err != nil {
					return err
				}
			}
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			sess, err := a.sessionRef(ctx, svc, sessionID)
			if err != nil {
				return err
			}
			in.SessionID = sess.ID
			if sess, err = svc.SetPlan(ctx, in); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(sess)
			}
			fmt.Fprintf(a.env.Stdout, "Plan of %d tasks set on session %s.\n", len(sess.Plan.Tasks), sess.ID)
			return nil
		},
	}
	sessionFlag(cmd, &sessionID)
	f := cmd.Flags()
	f.StringVar(&mode, "mode", "", "every_task, every_n or triggers")
	f.IntVar(&every, "every", 0, "with --mode every_n: stop after every N tasks")
	f.StringVar(&warnAt, "warn-at", "", "stop once when the cost reaches this many dollars")
	f.StringVar(&hardLimit, "hard-limit", "", "pause at this many dollars (and stop once at 90%)")
	return cmd
}

// readTasks reads a plan file: JSON, or one "ID: title" a line.
func (a *app) readTasks(path string) ([]belay.Task, error) {
	var r io.Reader = a.env.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, belay.Invalid("file", "cannot read the plan: %v", err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, 4<<20))
	if err != nil {
		return nil, err
	}
	if t := strings.TrimSpace(string(data)); strings.HasPrefix(t, "[") {
		var tasks []belay.Task
		if err := json.Unmarshal([]byte(t), &tasks); err != nil {
			return nil, belay.Invalid("file", "the plan is not a JSON array of tasks: %v", err)
		}
		return tasks, nil
	}
	var tasks []belay.Task
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, title, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(id) == "" || strings.TrimSpace(title) == "" {
			return nil, belay.Invalid("file", "line %d %q: write a task as ID: title", n+1, belay.Clip(line, 80))
		}
		tasks = append(tasks, belay.Task{ID: strings.TrimSpace(id), Title: strings.TrimSpace(title)})
	}
	return tasks, nil
}

func (a *app) planShowCommand() *cobra.Command {
	var sessionID string
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Show the plan's tasks with their status and cost",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			sess, err := a.sessionRef(ctx, svc, sessionID)
			if err != nil {
				return err
			}
			if sess.Plan == nil {
				return belay.Invalid("session", "session %s has no plan; set one with: belay plan set FILE", sess.ID)
			}
			if a.json {
				return a.printJSON(sess.Plan)
			}
			for i, t := range sess.Plan.Tasks {
				fmt.Fprintf(a.env.Stdout, "%3d. %-10s %-30s %s  %s\n", i+1, t.Status, t.ID, belay.FormatUSD(t.CostMicros), belay.OneLine(t.Title, 60))
			}
			fmt.Fprintln(a.env.Stdout, belay.FormatProgress(belay.ComputeProgress(sess.Plan, sess.CostMicros)))
			return nil
		},
	}
	sessionFlag(cmd, &sessionID)
	return cmd
}

// planEditHelp heads the editor buffer of `belay plan edit`.
const planEditHelp = `# Remaining tasks, one a line. Delete a line to drop the task, move lines
# to reorder, put "skip:" in front to skip one. Tasks cannot be added or
# renamed here. Save and quit to apply; an empty file cancels.
`

// parsePlanEdit reads the editor buffer of `belay plan edit` back into an
// adjustment of the pending tasks. A line must name a pending task, once.
func parsePlanEdit(pending []belay.Task, text string) (belay.PlanAdjustment, bool, error) {
	var adj belay.PlanAdjustment
	seen := map[string]int{}
	var order []string
	any := false
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		any = true
		skip := false
		if rest, ok := strings.CutPrefix(line, "skip:"); ok {
			skip, line = true, strings.TrimSpace(rest)
		}
		id, _, _ := strings.Cut(line, ":")
		id = strings.TrimSpace(id)
		if !slices.ContainsFunc(pending, func(t belay.Task) bool { return t.ID == id }) {
			return adj, false, belay.Invalid("plan", "line %d %q: %q is not a pending task; tasks cannot be added or renamed",
				n+1, belay.Clip(line, 80), belay.Clip(id, 40))
		}
		if prev, ok := seen[id]; ok {
			return adj, false, belay.Invalid("plan", "line %d: task %q is already on line %d", n+1, id, prev)
		}
		seen[id] = n + 1
		if skip {
			adj.Skipped = append(adj.Skipped, id)
		} else {
			order = append(order, id)
		}
	}
	if !any {
		return adj, false, nil
	}
	for _, t := range pending {
		if _, ok := seen[t.ID]; !ok {
			adj.Dropped = append(adj.Dropped, t.ID)
		}
	}
	var kept []string
	for _, t := range pending {
		if slices.Contains(order, t.ID) {
			kept = append(kept, t.ID)
		}
	}
	if !slices.Equal(kept, order) {
		adj.Reordered = order
	}
	return adj, true, nil
}

func describeAdjustment(adj belay.PlanAdjustment) string {
	var parts []string
	if len(adj.Dropped) > 0 {
		parts = append(parts, "Dropping "+strings.Join(adj.Dropped, ", ")+".")
	}
	if len(adj.Skipped) > 0 {
		parts = append(parts, "Skipping "+strings.Join(adj.Skipped, ", ")+".")
	}
	if len(adj.Reordered) > 0 {
		parts = append(parts, "New order: "+strings.Join(adj.Reordered, ", ")+".")
	}
	if len(parts) == 0 {
		return "No change."
	}
	return strings.Join(parts, " ")
}

func (a *app) planEditCommand() *cobra.Command {
	var sessionID string
	var yes bool
	cmd := &cobra.Command{
		Use:   "edit",
		Short: "Revise the remaining tasks in $EDITOR: drop, skip, reorder",
		Long: `Open the remaining (pending) tasks in $EDITOR, one a line: delete a line to
drop a task, move lines to reorder, write "skip:" in front to skip one. belay
shows what will change and asks before applying (--yes applies at once).`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			sess, err := a.sessionRef(ctx, svc, sessionID)
			if err != nil {
				return err
			}
			if sess.Plan == nil {
				return belay.Invalid("session", "session %s has no plan; set one with: belay plan set FILE", sess.ID)
			}
			var pending []belay.Task
			var b strings.Builder
			b.WriteString(planEditHelp)
			for _, t := range sess.Plan.Tasks {
				if t.Status == belay.TaskPending {
					pending = append(pending, t)
					fmt.Fprintf(&b, "%s: %s\n", t.ID, belay.OneLine(t.Title, 200))
				}
			}
			if len(pending) == 0 {
				return belay.Invalid("plan", "no pending task is left to revise")
			}
			// Without --yes the changes are confirmed on the terminal: refuse
			// before the editor runs rather than after.
			if !yes {
				if err := a.needTerminal("pass --yes to apply the changes"); err != nil {
					return err
				}
			}
			text, err := a.editText(b.String())
			if err != nil {
				return err
			}
			adj, ok, err := parsePlanEdit(pending, text)
			if err != nil {
				return err
			}
			if !ok {
				fmt.Fprintln(a.env.Stderr, "Empty plan: nothing changed.")
				return nil
			}
			fmt.Fprintln(a.env.Stderr, describeAdjustment(adj))
			if !yes {
				fmt.Fprint(a.env.Stderr, "Confirm? [y/N] ")
				answer, _ := bufio.NewReader(a.env.Stdin).ReadString('\n')
				if !strings.HasPrefix(strings.ToLower(strings.TrimSpace(answer)), "y") {
					fmt.Fprintln(a.env.Stderr, "Nothing changed.")
					return nil
				}
			}
			if sess, err = svc.AdjustPlan(ctx, sess.ID, adj); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(sess.Plan)
			}
			fmt.Fprintln(a.env.Stdout, belay.FormatProgress(belay.ComputeProgress(sess.Plan, sess.CostMicros)))
			return nil
		},
	}
	sessionFlag(cmd, &sessionID)
	cmd.Flags().BoolVar(&yes, "yes", false, "apply without asking")
	return cmd
}

// editText lets the person edit text in $VISUAL or $EDITOR (vi when unset)
// and returns what they saved.
func (a *app) editText(text string) (string, error) {
	editor := a.env.Getenv("VISUAL")
	if editor == "" {
		editor = a.env.Getenv("EDITOR")
	}
	if editor == "" {
		editor = "vi"
	}
	dir, err := os.MkdirTemp("", "belay-edit-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "plan.txt")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return "", err
	}
	// The editor may carry arguments ("code --wait"): let the shell split them.
	ed := exec.Command("sh", "-c", editor+` "$1"`, "sh", path)
	ed.Stdin, ed.Stdout, ed.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := ed.Run(); err != nil {
		return "", fmt.Errorf("the editor %q failed: %w", editor, err)
	}
	out, err := os.ReadFile(path)
	return string(out), err
}

func (a *app) taskCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "task",
		Short: "Start, finish, fail or skip a task of the plan",
	}
	for _, v := range []struct {
		verb   string
		status belay.TaskStatus
		short  string
	}{
		{"start", belay.TaskRunning, "Mark a task running"},
		{"done", belay.TaskCompleted, "Mark a task completed (prints the progress; may stop for a person)"},
		{"fail", belay.TaskFailed, "Mark a task failed"},
		{"skip", belay.TaskSkipped, "Skip a task"},
	} {
		cmd.AddCommand(a.taskVerbCommand(v.verb, v.status, v.short))
	}
	return cmd
}

func (a *app) taskVerbCommand(verb string, status belay.TaskStatus, short string) *cobra.Command {
	var sessionID string
	in := belay.TaskUpdate{Status: status}
	cmd := &cobra.Command{
		Use:   verb + " TASK",
		Short: short,
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			sess, err := a.sessionRef(ctx, svc, sessionID)
			if err != nil {
				return err
			}
			in.SessionID, in.TaskID = sess.ID, argv[0]
			res, err := svc.UpdateTask(ctx, in)
			if err != nil {
				return err
			}
			return a.printProgress(res)
		},
	}
	sessionFlag(cmd, &sessionID)
	if status != belay.TaskRunning {
		f := cmd.Flags()
		f.StringArrayVar(&in.ChangedFiles, "file", nil, "a file the task changed (repeatable)")
		f.StringVar(&in.CommitSHA, "commit", "", "the commit the task made")
		f.IntVar(&in.FixCycles, "fix-cycles", 0, "how many fix cycles it took")
		f.StringVar(&in.Reason, "reason", "", "why it failed or was skipped")
		f.BoolVar(&in.TestFailed, "test-failed", false, "tests failed after it: stop for a person")
	}
	return cmd
}

// printProgress prints a progress result and, when a trigger fired, what
// waits for a decision.
func (a *app) printProgress(res *belay.ProgressResult) error {
	if a.json {
		return a.printJSON(res)
	}
	fmt.Fprintln(a.env.Stdout, belay.Printable(res.Summary))
	if cp := res.Checkpoint; cp != nil {
		var names []string
		for _, t := range res.Triggers {
			names = append(names, string(t))
		}
		fmt.Fprintf(a.env.Stdout, "Trigger: %s — waiting for a decision: #%d (belay decide %s: continue, adjust or abort)\n",
			strings.Join(names, ", "), cp.Seq, cp.ID)
	}
	return nil
}

func (a *app) costCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cost",
		Short: "Record what the agent spent",
	}
	var sessionID string
	in := belay.CostInput{}
	add := &cobra.Command{
		Use:     "add DOLLARS",
		Short:   "Add spending to the session (and its running task)",
		Example: `  belay cost add 0.42 --tokens-in 12000 --tokens-out 800 --model claude-sonnet`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			var err error
			if in.Micros, err = belay.ParseUSD("cost", argv[0]); err != nil {
				return err
			}
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			sess, err := a.sessionRef(ctx, svc, sessionID)
			if err != nil {
				return err
			}
			in.SessionID = sess.ID
			res, err := svc.AddCost(ctx, in)
			if err != nil {
				return err
			}
			return a.printProgress(res)
		},
	}
	sessionFlag(add, &sessionID)
	f := add.Flags()
	f.StringVar(&in.TaskID, "task", "", "the task it was for (default: the running one)")
	f.Int64Var(&in.TokensIn, "tokens-in", 0, "input tokens")
	f.Int64Var(&in.TokensOut, "tokens-out", 0, "output tokens")
	f.StringVar(&in.Model, "model", "", "the model")
	cmd.AddCommand(add)
	return cmd
}

func (a *app) statusCommand() *cobra.Command {
	var sessionID string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Progress, cost and what waits for a person in the current session",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			sess, err := a.sessionRef(ctx, svc, sessionID)
			if err != nil {
				return err
			}
			pending, err := svc.PendingHITL(ctx, sess.ID)
			if err != nil {
				return err
			}
			out := map[string]any{"session": sess, "pending": pending}
			w := a.env.Stdout
			line := fmt.Sprintf("Session %s is %s | %s spent", sess.ID, sess.Status, belay.FormatUSD(sess.CostMicros))
			if sess.Plan != nil {
				if limit := sess.Plan.Budget.HardLimitMicros; limit > 0 {
					line += " | hard limit " + belay.FormatUSD(limit)
				}
				p := belay.ComputeProgress(sess.Plan, sess.CostMicros)
				out["progress"] = p
				line += "\n" + belay.FormatProgress(p)
			}
			if a.json {
				return a.printJSON(out)
			}
			fmt.Fprintln(w, line)
			switch len(pending) {
			case 0:
				return nil
			case 1:
				fmt.Fprintln(w, "1 decision waits (belay decide):")
			default:
				fmt.Fprintf(w, "%d decisions wait (belay decide):\n", len(pending))
			}
			for _, p := range pending {
				left := ""
				if p.Deadline != nil {
					left = " (" + remaining(p) + ")"
				}
				fmt.Fprintf(w, "  #%d %s%s\n", p.Checkpoint.Seq, belay.OneLine(p.Checkpoint.HITL.Title, 60), left)
			}
			return nil
		},
	}
	sessionFlag(cmd, &sessionID)
	return cmd
}

func (a *app) contextCommand() *cobra.Command {
	var sessionID string
	cmd := &cobra.Command{
		Use:   "context",
		Short: "Print what the next task should know of the last five (for a prompt)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			sess, err := a.sessionRef(ctx, svc, sessionID)
			if err != nil {
				return err
			}
			out, err := svc.TaskContext(ctx, sess.ID)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(out)
			}
			fmt.Fprint(a.env.Stdout, belay.Printable(out.Prompt))
			return nil
		},
	}
	sessionFlag(cmd, &sessionID)
	return cmd
}
