package workspace

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Restore actions reported in Change.Action.
const (
	// ActionRestore: a file modified or deleted since the target is written
	// back with the target's content, mode or symlink.
	ActionRestore = "restore"
	// ActionRemove: a file created since the target is removed, with the
	// parent directories this leaves empty.
	ActionRemove = "remove"
)

// Change is one path a restore writes or removes.
type Change struct {
	Path   string // relative to the workspace root, slash separated
	Action string // ActionRestore or ActionRemove
}

// RestoreResult lists what a restore changed (or would change, for a dry
// run), sorted by path.
type RestoreResult struct {
	Changes []Change
	// Kept are the paths the restore was told to keep that it would have
	// removed: they are left as they are.
	Kept []string
}

// Restore moves the work tree from the tree of commit from — the caller's
// snapshot of the current state, taken just before — to the tree of commit
// target, and updates the private index to target. Only paths where the two
// trees differ are touched: files modified or deleted since target are
// written back (atomically, via a temporary file and rename), files created
// since target are removed along with the directories that leaves empty.
// Ignored files and files neither tree knows are never touched, and a
// restore that would write over one fails before it changes anything
// (WouldOverwrite); a directory is never removed unless it holds no file
// however deep (directories of empty directories in the way of a file give
// way, as in git checkout, and are not made again if the restore fails). Nothing is written through a symlink: a
// symlink is written as a symlink, and a path below one is never written.
//
// A journal (restore.json in the shadow directory) is written before the
// first file is touched; if the process dies mid-restore, the next Snapshot
// or Restore of the workspace finishes it. If a file cannot be written, the
// paths already changed are put back as they were in from, the directories
// the restore made are removed again, and an *Error with code RestoreFailed
// is returned. A path is left as the restore made it only when putting it
// back would remove someone else's files (a file the restore replaced by a
// directory into which they have since been put); the error then names it,
// and the restore is over all the same: later calls do not retry it.
// With dryRun nothing is written and the changes are only listed.
func (m *Manager) Restore(ctx context.Context, root, from, target string, dryRun bool) (*RestoreResult, error) {
	s, err := m.existing(ctx, root)
	if err != nil {
		return nil, err
	}
	unlock, err := m.lock(ctx, s)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return m.restore(ctx, s, from, target, dryRun, nil, nil)
}

// RestoreLocked is Restore for a caller that already holds Lock(root).
func (m *Manager) RestoreLocked(ctx context.Context, root, from, target string, dryRun bool) (*RestoreResult, error) {
	s, err := m.lockedWorkspace(ctx, root, "RestoreLocked")
	if err != nil {
		return nil, err
	}
	return m.restore(ctx, s, from, target, dryRun, nil, nil)
}

// BeginRestoreLocked is RestoreLocked for a restore the caller must record
// elsewhere (a rollback in a database): the journal carries record and stays
// after the files are moved, until the caller, having recorded the restore,
// calls CommitRestoreLocked, or calls UndoRestoreLocked to move the files
// back. If the caller's process dies in between, the next caller holding the
// lock gets the record from PendingRestoreLocked, with the files moved, and
// records the restore or undoes it: a restore is never left half done or
// done and unrecorded. A failed restore is rolled back as by Restore and
// leaves nothing pending. The journal is written even when the trees do not
// differ.
//
// The paths in keep are never removed (a file the target's snapshot left
// out, which was there all the same): the result lists those it kept, and
// finishing, undoing or recovering the restore leaves them alone too.
func (m *Manager) BeginRestoreLocked(ctx context.Context, root, from, target string, record []byte, keep []string) (*RestoreResult, error) {
	if len(record) == 0 {
		return nil, errors.New("BeginRestoreLocked: the record is empty")
	}
	s, err := m.lockedWorkspace(ctx, root, "BeginRestoreLocked")
	if err != nil {
		return nil, err
	}
	return m.restore(ctx, s, from, target, false, record, keep)
}

// PendingRestore is a restore begun with BeginRestoreLocked that was neither
// committed nor undone.
type PendingRestore struct {
	From, Target string
	// Record is what the caller passed to BeginRestoreLocked.
	Record []byte
	// Changes lists what the restore changed, sorted by path.
	Changes []Change
	// Left are the paths the restore was to change that were changed after
	// its process died, before it was finished: they are left as they
	// were, by finishing and by undoing the restore alike.
	Left []string
}

// PendingRestoreLocked first finishes moving the files of a restore whose
// process died midway (as every Snapshot and Restore does), then returns the
// restore begun with BeginRestoreLocked that is waiting to be committed or
// undone, or nil. A restore that cannot be finished and was rolled back
// leaves nothing pending: it did not happen. The caller holds Lock(root).
func (m *Manager) PendingRestoreLocked(ctx context.Context, root string) (*PendingRestore, error) {
	s, err := m.lockedWorkspace(ctx, root, "PendingRestoreLocked")
	if err != nil {
		return nil, err
	}
	if err := m.requireShadow(s); err != nil {
		var e *Error
		if errors.As(err, &e) && e.Code == NotFound {
			return nil, nil
		}
		return nil, err
	}
	if err := m.open(ctx, s); err != nil {
		return nil, err
	}
	j, err := m.recoverRestore(ctx, s)
	if err != nil || j == nil {
		return nil, err
	}
	changes, err := m.treeChanges(ctx, s, j.From, j.Target)
	if err != nil {
		return nil, fmt.Errorf("pending restore of %s: %w", s.root, err)
	}
	return &PendingRestore{From: j.From, Target: j.Target, Record: j.Record, Changes: restoreChanges(j.kept(changes)), Left: j.Left}, nil
}

// CommitRestoreLocked ends the pending restore: its caller recorded it. The
// caller holds Lock(root).
func (m *Manager) CommitRestoreLocked(ctx context.Context, root string) error {
	s, err := m.lockedWorkspace(ctx, root, "CommitRestoreLocked")
	if err != nil {
		return err
	}
	if err := removeDurably(s.journalPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("restore %s: remove journal: %w", s.root, err)
	}
	return nil
}

// UndoRestoreLocked moves the work tree of the pending restore back from its
// target to where it started, as a restore of its own (journaled, rolled
// back on failure), and forgets the pending restore. The caller holds
// Lock(root).
func (m *Manager) UndoRestoreLocked(ctx context.Context, root string) error {
	s, err := m.lockedWorkspace(ctx, root, "UndoRestoreLocked")
	if err != nil {
		return err
	}
	j, err := readJournal(s)
	if err != nil || j == nil {
		return err
	}
	changes, err := m.treeChanges(ctx, s, j.Target, j.From)
	if err != nil {
		return fmt.Errorf("undo restore of %s: %w", s.root, err)
	}
	changes = j.kept(changes)
	back := journal{From: j.Target, Target: j.From, Started: m.now().UTC(), Keep: j.Keep, Left: j.Left}
	for _, c := range changes {
		back.Pending = append(back.Pending, c.path)
	}
	_, err = m.runJournal(ctx, s, back, changes)
	return err
}

// lockedWorkspace resolves root for a *Locked call, which needs the lock.
func (m *Manager) lockedWorkspace(ctx context.Context, root, what string) (*shadow, error) {
	s, err := m.workspaceFor(ctx, root)
	if err != nil {
		return nil, err
	}
	if !m.held(s) {
		return nil, fmt.Errorf("%s %s: called without holding Lock", what, s.root)
	}
	return s, nil
}

func (m *Manager) restore(ctx context.Context, s *shadow, from, target string, dryRun bool, record []byte, keep []string) (*RestoreResult, error) {
	if err := m.requireShadow(s); err != nil {
		return nil, err
	}
	if !dryRun {
		if err := m.open(ctx, s); err != nil {
			return nil, fmt.Errorf("restore %s: %w", s.root, err)
		}
		pending, err := m.recoverRestore(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("restore %s: %w", s.root, err)
		}
		if pending != nil {
			return nil, errorf(RestoreFailed, nil, "restore %s: an earlier restore is waiting to be recorded or undone", s.root)
		}
		if err := m.ownObjects(ctx, s); err != nil {
			return nil, fmt.Errorf("restore %s: %w", s.root, err)
		}
	}
	fromID, err := m.resolveCommit(ctx, s, from)
	if err != nil {
		return nil, fmt.Errorf("restore %s: from: %w", s.root, err)
	}
	targetID, err := m.resolveCommit(ctx, s, target)
	if err != nil {
		return nil, fmt.Errorf("restore %s: target: %w", s.root, err)
	}
	changes, err := m.treeChanges(ctx, s, fromID, targetID)
	if err != nil {
		return nil, fmt.Errorf("restore %s: %w", s.root, err)
	}
	var unsafe []string
	for _, c := range changes {
		if !safePath(c.path) {
			unsafe = append(unsafe, c.path)
		}
	}
	if len(unsafe) > 0 {
		return nil, &Error{Code: UnsafePath, Paths: unsafe, Msg: fmt.Sprintf(
			"restore %s: the snapshots hold paths no restore writes (a .git, empty, . or .. component, or an absolute path), so nothing was changed: %s",
			s.root, quotedList(unsafe))}
	}
	var kept []string
	if len(keep) > 0 {
		keepSet := make(map[string]bool, len(keep))
		for _, p := range keep {
			keepSet[p] = true
		}
		for _, c := range changes {
			if c.status == 'D' && keepSet[c.path] {
				kept = append(kept, c.path)
			}
		}
	}
	j := journal{From: fromID, Target: targetID, Started: m.now().UTC(), Record: record, Keep: kept}
	changes = j.kept(changes)
	var added []string
	for _, c := range changes {
		if c.oldMode == "000000" && c.newMode != "000000" && c.newMode != "160000" {
			added = append(added, c.path)
		}
	}
	if err := refuseOverwrite(s, added); err != nil {
		return nil, err
	}
	result := &RestoreResult{Changes: restoreChanges(changes), Kept: kept}
	if dryRun || len(changes) == 0 && record == nil {
		return result, nil
	}
	for _, c := range result.Changes {
		j.Pending = append(j.Pending, c.Path)
	}
	if _, err := m.runJournal(ctx, s, j, changes); err != nil {
		return nil, err
	}
	return result, nil
}

// RefuseOverwrite checks paths a restore would write that the snapshot it
// starts from lacks, as Restore does before it changes anything: those the
// work tree holds all the same, as a file or a symlink (ignored files, or
// files that snapshot left out), are in no snapshot, and it returns an
// *Error with code WouldOverwrite naming them. For a dry run that compares
// the target with the work tree itself.
func (m *Manager) RefuseOverwrite(ctx context.Context, root string, paths []string) error {
	s, err := m.existing(ctx, root)
	if err != nil {
		return err
	}
	return refuseOverwrite(s, paths)
}

// refuseOverwrite is RefuseOverwrite on s: a restore must not write over a
// file no snapshot holds, as git checkout will not.
func refuseOverwrite(s *shadow, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	root, err := s.openRoot()
	if err != nil {
		return fmt.Errorf("restore %s: %w", s.root, err)
	}
	defer root.Close()
	var unsaved []string
	for _, p := range paths {
		if fi, err := root.Lstat(p); err == nil && !fi.IsDir() && !belowLink(root, p) {
			unsaved = append(unsaved, p)
		}
	}
	if len(unsaved) == 0 {
		return nil
	}
	return &Error{Code: WouldOverwrite, Paths: unsaved, Msg: fmt.Sprintf(
		"restore %s: it would overwrite files that are in no snapshot (ignored, or left out of the snapshot of the current state), so nothing was changed; move them away first: %s",
		s.root, quotedList(unsaved))}
}

// belowLink reports whether a directory on the way to p in the work tree
// is a symlink: a restore replaces the link and writes nothing through it,
// so what it shows at p is no file of p's.
func belowLink(root *os.Root, p string) bool {
	for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
		if fi, err := root.Lstat(dir); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return true
		}
	}
	return false
}

// safeName reports whether a tree entry's name may be written in a work
// tree: not empty, ".", ".." or .git in any case (git refuses all of them,
// and .git on a case-insensitive file system is the repository), and
// without a slash.
func safeName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.EqualFold(name, ".git") && !strings.Contains(name, "/")
}

// safePath reports whether every component of a slash-separated path is a
// safe name (see safeName): a relative path inside the work tree and
// outside any .git.
func safePath(p string) bool {
	for name := range strings.SplitSeq(p, "/") {
		if !safeName(name) {
			return false
		}
	}
	return true
}

// quotedList quotes paths for a message, the first ten of them.
func quotedList(paths []string) string {
	const most = 10
	quoted := make([]string, 0, most)
	for _, p := range paths[:min(len(paths), most)] {
		quoted = append(quoted, strconv.Quote(p))
	}
	if len(paths) > most {
		quoted = append(quoted, fmt.Sprintf("and %d more", len(paths)-most))
	}
	return strings.Join(quoted, ", ")
}

// restoreChanges lists what moving the work tree along changes does.
func restoreChanges(changes []treeChange) []Change {
	out := make([]Change, 0, len(changes))
	for _, c := range changes {
		action := ActionRestore
		if c.status == 'D' {
			action = ActionRemove
		}
		out = append(out, Change{Path: c.path, Action: action})
	}
	return out
}

// journal is restore.json: a restore that was started and not finished, or
// (with a record) not yet committed by its caller.
type journal struct {
	From    string    `json:"from"`
	Target  string    `json:"target"`
	Pending []string  `json:"pending"`
	Started time.Time `json:"started"`
	// Record is the caller's, from BeginRestoreLocked.
	Record json.RawMessage `json:"record,omitempty"`
	// Applied: the work tree and the index are at Target; the journal
	// waits for the caller to commit or undo the restore.
	Applied bool `json:"applied,omitempty"`
	// Dirs are the directories the restore makes, which were not
	// directories when it started, sorted: a rollback removes them again.
	Dirs []string `json:"dirs,omitempty"`
	// Keep are paths From has and Target lacks that the restore leaves as
	// they are, both ways (see BeginRestoreLocked).
	Keep []string `json:"keep,omitempty"`
	// Left are paths changed after the process of the restore died, which
	// finishing it found holding neither what the restore found there nor
	// what it writes: they are left as they are, both ways.
	Left []string `json:"left,omitempty"`
	// Temp begins the name of every temporary file the restore writes
	// through (see createTemp): finishing the restore after a crash removes
	// those it left.
	Temp string `json:"temp,omitempty"`
}

// kept returns changes without those of the paths j keeps or leaves.
func (j *journal) kept(changes []treeChange) []treeChange {
	if len(j.Keep) == 0 && len(j.Left) == 0 {
		return changes
	}
	return slices.DeleteFunc(changes, func(c treeChange) bool {
		return slices.Contains(j.Keep, c.path) || slices.Contains(j.Left, c.path)
	})
}

// readJournal returns the journal of s, or nil when there is none.
func readJournal(s *shadow) (*journal, error) {
	data, err := os.ReadFile(s.journalPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read restore journal: %w", err)
	}
	var j journal
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, errorf(Corrupted, err, "the journal of an interrupted restore of %s is unreadable", s.root)
	}
	return &j, nil
}

// runJournal writes the journal, moves the work tree from j.From to
// j.Target (rolling back to j.From on failure), updates the private index
// and deletes the journal, or marks it applied when it carries a record.
// rolledBack reports a failed restore that was rolled back completely: it
// did not happen. A failed restore is over once rolled back as far as it
// can be: the journal stays only when the process dies midway or the
// journal cannot be deleted, and then the next call tries again.
func (m *Manager) runJournal(ctx context.Context, s *shadow, j journal, changes []treeChange) (rolledBack bool, err error) {
	j.Applied = false
	forward := make([]fileOp, len(changes))
	before := make(map[string]fileOp, len(changes))
	for i, c := range changes {
		forward[i] = fileOp{path: c.path, mode: c.newMode, id: c.newID}
		before[c.path] = fileOp{path: c.path, mode: c.oldMode, id: c.oldID}
	}
	// The journal keeps the directories the restore makes from before the
	// first of them is made, so that a rollback after a crash removes them
	// too. A second run (finishing a crashed restore) adds the ones still
	// missing and keeps the first run's.
	dirs, err := missingDirs(s, forward)
	if err != nil {
		return false, fmt.Errorf("restore %s: %w", s.root, err)
	}
	j.Dirs = mergeSorted(j.Dirs, dirs)
	if j.Temp == "" {
		j.Temp = ".belay-" + rand.Text()[:10] + "-"
	}
	if err := writeJournal(s, j); err != nil {
		return false, err
	}
	touched, applyErr := m.apply(ctx, s, forward, j.Temp)
	if applyErr == nil && len(forward) > 0 {
		// The index follows the work tree, so the next snapshot re-hashes only
		// the restored files. update-index replaces the index atomically: on
		// failure it is unchanged and matches the rolled-back work tree.
		applyErr = m.setIndexEntries(ctx, s, forward)
	}
	if applyErr != nil {
		back := make([]fileOp, len(touched))
		for i, op := range touched {
			back[i] = before[op.path]
		}
		// Roll back even if ctx is cancelled: a cancelled restore must not
		// leave the work tree half-restored.
		rollbackErr := m.rollBack(context.WithoutCancel(ctx), s, back, j.Dirs, j.Temp)
		// The restore is over either way: retrying a rollback that failed
		// would fail the same way at every later call, and the paths it
		// could not put back are still in the snapshot j.From.
		if err := removeDurably(s.journalPath()); err != nil {
			return false, errorf(RestoreFailed, errors.Join(applyErr, rollbackErr, err), "restore %s: failed, and its journal could not be removed: the next snapshot or restore retries it", s.root)
		}
		if rollbackErr != nil {
			return false, errorf(RestoreFailed, errors.Join(applyErr, rollbackErr),
				"restore %s: failed, and some paths could not be rolled back to %s: they are left as the restore made them", s.root, j.From)
		}
		return true, errorf(RestoreFailed, applyErr, "restore %s: failed and was rolled back to %s", s.root, j.From)
	}
	if j.Record != nil {
		j.Applied = true
		return false, writeJournal(s, j)
	}
	if err := removeDurably(s.journalPath()); err != nil {
		return false, fmt.Errorf("restore %s: remove journal: %w", s.root, err)
	}
	return false, nil
}

// missingDirs lists, sorted, the leading directories of the paths ops write
// that are not directories in the work tree now (missing, or a file or
// symlink that ops replace): the directories the restore makes.
func missingDirs(s *shadow, ops []fileOp) ([]string, error) {
	root, err := s.openRoot()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	isDir := map[string]bool{}
	var missing []string
	for _, op := range ops {
		if op.absent() || op.mode == "160000" {
			continue
		}
		parentIsDir := true
		for i := 0; i < len(op.path); i++ {
			if op.path[i] != '/' {
				continue
			}
			dir := op.path[:i]
			known, seen := isDir[dir]
			if !seen {
				if parentIsDir {
					fi, err := root.Lstat(dir)
					known = err == nil && fi.IsDir()
				}
				isDir[dir] = known
				if !known {
					missing = append(missing, dir)
				}
			}
			parentIsDir = known
		}
	}
	slices.Sort(missing)
	return missing, nil
}

// mergeSorted returns the sorted union of two sorted lists.
func mergeSorted(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

func writeJournal(s *shadow, j journal) error {
	data, err := json.Marshal(j)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(s.journalPath(), data, 0o600); err != nil {
		return fmt.Errorf("restore %s: write journal: %w", s.root, err)
	}
	return nil
}

// recoverRestore finishes moving the files of a restore whose process died
// (moving the work tree to the target again is idempotent), but for the
// paths changed since (holding neither what the restore found there nor
// what it writes), which it leaves as they are and lists in the journal's
// Left; it removes the temporary files the process left, and returns the
// journal when it carries a record and so waits for its caller (see
// BeginRestoreLocked). A restore that cannot be finished is rolled back as
// any failed restore; once rolled back it is over and recoverRestore returns
// nil, so the next snapshot sees the work tree as it is. When some paths
// could not be put back it returns the error naming them, once: the
// restore is over all the same.
func (m *Manager) recoverRestore(ctx context.Context, s *shadow) (*journal, error) {
	j, err := readJournal(s)
	if err != nil || j == nil {
		return nil, err
	}
	if j.Applied {
		return j, nil
	}
	changes, err := m.treeChanges(ctx, s, j.From, j.Target)
	if err != nil {
		return nil, fmt.Errorf("finish interrupted restore: %w", err)
	}
	changes = j.kept(changes)
	if err := removeTemps(s, j); err != nil {
		return nil, fmt.Errorf("finish interrupted restore: %w", err)
	}
	// A path edited since the process died is someone's work, in no
	// snapshot: it is not written over.
	left, err := changedSince(s, changes)
	if err != nil {
		return nil, fmt.Errorf("finish interrupted restore: %w", err)
	}
	j.Left = mergeSorted(j.Left, left)
	changes = j.kept(changes)
	if rolledBack, err := m.runJournal(ctx, s, *j, changes); err != nil {
		if rolledBack {
			return nil, nil // the restore did not happen
		}
		return nil, fmt.Errorf("finish interrupted restore: %w", err)
	}
	if j.Record == nil {
		return nil, nil
	}
	j.Applied = true
	return j, nil
}

// removeTemps removes the temporary files a restore whose process died left
// (their names begin with j.Temp) in the directories of the paths it
// changes.
func removeTemps(s *shadow, j *journal) error {
	if j.Temp == "" {
		return nil
	}
	root, err := s.openRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	seen := map[string]bool{}
	for _, p := range j.Pending {
		dir := path.Dir(p)
		if seen[dir] {
			continue
		}
		seen[dir] = true
		d, err := root.Open(dir)
		if err != nil {
			continue // gone, or no directory: no temporary file is there
		}
		names, err := d.Readdirnames(-1)
		d.Close()
		if err != nil {
			return fmt.Errorf("list %s: %w", dir, err)
		}
		for _, name := range names {
			if !strings.HasPrefix(name, j.Temp) {
				continue
			}
			if err := root.Remove(path.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove a temporary file: %w", err)
			}
		}
	}
	return nil
}

// changedSince lists the paths of changes that hold neither what the
// restore found there (the change's old entry) nor what it writes (its new
// one): they changed after the restore's process died.
func changedSince(s *shadow, changes []treeChange) ([]string, error) {
	root, err := s.openRoot()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var changed []string
	for _, c := range changes {
		if !holds(root, c.path, c.oldMode, c.oldID) && !holds(root, c.path, c.newMode, c.newID) {
			changed = append(changed, c.path)
		}
	}
	return changed, nil
}

// holds reports whether the work tree holds the tree entry of mode and id
// at name: nothing (or a directory) for an absent entry, a directory for a
// gitlink, else a symlink or a file of that mode and content. What cannot
// be read holds nothing known.
func holds(root *os.Root, name, mode, id string) bool {
	fi, err := root.Lstat(name)
	switch {
	case mode == "000000":
		return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || err == nil && fi.IsDir()
	case err != nil:
		return false
	case mode == "160000":
		return fi.IsDir()
	case mode == "120000":
		if fi.Mode()&fs.ModeSymlink == 0 {
			return false
		}
		target, err := root.Readlink(name)
		return err == nil && blobID(strings.NewReader(target), int64(len(target))) == id
	}
	if !fi.Mode().IsRegular() || (fi.Mode()&0o100 != 0) != (mode == "100755") {
		return false
	}
	f, err := root.Open(name)
	if err != nil {
		return false
	}
	defer f.Close()
	return blobID(f, fi.Size()) == id
}

// blobID returns the object name of a blob of size bytes read from r, or ""
// when r holds another number of bytes or fails.
func blobID(r io.Reader, size int64) string {
	h := sha1.New()
	h.Write(objectHeader("blob", size))
	if n, err := io.Copy(h, r); err != nil || n != size {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// fileOp sets one path to a tree entry; mode "000000" means absent.
type fileOp struct {
	path string
	mode string
	id   string
}

func (op fileOp) absent() bool { return op.mode == "000000" }

// apply carries out ops on the work tree: removals first (so a file can
// replace a directory and vice versa), then writes. It stops at the first
// op that fails and returns the ops it started, in order — the failed op
// included, as it may have half happened.
func (m *Manager) apply(ctx context.Context, s *shadow, ops []fileOp, temp string) (touched []fileOp, err error) {
	root, err := s.openRoot()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var writes []fileOp
	for _, op := range ops {
		if !op.absent() {
			if op.mode != "160000" { // a gitlink has no content to write
				writes = append(writes, op)
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return touched, err
		}
		touched = append(touched, op)
		if err := m.removeFile(root, op.path, false); err != nil {
			return touched, err
		}
	}
	if len(writes) == 0 {
		return touched, nil
	}
	next := 0
	err = m.catObjects(ctx, s, "blob", blobIDs(writes), func(r io.Reader, size int64) error {
		op := writes[next]
		next++
		touched = append(touched, op)
		return m.writeFile(root, op, r, size, false, temp)
	})
	return touched, err
}

// blobIDs lists the object ids of ops, in order.
func blobIDs(ops []fileOp) []string {
	ids := make([]string, len(ops))
	for i, op := range ops {
		ids[i] = op.id
	}
	return ids
}

// rollBack puts the paths of ops back as they were before a failed
// restore; dirs are the directories the restore made (see missingDirs).
// It removes the files the restore wrote, then the directories it made
// that this leaves empty, deepest first, then writes the files back. A
// path to remove that is a directory, a path to write whose parent is not
// a directory, and a path to write that is a directory the restore did not
// make are left alone: the restore cannot have made them so, and writing
// there could go through a symlink. A directory the restore made that
// still holds files (someone put them there since) is never emptied: the
// file it replaced cannot be written back, and the error says so. rollBack
// carries on past a path it cannot put back and returns the failures, each
// naming its path.
func (m *Manager) rollBack(ctx context.Context, s *shadow, ops []fileOp, dirs []string, temp string) error {
	root, err := s.openRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	var failed []error
	var writes []fileOp
	for _, op := range ops {
		if !op.absent() {
			if op.mode != "160000" {
				writes = append(writes, op)
			}
			continue
		}
		if err := m.removeFile(root, op.path, true); err != nil {
			failed = append(failed, err)
		}
	}
	for _, dir := range slices.Backward(dirs) {
		if fi, err := root.Lstat(dir); err != nil || !fi.IsDir() {
			continue
		}
		// Remove fails on a directory that is not empty, which stays.
		root.Remove(dir)
	}
	if len(writes) == 0 {
		return errors.Join(failed...)
	}
	next := 0
	err = m.catObjects(ctx, s, "blob", blobIDs(writes), func(r io.Reader, size int64) error {
		op := writes[next]
		next++
		var err error
		if fi, statErr := root.Lstat(op.path); statErr == nil && fi.IsDir() {
			if _, made := slices.BinarySearch(dirs, op.path); made {
				err = fmt.Errorf("write %s back: the directory the restore made there holds files it did not write; not removing them", op.path)
			}
		} else {
			err = m.writeFile(root, op, r, size, true, temp)
		}
		if err != nil {
			failed = append(failed, err)
		}
		// Skip what writeFile left unread, so the next blob can be read.
		_, err = io.Copy(io.Discard, r)
		return err
	})
	if err != nil {
		failed = append(failed, err)
	}
	return errors.Join(failed...)
}

// removeFile removes one file or symlink and then (unless rolling back) its
// parent directories while they are empty.
func (m *Manager) removeFile(root *os.Root, name string, rollback bool) error {
	if m.beforeWrite != nil {
		if err := m.beforeWrite(name); err != nil {
			return err
		}
	}
	if err := checkParents(root, name, false); err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotDirectory) {
			return nil // already gone: nothing in the work tree is at name
		}
		return err
	}
	fi, err := root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("remove %s: %w", name, err)
	case fi.IsDir():
		// No file is at name: the directory is one a crashed run of the
		// same restore made, or someone else's; it is never removed here.
		return nil
	}
	if err := root.Remove(name); err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	if rollback {
		// The directories a restore created are removed by the caller; any
		// other directory was there before and stays.
		return nil
	}
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		// Remove fails on a non-empty directory, which ends the climb.
		if root.Remove(dir) != nil {
			break
		}
	}
	return nil
}

// errNotDirectory: a leading component of a path is a file or a symlink.
var errNotDirectory = errors.New("not a directory")

// checkParents makes sure every leading directory of name is a real
// directory (never a symlink, which could lead out of the workspace). With
// create, missing ones are made.
func checkParents(root *os.Root, name string, create bool) error {
	for i := 0; i < len(name); i++ {
		if name[i] != '/' {
			continue
		}
		dir := name[:i]
		fi, err := root.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist) && create:
			if err := root.Mkdir(dir, 0o777); err != nil {
				return fmt.Errorf("create directory %s: %w", dir, err)
			}
		case err != nil:
			return fmt.Errorf("%s: %w", dir, err)
		case !fi.IsDir():
			return fmt.Errorf("%s: in the way of %s: %w, not replacing it", dir, name, errNotDirectory)
		}
	}
	return nil
}

// writeFile writes one tree entry to the work tree through a temporary file
// (or symlink) renamed over the old one, so a reader never sees a partial
// file; the temporary file's name begins with temp (see createTemp). With
// rollback, a path whose parent is no longer a directory is skipped (see
// rollBack).
func (m *Manager) writeFile(root *os.Root, op fileOp, r io.Reader, size int64, rollback bool, temp string) error {
	if m.beforeWrite != nil {
		if err := m.beforeWrite(op.path); err != nil {
			return err
		}
	}
	if err := checkParents(root, op.path, true); err != nil {
		if rollback && errors.Is(err, errNotDirectory) {
			return nil
		}
		return fmt.Errorf("write %s: %w", op.path, err)
	}
	fi, err := root.Lstat(op.path)
	if err == nil && fi.IsDir() {
		// Empty directories are nothing git (or a snapshot) keeps: as git
		// checkout does, they give way; a directory holding a file does not.
		dirs := emptyDirs(root, op.path)
		if dirs == nil {
			return fmt.Errorf("write %s: a directory holding files is in the way; not replacing it", op.path)
		}
		for _, dir := range slices.Backward(dirs) {
			// rmdir fails on a directory a file was put in meanwhile.
			if err := root.Remove(dir); err != nil {
				return fmt.Errorf("write %s: a directory is in the way: %w", op.path, err)
			}
		}
	}
	replacesFile := err == nil && fi.Mode().IsRegular()
	dir := path.Dir(op.path)
	var tmp string
	switch op.mode {
	case "120000":
		target := make([]byte, size)
		if _, err := io.ReadFull(r, target); err != nil {
			return fmt.Errorf("write %s: read blob: %w", op.path, err)
		}
		tmp, err = createTemp(dir, temp, func(name string) error { return root.Symlink(string(target), name) })
		if err != nil {
			return fmt.Errorf("write %s: %w", op.path, err)
		}
	case "100644", "100755":
		perm := fs.FileMode(0o666)
		if op.mode == "100755" {
			perm = 0o777
		}
		if replacesFile {
			perm = executable(fi.Mode().Perm(), op.mode == "100755")
		}
		var f *os.File
		tmp, err = createTemp(dir, temp, func(name string) (err error) {
			f, err = root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
			return err
		})
		if err != nil {
			return fmt.Errorf("write %s: %w", op.path, err)
		}
		if replacesFile {
			// Exactly the old file's bits, which the umask would narrow.
			err = f.Chmod(perm)
		}
		if err == nil {
			_, err = io.CopyN(f, r, size)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			root.Remove(tmp)
			return fmt.Errorf("write %s: %w", op.path, err)
		}
	default:
		return fmt.Errorf("write %s: unsupported mode %s", op.path, op.mode)
	}
	if err := root.Rename(tmp, op.path); err != nil {
		root.Remove(tmp)
		return fmt.Errorf("write %s: %w", op.path, err)
	}
	return nil
}

// emptyDirs lists the directory dir and the directories below it, each
// before those it holds, when they hold nothing else however deep (no file,
// symlink or other entry); nil when they do, or cannot be read.
func emptyDirs(root *os.Root, dir string) []string {
	d, err := root.Open(dir)
	if err != nil {
		return nil
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return nil
	}
	dirs := []string{dir}
	for _, e := range entries {
		if !e.IsDir() {
			return nil
		}
		below := emptyDirs(root, path.Join(dir, e.Name()))
		if below == nil {
			return nil
		}
		dirs = append(dirs, below...)
	}
	return dirs
}

// executable returns perm with the executable bits of git's mode 100755
// (where perm lets read, and the owner's at least) or 100644 (none).
func executable(perm fs.FileMode, exec bool) fs.FileMode {
	perm &^= 0o111
	if exec {
		perm |= (perm&0o444)>>2 | 0o100
	}
	return perm
}

// createTemp makes a temporary file in dir with create, named with prefix
// (the restore's, journal.Temp) and a random suffix, never after the file
// it stands for: it cannot be a file of the user's, and it is short enough
// for a directory where the file's own name is as long as names may be. A
// name already taken is tried again with another suffix.
func createTemp(dir, prefix string, create func(name string) error) (string, error) {
	for range 100 {
		name := path.Join(dir, prefix+rand.Text()[:8])
		if err := create(name); !errors.Is(err, fs.ErrExist) {
			return name, err
		}
	}
	return "", fmt.Errorf("no free temporary name in %s", dir)
}

// setIndexEntries makes the private index agree with ops without reading the
// work tree. The entries get no stat data, so the next snapshot re-hashes
// exactly these paths.
func (m *Manager) setIndexEntries(ctx context.Context, s *shadow, ops []fileOp) error {
	if ok, err := m.setNativeEntries(s, ops); ok || err != nil {
		return err
	}
	var buf bytes.Buffer
	for _, op := range ops {
		if op.absent() {
			// mode 0 removes the entry
			fmt.Fprintf(&buf, "0 %s\t%s\x00", strings.Repeat("0", len(op.id)), op.path)
		} else {
			fmt.Fprintf(&buf, "%s %s\t%s\x00", op.mode, op.id, op.path)
		}
	}
	if _, err := m.run(ctx, s, runOpts{stdin: buf.Bytes()}, "update-index", "-z", "--index-info"); err != nil {
		return fmt.Errorf("update index: %w", err)
	}
	return nil
}

// catObjects streams the contents of objects of one kind ("blob", "tree"),
// in order, to fn through one `git cat-file --batch`. fn must consume
// exactly size bytes. An object missing or of another kind is an *Error
// with code NotFound.
func (m *Manager) catObjects(ctx context.Context, s *shadow, kind string, ids []string, fn func(r io.Reader, size int64) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := s.checkRoot(); err != nil {
		return err
	}
	cmd := m.command(ctx, s, runOpts{}, "cat-file", "--batch")
	cmd.Stdin = strings.NewReader(strings.Join(ids, "\n") + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return errorf(GitMissing, err, "run git")
	}
	br := bufio.NewReaderSize(stdout, 64<<10)
	readErr := func() error {
		for range ids {
			header, err := br.ReadString('\n')
			if err != nil {
				return fmt.Errorf("git cat-file: %w", err)
			}
			// "<id> <kind> <size>" or "<id> missing"
			fields := strings.Fields(header)
			if len(fields) != 3 || fields[1] != kind {
				return errorf(NotFound, nil, "object %s", strings.TrimSpace(header))
			}
			size, err := strconv.ParseInt(fields[2], 10, 64)
			if err != nil {
				return fmt.Errorf("git cat-file: bad header %q", header)
			}
			lr := &io.LimitedReader{R: br, N: size}
			if err := fn(lr, size); err != nil {
				return err
			}
			if lr.N != 0 {
				return fmt.Errorf("git cat-file: %s %s not fully read", kind, fields[0])
			}
			if _, err := br.Discard(1); err != nil { // the newline after the content
				return fmt.Errorf("git cat-file: %w", err)
			}
		}
		return nil
	}()
	if readErr != nil {
		cancel()
		cmd.Wait()
		return readErr
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("git cat-file: %s: %w", strings.TrimSpace(stderr.String()), err)
	}
	return nil
}
