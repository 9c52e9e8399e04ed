package core

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/workspace"
)

// Names inside an export archive (seed 004's layout plus the snapshots).
const (
	manifestFile  = "manifest.json"
	rollbacksFile = "rollback-history.json"
	bundleFile    = "workspace.bundle"
	exportFormat  = "belay-session"
	exportVersion = 1
)

// Import limits: an archive is untrusted input.
const (
	// MaxImportBytes bounds an archive, compressed and uncompressed.
	MaxImportBytes = 4 << 30
	// MaxImportEntryBytes bounds one JSON file of an archive.
	MaxImportEntryBytes = 64 << 20
	// MaxImportJSONBytes bounds all JSON files of an archive together.
	MaxImportJSONBytes = 512 << 20
	// MaxImportEntries bounds the files of an archive.
	MaxImportEntries = 100000
)

// exportManifest is manifest.json: seed 004's manifest, with the session.
type exportManifest struct {
	Format            string          `json:"format"`
	Version           int             `json:"version"`
	SessionID         string          `json:"session_id"`
	Topic             string          `json:"topic"`
	CreatedAt         time.Time       `json:"created_at"`
	UpdatedAt         time.Time       `json:"updated_at"`
	ExportedAt        time.Time       `json:"exported_at"`
	Checkpoints       []manifestEntry `json:"checkpoints"`
	CurrentCheckpoint string          `json:"current_checkpoint"`
	// RollbackHistory lists the rollbacks' ids; rollback-history.json holds them.
	RollbackHistory []string       `json:"rollback_history"`
	Session         *belay.Session `json:"session"`
	// Bundle names the git bundle of the snapshots, when there are any.
	Bundle string `json:"bundle,omitempty"`
}

type manifestEntry struct {
	ID           string `json:"id"`
	CheckpointID string `json:"checkpoint_id"`
	Step         int64  `json:"step"`
	File         string `json:"file"`
	Valid        bool   `json:"valid"`
	Checksum     string `json:"checksum"`
}

var slugInvalid = regexp.MustCompile(`[^a-z0-9]+`)

// exportName is seed 004's checkpoint id: cp-NN-<name>.
func exportName(cp *belay.Checkpoint) string {
	slug := strings.Trim(slugInvalid.ReplaceAllString(strings.ToLower(cp.Name), "-"), "-")
	if len(slug) > 40 {
		slug = strings.TrimRight(slug[:40], "-")
	}
	if slug == "" {
		return fmt.Sprintf("cp-%02d", cp.Seq)
	}
	return fmt.Sprintf("cp-%02d-%s", cp.Seq, slug)
}

// ExportSession writes a session to w as a gzipped tar archive: manifest.json,
// one cp-NN-<name>.json per checkpoint, rollback-history.json and
// workspace.bundle, a git bundle of the session's snapshot refs. A damaged
// checkpoint stops the export (run Validate first). Nothing is written to w
// before the archive's contents are gathered.
func (s *Service) ExportSession(ctx context.Context, sessionID string, w io.Writer) error {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return err
	}
	if err := belay.ValidateID("sessionId", sessionID); err != nil {
		return err
	}
	sess, rt, err := readSession(ctx, s.store, c, sessionID)
	if err != nil {
		return err
	}
	if err := rt.mayOwn(c, sess, "export it"); err != nil {
		return err
	}
	cps, err := sessionCheckpoints(ctx, s.store, sess.ID)
	if err != nil {
		return err
	}
	rollbacks, err := s.store.ListRollbacks(ctx, sess.ID)
	if err != nil {
		return err
	}
	if rollbacks == nil {
		rollbacks = []*belay.Rollback{}
	}
	m := exportManifest{Format: exportFormat, Version: exportVersion, SessionID: sess.ID, Topic: sess.Title,
		CreatedAt: sess.CreatedAt, UpdatedAt: sess.UpdatedAt, ExportedAt: s.clock.Now(), Session: sess,
		Checkpoints: []manifestEntry{}, RollbackHistory: []string{}}
	var refs []string
	for _, cp := range cps {
		if err := cp.VerifyChecksum(); err != nil {
			return err
		}
		name := exportName(cp)
		m.Checkpoints = append(m.Checkpoints, manifestEntry{ID: name, CheckpointID: cp.ID, Step: cp.Seq,
			File: name + ".json", Valid: true, Checksum: cp.Checksum})
		if cp.ID == sess.HeadCheckpointID {
			m.CurrentCheckpoint = name
		}
		if cp.WorkspaceRef != "" {
			refs = append(refs, checkpointRef(sess.ID, cp.Seq))
		}
	}
	for _, rb := range rollbacks {
		m.RollbackHistory = append(m.RollbackHistory, rb.ID)
	}
	tmp, err := os.MkdirTemp("", "belay-export-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if len(refs) > 0 {
		belay.ReportProgress(ctx, belay.Progress{Phase: "bundling snapshots"})
		if err := s.bundleSession(ctx, sess, cps, refs, filepath.Join(tmp, bundleFile)); err != nil {
			return err
		}
		m.Bundle = bundleFile
	}
	gz := gzip.NewWriter(progressWriter(ctx, w, "exporting"))
	tw := tar.NewWriter(gz)
	add := func(name string, v any) error {
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		return writeEntry(tw, name, int64(len(data)), bytes.NewReader(data), m.ExportedAt)
	}
	if err := add(manifestFile, m); err != nil {
		return err
	}
	for i, cp := range cps {
		if err := add(m.Checkpoints[i].File, cp); err != nil {
			return err
		}
	}
	if err := add(rollbacksFile, rollbacks); err != nil {
		return err
	}
	if m.Bundle != "" {
		f, err := os.Open(filepath.Join(tmp, bundleFile))
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if err := writeEntry(tw, bundleFile, fi.Size(), f, m.ExportedAt); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func writeEntry(tw *tar.Writer, name string, size int64, r io.Reader, at time.Time) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, ModTime: at, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err := io.Copy(tw, r)
	return err
}

// bundleSession writes the session's snapshot refs to a git bundle after
// checking that each still points at its checkpoint's commit.
func (s *Service) bundleSession(ctx context.Context, sess *belay.Session, cps []*belay.Checkpoint, refs []string, path string) error {
	ws, err := s.workspaces()
	if err != nil {
		return err
	}
	root, err := workspaceRoot(sess)
	if err != nil {
		return err
	}
	have, err := ws.Refs(ctx, root, sessionRefs(sess.ID))
	if err != nil {
		return workspaceError(err)
	}
	for _, cp := range cps {
		if cp.WorkspaceRef != "" && have[checkpointRef(sess.ID, cp.Seq)] != cp.WorkspaceRef {
			return belay.Errorf(belay.CodeCheckpointCorrupt, "the snapshot of checkpoint #%d is missing", cp.Seq).
				With("checkpointId", cp.ID)
		}
	}
	return workspaceError(ws.WriteBundle(ctx, root, refs, path))
}

// ExportBranch writes the session's snapshots as branch in.Branch (default
// belay/<session id>) of the workspace's own git repository: one commit per
// checkpoint with a snapshot, in seq order, on top of the user's HEAD. The
// session owner or an admin may.
func (s *Service) ExportBranch(ctx context.Context, in belay.ExportBranchInput) (*belay.ExportBranchResult, error) {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	ws, err := s.workspaces()
	if err != nil {
		return nil, err
	}
	sess, rt, err := readSession(ctx, s.store, c, in.SessionID)
	if err != nil {
		return nil, err
	}
	if err := rt.mayOwn(c, sess, "export it to a branch"); err != nil {
		return nil, err
	}
	root, err := workspaceRoot(sess)
	if err != nil {
		return nil, err
	}
	if err := belay.ValidateProjectPath("projectPath", root); err != nil {
		return nil, err
	}
	cps, err := sessionCheckpoints(ctx, s.store, sess.ID)
	if err != nil {
		return nil, err
	}
	var commits []string
	for _, cp := range cps {
		if err := cp.VerifyChecksum(); err != nil {
			return nil, err
		}
		if cp.WorkspaceRef != "" {
			commits = append(commits, cp.WorkspaceRef)
		}
	}
	if len(commits) == 0 {
		return nil, belay.Invalid("sessionId", "session %s has no snapshots to export", sess.ID)
	}
	branch := in.Branch
	if branch == "" {
		branch = "belay/" + sess.ID
	}
	if err := ws.ExportBranch(ctx, root, branch, commits); err != nil {
		var we *workspace.Error
		if errors.As(err, &we) && we.Code == workspace.InvalidWorkspace {
			return nil, belay.Invalid("branch", "%s", we.Error())
		}
		return nil, workspaceError(err)
	}
	return &belay.ExportBranchResult{Branch: branch, ProjectPath: root, Commits: len(commits)}, nil
}

// importArchive is what an archive holds once read and checked.
type importArchive struct {
	manifest  exportManifest
	cps       []*belay.Checkpoint
	rollbacks []*belay.Rollback
	bundle    string // path of the extracted bundle, "" when none
}

// ImportSession reads an archive written by ExportSession and creates its
// session here, with its checkpoints, rollback history and snapshots, so it
// can be rolled back here. Only an admin may: an archive brings files a
// rollback writes into the workspace. With in.ProjectPath the session moves
// to that workspace (checksums are recomputed).
//
// The archive is untrusted: only the expected regular files are accepted, by
// name, with size limits; every checkpoint must match its checksum and every
// record must be consistent; the bundle may hold only the session's snapshot
// refs. A session that exists already is a CONFLICT. Nothing is half
// imported: the rows are written in one transaction, and snapshots fetched
// before a failed write are dropped again.
func (s *Service) ImportSession(ctx context.Context, in belay.ImportInput, r io.Reader) (*belay.ImportResult, error) {
	c, err := authorize(ctx, belay.ScopeWrite)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	if err := c.admin("import a session"); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "belay-import-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	arc, err := readArchive(progressReader(ctx, r, "reading the archive"), tmp)
	if err != nil {
		return nil, err
	}
	sess := arc.manifest.Session
	if err := remapProject(sess, arc.cps, cleanPath(in.ProjectPath)); err != nil {
		return nil, err
	}
	if _, err := s.store.GetSession(ctx, sess.ID); err == nil {
		return nil, belay.Errorf(belay.CodeConflict, "session %s exists already; delete it first to import it again", sess.ID).With("sessionId", sess.ID)
	} else if !belay.IsCode(err, belay.CodeSessionNotFound) {
		return nil, err
	}
	for _, cp := range arc.cps {
		if _, err := s.store.GetCheckpoint(ctx, cp.ID); err == nil {
			return nil, belay.Errorf(belay.CodeConflict, "checkpoint %s exists already", cp.ID).With("checkpointId", cp.ID)
		} else if !belay.IsCode(err, belay.CodeCheckpointNotFound) {
			return nil, err
		}
	}
	res := &belay.ImportResult{Session: sess, Checkpoints: len(arc.cps), Rollbacks: len(arc.rollbacks)}
	if arc.bundle != "" {
		ws, err := s.workspaces()
		if err != nil {
			return nil, err
		}
		refs, err := ws.ReadBundle(ctx, sess.ProjectPath, arc.bundle)
		if err != nil {
			return nil, workspaceError(err)
		}
		res.Snapshots = len(refs)
	}
	sess.Owner = c.UserID
	sess.CheckpointCount = int64(len(arc.cps))
	err = s.update(ctx, func(tx store.Tx) error {
		if err := tx.InsertSession(ctx, sess); err != nil {
			if _, gerr := tx.GetSession(ctx, sess.ID); gerr == nil {
				return belay.Errorf(belay.CodeConflict, "session %s exists already", sess.ID).With("sessionId", sess.ID)
			}
			return err
		}
		for _, cp := range arc.cps {
			derive(cp) // archives from before these fields lack them
			if err := tx.InsertCheckpoint(ctx, cp); err != nil {
				return err
			}
		}
		for _, rb := range arc.rollbacks {
			if err := tx.InsertRollback(ctx, rb); err != nil {
				return err
			}
		}
		return s.appendEvent(ctx, tx, belay.EventSessionCreated, sess.ID, "", map[string]any{
			"projectPath": sess.ProjectPath, "title": sess.Title, "owner": sess.Owner,
			"imported": true, "checkpoints": len(arc.cps)})
	})
	if err != nil {
		if arc.bundle != "" {
			if _, gerr := s.store.GetSession(ctx, sess.ID); belay.IsCode(gerr, belay.CodeSessionNotFound) {
				if _, derr := s.ws.DeleteRefs(context.WithoutCancel(ctx), sess.ProjectPath, sessionRefs(sess.ID)); derr != nil {
					s.log.Error("drop snapshots of a failed import", "sessionId", sess.ID, "error", derr)
				}
			}
		}
		return nil, err
	}
	return res, nil
}

// remapProject moves an imported session to root (when given and different)
// and checks that its workspace exists here.
func remapProject(sess *belay.Session, cps []*belay.Checkpoint, root string) error {
	old := sess.ProjectPath
	if root != "" && root != old {
		sess.ProjectPath = root
		for _, cp := range cps {
			if cp.ProjectPath != old {
				continue
			}
			cp.ProjectPath = root
			sum, err := cp.ComputeChecksum()
			if err != nil {
				return err
			}
			cp.Checksum = sum
		}
	}
	if sess.ProjectPath == "" {
		if hasSnapshots(cps) {
			return belay.Invalid("projectPath", "the session has snapshots but no project path; pass one")
		}
		return nil
	}
	if fi, err := os.Stat(sess.ProjectPath); err != nil || !fi.IsDir() {
		return belay.Invalid("projectPath", "the session's project %q is not a directory here; pass the project's path on this machine", sess.ProjectPath)
	}
	return nil
}

func archiveError(format string, args ...any) error {
	return belay.Invalid("archive", "not a belay export: "+format, args...)
}

var checkpointFile = regexp.MustCompile(`^cp-[0-9]{2,19}(-[a-z0-9]+(-[a-z0-9]+)*)?\.json$`)

// readArchive reads and checks an archive, extracting its bundle into dir.
func readArchive(r io.Reader, dir string) (*importArchive, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, archiveError("not a gzip file")
	}
	body := &io.LimitedReader{R: gz, N: MaxImportBytes + 1}
	tr := tar.NewReader(body)
	files := map[string][]byte{}
	var bundle string
	jsonBytes, entries := int64(0), 0
	tooLarge := belay.Errorf(belay.CodeTooLarge, "the archive is larger than %d bytes unpacked", int64(MaxImportBytes))
	for {
		hdr, err := tr.Next()
		if body.N <= 0 {
			return nil, tooLarge
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, archiveError("damaged archive: %v", err)
		}
		if entries++; entries > MaxImportEntries {
			return nil, archiveError("more than %d files", MaxImportEntries)
		}
		name := hdr.Name
		if hdr.Typeflag != tar.TypeReg {
			return nil, archiveError("entry %q is not a regular file", clipName(name))
		}
		if name != manifestFile && name != rollbacksFile && name != bundleFile && (len(name) > 80 || !checkpointFile.MatchString(name)) {
			return nil, archiveError("unexpected entry %q", clipName(name))
		}
		if _, dup := files[name]; dup || (name == bundleFile && bundle != "") {
			return nil, archiveError("entry %q appears twice", name)
		}
		if hdr.Size < 0 || hdr.Size > MaxImportBytes {
			return nil, belay.Errorf(belay.CodeTooLarge, "entry %q is larger than %d bytes", name, int64(MaxImportBytes))
		}
		if name == bundleFile {
			if bundle, err = extract(tr, filepath.Join(dir, bundleFile), hdr.Size); err != nil {
				return nil, err
			}
			continue
		}
		if hdr.Size > MaxImportEntryBytes {
			return nil, belay.Errorf(belay.CodeTooLarge, "entry %q is larger than %d bytes", name, MaxImportEntryBytes)
		}
		if jsonBytes += hdr.Size; jsonBytes > MaxImportJSONBytes {
			return nil, belay.Errorf(belay.CodeTooLarge, "the archive's records are larger than %d bytes", MaxImportJSONBytes)
		}
		data, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
		if err != nil || int64(len(data)) != hdr.Size {
			return nil, archiveError("entry %q is truncated", name)
		}
		files[name] = data
	}
	arc := &importArchive{bundle: bundle}
	if err := arc.decode(files); err != nil {
		return nil, err
	}
	return arc, nil
}

func clipName(name string) string {
	if len(name) > 80 {
		return name[:80] + "…"
	}
	return name
}

func extract(r io.Reader, path string, size int64) (string, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	_, err = io.CopyN(f, r, size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "", archiveError("entry %q is truncated", bundleFile)
	}
	if err != nil {
		return "", err
	}
	return path, nil
}

// decodeStrict decodes one JSON document that may hold no unknown fields.
func decodeStrict(name string, data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return archiveError("%s: %v", name, err)
	}
	if dec.More() {
		return archiveError("%s holds more than one JSON document", name)
	}
	return nil
}

// decode checks the archive's files against each other.
func (arc *importArchive) decode(files map[string][]byte) error {
	data, ok := files[manifestFile]
	if !ok {
		return archiveError("no %s", manifestFile)
	}
	m := &arc.manifest
	if err := decodeStrict(manifestFile, data, m); err != nil {
		return err
	}
	if m.Format != exportFormat || m.Version != exportVersion {
		return archiveError("format %q version %d is not %q version %d", m.Format, m.Version, exportFormat, exportVersion)
	}
	sess := m.Session
	if sess == nil || !belay.IsUUID(sess.ID) || sess.ID != m.SessionID {
		return archiveError("the manifest names no valid session")
	}
	if err := validImportedSession(sess); err != nil {
		return err
	}
	listed := map[string]bool{manifestFile: true, rollbacksFile: true}
	byID := map[string]*belay.Checkpoint{}
	bySeq := map[int64]bool{}
	for _, e := range m.Checkpoints {
		data, ok := files[e.File]
		if !ok || listed[e.File] {
			return archiveError("checkpoint file %q is missing or listed twice", clipName(e.File))
		}
		listed[e.File] = true
		cp := new(belay.Checkpoint)
		if err := decodeStrict(e.File, data, cp); err != nil {
			return err
		}
		if err := cp.VerifyChecksum(); err != nil {
			return err
		}
		switch {
		case cp.ID != e.CheckpointID || cp.Seq != e.Step || cp.Checksum != e.Checksum || e.File != exportName(cp)+".json":
			return archiveError("%s does not match its manifest entry", e.File)
		case cp.SessionID != sess.ID:
			return archiveError("%s is of another session", e.File)
		case byID[cp.ID] != nil || bySeq[cp.Seq] || cp.Seq < 1 || cp.Seq > sess.LastSeq:
			return archiveError("%s repeats a checkpoint or has a seq out of range", e.File)
		}
		if err := validImportedCheckpoint(cp); err != nil {
			return archiveError("%s: %v", e.File, err)
		}
		byID[cp.ID], bySeq[cp.Seq] = cp, true
		arc.cps = append(arc.cps, cp)
	}
	for name := range files {
		if !listed[name] {
			return archiveError("%s is not listed in the manifest", name)
		}
	}
	for _, cp := range arc.cps {
		if cp.ParentID != "" && byID[cp.ParentID] == nil {
			return archiveError("checkpoint #%d descends from a checkpoint the archive lacks", cp.Seq)
		}
	}
	if sess.HeadCheckpointID != "" && byID[sess.HeadCheckpointID] == nil {
		return archiveError("the session's head is not in the archive")
	}
	if err := arc.decodeRollbacks(files[rollbacksFile], byID); err != nil {
		return err
	}
	return arc.checkBundle()
}

func (arc *importArchive) decodeRollbacks(data []byte, byID map[string]*belay.Checkpoint) error {
	if data == nil {
		return archiveError("no %s", rollbacksFile)
	}
	if err := decodeStrict(rollbacksFile, data, &arc.rollbacks); err != nil {
		return err
	}
	seen := map[string]bool{}
	var ids []string
	for _, rb := range arc.rollbacks {
		switch {
		case rb == nil || !belay.IsUUID(rb.ID) || seen[rb.ID] || rb.SessionID != arc.manifest.SessionID:
			return archiveError("%s holds an invalid rollback", rollbacksFile)
		case byID[rb.TargetID] == nil || rb.FromCheckpointID != "" && byID[rb.FromCheckpointID] == nil:
			return archiveError("rollback %s names a checkpoint the archive lacks", rb.ID)
		case len(rb.Reason) > belay.MaxReason*4 || len(rb.UserID) > belay.MaxNameLen*4 || len(rb.RestoredFiles) > MaxImportEntries:
			return archiveError("rollback %s is too large", rb.ID)
		}
		seen[rb.ID] = true
		ids = append(ids, rb.ID)
	}
	if !slices.Equal(ids, arc.manifest.RollbackHistory) {
		return archiveError("%s does not match the manifest", rollbacksFile)
	}
	return nil
}

// checkBundle makes sure the bundle holds exactly the session's snapshot
// refs, pointing at the checkpoints' commits, and nothing it depends on.
func (arc *importArchive) checkBundle() error {
	want := map[string]string{}
	for _, cp := range arc.cps {
		if cp.WorkspaceRef != "" {
			want[checkpointRef(cp.SessionID, cp.Seq)] = cp.WorkspaceRef
		}
	}
	if arc.bundle == "" || arc.manifest.Bundle != bundleFile {
		if len(want) > 0 || arc.bundle != "" || arc.manifest.Bundle != "" {
			return archiveError("the snapshots and %s do not match", bundleFile)
		}
		return nil
	}
	got, err := bundleRefs(arc.bundle)
	if err != nil {
		return err
	}
	if !maps.Equal(got, want) {
		return archiveError("%s holds other refs than the checkpoints' snapshots", bundleFile)
	}
	return nil
}

// bundleRefs reads the refs listed in a git bundle's header (v2 or v3),
// refusing prerequisites and capabilities other than SHA-1 object names.
func bundleRefs(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReader(io.LimitReader(f, 64<<20))
	line := func() (string, error) {
		l, err := br.ReadString('\n')
		if err != nil {
			return "", archiveError("%s has a damaged header", bundleFile)
		}
		return strings.TrimSuffix(l, "\n"), nil
	}
	sig, err := line()
	if err != nil {
		return nil, err
	}
	if sig != "# v2 git bundle" && sig != "# v3 git bundle" {
		return nil, archiveError("%s is not a git bundle", bundleFile)
	}
	refs := map[string]string{}
	for {
		l, err := line()
		if err != nil {
			return nil, err
		}
		switch {
		case l == "":
			return refs, nil
		case strings.HasPrefix(l, "@"):
			if sig != "# v3 git bundle" || l != "@object-format=sha1" {
				return nil, archiveError("%s needs an unsupported capability %q", bundleFile, clipName(l))
			}
		case strings.HasPrefix(l, "-"):
			return nil, archiveError("%s depends on commits it does not hold", bundleFile)
		default:
			oid, ref, ok := strings.Cut(l, " ")
			if _, err := hex.DecodeString(oid); !ok || err != nil || len(oid) != 40 || refs[ref] != "" {
				return nil, archiveError("%s has a damaged header", bundleFile)
			}
			refs[ref] = oid
		}
	}
}

// validImportedSession checks an imported session against the limits a
// created one obeys.
func validImportedSession(sess *belay.Session) error {
	in := belay.CreateSessionInput{Title: sess.Title, Phase: sess.Phase, Metadata: sess.Metadata}
	if err := in.Validate(); err != nil {
		return archiveError("session: %v", err)
	}
	switch {
	case !sess.Status.Valid():
		return archiveError("session status %q is unknown", clipName(string(sess.Status)))
	case sess.ProjectPath != "" && !filepath.IsAbs(sess.ProjectPath):
		return archiveError("session project path is not absolute")
	case sess.HeadCheckpointID != "" && !belay.IsUUID(sess.HeadCheckpointID):
		return archiveError("session head is not a checkpoint id")
	case len(sess.State) > belay.MaxStateBytes || sess.State != nil && !json.Valid(sess.State):
		return archiveError("session state is not valid JSON within %d bytes", belay.MaxStateBytes)
	case sess.LastSeq < 0 || sess.CurrentStep < 0 || len(sess.Owner) > belay.MaxNameLen*4:
		return archiveError("session counters are out of range")
	}
	return nil
}

// validImportedCheckpoint checks an imported checkpoint against the limits a
// saved one obeys. Its checksum proves it unchanged, not sane.
func validImportedCheckpoint(cp *belay.Checkpoint) error {
	in := belay.CreateCheckpointInput{SessionID: cp.SessionID, Name: cp.Name, Type: cp.Type, Trigger: cp.Trigger,
		Summary: cp.Summary, Description: cp.Description, AgentState: cp.AgentState, Outputs: cp.Outputs,
		Metadata: cp.Metadata, Context: cp.Context, Tags: cp.Tags, Phase: cp.Phase, Step: cp.Step}
	if h := cp.HITL; h != nil {
		in.HITL = &belay.HITLInput{Title: h.Title, Message: h.Message, Options: h.Options,
			Context: h.Context, Approvers: h.Approvers, OnReject: h.OnReject}
		if t := h.Timeout; t != nil {
			in.HITL.Timeout = &belay.TimeoutInput{Duration: t.Duration, DefaultAction: t.DefaultAction}
		}
	}
	if err := in.Validate(); err != nil {
		return err
	}
	switch {
	case !belay.IsUUID(cp.ID) || cp.ParentID != "" && !belay.IsUUID(cp.ParentID):
		return errors.New("ids are not UUIDs")
	case cp.Type == "" || cp.Trigger == "":
		return errors.New("type and trigger are required")
	case cp.HITLRequired != (cp.HITL != nil) || cp.Decision != nil && cp.HITL == nil:
		return errors.New("HITL fields disagree")
	case cp.ProjectPath != "" && !filepath.IsAbs(cp.ProjectPath):
		return errors.New("project path is not absolute")
	case cp.WorkspaceRef != "" && (len(cp.WorkspaceRef) != 40 || !isHex(cp.WorkspaceRef)):
		return errors.New("workspaceRef is not a commit id")
	case len(cp.CreatedBy) > belay.MaxNameLen*4:
		return errors.New("createdBy is too long")
	}
	if f := cp.Files; f != nil {
		for _, p := range slices.Concat(f.Created, f.Modified, f.Deleted) {
			if err := belay.ValidateRelativePath("files", p); err != nil {
				return err
			}
		}
	}
	return nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// progressWriter counts the bytes written to w as progress of phase, when
// ctx asks for progress (belay.WithProgress).
func progressWriter(ctx context.Context, w io.Writer, phase string) io.Writer {
	fn := belay.ProgressFunc(ctx)
	if fn == nil {
		return w
	}
	return &countingWriter{w: w, report: func(n int64) { fn(belay.Progress{Phase: phase, Bytes: n}) }}
}

// progressReader counts the bytes read from r as progress of phase, when
// ctx asks for progress.
func progressReader(ctx context.Context, r io.Reader, phase string) io.Reader {
	fn := belay.ProgressFunc(ctx)
	if fn == nil {
		return r
	}
	return &countingReader{r: r, report: func(n int64) { fn(belay.Progress{Phase: phase, Bytes: n}) }}
}

type countingWriter struct {
	w      io.Writer
	n      int64
	report func(int64)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.report(c.n)
	return n, err
}

type countingReader struct {
	r      io.Reader
	n      int64
	report func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.report(c.n)
	return n, err
}
