package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
)

// printSnapshot reports a saved checkpoint's snapshot and, as warnings, the
// files it left out.
func (a *app) printSnapshot(cp *belay.Checkpoint) {
	if cp.WorkspaceRef == "" || cp.Files == nil {
		return
	}
	fmt.Fprintf(a.env.Stdout, "Snapshot %.12s: %d created, %d modified, %d deleted\n", cp.WorkspaceRef,
		len(cp.Files.Created), len(cp.Files.Modified), len(cp.Files.Deleted))
	a.warnSkipped(cp, "were not snapshotted and cannot be rolled back")
}

// warnSkipped lists the files cp's snapshot left out.
func (a *app) warnSkipped(cp *belay.Checkpoint, what string) {
	skipped := core.SkippedFiles(cp)
	if len(skipped) == 0 {
		return
	}
	fmt.Fprintf(a.env.Stderr, "belay: warning: %d files %s:\n", len(skipped), what)
	for _, sk := range skipped {
		fmt.Fprintf(a.env.Stderr, "  %s (%s)\n", quoted(sk.Path), sk.Reason)
	}
}

// quoted shows a path on one line.
func quoted(p string) string {
	if strings.ContainsAny(p, "\n\r\t") {
		return fmt.Sprintf("%q", p)
	}
	return p
}

// absPath resolves a file name given on the command line against the working
// directory.
func (a *app) absPath(name string) (string, error) {
	if filepath.IsAbs(name) {
		return filepath.Clean(name), nil
	}
	wd, err := a.cwd()
	if err != nil {
		return "", err
	}
	return filepath.Join(wd, name), nil
}

func (a *app) rollbackCommand() *cobra.Command {
	var in belay.RestoreInput
	var sessionID string
	cmd := &cobra.Command{
		Use:   "rollback N|ID",
		Short: "Roll the project's files and the agent state back to a checkpoint",
		Long: `Roll back to checkpoint N of the active session (or --session), or to a
checkpoint id. The current state is saved first as an automatic checkpoint
named pre-rollback: rolling back to it undoes the rollback.

Only the files that differ are touched: files modified or deleted since the
checkpoint are written back, files created since are removed. Ignored files
and files no snapshot holds are left alone; your git repository is never
touched. New checkpoints descend from the checkpoint rolled back to.`,
		Example: `  belay rollback 3 --reason "wrong direction"
  belay rollback 3 --dry-run`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx, svc, cp, err := a.openCheckpoint(cmd, argv[0], sessionID)
			if err != nil {
				return err
			}
			in.CheckpointID = cp.ID
			res, err := svc.RestoreCheckpoint(ctx, in)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(res)
			}
			a.printRestore(res, sessionID != "")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.Reason, "reason", "", "why, kept in the rollback history")
	f.BoolVar(&in.DryRun, "dry-run", false, "list what would change and change nothing")
	f.StringVar(&sessionID, "session", "", "session of checkpoint number N (default: the active session)")
	return cmd
}

func (a *app) printRestore(res *belay.RestoreResult, withSession bool) {
	w := a.env.Stdout
	cp := res.Checkpoint
	if res.DryRun {
		fmt.Fprintf(w, "Rolling back to checkpoint #%d would restore %d files and remove %d (dry run: nothing changed).\n",
			cp.Seq, len(res.RestoredFiles), len(res.RemovedFiles))
	} else {
		fmt.Fprintf(w, "Rolled back to checkpoint #%d %s of session %s: %d files restored, %d removed.\n",
			cp.Seq, cp.ID, cp.SessionID, len(res.RestoredFiles), len(res.RemovedFiles))
	}
	for _, p := range res.RestoredFiles {
		fmt.Fprintf(w, "  restore  %s\n", quoted(p))
	}
	for _, p := range res.RemovedFiles {
		fmt.Fprintf(w, "  remove   %s\n", quoted(p))
	}
	if cp.WorkspaceRef == "" {
		fmt.Fprintln(w, "The checkpoint has no snapshot: only the agent state was rolled back.")
	}
	if res.SafetyCheckpoint != nil {
		a.warnSkipped(res.SafetyCheckpoint, "were not in the pre-rollback snapshot and were left as they are")
		undo := fmt.Sprintf("belay rollback %d", res.SafetyCheckpoint.Seq)
		if withSession {
			undo += " --session " + cp.SessionID
		}
		fmt.Fprintf(w, "Undo with: %s\n", undo)
	}
}

func (a *app) rollbacksCommand() *cobra.Command {
	var sessionID string
	cmd := &cobra.Command{
		Use:   "rollbacks",
		Short: "List the rollbacks of the active session (or --session), oldest first",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			if sessionID == "" {
				sess, err := a.activeSession(ctx, svc)
				if err != nil {
					return err
				}
				sessionID = sess.ID
			}
			list, err := svc.ListRollbacks(ctx, sessionID)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"items": list})
			}
			if len(list) == 0 {
				fmt.Fprintln(a.env.Stdout, "No rollbacks.")
				return nil
			}
			tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTARGET\tPRE-ROLLBACK\tUSER\tFILES\tWHEN\tREASON")
			for _, rb := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", short(rb.ID), short(rb.TargetID), dash(short(rb.FromCheckpointID)),
					rb.UserID, len(rb.RestoredFiles), ago(rb.CreatedAt), dash(clip(rb.Reason, 40)))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&sessionID, "session", "", "session id (default: the active session)")
	return cmd
}

func (a *app) diffCommand() *cobra.Command {
	var sessionID string
	var stat bool
	cmd := &cobra.Command{
		Use:   "diff N [M]",
		Short: "Show what changed since checkpoint N (or between N and M)",
		Long: `Compare checkpoint N's snapshot with the project's files as they are now, or
with checkpoint M's. N and M are numbers in the active session (or --session)
or checkpoint ids. Prints a summary and a unified diff; --stat prints the
summary only.`,
		Args: args(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			from, err := a.resolveCheckpoint(ctx, svc, argv[0], sessionID)
			if err != nil {
				return err
			}
			in := belay.DiffInput{CheckpointID: from.ID}
			if len(argv) == 2 {
				to, err := a.resolveCheckpoint(ctx, svc, argv[1], sessionID)
				if err != nil {
					return err
				}
				in.To = to.ID
			}
			res, err := svc.DiffCheckpoint(ctx, in)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(res)
			}
			a.printDiff(res, stat)
			return nil
		},
	}
	cmd.Flags().StringVar(&sessionID, "session", "", "session of checkpoint numbers (default: the active session)")
	cmd.Flags().BoolVar(&stat, "stat", false, "print the summary only")
	return cmd
}

func (a *app) printDiff(res *belay.DiffResult, stat bool) {
	w := a.env.Stdout
	to := "the working tree"
	if res.To != nil {
		to = fmt.Sprintf("checkpoint #%d", res.To.Seq)
	}
	fmt.Fprintf(w, "Changes from checkpoint #%d to %s:\n", res.From.Seq, to)
	if len(res.Files) == 0 {
		fmt.Fprintln(w, "  none")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range res.Files {
		name := quoted(f.Path)
		if f.OldPath != "" {
			name = quoted(f.OldPath) + " → " + name
		}
		counts := fmt.Sprintf("+%d -%d", f.Additions, f.Deletions)
		if f.Binary {
			counts = "binary"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", f.Status, name, counts)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d files changed, %d insertions(+), %d deletions(-)\n", len(res.Files), res.Additions, res.Deletions)
	if !stat && res.Patch != "" {
		fmt.Fprintf(w, "\n%s", res.Patch)
	}
}

func (a *app) validateCommand() *cobra.Command {
	var in belay.ValidateInput
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Check every checkpoint against its checksum and its snapshot",
		Long: `Check the integrity of every session's checkpoints (or --session's): each
against its checksum, each snapshot for presence, and each workspace's
snapshot repository: missing objects, lock files of git commands that were
killed, a rollback a crash interrupted, files a crash left empty. Problems
are printed with ways to recover; --repair rebuilds damaged or missing
checkpoints from their snapshot commits, finishes an interrupted rollback
and rebuilds what git can rebuild of the snapshot repository.

Exits 1 when problems remain.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			rep, err := svc.Validate(ctx, in)
			if err != nil {
				return err
			}
			if a.json {
				if err := a.printJSON(rep); err != nil {
					return err
				}
			} else {
				a.printValidation(rep)
			}
			if !rep.OK {
				return exitCode(ExitError)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&in.SessionID, "session", "", "check only this session")
	cmd.Flags().BoolVar(&in.Repair, "repair", false, "rebuild damaged or missing checkpoints from their snapshots, and repair snapshot repositories")
	return cmd
}

func (a *app) printValidation(rep *belay.ValidationReport) {
	w := a.env.Stdout
	fmt.Fprintf(w, "Checked %d sessions, %d checkpoints, %d workspaces.\n", rep.Sessions, rep.Checkpoints, rep.Workspaces)
	for _, p := range rep.Problems {
		where := ""
		if p.SessionID != "" {
			where = " (session " + p.SessionID + ")"
		}
		switch {
		case p.Repaired && p.Kind == belay.ProblemWorkspace:
			fmt.Fprintf(w, "\n✓ REPAIRED: workspace %s%s\n  %s\n", p.ProjectPath, where, p.Message)
			continue
		case p.Repaired:
			fmt.Fprintf(w, "\n✓ REPAIRED: cp-%02d%s\n  %s\n", p.Seq, where, p.Message)
			continue
		case p.Kind == belay.ProblemWorkspace:
			fmt.Fprintf(w, "\n⚠️  WORKSPACE DAMAGED: %s%s\n", p.ProjectPath, where)
		default:
			fmt.Fprintf(w, "\n⚠️  CHECKPOINT CORRUPTED: cp-%02d%s\n", p.Seq, where)
		}
		fmt.Fprintf(w, "  %s\n", p.Message)
		if len(p.Recovery) > 0 {
			fmt.Fprintln(w, "\n  Options:")
			for _, o := range p.Recovery {
				fmt.Fprintf(w, "  - %s\n      → %s\n", o.Command, o.Description)
			}
		}
	}
	if rep.OK {
		fmt.Fprintln(w, "\nNo problems left.")
	}
}

func (a *app) exportCommand() *cobra.Command {
	var output, branch string
	var gitBranch bool
	cmd := &cobra.Command{
		Use:   "export [SESSION]",
		Short: "Export a session to an archive, or its snapshots to a git branch",
		Long: `Export a session (default: the active one) to a .tar.gz archive holding
manifest.json, one cp-NN-<name>.json per checkpoint, rollback-history.json
and a git bundle of its snapshots; 'belay import' reads it on another machine.

With --git-branch, write the snapshots instead as branch belay/<session id>
(or --branch) of the project's own git repository: one commit per checkpoint,
on top of your HEAD, which stays where it is.`,
		Example: `  belay export -o session.tar.gz
  belay export --git-branch`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			sessionID := ""
			if len(argv) == 1 {
				sessionID = argv[0]
			} else {
				sess, err := a.activeSession(ctx, svc)
				if err != nil {
					return err
				}
				sessionID = sess.ID
			}
			if gitBranch {
				res, err := svc.ExportBranch(ctx, belay.ExportBranchInput{SessionID: sessionID, Branch: branch})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(res)
				}
				fmt.Fprintf(a.env.Stdout, "Wrote branch %s in %s: %d commits, one per checkpoint with a snapshot.\n", res.Branch, res.ProjectPath, res.Commits)
				return nil
			}
			if branch != "" {
				return usagef("--branch goes with --git-branch")
			}
			return a.exportArchive(ctx, svc, sessionID, output)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "", "archive file, - for standard output (default belay-<session id>.tar.gz)")
	f.BoolVar(&gitBranch, "git-branch", false, "write the snapshots as a branch of the project's git repository")
	f.StringVar(&branch, "branch", "", "branch name for --git-branch (default belay/<session id>)")
	return cmd
}

// exportArchive writes the archive to a temporary file renamed into place,
// so a failed export leaves no partial file.
func (a *app) exportArchive(ctx context.Context, svc belay.Service, sessionID, output string) error {
	if output == "-" {
		return svc.ExportSession(ctx, sessionID, a.env.Stdout)
	}
	if output == "" {
		output = "belay-" + sessionID + ".tar.gz"
	}
	path, err := a.absPath(output)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer os.Remove(f.Name())
	err = svc.ExportSession(ctx, sessionID, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if a.json {
		return a.printJSON(map[string]any{"sessionId": sessionID, "file": path})
	}
	fmt.Fprintf(a.env.Stdout, "Exported session %s to %s\n", sessionID, path)
	return nil
}

func (a *app) importCommand() *cobra.Command {
	var project string
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Import a session exported with 'belay export'",
		Long: `Import a session from an archive written by 'belay export' (- reads standard
input), with its checkpoints, rollback history and snapshots, so it can be
rolled back here. --project names the project's directory on this machine
when it differs from where the session was exported.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			var in belay.ImportInput
			if project != "" {
				if in.ProjectPath, err = a.absPath(project); err != nil {
					return err
				}
			}
			var r io.Reader = a.env.Stdin
			if argv[0] != "-" {
				path, err := a.absPath(argv[0])
				if err != nil {
					return err
				}
				f, err := os.Open(path)
				if err != nil {
					return belay.Invalid("file", "cannot read %s: %v", argv[0], err)
				}
				defer f.Close()
				r = f
			}
			res, err := svc.ImportSession(ctx, in, r)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(res)
			}
			fmt.Fprintf(a.env.Stdout, "Imported session %s into %s: %d checkpoints, %d rollbacks, %d snapshots.\n",
				res.Session.ID, dash(res.Session.ProjectPath), res.Checkpoints, res.Rollbacks, res.Snapshots)
			return nil
		},
	}
	cmd.Flags().StringVar(&project, "project", "", "the project's directory on this machine")
	return cmd
}

func (a *app) duCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "du",
		Short: "Show the space snapshots and checkpoints use",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			rep, err := svc.DiskUsage(ctx)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(rep)
			}
			tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "WORKSPACE\tSESSIONS\tSNAPSHOTS")
			for _, w := range rep.Workspaces {
				size := humanBytes(w.Bytes)
				if w.Error != "" {
					size = "? (" + clip(w.Error, 60) + ")"
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\n", w.ProjectPath, w.Sessions, size)
			}
			tw.Flush()
			fmt.Fprintln(a.env.Stdout)
			tw = tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SESSION\tCHECKPOINTS\tSTATE\tSTATUS\tPROJECT")
			for _, s := range rep.Sessions {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", s.ID, s.Checkpoints, humanBytes(s.StateBytes), s.Status, dash(s.ProjectPath))
			}
			tw.Flush()
			fmt.Fprintf(a.env.Stdout, "\nTotal: %s of snapshots, %s of checkpoint state.\n", humanBytes(rep.WorkspaceBytes), humanBytes(rep.StateBytes))
			return nil
		},
	}
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// withSessionDelete adds `sessions delete` to the sessions command.
func (a *app) withSessionDelete(sessions *cobra.Command) *cobra.Command {
	sessions.AddCommand(&cobra.Command{
		Use:   "delete ID",
		Short: "Delete a session with its checkpoints, rollbacks and snapshots",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			res, err := svc.DeleteSession(ctx, argv[0])
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(res)
			}
			fmt.Fprintf(a.env.Stdout, "Deleted session %s and its %d checkpoints.\n", res.SessionID, res.Checkpoints)
			if res.Warning != "" {
				fmt.Fprintf(a.env.Stderr, "belay: warning: %s\n", res.Warning)
			}
			return nil
		},
	})
	return sessions
}
