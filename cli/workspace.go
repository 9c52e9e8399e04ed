package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"charm.land/huh/v2"
	"github.com/spf13/cobra"

	"github.com/belayhq/belay"
)

// printSnapshot reports a saved checkpoint's snapshot and, as warnings, the
// files it left out.
func (a *app) printSnapshot(cp *belay.Checkpoint) {
	if !cp.HasSnapshot() {
		return
	}
	fmt.Fprintf(a.env.Stdout, "Snapshot %.12s: %d created, %d modified, %d deleted\n", cp.WorkspaceRef,
		len(cp.Files.Created), len(cp.Files.Modified), len(cp.Files.Deleted))
	a.warnSkipped(cp, "were not snapshotted and cannot be rolled back")
}

// warnSkipped lists the files cp's snapshot left out.
func (a *app) warnSkipped(cp *belay.Checkpoint, what string) {
	skipped := cp.SkippedFiles()
	if len(skipped) == 0 {
		return
	}
	fmt.Fprintf(a.env.Stderr, "belay: warning: %d files %s:\n", len(skipped), what)
	for _, sk := range skipped {
		fmt.Fprintf(a.env.Stderr, "  %s (%s)\n", quoted(sk.Path), sk.Reason)
	}
}

// quoted shows a path on one line, any control character in it escaped.
func quoted(p string) string {
	if strings.ContainsFunc(p, unicode.IsControl) || !utf8.ValidString(p) {
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

// projectPaths resolves --project values, which may be relative, in place;
// an empty one stays empty (the command then finds the project).
func (a *app) projectPaths(paths ...*string) error {
	for _, p := range paths {
		if *p == "" {
			continue
		}
		abs, err := a.absPath(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	return nil
}

func (a *app) rollbackCommand() *cobra.Command {
	var in belay.RestoreInput
	var sessionID string
	var step int
	cmd := &cobra.Command{
		Use:   "rollback N|ID|NAME",
		Short: "Roll the project's files and the agent state back to a checkpoint",
		Long: `Roll back to checkpoint N of the active session (or --session), or to a
checkpoint id. The current state is saved first as an automatic checkpoint
named pre-rollback: rolling back to it undoes the rollback.

Only the files that differ are touched: files modified or deleted since the
checkpoint are written back, files created since are removed. Ignored files
and files no snapshot holds are left alone, and a rollback that would write
over one is refused before it changes anything (move it away, then roll
back); your git repository is never touched. New checkpoints descend from
the checkpoint rolled back to.`,
		Example: `  belay rollback 3 --reason "wrong direction"
  belay rollback 3 --dry-run`,
		Args: oneCheckpoint(&step),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx, svc, cp, err := a.openCheckpoint(cmd, argv, step, sessionID)
			if err != nil {
				return err
			}
			in.CheckpointID = cp.ID
			pctx, done := a.withProgress(ctx, "rolling back")
			res, err := svc.RestoreCheckpoint(pctx, in)
			done()
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(res)
			}
			a.printRestore(res, a.here(ctx, svc))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.Reason, "reason", "", "why, kept in the rollback history")
	f.BoolVar(&in.DryRun, "dry-run", false, "list what would change and change nothing")
	f.StringVar(&sessionID, "session", "", "session of checkpoint number N (default: the active session)")
	stepFlag(cmd, &step)
	return cmd
}

// place is where a command runs: the project and its current session
// ("" for none).
type place struct{ project, session string }

// here returns the project the command works in and its current session,
// as far as they can be told.
func (a *app) here(ctx context.Context, svc belay.Service) place {
	var p place
	p.project, _ = a.project(ctx, svc)
	if sess, err := a.activeSession(ctx, svc); err == nil {
		p.session = sess.ID
	}
	return p
}

// printRestore reports a rollback run at here: a rollback of another
// project names it, and its undo command names the session when a number
// alone would mean another one there.
func (a *app) printRestore(res *belay.RestoreResult, here place) {
	w := a.env.Stdout
	cp := res.Checkpoint
	where := ""
	if !samePath(cp.ProjectPath, here.project) {
		where = " in " + quoted(cp.ProjectPath)
	}
	if res.DryRun {
		fmt.Fprintf(w, "Rolling back to checkpoint #%d%s would restore %s and remove %d (dry run: nothing changed).\n",
			cp.Seq, where, plural(len(res.RestoredFiles), "file"), len(res.RemovedFiles))
	} else {
		fmt.Fprintf(w, "Rolled back to checkpoint #%d %s of session %s%s: %s restored, %d removed.\n",
			cp.Seq, cp.ID, cp.SessionID, where, plural(len(res.RestoredFiles), "file"), len(res.RemovedFiles))
	}
	for _, p := range res.RestoredFiles {
		fmt.Fprintf(w, "  restore  %s\n", quoted(p))
	}
	for _, p := range res.RemovedFiles {
		fmt.Fprintf(w, "  remove   %s\n", quoted(p))
	}
	for _, p := range res.KeptFiles {
		fmt.Fprintf(w, "  keep     %s (left out of checkpoint #%d's snapshot, left as it is)\n", quoted(p), cp.Seq)
	}
	switch {
	case !cp.HasSnapshot() && res.DryRun:
		fmt.Fprintln(w, "The checkpoint has no snapshot: only the agent state would be rolled back.")
	case !cp.HasSnapshot():
		fmt.Fprintln(w, "The checkpoint has no snapshot: only the agent state was rolled back.")
	}
	switch {
	case res.SafetyCheckpoint != nil && res.SafetyCheckpoint.ID == cp.ID && !cp.HasSnapshot():
		fmt.Fprintf(w, "The agent state was already checkpoint #%d's: nothing to undo.\n", cp.Seq)
	case res.SafetyCheckpoint != nil && res.SafetyCheckpoint.ID == cp.ID:
		fmt.Fprintf(w, "Nothing had changed since checkpoint #%d: nothing to undo.\n", cp.Seq)
	case res.SafetyCheckpoint != nil:
		a.warnSkipped(res.SafetyCheckpoint, "were not in the pre-rollback snapshot and were left as they are")
		undo := fmt.Sprintf("belay rollback %d", res.SafetyCheckpoint.Seq)
		if cp.SessionID != here.session {
			undo = "belay rollback " + res.SafetyCheckpoint.ID
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
			sess, err := a.namedSession(ctx, svc, sessionID, sessionHint)
			if err != nil {
				return err
			}
			list, err := svc.ListRollbacks(ctx, sess.ID)
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
			return a.paged(func(bool) error {
				ids, checkpoints := newAbbrev(), newAbbrev()
				for _, rb := range list {
					ids.add(rb.ID)
					checkpoints.add(rb.TargetID)
					checkpoints.add(rb.FromCheckpointID)
				}
				tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tTARGET\tPRE-ROLLBACK\tUSER\tRESTORED\tWHEN\tREASON")
				for _, rb := range list {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", ids.of(rb.ID), checkpoints.of(rb.TargetID), checkpoints.of(rb.FromCheckpointID),
						dash(rb.UserID), len(rb.RestoredFiles), ago(rb.CreatedAt), dash(belay.OneLine(rb.Reason, 40)))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&sessionID, "session", "", "session id or unique prefix (default: the active session)")
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
			return a.paged(func(color bool) error {
				a.printDiff(res, stat, color)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&sessionID, "session", "", "session of checkpoint numbers (default: the active session)")
	cmd.Flags().BoolVar(&stat, "stat", false, "print the summary only")
	return cmd
}

// diffColors colour a file's status in a diff's summary.
var diffColors = map[string]string{belay.FileAdded: colorGreen, belay.FileDeleted: colorRed,
	belay.FileModified: colorYellow, belay.FileRenamed: colorCyan}

func (a *app) printDiff(res *belay.DiffResult, stat, color bool) {
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
		status := f.Status
		if color {
			// Padded before it is painted: tabwriter would count the escapes.
			status = paint(color, diffColors[f.Status], fmt.Sprintf("%-8s", f.Status))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", status, name, counts)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d files changed, %d insertions(+), %d deletions(-)\n", len(res.Files), res.Additions, res.Deletions)
	if stat || res.Patch == "" {
		return
	}
	fmt.Fprintln(w)
	if color {
		colorPatch(w, res.Patch)
	} else {
		fmt.Fprint(w, res.Patch)
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
			if in.SessionID, err = a.sessionFlag(ctx, svc, in.SessionID); err != nil {
				return err
			}
			pctx, done := a.withProgress(ctx, "validating")
			rep, err := svc.Validate(pctx, in)
			done()
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
	cmd.Flags().StringVar(&in.SessionID, "session", "", "check only this session (id or unique prefix)")
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
			fmt.Fprintf(w, "\n✓ REPAIRED: workspace %s%s\n  %s\n", belay.Printable(p.ProjectPath), where, belay.Printable(p.Message))
			continue
		case p.Repaired:
			fmt.Fprintf(w, "\n✓ REPAIRED: cp-%02d%s\n  %s\n", p.Seq, where, belay.Printable(p.Message))
			continue
		case p.Kind == belay.ProblemWorkspace:
			fmt.Fprintf(w, "\n⚠️  WORKSPACE DAMAGED: %s%s\n", belay.Printable(p.ProjectPath), where)
		case p.Kind == belay.ProblemMissingRef:
			fmt.Fprintf(w, "\n⚠️  SNAPSHOT REF LOST: cp-%02d%s\n", p.Seq, where)
		default:
			fmt.Fprintf(w, "\n⚠️  CHECKPOINT CORRUPTED: cp-%02d%s\n", p.Seq, where)
		}
		fmt.Fprintf(w, "  %s\n", belay.Printable(p.Message))
		if len(p.Recovery) > 0 {
			fmt.Fprintln(w, "\n  Options:")
			for _, o := range p.Recovery {
				fmt.Fprintf(w, "  - %s\n      → %s\n", recoveryCommand(o), o.Description)
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

The archive is <session id>.belay.tar.gz in the working directory, or, when
that is inside the session's project, in the data directory's exports/
folder. Files named *.belay.tar.gz are never snapshotted, so an archive in the
project is neither saved nor removed by a rollback.

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
			ref := ""
			if len(argv) == 1 {
				ref = argv[0]
			}
			sess, err := a.namedSession(ctx, svc, ref, "name one: belay export SESSION (see `belay sessions`)")
			if err != nil {
				return err
			}
			if gitBranch {
				res, err := svc.ExportBranch(ctx, belay.ExportBranchInput{SessionID: sess.ID, Branch: branch})
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(res)
				}
				fmt.Fprintf(a.env.Stdout, "Wrote branch %s in %s: %d commits, one per checkpoint with a snapshot.\n", res.Branch, belay.Printable(res.ProjectPath), res.Commits)
				return nil
			}
			if branch != "" {
				return usagef("--branch goes with --git-branch")
			}
			return a.exportArchive(ctx, svc, sess, output)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "", "archive file, - for standard output (default <session id>.belay.tar.gz, outside the project)")
	f.BoolVar(&gitBranch, "git-branch", false, "write the snapshots as a branch of the project's git repository")
	f.StringVar(&branch, "branch", "", "branch name for --git-branch (default belay/<session id>)")
	return cmd
}

// exportArchive writes the archive to a temporary file renamed into place,
// so a failed export leaves no partial file. By default it goes to the
// working directory, unless that is inside the session's project, where the
// next save would snapshot it and a rollback remove it: then to the data
// directory's exports/ folder.
func (a *app) exportArchive(ctx context.Context, svc belay.Service, sess *belay.Session, output string) error {
	if output == "-" {
		return svc.ExportSession(ctx, sess.ID, a.env.Stdout)
	}
	wd, err := a.cwd()
	if err != nil {
		return err
	}
	inProject := sess.ProjectPath != "" && within(wd, sess.ProjectPath)
	var path, note string
	switch {
	case output != "":
		if path, err = a.absPath(output); err != nil {
			return err
		}
		if err := archiveTarget(path); err != nil {
			return err
		}
		if sess.ProjectPath != "" && within(path, sess.ProjectPath) && !strings.HasSuffix(path, belay.ArchiveSuffix) {
			fmt.Fprintf(a.env.Stderr, "belay: warning: %s is inside the project: the next save will snapshot it and a rollback may remove it; name it *%s to keep it out\n",
				output, belay.ArchiveSuffix)
		}
	case inProject:
		dir, err := a.resolveDataDir()
		if err != nil {
			return err
		}
		dir = filepath.Join(dir, "exports")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		path = filepath.Join(dir, sess.ID+belay.ArchiveSuffix)
		note = " (in belay's data directory: the working directory is inside the project; -o names another place)"
	default:
		path = filepath.Join(wd, sess.ID+belay.ArchiveSuffix)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return archiveDirError(filepath.Dir(path), err)
	}
	defer os.Remove(f.Name())
	pctx, done := a.withProgress(ctx, "exporting")
	err = svc.ExportSession(pctx, sess.ID, f)
	done()
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
		return a.printJSON(map[string]any{"sessionId": sess.ID, "file": path})
	}
	fmt.Fprintf(a.env.Stdout, "Exported session %s to %s%s\n", sess.ID, path, note)
	return nil
}

// archiveTarget refuses an -o that names a directory, before anything is
// written: the rename into place would fail only once the archive is made.
func archiveTarget(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return belay.Invalid("output", "%s is a directory: name the archive file to write", path)
	}
	return nil
}

// archiveDirError says why no file can be made in dir, the directory the
// archive goes to, naming it rather than the temporary file tried there.
func archiveDirError(dir string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return belay.Invalid("output", "directory %s does not exist", dir)
	case errors.Is(err, syscall.ENOTDIR):
		return belay.Invalid("output", "%s is not a directory", dir)
	}
	return belay.Invalid("output", "cannot write in directory %s: %v", dir, err)
}

// within reports whether path is dir or lies below it, comparing the paths
// with symlinks resolved where they exist.
func within(path, dir string) bool {
	rel, err := filepath.Rel(resolved(dir), resolved(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// samePath reports whether a and b name one file, symlinks resolved where
// they exist: belay keeps a project by its directory's path, which may not be
// the path the working directory was reached by.
func samePath(a, b string) bool {
	return resolved(a) == resolved(b)
}

// resolved returns p with symlinks resolved, as far as it exists.
func resolved(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	if r, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		return filepath.Join(r, filepath.Base(p))
	}
	return filepath.Clean(p)
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
			pctx, done := a.withProgress(ctx, "importing")
			res, err := svc.ImportSession(pctx, in, r)
			done()
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
		Short: "Show the space belay uses: snapshots per workspace, checkpoints per session",
		Long: `Show the space belay uses: each workspace's snapshots (belay's own git
repository for it), each session's checkpoints in the database, and the
database itself. On the local database (you are its admin) it also lists
snapshots no session refers to any more, marked orphaned: 'belay gc' removes
them.`,
		Args: args(cobra.NoArgs),
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
			return a.paged(func(bool) error {
				a.printUsage(rep)
				return nil
			})
		},
	}
}

func (a *app) printUsage(rep *belay.DiskUsageReport) {
	w := a.env.Stdout
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKSPACE\tSESSIONS\tSNAPSHOTS")
	orphans := 0
	for _, u := range rep.Workspaces {
		size := humanBytes(u.Bytes)
		if u.Error != "" {
			size = "? (" + belay.OneLine(u.Error, 60) + ")"
		}
		name := dash(u.ProjectPath)
		if u.Orphaned {
			orphans++
			name += " (orphaned)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", name, u.Sessions, size)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tCHECKPOINTS\tSTATE\tSTATUS\tPROJECT")
	for _, u := range rep.Sessions {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", u.ID, u.Checkpoints, humanBytes(u.StateBytes), u.Status, dash(u.ProjectPath))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nTotal: %s of snapshots, %s of checkpoint state", humanBytes(rep.WorkspaceBytes), humanBytes(rep.StateBytes))
	if rep.StateChunkBytes > 0 {
		fmt.Fprintf(w, " (large states stored as %s of shared chunks)", humanBytes(rep.StateChunkBytes))
	}
	if rep.DatabaseBytes > 0 {
		fmt.Fprintf(w, " in a database of %s", humanBytes(rep.DatabaseBytes))
	}
	fmt.Fprintln(w, ".")
	if orphans > 0 {
		fmt.Fprintf(w, "%d orphaned: no session refers to them; 'belay gc' removes them.\n", orphans)
	}
}

func (a *app) gcCommand() *cobra.Command {
	var in belay.GCInput
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Reclaim the space snapshots and agent states no longer need",
		Long: `Reclaim disk space: delete the chunks of large agent states that no
checkpoint refers to any more (those of deleted checkpoints and sessions); in
every workspace's snapshot repository, drop what no checkpoint needs (the
snapshots of deleted sessions and deleted checkpoints, objects of failed saves
and diffs); and
remove the snapshot repositories of workspaces no session refers to (listed
as orphaned by 'belay du'). Admins only.

--dry-run says what would go and changes nothing; for a workspace that stays,
the space it would free is an estimate.`,
		Example: `  belay gc --dry-run
  belay gc`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			rep, err := svc.CollectGarbage(ctx, in)
			if err != nil {
				return err
			}
			if a.json {
				if err := a.printJSON(rep); err != nil {
					return err
				}
			} else {
				a.printGC(rep)
			}
			// A workspace gc could not clean is a failure, said above.
			for _, g := range rep.Workspaces {
				if g.Error != "" {
					return exitCode(ExitError)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&in.DryRun, "dry-run", false, "say what would be freed and change nothing")
	return cmd
}

func (a *app) printGC(rep *belay.GCReport) {
	w := a.env.Stdout
	verb, removeVerb := "freed", "removed"
	if rep.DryRun {
		verb, removeVerb = "would free", "would remove"
	}
	if rep.StateChunks > 0 {
		fmt.Fprintf(w, "  agent state: %s %s (%d chunks no checkpoint refers to)\n", verb, humanBytes(rep.StateBytes), rep.StateChunks)
	}
	for _, g := range rep.Workspaces {
		name := belay.Printable(g.ProjectPath)
		if name == "" {
			name = "(unknown workspace)"
		}
		switch {
		case g.Error != "":
			fmt.Fprintf(w, "  %s: %s\n", name, belay.Printable(g.Error))
		case g.Removed:
			why := "no snapshot left"
			if g.Orphaned {
				why = "no session refers to it"
			}
			fmt.Fprintf(w, "  %s: %s all snapshots (%s), %s %s\n", name, removeVerb, why, verb, humanBytes(g.BytesFreed))
		case g.BytesFreed > 0 || g.DeletedSessions > 0 || g.DeletedCheckpoints > 0:
			var of []string
			if g.DeletedSessions > 0 {
				of = append(of, plural(g.DeletedSessions, "deleted session"))
			}
			if g.DeletedCheckpoints > 0 {
				of = append(of, plural(g.DeletedCheckpoints, "deleted checkpoint"))
			}
			extra := ""
			if len(of) > 0 {
				extra = " (snapshots of " + strings.Join(of, " and ") + ")"
			}
			fmt.Fprintf(w, "  %s: %s %s%s\n", name, verb, humanBytes(g.BytesFreed), extra)
		}
	}
	if rep.DryRun {
		fmt.Fprintf(w, "Would free about %s (dry run: nothing changed).\n", humanBytes(rep.FreedBytes))
		return
	}
	cleaned := 0
	for _, g := range rep.Workspaces {
		if g.Error == "" {
			cleaned++
		}
	}
	fmt.Fprintf(w, "Freed %s in %s.\n", humanBytes(rep.FreedBytes), plural(cleaned, "workspace"))
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
	var yes bool
	del := &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a session with its checkpoints, rollbacks and snapshots (ID or a unique prefix)",
		Long: `Delete a session with its checkpoints and rollback history, and give back the
space only its snapshots used (all of the workspace's snapshot repository when
no other session has snapshots there). It cannot be undone: on a terminal it
asks first; scripts pass --yes.`,
		Example: `  belay sessions delete 01a1f2c3-… --yes`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			sess, err := svc.ResolveSession(ctx, argv[0])
			if err != nil {
				return err
			}
			if !yes {
				if err := a.confirm(ctx, fmt.Sprintf("Delete session %s (%s) with its %d checkpoints and their snapshots?",
					sess.ID, dash(sess.ProjectPath), sess.CheckpointCount)); err != nil {
					return err
				}
			}
			res, err := svc.DeleteSession(ctx, sess.ID)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(res)
			}
			fmt.Fprintf(a.env.Stdout, "Deleted session %s and its %d checkpoints; freed %s.\n", res.SessionID, res.Checkpoints, humanBytes(res.FreedBytes))
			if res.Warning != "" {
				fmt.Fprintf(a.env.Stderr, "belay: warning: %s\n", res.Warning)
			}
			return nil
		},
	}
	del.Flags().BoolVarP(&yes, "yes", "y", false, "delete without asking")
	sessions.AddCommand(del)
	return sessions
}

// recoveryCommand is the command that carries a recovery option out.
func recoveryCommand(o belay.RecoveryOption) string {
	switch o.Action {
	case belay.RecoverRollback:
		return fmt.Sprintf("belay rollback %d --session %s", o.Seq, o.SessionID)
	case belay.RecoverRepair:
		if o.SessionID == "" {
			return "belay validate --repair"
		}
		return "belay validate --repair --session " + o.SessionID
	case belay.RecoverFinish:
		return "belay save"
	case belay.RecoverDeleteSession:
		return "belay sessions delete " + o.SessionID
	}
	return o.Action
}

// errDeclined ends a command the user said no to, with exit code 1 and no
// further message.
var errDeclined = exitCode(ExitError)

// confirm asks a yes/no question on the terminal; without one it refuses
// with a usage error naming --yes.
func (a *app) confirm(ctx context.Context, question string) error {
	var ok bool
	if err := a.prompt(ctx, "this cannot be undone: pass --yes to go ahead", huh.NewGroup(huh.NewConfirm().Title(question).Affirmative("Delete").Negative("Keep").Value(&ok))); err != nil {
		return err
	}
	if !ok {
		fmt.Fprintln(a.env.Stderr, "Nothing deleted.")
		return errDeclined
	}
	return nil
}
