package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/belayhq/belay"
)

func (a *app) saveCommand() *cobra.Command {
	var in belay.CreateCheckpointInput
	var typ, trigger, stateFile, outputsFile, metadataFile string
	var contextPairs []string
	var noSnapshot bool
	cmd := &cobra.Command{
		Use:   "save -m SUMMARY",
		Short: "Save a checkpoint in the current project's active session",
		Long: `Save a checkpoint. Without --session it goes to the active session of the
project (found from the working directory, or --project), created on demand.

The project's files are snapshotted into belay's own git repository (never
yours), so 'belay rollback' can bring them back; --no-snapshot skips that and
--paths limits it to the files the agent touched.`,
		Example: `  belay save -m "architecture approved" --name architecture --type phase
  belay save -m "tests pass" --tag tests --state-file state.json
  echo '{"step":3}' | belay save -m "step 3" --state-file -`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(in.Summary) == "" {
				return usagef("a summary is required: belay save -m SUMMARY")
			}
			if _, ok := belay.SeqRef(in.Name); ok {
				return usagef("--name %q reads as a checkpoint number, so 'belay show %s' would never find it by name; choose a name with a letter in it", in.Name, strings.TrimSpace(in.Name))
			}
			in.Type, in.Trigger = belay.CheckpointType(typ), belay.Trigger(trigger)
			in.Snapshot = !noSnapshot
			var err error
			if in.AgentState, err = a.readJSONFile(stateFile); err != nil {
				return err
			}
			if in.Outputs, err = a.readJSONFile(outputsFile); err != nil {
				return err
			}
			if in.Metadata, err = a.readJSONFile(metadataFile); err != nil {
				return err
			}
			if in.Context, err = parsePairs(contextPairs); err != nil {
				return err
			}
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			if in.SessionID, err = a.sessionFlag(ctx, svc, in.SessionID); err != nil {
				return err
			}
			if in.SessionID == "" || a.projectFlag != "" {
				if in.ProjectPath, err = a.project(ctx, svc); err != nil {
					return err
				}
			}
			pctx, done := a.withProgress(ctx, "saving")
			cp, err := svc.CreateCheckpoint(pctx, in)
			done()
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(cp)
			}
			fmt.Fprintf(a.env.Stdout, "Saved checkpoint #%d %s in session %s\n", cp.Seq, cp.ID, cp.SessionID)
			a.printSnapshot(cp)
			a.printStarted(cp)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&in.Summary, "message", "m", "", "summary of the checkpoint, 1-500 characters (required)")
	f.StringVar(&in.Description, "description", "", "longer description, up to 10,000 characters")
	f.StringVar(&in.Name, "name", "", "step name, e.g. architecture")
	f.StringVar(&typ, "type", "", "auto, phase, hitl, error or manual (default manual)")
	f.StringVar(&trigger, "trigger", "", "periodic, phase_change, subtask_complete, validation_fail, cost_threshold or user_request (default user_request)")
	f.StringArrayVar(&in.Tags, "tag", nil, "tag, repeatable")
	f.StringArrayVar(&contextPairs, "context", nil, "context pair KEY=VALUE, repeatable")
	f.StringVar(&stateFile, "state-file", "", "agent state as a JSON file, or - for standard input")
	f.StringVar(&outputsFile, "outputs-file", "", "outputs as a JSON file, or - for standard input")
	f.StringVar(&metadataFile, "metadata-file", "", "metadata as a JSON object file, or - for standard input")
	f.StringVar(&in.SessionID, "session", "", "session id or unique prefix (default: the project's active session)")
	f.StringVar(&in.Phase, "phase", "", "the session's phase after this checkpoint")
	f.IntVar(&in.Step, "step", 0, "the session's step number after this checkpoint")
	f.BoolVar(&noSnapshot, "no-snapshot", false, "do not snapshot the project's files")
	f.StringSliceVar(&in.Paths, "paths", nil, "snapshot only these paths, relative to the project (comma separated)")
	f.Var((*byteSize)(&in.MaxFileSize), "max-file-size", "leave out files larger than this, e.g. 200MiB (default 50MiB, at most 1GiB)")
	return cmd
}

// printStarted says so when saving cp started a new session because the
// project's session had ended: its checkpoint numbers start again at 1.
func (a *app) printStarted(cp *belay.Checkpoint) {
	st := cp.StartedSession
	if st == nil {
		return
	}
	fmt.Fprintf(a.env.Stderr, "belay: session %s is %s; started session %s — checkpoint numbers restart at #1.\n"+
		"The earlier checkpoints: belay checkpoints --session %s\n", st.PreviousID, st.PreviousStatus, cp.SessionID, st.PreviousID)
}

// byteSize is a flag holding a number of bytes, written as 1024, 4KiB,
// 50MiB or 1GiB (K, M, G and KB, MB, GB count in 1024s too).
type byteSize int64

func (b *byteSize) String() string {
	if *b == 0 {
		return ""
	}
	return strconv.FormatInt(int64(*b), 10)
}

func (b *byteSize) Type() string { return "size" }

func (b *byteSize) Set(s string) error {
	num := strings.TrimRight(s, "BbKkMmGgIi")
	unit := strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(s[len(num):], "B"), "b"))
	shift := map[string]uint{"": 0, "K": 10, "KI": 10, "M": 20, "MI": 20, "G": 30, "GI": 30}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	sh, ok := shift[unit]
	if err != nil || !ok || n < 0 || n > 1<<40 {
		return fmt.Errorf("want a size such as 4096, 512KiB, 200MiB or 1GiB")
	}
	*b = byteSize(n << sh)
	return nil
}

// readJSONFile reads a JSON document from a file, or standard input for "-".
func (a *app) readJSONFile(path string) (json.RawMessage, error) {
	if path == "" {
		return nil, nil
	}
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(a.env.Stdin, belay.MaxStateBytes+1))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, belay.Invalid("file", "cannot read %s: %v", path, err)
	}
	if !json.Valid(b) {
		return nil, belay.Invalid("file", "%s does not hold valid JSON", path)
	}
	return b, nil
}

func parsePairs(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return nil, usagef("--context wants KEY=VALUE, got %q", p)
		}
		m[k] = v
	}
	return m, nil
}

func (a *app) checkpointsCommand() *cobra.Command {
	var in belay.ListCheckpointsInput
	var all, asc, pending, tree bool
	var typ string
	cmd := &cobra.Command{
		Use:     "checkpoints",
		Aliases: []string{"list", "ls"},
		Short:   "List checkpoints, newest first",
		Long: `List checkpoints. By default those of the project's current session, the one
checkpoint numbers count in (its newest open session, unless one made after it
has ended since); with --project, of every session of that project. --all
lists every project.
--tree draws one session's timeline: a rollback starts a new branch.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := countFlag("limit", in.Limit, belay.MaxListLimit); err != nil {
				return err
			}
			if tree && all {
				return usagef("--tree draws one session's timeline and does not combine with --all")
			}
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			if in.SessionID, err = a.sessionFlag(ctx, svc, in.SessionID); err != nil {
				return err
			}
			in.Type = belay.CheckpointType(typ)
			if asc {
				in.OrderDir = belay.OrderAsc
			}
			if pending {
				yes, no := true, false
				in.HITLRequired, in.HITLDecided = &yes, &no
			}
			// active is the session listed because it is the project's:
			// the one earlier sessions are pointed out beside.
			var active *belay.Session
			if !all && in.SessionID == "" {
				root, err := a.project(ctx, svc)
				if err != nil {
					return err
				}
				if a.projectFlag != "" {
					in.ProjectPath = root
				} else if active, err = svc.CurrentSession(ctx, root); err == nil {
					in.SessionID = active.ID
				} else if belay.IsCode(err, belay.CodeSessionNotFound) {
					in.ProjectPath = root
				} else {
					return err
				}
			}
			if tree {
				if in.SessionID == "" {
					return usagef("--tree draws one session: pass --session ID, or run it in a project with a session")
				}
				return a.paged(func(bool) error { return a.printTree(ctx, svc, in.SessionID) })
			}
			list, err := svc.ListCheckpoints(ctx, in)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(list)
			}
			filtered := in.Type != "" || len(in.Tags) > 0 || pending || in.Cursor != ""
			return a.paged(func(bool) error {
				if len(list.Items) == 0 && filtered {
					fmt.Fprintln(a.env.Stdout, "No checkpoints match.")
					return nil
				}
				a.printCheckpoints(list)
				for _, e := range list.Corrupted {
					fmt.Fprintf(a.env.Stdout, "⚠️  left out: %s\n", e.Message)
				}
				if active != nil {
					return a.printEarlierSession(ctx, svc, active)
				}
				if len(list.Items) > 0 && in.ProjectPath != "" && a.projectFlag == "" {
					fmt.Fprintln(a.env.Stdout, "None of these sessions is yours, so numbers name none of them: name one with --session ID; your next save here starts a session of your own.")
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.SessionID, "session", "", "only this session (id or unique prefix)")
	f.BoolVar(&all, "all", false, "every project")
	f.StringVar(&typ, "type", "", "only this type")
	f.StringArrayVar(&in.Tags, "tag", nil, "only checkpoints with this tag (repeatable: all must match)")
	f.BoolVar(&pending, "pending", false, "only checkpoints waiting for a human decision")
	f.IntVar(&in.Limit, "limit", 20, "page size, 1-100")
	f.StringVar(&in.Cursor, "cursor", "", "cursor of the next page, printed after a full page")
	f.StringVar(&in.OrderBy, "order-by", "", "createdAt, updatedAt or type")
	f.BoolVar(&asc, "asc", false, "oldest first")
	f.BoolVar(&tree, "tree", false, "draw the session's checkpoints as a tree of branches")
	return cmd
}

// printEarlierSession points, below a list of the project's active session,
// to another session of the project: when a session ends the next one
// restarts the numbers, and the earlier checkpoints leave the list.
func (a *app) printEarlierSession(ctx context.Context, svc belay.Service, active *belay.Session) error {
	// Listing a session the caller's saves do not continue (another user's,
	// listed because the caller has none here): say where they go.
	if active.Status.Open() {
		open, err := svc.ActiveSession(ctx, active.ProjectPath)
		switch {
		case err == nil && open.ID != active.ID:
			fmt.Fprintf(a.env.Stdout, "This is session %s of %s. Your new checkpoints go to session %s: belay checkpoints --session %s\n",
				active.ID, dash(active.Owner), open.ID, open.ID)
			return nil
		case belay.IsCode(err, belay.CodeSessionNotFound):
			fmt.Fprintf(a.env.Stdout, "This is session %s of %s. Your next save here starts a session of your own.\n", active.ID, dash(active.Owner))
			return nil
		case err != nil:
			return err
		}
		// An admin's session the caller may only read receives none of
		// its saves either.
		if full, err := svc.GetSession(ctx, active.ID); err == nil && full.Access != nil && !full.Access.Write {
			fmt.Fprintf(a.env.Stdout, "This is session %s of %s, which you may only read. Your next save here starts a session of your own.\n",
				active.ID, dash(active.Owner))
			return nil
		}
	}
	// Listing an ended session, with another open: new saves go there.
	if !active.Status.Open() {
		open, err := svc.ActiveSession(ctx, active.ProjectPath)
		if err == nil {
			fmt.Fprintf(a.env.Stdout, "This is session %s (%s). New checkpoints go to session %s (%s, %s): belay checkpoints --session %s\n",
				active.ID, active.Status, open.ID, open.Status, plural(open.CheckpointCount, "checkpoint"), open.ID)
			return nil
		}
		if !belay.IsCode(err, belay.CodeSessionNotFound) {
			return err
		}
		fmt.Fprintf(a.env.Stdout, "Session %s has ended (%s): the next save here starts a new session.\n", active.ID, active.Status)
	}
	list, err := svc.ListSessions(ctx, belay.ListSessionsInput{ProjectPath: active.ProjectPath, Limit: 2})
	if err != nil {
		return err
	}
	for _, s := range list.Items {
		if s.ID == active.ID {
			continue
		}
		fmt.Fprintf(a.env.Stdout, "This is session %s. Also in this project: session %s (%s, %s): belay checkpoints --session %s\n",
			active.ID, s.ID, s.Status, plural(s.CheckpointCount, "checkpoint"), s.ID)
		break
	}
	return nil
}

// printTree draws a session's timeline: each checkpoint under its parent, so
// the branches rollbacks started show, with the session's head marked.
func (a *app) printTree(ctx context.Context, svc belay.Service, sessionID string) error {
	sess, err := svc.GetSession(ctx, sessionID)
	if err != nil {
		return err
	}
	var all []*belay.Checkpoint
	in := belay.ListCheckpointsInput{SessionID: sessionID, Limit: belay.MaxListLimit, OrderDir: belay.OrderAsc}
	for {
		list, err := svc.ListCheckpoints(ctx, in)
		if err != nil {
			return err
		}
		all = append(all, list.Items...)
		if !list.HasMore {
			break
		}
		in.Cursor = list.NextCursor
	}
	roots := belay.Timeline(all, sess.HeadCheckpointID)
	if a.json {
		return a.printJSON(roots)
	}
	if len(roots) == 0 {
		fmt.Fprintln(a.env.Stdout, "No checkpoints. Save one with: belay save -m SUMMARY")
		return nil
	}
	fmt.Fprintf(a.env.Stdout, "Session %s (%s)\n", sess.ID, sess.Status)
	var walk func(n *belay.TimelineNode, prefix string, last bool)
	walk = func(n *belay.TimelineNode, prefix string, last bool) {
		branch, next := "├─ ", "│  "
		if last {
			branch, next = "└─ ", "   "
		}
		mark := ""
		if n.Head {
			mark = "  ← head"
		}
		fmt.Fprintf(a.env.Stdout, "%s%s#%d %s %s  %s%s\n", prefix, branch, n.Seq, n.Type, dash(n.Name), belay.OneLine(n.Summary, 60), mark)
		for i, c := range n.Children {
			walk(c, prefix+next, i == len(n.Children)-1)
		}
	}
	for i, r := range roots {
		walk(r, "", i == len(roots)-1)
	}
	return nil
}

func (a *app) printCheckpoints(list *belay.CheckpointList) {
	if len(list.Items) == 0 {
		fmt.Fprintln(a.env.Stdout, "No checkpoints. Save one with: belay save -m SUMMARY")
		return
	}
	ids, sessions := newAbbrev(), newAbbrev()
	for _, c := range list.Items {
		ids.add(c.ID)
		sessions.add(c.SessionID)
	}
	tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tID\tSESSION\tTYPE\tNAME\tSUMMARY\tHITL\tCREATED")
	for _, c := range list.Items {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Seq, ids.of(c.ID), sessions.of(c.SessionID), c.Type,
			dash(c.Name), belay.OneLine(c.Summary, 50), hitlState(c), ago(c.CreatedAt))
	}
	tw.Flush()
	fmt.Fprintf(a.env.Stdout, "%d of %d", len(list.Items), list.TotalCount)
	if list.HasMore {
		fmt.Fprintf(a.env.Stdout, "; next page: --cursor %s", list.NextCursor)
	}
	fmt.Fprintln(a.env.Stdout)
}

func hitlState(c *belay.Checkpoint) string {
	switch {
	case !c.HITLRequired:
		return "-"
	case c.Decision == nil:
		return "pending"
	case c.Decision.AutoTriggered:
		return string(c.Decision.Action) + " (timeout)"
	}
	return string(c.Decision.Action)
}

// resolveCheckpoint finds the checkpoint a person names (a number, an id, a
// unique id prefix or a name) in --session or the project's current session.
func (a *app) resolveCheckpoint(ctx context.Context, svc belay.Service, ref, sessionID string) (*belay.Checkpoint, error) {
	sessionID, err := a.sessionFlag(ctx, svc, sessionID)
	if err != nil {
		return nil, err
	}
	in := belay.CheckpointRef{Ref: ref, SessionID: sessionID}
	if sessionID == "" {
		if in.ProjectPath, err = a.project(ctx, svc); err != nil {
			return nil, err
		}
	}
	cp, err := svc.ResolveCheckpoint(ctx, in)
	return cp, withHint(err, sessionHint)
}

// activeSession returns the project's current session.
func (a *app) activeSession(ctx context.Context, svc belay.Service) (*belay.Session, error) {
	root, err := a.project(ctx, svc)
	if err != nil {
		return nil, err
	}
	return svc.CurrentSession(ctx, root)
}

func (a *app) showCommand() *cobra.Command {
	var sessionID string
	var state bool
	var step int
	cmd := &cobra.Command{
		Use:   "show N|ID|NAME",
		Short: "Show one checkpoint: by number in the active session, id, id prefix or name",
		Long: `Show one checkpoint: checkpoint N of the active session (or --session), or
the checkpoint with that id, unique id prefix or name. A checkpoint that asks
for a decision shows its options and, once decided, the decision with its
feedback.

--state prints the checkpoint's agent state alone, in full, as JSON (null
when it has none), e.g. to save it to a file.`,
		Example: `  belay show 3
  belay show 3 --state > state.json`,
		Args: oneCheckpoint(&step),
		RunE: func(cmd *cobra.Command, argv []string) error {
			_, _, cp, err := a.openCheckpoint(cmd, argv, step, sessionID)
			if err != nil {
				return err
			}
			if state {
				return a.printState(cp)
			}
			if a.json {
				return a.printJSON(cp)
			}
			a.printCheckpoint(cp)
			return nil
		},
	}
	cmd.Flags().StringVar(&sessionID, "session", "", "session of checkpoint number N (default: the active session)")
	stepFlag(cmd, &step)
	cmd.Flags().BoolVar(&state, "state", false, "print only the agent state, in full, as JSON")
	return cmd
}

// printState prints a checkpoint's agent state as indented JSON.
func (a *app) printState(cp *belay.Checkpoint) error {
	if cp.AgentState == nil {
		_, err := fmt.Fprintln(a.env.Stdout, "null")
		return err
	}
	return a.printJSON(cp.AgentState)
}

func (a *app) printCheckpoint(c *belay.Checkpoint) {
	w := a.env.Stdout
	fmt.Fprintf(w, "Checkpoint #%d  %s\n", c.Seq, c.ID)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "  %-13s %s\n", belay.Printable(k)+":", belay.Printable(v))
		}
	}
	row("Session", c.SessionID)
	row("Summary", c.Summary)
	row("Name", c.Name)
	row("Type", fmt.Sprintf("%s (trigger %s)", c.Type, c.Trigger))
	row("Project", c.ProjectPath)
	row("Phase", c.Phase)
	if c.Step != 0 {
		row("Step", strconv.Itoa(c.Step))
	}
	row("Parent", c.ParentID)
	if c.WorkspaceRef != "" && !c.HasSnapshot() {
		row("Workspace", c.WorkspaceRef+" (a label: no snapshot)")
	} else {
		row("Workspace", c.WorkspaceRef)
	}
	row("Tags", strings.Join(c.Tags, ", "))
	row("Created", c.CreatedAt.Local().Format(time.RFC3339)+" ("+ago(c.CreatedAt)+")")
	if c.ExpiresAt != nil {
		row("Expires", c.ExpiresAt.Local().Format(time.RFC3339))
	}
	row("Checksum", c.Checksum)
	if c.Files != nil {
		row("Files", fmt.Sprintf("%d created, %d modified, %d deleted", len(c.Files.Created), len(c.Files.Modified), len(c.Files.Deleted)))
	}
	if c.HITLRequired {
		row("HITL", hitlState(c)+": "+c.HITL.Title)
		a.printRequest(c)
	}
	if c.Description != "" {
		fmt.Fprintf(w, "\n%s\n", belay.Printable(c.Description))
	}
	for _, k := range slices.Sorted(maps.Keys(c.Context)) {
		row("Context "+k, c.Context[k])
	}
	if c.AgentState != nil {
		fmt.Fprintf(w, "\nAgent state:\n%s\n", indentJSON(c.AgentState, 4000, fmt.Sprintf("belay show %s --state", c.ID)))
	}
}

// printRequest shows a HITL request's message, options, timeout and, once
// decided, the decision.
func (a *app) printRequest(c *belay.Checkpoint) {
	w, h := a.env.Stdout, c.HITL
	if h.Message != "" {
		fmt.Fprintf(w, "  %-13s %s\n", "Message:", belay.Printable(h.Message))
	}
	width := 0
	for _, o := range h.Options {
		width = max(width, len(o.ID))
	}
	for i, o := range h.Options {
		label := ""
		if i == 0 {
			label = "Options:"
		}
		line := fmt.Sprintf("%-*s  ", width, o.ID)
		if o.Label != o.ID {
			line += o.Label + " "
		}
		line += "(" + string(o.Action)
		if o.IsDefault {
			line += ", default"
		}
		line += ")"
		if o.Description != "" {
			line += " - " + o.Description
		}
		fmt.Fprintf(w, "  %-13s %s\n", label, belay.Printable(line))
	}
	if t := h.Timeout; t != nil {
		when := "at " + t.ExpiresAt.Local().Format(time.RFC3339)
		if c.TimeoutFired {
			when = "fired " + ago(t.ExpiresAt)
		}
		fmt.Fprintf(w, "  %-13s %s, then %s (%s)\n", "Timeout:", time.Duration(t.Duration)*time.Second, t.DefaultAction, when)
	}
	d := c.Decision
	if d == nil {
		return
	}
	by := d.UserID
	if d.AutoTriggered {
		by = "the timeout"
	}
	fmt.Fprintf(w, "  %-13s %s (option %s) by %s, %s\n", "Decision:", d.Action, belay.Printable(d.SelectedOption), belay.Printable(by), ago(d.DecidedAt))
	if d.Feedback != "" {
		fmt.Fprintf(w, "  %-13s %s\n", "Feedback:", belay.Printable(d.Feedback))
	}
	if d.Modifications != nil {
		fmt.Fprintf(w, "  Modifications:\n%s\n", indentJSON(d.Modifications, 4000, "belay show "+c.ID+" --json"))
	}
}

// indentJSON indents raw for reading, cut at limit bytes with a pointer to
// more, the command that prints it all.
func indentJSON(raw json.RawMessage, limit int, more string) string {
	var b strings.Builder
	var out []byte
	if v, err := json.MarshalIndent(raw, "  ", "  "); err == nil {
		out = v
	} else {
		out = raw
	}
	b.WriteString("  ")
	b.Write(out)
	s := b.String()
	if len(s) > limit {
		s = s[:limit] + "\n  … (" + more + " prints all of it)"
	}
	return s
}

func (a *app) deleteCommand() *cobra.Command {
	var sessionID string
	cmd := &cobra.Command{
		Use:   "delete N|ID",
		Short: "Delete a checkpoint",
		Long: `Delete checkpoint N of the current session (or --session), or a checkpoint
by id or a unique prefix of it. Only the session's owner or an admin may;
deleting a request that still waits for a decision also takes the right to
decide it, as it clears the gate. Its snapshot stays until 'belay gc' gives
its space back.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx, svc, cp, err := a.openCheckpoint(cmd, argv, 0, sessionID)
			if err != nil {
				return err
			}
			if err := svc.DeleteCheckpoint(ctx, cp.ID); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"deleted": cp.ID, "seq": cp.Seq, "sessionId": cp.SessionID})
			}
			fmt.Fprintf(a.env.Stdout, "Deleted checkpoint #%d %s\n", cp.Seq, cp.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&sessionID, "session", "", "session of checkpoint number N (default: the active session)")
	return cmd
}

// plural counts n things: "1 file", "2 files".
func plural[N int | int64](n N, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// dash is stored text s for a column or a line: "-" when empty, else
// escaped as belay.Printable does.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return belay.Printable(s)
}

func ago(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}
