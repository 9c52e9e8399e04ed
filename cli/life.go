package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/belayhq/belay"
)

// sessionRef picks the session a command works on: --session, else
// $BELAY_SESSION (set by `belay run`), else the working directory's open
// session, the one saves go to, else its current one.
func (a *app) sessionRef(ctx context.Context, svc belay.Service, flag string) (*belay.Session, error) {
	if flag == "" {
		flag = a.env.Getenv("BELAY_SESSION")
	}
	if flag == "" {
		root, err := a.project(ctx, svc)
		if err != nil {
			return nil, err
		}
		if sess, err := svc.ActiveSession(ctx, root); !belay.IsCode(err, belay.CodeSessionNotFound) {
			return sess, err
		}
	}
	return a.namedSession(ctx, svc, flag, "pass --session ID")
}

func (a *app) endCommand(status belay.SessionStatus, verb, short string) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   verb + " [SESSION]",
		Short: short,
		Args:  args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			ref := ""
			if len(argv) == 1 {
				ref = argv[0]
			}
			sess, err := a.sessionRef(ctx, svc, ref)
			if err != nil {
				return err
			}
			if sess, err = svc.EndSession(ctx, belay.EndSessionInput{SessionID: sess.ID, Status: status, Reason: reason}); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(sess)
			}
			fmt.Fprintf(a.env.Stdout, "Session %s is %s.\n", sess.ID, sess.Status)
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why")
	return cmd
}

// holderName names this process as a lease holder.
func holderName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}

func (a *app) resumeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "resume [SESSION]",
		Short: "Resume an interrupted session (default: the newest of this project)",
		Long: `Take over an interrupted session and print where to continue from: its head
checkpoint, agent state, next task and open decisions. --json gives the whole
answer for an agent. An abandoned or ended session cannot be resumed.`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			in := belay.ResumeInput{Holder: holderName()}
			if len(argv) == 1 {
				if in.SessionID, err = a.sessionFlag(ctx, svc, argv[0]); err != nil {
					return err
				}
			} else if in.ProjectPath, err = a.project(ctx, svc); err != nil {
				return err
			}
			res, err := svc.ResumeSession(ctx, in)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(res)
			}
			a.printResume(res)
			return nil
		},
	}
	return cmd
}

func (a *app) printResume(res *belay.ResumeResult) {
	w := a.env.Stdout
	fmt.Fprintf(w, "Resumed session %s (%s).\n", res.Session.ID, res.Session.Status)
	if res.Head != nil {
		fmt.Fprintf(w, "  Continue from #%d %s\n", res.Head.Seq, belay.Printable(res.Head.Summary))
	}
	if res.NextTask != nil {
		fmt.Fprintf(w, "  Next task:    %s (%s)\n", belay.Printable(res.NextTask.Title), belay.Printable(res.NextTask.ID))
	}
	if res.Session.Plan != nil {
		fmt.Fprintf(w, "  %s\n", belay.FormatProgress(belay.ComputeProgress(res.Session.Plan, res.Session.CostMicros)))
	}
	for _, p := range res.Pending {
		fmt.Fprintf(w, "  Waiting for a decision: #%d %s (belay decide %s)\n", p.Seq, belay.Printable(p.HITL.Title), p.ID)
	}
	if res.MorePending {
		fmt.Fprintf(w, "  More wait for a decision: belay pending --session %s\n", res.Session.ID)
	}
}

func (a *app) runCommand() *cobra.Command {
	var restarts int
	var sessionID string
	cmd := &cobra.Command{
		Use:   "run [--restart N] -- COMMAND [ARGS...]",
		Short: "Run an agent command under a session, and bring it back after a crash",
		Long: `Run COMMAND under a belay session: the session is held (heartbeats) while it
runs, marked completed when it exits 0, failed on another exit code, and
interrupted when it is killed. With --restart N a command that crashed is
started again (after 1s, 2s, 4s…), resuming the session.

The command finds the session in its environment: BELAY_SESSION (the session
id), BELAY_PROJECT, and BELAY_URL/BELAY_TOKEN or BELAY_DATA_DIR as this belay
uses; after a restart BELAY_RESUMED=1 and BELAY_HEAD (the checkpoint to
continue from). Ctrl-C stops the command cleanly and leaves the session
interrupted, to resume later.`,
		Example: `  belay run -- python agent.py
  belay run --restart 3 -- ./agent --task fix-tests`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			return a.run(ctx, svc, sessionID, restarts, argv)
		},
	}
	cmd.Flags().IntVar(&restarts, "restart", 0, "start the command again this many times after a crash")
	cmd.Flags().StringVar(&sessionID, "session", "", "run under this session (default: a new session of the working directory)")
	return cmd
}

// heartbeatEvery is how often `belay run` renews its lease; the lease lasts
// three times as long, so a missed beat or two costs nothing.
const heartbeatEvery = 5 * time.Second

func (a *app) run(ctx context.Context, svc belay.Service, sessionID string, restarts int, argv []string) error {
	if restarts < 0 {
		return usagef("--restart must not be negative")
	}
	// A command that cannot start makes no session to be left running.
	if _, err := exec.LookPath(argv[0]); err != nil {
		return belay.Invalid("command", "cannot run %q: %v", argv[0], err)
	}
	wd, err := a.project(ctx, svc)
	if err != nil {
		return err
	}
	holder := holderName()
	var sess *belay.Session
	if sessionID != "" {
		if sessionID, err = a.sessionFlag(ctx, svc, sessionID); err != nil {
			return err
		}
		res, err := a.takeOver(ctx, svc, belay.ResumeInput{SessionID: sessionID, Holder: holder, Lease: 3 * heartbeatEvery})
		if err != nil {
			return err
		}
		sess = res.Session
	} else if sess, err = svc.CreateSession(ctx, belay.CreateSessionInput{ProjectPath: wd, Title: strings.Join(argv, " ")}); err != nil {
		return err
	}
	lease := belay.LeaseInput{SessionID: sess.ID, Holder: holder, Lease: 3 * heartbeatEvery}
	if _, err := svc.Heartbeat(ctx, lease); err != nil {
		return err
	}
	fmt.Fprintf(a.env.Stderr, "belay: running %q under session %s\n", strings.Join(argv, " "), sess.ID)
	// Stopped by the person: the session stays to be resumed.
	stopped := func() error {
		fmt.Fprintf(a.env.Stderr, "belay: stopped; resume with: belay resume %s\n", sess.ID)
		return exitCode(ExitInterrupted)
	}
	backoff := time.Second
	for attempt := 0; ; attempt++ {
		code, sig, err := a.runOnce(ctx, svc, lease, sess, attempt > 0, argv)
		if err != nil {
			return err
		}
		switch {
		case ctx.Err() != nil:
			return stopped()
		case code == 0 && sig == 0:
			_, err := svc.EndSession(context.WithoutCancel(ctx), belay.EndSessionInput{SessionID: sess.ID, Status: belay.SessionCompleted})
			return err
		case sig == 0 && attempt >= restarts:
			_, err := svc.EndSession(context.WithoutCancel(ctx), belay.EndSessionInput{SessionID: sess.ID, Status: belay.SessionFailed,
				Reason: fmt.Sprintf("the command exited with %d", code)})
			if err != nil {
				return err
			}
			return exitCode(code)
		case attempt >= restarts:
			fmt.Fprintf(a.env.Stderr, "belay: the command was killed (%s); the session is interrupted: belay resume %s\n", sig, sess.ID)
			return exitCode(128 + int(sig))
		}
		what := fmt.Sprintf("exited with %d", code)
		if sig != 0 {
			what = "was killed (" + sig.String() + ")"
		}
		fmt.Fprintf(a.env.Stderr, "belay: the command %s; restarting in %s (%d of %d)\n", what, backoff, attempt+1, restarts)
		select {
		case <-ctx.Done():
			return stopped()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
		res, err := svc.ResumeSession(ctx, belay.ResumeInput{SessionID: sess.ID, Holder: holder, Lease: lease.Lease})
		if err != nil {
			return err
		}
		sess = res.Session
	}
}

// takeOver resumes a session for `belay run --session`. A lease held by a
// process of this machine that is no longer running (a `belay resume` that
// printed where to go on and exited, a crashed run) is waited out, not
// refused: it lapses within its lease, and nothing else can renew it.
func (a *app) takeOver(ctx context.Context, svc belay.Service, in belay.ResumeInput) (*belay.ResumeResult, error) {
	gone := ""
	var until time.Time
	for {
		res, err := svc.ResumeSession(ctx, in)
		if !belay.IsCode(err, belay.CodeLeaseLost) {
			return res, err
		}
		sess, gerr := svc.GetSession(ctx, in.SessionID)
		switch {
		case gerr != nil || sess.Holder == "" || sess.LeaseExpiresAt == nil || processAlive(sess.Holder):
			return nil, err
		case gone != "" && (sess.Holder != gone || sess.LeaseExpiresAt.After(until)):
			// Another holder, or the lease renewed: a process with this
			// machine's name elsewhere holds it, alive after all.
			return nil, err
		}
		if gone == "" {
			gone, until = sess.Holder, *sess.LeaseExpiresAt
			fmt.Fprintf(a.env.Stderr, "belay: session %s is held by %s, which is no longer running; waiting for its lease to lapse (by %s)\n",
				sess.ID, gone, until.Local().Format(time.TimeOnly))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// processAlive says whether holder (see holderName) may still be running:
// false only for a process of this machine that is gone.
func processAlive(holder string) bool {
	host, pid, ok := strings.Cut(holder, ":")
	if me, _ := os.Hostname(); !ok || host != me {
		return true
	}
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return true
	}
	p, err := os.FindProcess(n)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}

// runOnce runs the command once while heartbeating, and reports its exit
// code or the signal that killed it. A killed command leaves the session
// interrupted: its lease is released so the next holder need not wait.
func (a *app) runOnce(ctx context.Context, svc belay.Service, lease belay.LeaseInput, sess *belay.Session, resumed bool,
	argv []string) (int, syscall.Signal, error) {
	child := exec.Command(argv[0], argv[1:]...)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, a.env.Stdout, a.env.Stderr
	child.Env = append(os.Environ(), "BELAY_SESSION="+sess.ID, "BELAY_PROJECT="+sess.ProjectPath)
	if dir, err := a.resolveDataDir(); err == nil && a.env.Getenv("BELAY_URL") == "" {
		child.Env = append(child.Env, "BELAY_DATA_DIR="+dir)
	}
	if resumed {
		child.Env = append(child.Env, "BELAY_RESUMED=1", "BELAY_HEAD="+sess.HeadCheckpointID)
	}
	// The child gets Ctrl-C from the terminal itself; belay forwards SIGTERM.
	if err := child.Start(); err != nil {
		return 0, 0, fmt.Errorf("start %s: %w", argv[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- child.Wait() }()
	beat := time.NewTicker(heartbeatEvery)
	defer beat.Stop()
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	defer signal.Stop(term)
	for {
		select {
		case err := <-done:
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					return -1, ws.Signal(), a.interruptOnExit(ctx, svc, lease)
				}
				return exit.ExitCode(), 0, nil
			}
			return 0, 0, err
		case <-ctx.Done():
			_ = child.Process.Signal(syscall.SIGINT)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = child.Process.Kill()
				<-done
			}
			return -1, syscall.SIGINT, a.interruptOnExit(ctx, svc, lease)
		case sig := <-term:
			_ = child.Process.Signal(sig)
		case <-beat.C:
			if _, err := svc.Heartbeat(ctx, lease); err != nil && ctx.Err() == nil {
				fmt.Fprintf(a.env.Stderr, "belay: heartbeat: %v\n", err)
			}
		}
	}
}

// interruptOnExit gives the lease up: the session is interrupted, to be resumed.
func (a *app) interruptOnExit(ctx context.Context, svc belay.Service, lease belay.LeaseInput) error {
	lease.Release = true
	_, err := svc.Heartbeat(context.WithoutCancel(ctx), lease)
	if belay.IsCode(err, belay.CodeLeaseLost) {
		return nil
	}
	return err
}

func (a *app) cleanupCommand() *cobra.Command {
	var olderThan string
	var statuses []string
	var in belay.CleanupInput
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Delete old ended sessions and their snapshots, and say what it freed",
		Long: `Delete ended sessions (completed and abandoned unless --status says otherwise)
not changed for --older-than, keeping the --keep-last newest of each project,
with their checkpoints and snapshots. --dry-run lists them and deletes nothing.`,
		Example: `  belay cleanup --older-than 30d --dry-run
  belay cleanup --status completed,failed,abandoned --keep-last 3`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := parseAge("older-than", olderThan)
			if err != nil {
				return err
			}
			in.OlderThan = d
			if err := keepFlag("keep-last", in.KeepLast); err != nil {
				return err
			}
			for _, s := range statuses {
				for _, one := range strings.Split(s, ",") {
					in.Statuses = append(in.Statuses, belay.SessionStatus(strings.TrimSpace(one)))
				}
			}
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			res, err := svc.CleanupSessions(ctx, in)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(res)
			}
			verb := "Deleted"
			if res.DryRun {
				verb = "Would delete"
			}
			fmt.Fprintf(a.env.Stdout, "%s %d sessions, %d checkpoints, %d snapshot refs; freed %s.\n",
				verb, len(res.Sessions), res.Checkpoints, res.Refs, humanBytes(res.BytesFreed))
			for _, id := range res.Sessions {
				fmt.Fprintf(a.env.Stdout, "  %s\n", id)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&olderThan, "older-than", "30d", "only sessions unchanged this long (e.g. 12h, 30d; 0 for any)")
	f.StringArrayVar(&statuses, "status", nil, "only these statuses, comma-separated (default completed,abandoned)")
	f.IntVar(&in.KeepLast, "keep-last", 0, "keep this many newest ended sessions per project")
	f.BoolVar(&in.DryRun, "dry-run", false, "list what would go, delete nothing")
	return cmd
}

// parseAge reads flag's duration, which may be in days ("30d"), up to
// belay.MaxSeconds.
func parseAge(flag, s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	bad := usagef("--%s %q: give a duration like 12h or 30d, at most %dd (100 years)", flag, s, belay.MaxSeconds/(24*60*60))
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int64
		if _, err := fmt.Sscanf(days, "%d", &n); err != nil || n < 0 || fmt.Sprint(n) != days || n > belay.MaxSeconds/(24*60*60) {
			return 0, bad
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > belay.MaxSeconds*time.Second {
		return 0, bad
	}
	return d, nil
}

func (a *app) retentionCommand() *cobra.Command {
	var keepLast int
	var maxAge string
	cmd := &cobra.Command{
		Use:   "retention",
		Short: "Show or set how many checkpoints a project keeps (admins)",
		Long: `Without flags, list the retention policies. With --keep-last and/or --max-age,
set the policy of the project (found from the working directory as git
does, or --project): the sweeper of
` + "`belay serve`" + ` then deletes, in each session, the checkpoints beyond the
--keep-last newest that are older than --max-age, with their snapshots. HITL
and phase checkpoints, a session's head and every checkpoint a branch starts
from are always kept. --keep-last 0 --max-age 0 removes the policy.`,
		Example: `  belay retention --keep-last 50 --max-age 30d
  belay retention`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("keep-last") && !cmd.Flags().Changed("max-age") {
				list, err := svc.ListRetention(ctx)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(list)
				}
				if len(list) == 0 {
					fmt.Fprintln(a.env.Stdout, "No retention policies: every checkpoint is kept.")
				}
				for _, p := range list {
					fmt.Fprintf(a.env.Stdout, "%s  keep last %d, max age %s\n", belay.Printable(p.ProjectPath), p.KeepLast, p.MaxAge)
				}
				return nil
			}
			if err := keepFlag("keep-last", keepLast); err != nil {
				return err
			}
			p := belay.RetentionPolicy{KeepLast: keepLast}
			if p.MaxAge, err = parseAge("max-age", maxAge); err != nil {
				return err
			}
			if p.ProjectPath, err = a.project(ctx, svc); err != nil {
				return err
			}
			stored, err := svc.SetRetention(ctx, p)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(stored)
			}
			fmt.Fprintf(a.env.Stdout, "Retention of %s: keep last %d, max age %s.\n", belay.Printable(stored.ProjectPath), stored.KeepLast, stored.MaxAge)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&keepLast, "keep-last", 0, "keep this many newest checkpoints per session")
	f.StringVar(&maxAge, "max-age", "0", "delete older checkpoints beyond --keep-last (e.g. 30d; 0: any age)")
	return cmd
}
