package workspace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// ProblemKind classifies a Problem.
type ProblemKind string

// Kinds of Problem.
const (
	// StaleLock: a lock file left by a git command that was killed with
	// belay. Writing what it locks fails until it is removed.
	StaleLock ProblemKind = "stale-lock"
	// UnfinishedRestore: the journal of a restore whose process died, or of
	// a restore begun with BeginRestoreLocked and neither committed nor
	// undone.
	UnfinishedRestore ProblemKind = "unfinished-restore"
	// DamagedFile: a file of the shadow directory is empty or wrong: HEAD,
	// the repository's settings, the built-in excludes or attributes, or the
	// metadata.
	DamagedFile ProblemKind = "damaged-file"
	// BrokenRef: a ref of the shadow repository names no object.
	BrokenRef ProblemKind = "broken-ref"
	// DamagedIndex: the private index cannot be read.
	DamagedIndex ProblemKind = "damaged-index"
	// MissingObjects: objects are missing (see Fsck).
	MissingObjects ProblemKind = "missing-objects"
)

// Problem is something wrong in a workspace's shadow directory.
type Problem struct {
	Kind ProblemKind
	// Name is the file concerned, relative to the shadow directory and slash
	// separated; for BrokenRef the ref; "" for MissingObjects.
	Name string
	// Message says what is wrong and what it breaks, for people.
	Message string
	// Record is, for an UnfinishedRestore begun with BeginRestoreLocked,
	// the caller's record.
	Record []byte
}

// Check lists what is wrong with the shadow directory of the workspace at
// root, or an *Error with code NotFound when it was never snapshotted. It
// looks under the workspace lock, so what it reports is not the work of a
// command in progress: a lock file or a restore journal it finds was left by
// a process that died. Only the check for missing objects, which can take a
// while on a large repository, runs after the lock is released. It changes
// nothing.
func (m *Manager) Check(ctx context.Context, root string) ([]Problem, error) {
	s, err := m.workspaceFor(ctx, root)
	if err != nil {
		return nil, err
	}
	if err := requireMeta(s); err != nil {
		return nil, err
	}
	unlock, err := m.lock(ctx, s)
	if err != nil {
		return nil, err
	}
	ps, sound, err := m.check(ctx, s)
	unlock()
	if err != nil || !sound {
		return ps, err
	}
	return m.checkObjects(ctx, s, ps)
}

// CheckLocked is Check for a caller that already holds Lock(root).
func (m *Manager) CheckLocked(ctx context.Context, root string) ([]Problem, error) {
	s, err := m.lockedWorkspace(ctx, root, "CheckLocked")
	if err != nil {
		return nil, err
	}
	if err := requireMeta(s); err != nil {
		return nil, err
	}
	ps, sound, err := m.check(ctx, s)
	if err != nil || !sound {
		return ps, err
	}
	return m.checkObjects(ctx, s, ps)
}

// requireMeta fails with NotFound when s was never snapshotted; unlike
// requireShadow it accepts a damaged metadata file, which Check reports.
func requireMeta(s *shadow) error {
	if _, err := os.Lstat(filepath.Join(s.dir, "meta.json")); err != nil {
		return errorf(NotFound, nil, "workspace %q has no snapshots", s.root)
	}
	return nil
}

// check lists the problems Check finds under the lock, and reports whether
// the repository is sound enough for git to look for missing objects.
func (m *Manager) check(ctx context.Context, s *shadow) (ps []Problem, sound bool, err error) {
	locks, err := lockFiles(s, true)
	if err != nil {
		return nil, false, err
	}
	for _, name := range locks {
		ps = append(ps, Problem{Kind: StaleLock, Name: name,
			Message: fmt.Sprintf("%s was left by a git command that was killed: snapshots fail until it is removed", name)})
	}
	if j, err := readJournal(s); err != nil || j != nil {
		p := Problem{Kind: UnfinishedRestore, Name: "restore.json", Message: "the journal of an interrupted restore is unreadable"}
		if j != nil {
			p.Message = fmt.Sprintf("a restore to snapshot %.12s was interrupted and is not finished", j.Target)
			p.Record = j.Record
		}
		ps = append(ps, p)
	}
	damaged := m.damagedFiles(ctx, s)
	ps = append(ps, damaged...)
	broken, err := brokenRefs(s)
	if err != nil {
		return nil, false, err
	}
	for _, ref := range broken {
		ps = append(ps, Problem{Kind: BrokenRef, Name: ref,
			Message: fmt.Sprintf("ref %s of the snapshot repository is empty or damaged: its snapshot cannot be found", ref)})
	}
	// git runs only in a repository with a valid HEAD and settings.
	usable := len(damaged) == 0
	if msg := m.damagedIndex(ctx, s, usable); msg != "" {
		ps = append(ps, Problem{Kind: DamagedIndex, Name: "index", Message: msg})
		usable = false
	}
	return ps, usable && len(broken) == 0, nil
}

// checkObjects adds missing objects (see Fsck) to ps.
func (m *Manager) checkObjects(ctx context.Context, s *shadow, ps []Problem) ([]Problem, error) {
	if err := m.fsck(ctx, s); err != nil {
		var e *Error
		if !errors.As(err, &e) {
			return nil, err
		}
		ps = append(ps, Problem{Kind: MissingObjects, Message: err.Error()})
	}
	return ps, nil
}

// damagedFiles lists the setup files, HEAD and the metadata that do not
// hold what they must. A configuration that is merely older is not damaged
// (the next command updates it): only one git cannot read, or without the
// built-in excludes.
func (m *Manager) damagedFiles(ctx context.Context, s *shadow) []Problem {
	var ps []Problem
	damaged := func(name, msg string) {
		ps = append(ps, Problem{Kind: DamagedFile, Name: name, Message: msg})
	}
	if data, err := os.ReadFile(filepath.Join(s.dir, "meta.json")); err != nil || json.Unmarshal(data, &meta{}) != nil {
		damaged("meta.json", "the metadata file of the snapshot repository is unreadable")
	}
	data, err := os.ReadFile(filepath.Join(s.repo, "HEAD"))
	headOK := err == nil && validHEAD(data)
	if !headOK {
		damaged("repo.git/HEAD", "HEAD of the snapshot repository is empty or damaged: every snapshot fails")
	}
	for _, f := range m.setupFiles(s) {
		have, err := os.ReadFile(filepath.Join(s.dir, filepath.FromSlash(f.name)))
		if err == nil && bytes.Equal(have, f.data) {
			continue
		}
		if f.name == "exclude" {
			damaged(f.name, "the built-in excludes are damaged: snapshots could store directories such as node_modules")
		} else {
			damaged(f.name, "the attribute settings are damaged: snapshots could change line endings")
		}
	}
	if !m.configReadable(ctx, s, headOK) {
		damaged("repo.git/config", "the settings of the snapshot repository are empty or damaged: snapshots fail or store ignored files")
	}
	return ps
}

// configReadable reports whether git reads the shadow repository's
// configuration with the built-in excludes in it. An older configuration
// passes (the next command brings it up to date). git reads a configuration
// only in a repository with a valid HEAD; without one only its size is
// checked.
func (m *Manager) configReadable(ctx context.Context, s *shadow, headOK bool) bool {
	path := filepath.Join(s.repo, "config")
	fi, err := os.Stat(path)
	if err != nil || fi.Size() == 0 {
		return false
	}
	if !headOK {
		return true
	}
	out, _, err := m.runCode(ctx, s, runOpts{gitDir: s.repo, okCodes: []int{1}}, "config", "--file", path, "--get", "core.excludesFile")
	return err == nil && strings.TrimSpace(string(out)) == filepath.Join(s.dir, "exclude")
}

// damagedIndex says what is wrong with the private index, or "" when it is
// missing (the next snapshot makes one) or readable. With git unusable only
// its size is checked.
func (m *Manager) damagedIndex(ctx context.Context, s *shadow, usable bool) string {
	fi, err := os.Stat(s.index)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ""
	case err != nil:
		return "the private index cannot be read: " + err.Error()
	case fi.Size() < 32: // a header and a checksum
		return "the private index is empty or truncated: every snapshot fails"
	case !usable:
		return ""
	}
	// Reading the index checks its checksum; .git is never in it, so
	// nothing is listed.
	if _, err := m.run(ctx, s, runOpts{}, "ls-files", "-z", "--cached", "--", ".git"); err != nil {
		return "the private index is damaged, every snapshot fails: " + firstLine(err)
	}
	return ""
}

// firstLine is the first line of err's message.
func firstLine(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}

// lockFiles lists git's lock files in the shadow directory, relative to it
// and sorted. The ones below repo.git/refs are listed only with refs: one
// for every ref can be many files to look at.
func lockFiles(s *shadow, refs bool) ([]string, error) {
	var out []string
	for _, dir := range []string{".", "repo.git"} {
		entries, err := os.ReadDir(filepath.Join(s.dir, dir))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".lock") && !e.IsDir() {
				out = append(out, path.Join(dir, e.Name()))
			}
		}
	}
	if refs {
		err := filepath.WalkDir(filepath.Join(s.repo, "refs"), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if !d.IsDir() && strings.HasSuffix(d.Name(), ".lock") {
				rel, _ := filepath.Rel(s.dir, p)
				out = append(out, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return out, nil
}

// removeLeftovers removes, under the lock, what killed commands leave in the
// shadow directory: git's lock files (not the ones of refs, see updateRef)
// and belay's temporary files (copies of the index, half-written files).
func removeLeftovers(s *shadow) error {
	locks, err := lockFiles(s, false)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "diff-index-") || name == "index.seed" || strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp") {
			locks = append(locks, name)
		}
	}
	for _, name := range locks {
		if err := os.Remove(filepath.Join(s.dir, filepath.FromSlash(name))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s left by a killed command: %w", name, err)
		}
	}
	return nil
}

// brokenRefs lists the loose refs whose file holds no object name, sorted.
func brokenRefs(s *shadow) ([]string, error) {
	var out []string
	err := filepath.WalkDir(filepath.Join(s.repo, "refs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || strings.HasSuffix(d.Name(), ".lock") {
			return nil
		}
		if data, err := os.ReadFile(p); err != nil || !validRef(data) {
			rel, _ := filepath.Rel(s.repo, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// validRef reports whether data is what git writes in a loose ref.
func validRef(data []byte) bool {
	line, _ := bytes.CutSuffix(data, []byte("\n"))
	if target, ok := bytes.CutPrefix(line, []byte("ref: refs/")); ok {
		return len(target) > 0
	}
	return isObjectID(string(line))
}

// updateRef points ref at commit. Under the lock a lock file of ref is stale
// and a loose ref file that names nothing (left empty by a crash) is
// overwritten anyway, so both are removed first: git refuses either.
func (m *Manager) updateRef(ctx context.Context, s *shadow, ref, commit string) error {
	file := filepath.Join(s.repo, filepath.FromSlash(ref))
	if err := os.Remove(file + ".lock"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the stale lock of %s: %w", ref, err)
	}
	if data, err := os.ReadFile(file); err == nil && !validRef(data) {
		if err := os.Remove(file); err != nil {
			return fmt.Errorf("remove the damaged ref %s: %w", ref, err)
		}
	}
	if snapshotRef(ref) && isObjectID(commit) {
		return writeLooseRef(s.repo, ref, commit)
	}
	if _, err := m.run(ctx, s, runOpts{}, "update-ref", "--no-deref", ref, commit); err != nil {
		return err
	}
	return nil
}

// RepairLocked rebuilds what a crash can break in the shadow directory of
// the workspace at root and git can rebuild: it removes stale lock files
// (see Check); rewrites HEAD, the settings, the built-in excludes and
// attributes and the metadata when damaged; points each broken ref at the
// commit known names for it (ref → commit, from the caller's records) or,
// failing that, at its packed value; rebuilds an unreadable private index
// from the tree of the newest snapshot; and finishes an interrupted restore
// (one begun with BeginRestoreLocked stays pending for its caller, see
// PendingRestoreLocked). It returns what it could not rebuild: a broken ref
// whose commit nobody knows is removed, so the repository works again, and
// is returned as lost. A broken ref mine says is not the caller's (another
// session's, in a shared workspace) is left as it is; nil mine takes every
// ref for the caller's. Missing objects cannot be rebuilt; Check still lists
// them. The caller holds Lock(root).
func (m *Manager) RepairLocked(ctx context.Context, root string, known map[string]string, mine func(ref string) bool) ([]Problem, error) {
	s, err := m.lockedWorkspace(ctx, root, "RepairLocked")
	if err != nil {
		return nil, err
	}
	if err := requireMeta(s); err != nil {
		return nil, err
	}
	if data, err := os.ReadFile(filepath.Join(s.dir, "meta.json")); err != nil || json.Unmarshal(data, &meta{}) != nil {
		data, err := json.Marshal(meta{Root: s.root, Created: m.now().UTC()})
		if err != nil {
			return nil, err
		}
		if err := writeFileAtomic(filepath.Join(s.dir, "meta.json"), data, 0o600); err != nil {
			return nil, err
		}
	}
	if err := m.open(ctx, s); err != nil {
		return nil, err
	}
	if !m.configReadable(ctx, s, true) {
		if err := m.writeSetup(s, true); err != nil {
			return nil, err
		}
	}
	locks, err := lockFiles(s, true)
	if err != nil {
		return nil, err
	}
	for _, name := range locks {
		if err := os.Remove(filepath.Join(s.dir, filepath.FromSlash(name))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("remove %s: %w", name, err)
		}
	}
	lost, err := m.repairRefs(ctx, s, known, mine)
	if err != nil {
		return nil, err
	}
	if msg := m.damagedIndex(ctx, s, true); msg != "" {
		if p := m.rebuildIndex(ctx, s); p != nil {
			lost = append(lost, *p)
		}
	}
	if _, err := readJournal(s); err != nil {
		if err := removeDurably(s.journalPath()); err != nil {
			return nil, fmt.Errorf("remove the unreadable restore journal: %w", err)
		}
		lost = append(lost, Problem{Kind: UnfinishedRestore, Name: "restore.json",
			Message: "the journal of an interrupted restore was unreadable and was removed: files it was restoring may be left as they were before it"})
	}
	if _, err := m.recoverRestore(ctx, s); err != nil {
		return nil, err
	}
	return lost, nil
}

// repairRefs repairs the broken refs mine says are the caller's (see
// RepairLocked) and returns the ones it could not rebuild.
func (m *Manager) repairRefs(ctx context.Context, s *shadow, known map[string]string, mine func(string) bool) ([]Problem, error) {
	broken, err := brokenRefs(s)
	if err != nil {
		return nil, err
	}
	var lost []Problem
	for _, ref := range broken {
		if mine != nil && !mine(ref) {
			continue
		}
		if err := removeDurably(filepath.Join(s.repo, filepath.FromSlash(ref))); err != nil {
			return nil, fmt.Errorf("remove the damaged ref %s: %w", ref, err)
		}
		if c := known[ref]; c != "" && m.isCommit(ctx, s, c) {
			if err := m.updateRef(ctx, s, ref, c); err != nil {
				return nil, fmt.Errorf("rebuild ref %s: %w", ref, err)
			}
			continue
		}
		if m.isCommit(ctx, s, ref) {
			continue // packed-refs holds it
		}
		lost = append(lost, Problem{Kind: BrokenRef, Name: ref,
			Message: fmt.Sprintf("ref %s was damaged and nothing records its commit: it was removed, and its snapshot is lost", ref)})
	}
	return lost, nil
}

// isCommit reports whether rev names a commit of the shadow repository.
func (m *Manager) isCommit(ctx context.Context, s *shadow, rev string) bool {
	_, code, err := m.runCode(ctx, s, runOpts{okCodes: []int{1, 128}}, "cat-file", "-e", "--end-of-options", rev+"^{commit}")
	return err == nil && code == 0
}

// rebuildIndex replaces the unreadable private index with one holding the
// tree of the newest snapshot (so files stored once stay stored; entries
// without stat data make the next snapshot hash every file once). With no
// snapshot, or when that fails, the index is removed and the next snapshot
// starts afresh from the work tree, which it returns as a Problem.
func (m *Manager) rebuildIndex(ctx context.Context, s *shadow) *Problem {
	m.dropNative(s)
	if err := os.Remove(s.index); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &Problem{Kind: DamagedIndex, Name: "index", Message: "the damaged private index could not be removed: " + err.Error()}
	}
	out, err := m.run(ctx, s, runOpts{}, "for-each-ref", "--sort=-committerdate", "--count=1", "--format=%(objectname)", "refs/belay/")
	newest := strings.TrimSpace(string(out))
	if err == nil && newest != "" {
		if _, err = m.run(ctx, s, runOpts{}, "read-tree", newest); err == nil {
			return nil
		}
		os.Remove(s.index)
	}
	msg := "the damaged private index was removed: the next snapshot builds a new one from the files as they are"
	if err != nil {
		msg += " (rebuilding it from the newest snapshot failed: " + firstLine(err) + ")"
	}
	return &Problem{Kind: DamagedIndex, Name: "index", Message: msg}
}
