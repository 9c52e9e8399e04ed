package core

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/workspace"
)

// errNoWorkspaces is returned for a workspace operation when the service has
// no workspace manager (no usable git on this machine).
var errNoWorkspaces = belay.Errorf(belay.CodeInternal,
	"workspace snapshots are not available: belay needs git 2.30 or newer on PATH (or save without a snapshot)")

func (s *Service) workspaces() (*workspace.Manager, error) {
	if s.ws == nil {
		return nil, errNoWorkspaces
	}
	return s.ws, nil
}

// workspaceError maps an error of the workspace package to a belay error:
// a bad workspace is the caller's mistake, missing objects are corruption,
// a missing git binary is internal but said plainly.
func workspaceError(err error) error {
	var be *belay.Error
	var we *workspace.Error
	if err == nil || errors.As(err, &be) || !errors.As(err, &we) {
		return err
	}
	switch we.Code {
	case workspace.InvalidWorkspace:
		return belay.Invalid("projectPath", "%s", we.Error())
	case workspace.GitMissing:
		return belay.Errorf(belay.CodeInternal, "git is not available: %s", we.Error())
	case workspace.Corrupted, workspace.NotFound:
		return belay.Errorf(belay.CodeCheckpointCorrupt, "%s; run `belay validate` to see how to recover", we.Error())
	case workspace.RestoreFailed:
		return belay.Errorf(belay.CodeRestoreFailed, "%s", we.Error())
	case workspace.Forbidden:
		return belay.Errorf(belay.CodeUnauthorized, "%s", we.Error())
	}
	return err
}

// checkpointRef is the private ref of a checkpoint's snapshot.
func checkpointRef(sessionID string, seq int64) string {
	return "refs/belay/" + sessionID + "/" + strconv.FormatInt(seq, 10)
}

// sessionRefs is the ref hierarchy of a session's snapshots.
func sessionRefs(sessionID string) string { return "refs/belay/" + sessionID + "/" }

// workspaceRoot is the workspace a session snapshots: its project path.
func workspaceRoot(sess *belay.Session) (string, error) {
	if sess.ProjectPath == "" {
		return "", belay.Invalid("projectPath", "session %s has no project path, so it has no workspace to snapshot", sess.ID).
			With("sessionId", sess.ID)
	}
	return sess.ProjectPath, nil
}

// createWithSnapshot saves cp as the next checkpoint of its session together
// with a snapshot of the session's workspace. The workspace lock is held from
// reading the session to inserting the checkpoint, so concurrent snapshot
// saves of one workspace are serialised; a save that does not snapshot and
// moves the session meanwhile makes this one fail with CONFLICT.
func (s *Service) createWithSnapshot(ctx context.Context, in belay.CreateCheckpointInput, cp *belay.Checkpoint) error {
	ws, err := s.workspaces()
	if err != nil {
		return err
	}
	root := in.ProjectPath
	if in.SessionID != "" {
		sess, err := s.store.GetSession(ctx, in.SessionID)
		if err != nil {
			return err
		}
		if root, err = workspaceRoot(sess); err != nil {
			return err
		}
		if in.ProjectPath != "" && in.ProjectPath != root {
			return belay.Invalid("projectPath", "session %s works on %s, not %s; a snapshot is of the session's workspace", sess.ID, root, in.ProjectPath)
		}
	}
	if err := s.mayUseWorkspace(ctx, root); err != nil {
		return err
	}
	ctx = s.confined(ctx)
	unlock, err := ws.Lock(ctx, root)
	if err != nil {
		return workspaceError(err)
	}
	defer unlock()
	// A rollback a crash interrupted comes first: the session's head and
	// the files this snapshot compares with are the rollback's.
	if err := s.finishInterruptedRollback(ctx, ws, root); err != nil {
		return err
	}
	// Read again under the lock: this is the state the snapshot builds on.
	var sess *belay.Session
	if in.SessionID != "" {
		sess, err = s.store.GetSession(ctx, in.SessionID)
	} else if sess, err = s.store.ActiveSession(ctx, root); belay.IsCode(err, belay.CodeSessionNotFound) {
		err = s.update(ctx, func(tx store.Tx) error {
			var err error
			sess, err = s.sessionFor(ctx, tx, "", root)
			return err
		})
	}
	if err != nil {
		return err
	}
	if err := checkOpen(sess); err != nil {
		return err
	}
	return s.saveSnapshotLocked(ctx, ws, root, sess, cp, in.Paths, true)
}

func checkOpen(sess *belay.Session) error {
	if !sess.Status.Open() {
		return belay.Errorf(belay.CodeConflict, "session %s is %s and takes no more checkpoints", sess.ID, sess.Status).
			With("sessionId", sess.ID).With("status", sess.Status)
	}
	return nil
}

// saveSnapshotLocked snapshots root for cp as the next checkpoint of sess (as
// read under the workspace lock, which the caller holds) and inserts it. It
// fails with CONFLICT when the session moved on since it was read.
func (s *Service) saveSnapshotLocked(ctx context.Context, ws *workspace.Manager, root string, sess *belay.Session,
	cp *belay.Checkpoint, paths []string, requireOpen bool) error {
	parent, err := s.snapshotParent(ctx, sess.HeadCheckpointID)
	if err != nil {
		return err
	}
	cp.SessionID, cp.Seq, cp.ParentID = sess.ID, sess.LastSeq+1, sess.HeadCheckpointID
	if cp.ProjectPath == "" {
		cp.ProjectPath = sess.ProjectPath
	}
	if err := snapshotRecord(ctx, ws, root, parent, cp, paths); err != nil {
		return err
	}
	return s.update(ctx, func(tx store.Tx) error {
		cur, err := tx.GetSession(ctx, sess.ID)
		if err != nil {
			return err
		}
		if cur.LastSeq != sess.LastSeq || cur.HeadCheckpointID != sess.HeadCheckpointID {
			return belay.Errorf(belay.CodeConflict, "session %s took checkpoint #%d while the workspace was being snapshotted; save again", sess.ID, cur.LastSeq).
				With("sessionId", sess.ID)
		}
		if requireOpen {
			if err := checkOpen(cur); err != nil {
				return err
			}
		}
		return s.insertCheckpoint(ctx, tx, cur, cp)
	})
}

// snapshotParent returns the snapshot commit of the nearest checkpoint with
// one, starting at id and following parents: the state a new snapshot's file
// changes are relative to. "" when there is none.
func (s *Service) snapshotParent(ctx context.Context, id string) (string, error) {
	seen := map[string]bool{}
	for id != "" && !seen[id] {
		seen[id] = true
		cp, err := s.store.GetCheckpoint(ctx, id)
		if belay.IsCode(err, belay.CodeCheckpointNotFound) {
			return "", nil // a deleted ancestor ends the chain
		}
		if err != nil {
			return "", err
		}
		if cp.WorkspaceRef != "" {
			return cp.WorkspaceRef, nil
		}
		id = cp.ParentID
	}
	return "", nil
}

// snapshotRecord snapshots root to cp's ref with a commit message that lists
// the changed files and carries cp's record (built once the tree is known,
// before the commit). It sets cp.WorkspaceRef, cp.Files and the
// "skippedFiles" metadata.
func snapshotRecord(ctx context.Context, ws *workspace.Manager, root, parent string, cp *belay.Checkpoint, paths []string) error {
	base := cp.Metadata
	for {
		req := workspace.SnapshotRequest{Root: root, Ref: checkpointRef(cp.SessionID, cp.Seq), Parent: parent, Paths: paths,
			MessageFunc: func(snap *workspace.Snapshot) (string, error) {
				meta, err := withSkipped(base, snap.Skipped)
				if err != nil {
					return "", err
				}
				cp.Metadata = meta
				return commitMessage(cp, parent, snapshotChanges(snap))
			}}
		snap, err := ws.SnapshotLocked(ctx, req)
		var we *workspace.Error
		if parent != "" && errors.As(err, &we) && we.Code == workspace.NotFound {
			// The parent snapshot is gone (see validate): start afresh.
			parent = ""
			continue
		}
		if err != nil {
			return workspaceError(err)
		}
		cp.WorkspaceRef, cp.Files = snap.Commit, snapshotChanges(snap)
		return nil
	}
}

// snapshotChanges returns a snapshot's file changes, never nil.
func snapshotChanges(snap *workspace.Snapshot) *belay.FileChanges {
	return &belay.FileChanges{
		Created:  append([]string{}, snap.Created...),
		Modified: append([]string{}, snap.Modified...),
		Deleted:  append([]string{}, snap.Deleted...),
	}
}

// maxSkippedListed bounds the skipped files listed in a checkpoint's metadata.
const maxSkippedListed = 1000

// SkippedFile is a file a snapshot left out, as listed in the checkpoint's
// metadata under "skippedFiles".
type SkippedFile struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// MetadataSkippedFiles is the metadata key listing the files a snapshot left
// out; MetadataSkippedCount counts them when the list is cut short.
const (
	MetadataSkippedFiles = "skippedFiles"
	MetadataSkippedCount = "skippedCount"
)

// withSkipped returns metadata with the skipped files listed, or as it is
// when there are none.
func withSkipped(meta json.RawMessage, skipped []workspace.Skipped) (json.RawMessage, error) {
	if len(skipped) == 0 {
		return meta, nil
	}
	m := map[string]json.RawMessage{}
	if meta != nil {
		if err := json.Unmarshal(meta, &m); err != nil {
			return nil, belay.Invalid("metadata", "metadata must be a JSON object")
		}
	}
	list := make([]SkippedFile, 0, min(len(skipped), maxSkippedListed))
	for _, sk := range skipped[:min(len(skipped), maxSkippedListed)] {
		list = append(list, SkippedFile{Path: sk.Path, Reason: sk.Reason})
	}
	var err error
	if m[MetadataSkippedFiles], err = json.Marshal(list); err != nil {
		return nil, err
	}
	m[MetadataSkippedCount] = json.RawMessage(strconv.Itoa(len(skipped)))
	return json.Marshal(m)
}

// SkippedFiles returns the files a checkpoint's snapshot left out, as listed
// in its metadata.
func SkippedFiles(cp *belay.Checkpoint) []SkippedFile {
	var m struct {
		Skipped []SkippedFile `json:"skippedFiles"`
	}
	if cp.Metadata == nil || json.Unmarshal(cp.Metadata, &m) != nil {
		return nil
	}
	return m.Skipped
}

// commitRecord is the checkpoint as carried by its snapshot commit (trailer
// Belay-Record): enough to rebuild the checkpoint's row from git alone. The
// snapshot commit, the checksum and — when the commit has a parent to compare
// with — the file changes are derived, so they are left out.
type commitRecord struct {
	Version      int               `json:"v"`
	Checkpoint   *belay.Checkpoint `json:"checkpoint"`
	ParentCommit string            `json:"parentCommit,omitempty"`
}

const (
	recordVersion  = 1
	recordTrailer  = "Belay-Record: "
	maxFilesListed = 200
)

// commitMessage is seed 004's checkpoint commit message plus trailers
// carrying cp's record. files is the list of changed files, when known.
func commitMessage(cp *belay.Checkpoint, parentCommit string, files *belay.FileChanges) (string, error) {
	rec := *cp
	rec.WorkspaceRef, rec.Checksum, rec.Files = "", "", nil
	rec.Decision, rec.TimeoutFired = nil, false
	if parentCommit == "" {
		rec.Files = files
	}
	data, err := json.Marshal(commitRecord{Version: recordVersion, Checkpoint: &rec, ParentCommit: parentCommit})
	if err != nil {
		return "", fmt.Errorf("encode checkpoint record: %w", err)
	}
	var b strings.Builder
	name := cp.Name
	if name == "" {
		name = cp.Summary
	}
	fmt.Fprintf(&b, "checkpoint: step-%d - %s\n\n", cp.Seq, oneLine(name, 72))
	fmt.Fprintf(&b, "Session: %s\nCheckpoint: %s\n", cp.SessionID, cp.ID)
	if files != nil {
		all := slices.Concat(files.Created, files.Modified, files.Deleted)
		slices.Sort(all)
		if len(all) > 0 {
			b.WriteString("\nFiles changed:\n")
			for _, p := range all[:min(len(all), maxFilesListed)] {
				fmt.Fprintf(&b, "- %s\n", quotePath(p))
			}
			if len(all) > maxFilesListed {
				fmt.Fprintf(&b, "- … and %d more\n", len(all)-maxFilesListed)
			}
		}
	}
	fmt.Fprintf(&b, "\nBelay-Session: %s\nBelay-Seq: %d\n%s%s\n", cp.SessionID, cp.Seq, recordTrailer, base64.StdEncoding.EncodeToString(data))
	return b.String(), nil
}

// oneLine makes s fit on one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// quotePath quotes a path that would not read as one line as is.
func quotePath(p string) string {
	if strings.IndexFunc(p, unicode.IsControl) >= 0 || strings.TrimSpace(p) != p || strings.HasPrefix(p, `"`) {
		return strconv.Quote(p)
	}
	return p
}

// maxRecordBytes bounds a decoded record: three JSON fields of
// belay.MaxStateBytes and the rest.
const maxRecordBytes = 3*belay.MaxStateBytes + 1<<20

// parseRecord reads the record trailer of a snapshot commit message.
func parseRecord(msg string) (*commitRecord, error) {
	i := strings.LastIndex(msg, "\n"+recordTrailer)
	if i < 0 {
		return nil, errors.New("the commit has no " + strings.TrimSpace(recordTrailer) + " trailer")
	}
	enc, _, _ := strings.Cut(msg[i+1+len(recordTrailer):], "\n")
	if base64.StdEncoding.DecodedLen(len(enc)) > maxRecordBytes {
		return nil, errors.New("the checkpoint record is too large")
	}
	data, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("the checkpoint record is not base64: %w", err)
	}
	var rec commitRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("the checkpoint record is not valid JSON: %w", err)
	}
	if rec.Version != recordVersion || rec.Checkpoint == nil {
		return nil, fmt.Errorf("unknown checkpoint record version %d", rec.Version)
	}
	if !belay.IsUUID(rec.Checkpoint.ID) || !belay.IsUUID(rec.Checkpoint.SessionID) {
		return nil, errors.New("the checkpoint record has no valid ids")
	}
	return &rec, nil
}

// DiffCheckpoint compares checkpoint in.CheckpointID's snapshot with another
// checkpoint's, or with the workspace as it is now.
func (s *Service) DiffCheckpoint(ctx context.Context, in belay.DiffInput) (*belay.DiffResult, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	ws, err := s.workspaces()
	if err != nil {
		return nil, err
	}
	from, err := s.GetCheckpoint(ctx, in.CheckpointID)
	if err != nil {
		return nil, err
	}
	if err := hasSnapshot("checkpointId", from); err != nil {
		return nil, err
	}
	if err := s.mayUseWorkspace(ctx, from.ProjectPath); err != nil {
		return nil, err
	}
	ctx = s.confined(ctx)
	res := &belay.DiffResult{From: from}
	toRef := ""
	if in.To != "" && in.To != belay.DiffCurrent {
		if res.To, err = s.GetCheckpoint(ctx, in.To); err != nil {
			return nil, err
		}
		if err := hasSnapshot("to", res.To); err != nil {
			return nil, err
		}
		if res.To.ProjectPath != from.ProjectPath {
			return nil, belay.Invalid("to", "checkpoints %s and %s are of different workspaces (%s and %s)",
				from.ID, res.To.ID, from.ProjectPath, res.To.ProjectPath)
		}
		toRef = res.To.WorkspaceRef
	}
	d, err := ws.Diff(ctx, from.ProjectPath, from.WorkspaceRef, toRef)
	if err != nil {
		return nil, workspaceError(err)
	}
	res.Files = make([]belay.FileDiff, len(d.Files))
	for i, f := range d.Files {
		res.Files[i] = belay.FileDiff{Path: f.Path, OldPath: f.OldPath, Status: f.Status,
			Additions: f.Additions, Deletions: f.Deletions, Binary: f.Binary}
	}
	res.Additions, res.Deletions, res.Patch = d.Additions, d.Deletions, d.Patch
	return res, nil
}

func hasSnapshot(field string, cp *belay.Checkpoint) error {
	if cp.WorkspaceRef == "" {
		return belay.Invalid(field, "checkpoint #%d (%s) has no workspace snapshot", cp.Seq, cp.ID).With("checkpointId", cp.ID)
	}
	return nil
}

// forEachSession calls fn with every session, newest first.
func forEachSession(ctx context.Context, r store.Reader, fn func(*belay.Session) error) error {
	q := store.SessionQuery{Limit: 500}
	for {
		page, _, err := r.ListSessions(ctx, q)
		if err != nil {
			return err
		}
		for _, sess := range page {
			if err := fn(sess); err != nil {
				return err
			}
		}
		if len(page) < q.Limit {
			return nil
		}
		last := page[len(page)-1]
		q.After = &store.SessionKey{CreatedAt: last.CreatedAt, ID: last.ID}
	}
}

// sessionCheckpoints returns every checkpoint of a session in seq order.
func sessionCheckpoints(ctx context.Context, r store.Reader, sessionID string) ([]*belay.Checkpoint, error) {
	var out []*belay.Checkpoint
	q := store.CheckpointQuery{SessionID: sessionID, Limit: 500}
	for {
		page, _, err := r.ListCheckpoints(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < q.Limit {
			break
		}
		last := page[len(page)-1]
		q.After = &store.CheckpointKey{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	slices.SortFunc(out, func(a, b *belay.Checkpoint) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// confined holds the workspace operations of a caller who is not an admin to
// the server's workspace roots each time an operation resolves the
// workspace's path, so a symlink swapped in after mayUseWorkspace cannot lead
// outside them.
func (s *Service) confined(ctx context.Context) context.Context {
	if a, ok := belay.ActorFrom(ctx); !ok || a.Admin {
		return ctx
	}
	return workspace.Confine(ctx, s.roots)
}

// mayUseWorkspace says whether the caller may snapshot, restore or diff the
// workspace at root: an admin anywhere, another authenticated user only under
// one of the server's workspace roots. Otherwise any token holder could read or roll
// back any directory the server can reach.
func (s *Service) mayUseWorkspace(ctx context.Context, root string) error {
	// No identity at all means no authenticating transport: the process
	// itself (an embedding program, a test) is calling.
	if a, ok := belay.ActorFrom(ctx); !ok || a.Admin {
		return nil
	}
	if workspace.InsideRoots(root, s.roots) {
		return nil
	}
	return belay.Errorf(belay.CodeUnauthorized, "only an admin may snapshot or restore %s; start the server with --workspace-root to let other users work under a directory", root).
		With("projectPath", root)
}

// mayChange says whether the actor may change sess: its owner or an admin.
func mayChange(ctx context.Context, sess *belay.Session, what string) error {
	if a := actor(ctx); !a.Admin && a.UserID != sess.Owner {
		return belay.Errorf(belay.CodeUnauthorized, "only the session owner or an admin may %s", what).With("sessionId", sess.ID)
	}
	return nil
}

// DiskUsage reports the space each workspace's snapshots use and, per
// session, its checkpoints and the bytes of their state in the database.
func (s *Service) DiskUsage(ctx context.Context) (*belay.DiskUsageReport, error) {
	rep := &belay.DiskUsageReport{Workspaces: []belay.WorkspaceUsage{}, Sessions: []belay.SessionUsage{}}
	byRoot := map[string]int{}
	err := forEachSession(ctx, s.store, func(sess *belay.Session) error {
		cps, err := sessionCheckpoints(ctx, s.store, sess.ID)
		if err != nil {
			return err
		}
		u := belay.SessionUsage{ID: sess.ID, Title: sess.Title, ProjectPath: sess.ProjectPath, Status: sess.Status, Checkpoints: int64(len(cps))}
		for _, cp := range cps {
			u.StateBytes += int64(len(cp.AgentState) + len(cp.Outputs) + len(cp.Metadata))
		}
		rep.Sessions = append(rep.Sessions, u)
		rep.StateBytes += u.StateBytes
		if sess.ProjectPath == "" {
			return nil
		}
		i, ok := byRoot[sess.ProjectPath]
		if !ok {
			i = len(rep.Workspaces)
			byRoot[sess.ProjectPath] = i
			rep.Workspaces = append(rep.Workspaces, belay.WorkspaceUsage{ProjectPath: sess.ProjectPath})
		}
		rep.Workspaces[i].Sessions++
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range rep.Workspaces {
		w := &rep.Workspaces[i]
		if s.ws == nil {
			w.Error = errNoWorkspaces.Message
			continue
		}
		n, err := s.ws.DiskUsage(ctx, w.ProjectPath)
		if err != nil {
			w.Error = workspaceError(err).Error()
			continue
		}
		w.Bytes = n
		rep.WorkspaceBytes += n
	}
	slices.SortFunc(rep.Workspaces, func(a, b belay.WorkspaceUsage) int { return strings.Compare(a.ProjectPath, b.ProjectPath) })
	return rep, nil
}

// DeleteSession deletes a session with its checkpoints and rollbacks (the
// session owner or an admin may), then deletes its snapshot refs and reclaims
// the space they held. A failure to prune is reported, not returned: the
// session is gone either way.
func (s *Service) DeleteSession(ctx context.Context, id string) (*belay.DeleteSessionResult, error) {
	if err := belay.ValidateID("id", id); err != nil {
		return nil, err
	}
	var sess *belay.Session
	err := s.update(ctx, func(tx store.Tx) error {
		var err error
		if sess, err = tx.GetSession(ctx, id); err != nil {
			return err
		}
		if err := mayChange(ctx, sess, "delete a session"); err != nil {
			return err
		}
		if err := tx.DeleteSession(ctx, id); err != nil {
			return err
		}
		return s.appendEvent(ctx, tx, belay.EventSessionDeleted, id, "",
			map[string]any{"projectPath": sess.ProjectPath, "checkpoints": sess.CheckpointCount})
	})
	if err != nil {
		return nil, err
	}
	res := &belay.DeleteSessionResult{SessionID: id, Checkpoints: sess.CheckpointCount, SnapshotsPruned: true}
	if sess.ProjectPath == "" || s.ws == nil {
		return res, nil
	}
	if err := s.ws.DeleteRefs(ctx, sess.ProjectPath, sessionRefs(id)); err != nil {
		var we *workspace.Error
		if errors.As(err, &we) && we.Code == workspace.NotFound {
			return res, nil // never snapshotted
		}
		res.SnapshotsPruned = false
		res.Warning = "the session's snapshots could not be dropped: " + err.Error()
	}
	return res, nil
}
