package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// CommitState is how much of a commit a shadow repository holds.
type CommitState int

const (
	// CommitAbsent: no such commit, or no shadow repository for the
	// workspace (the snapshot was taken by another data directory, or lost
	// with this one's).
	CommitAbsent CommitState = iota
	// CommitIncomplete: the commit is there, but objects of its tree are
	// missing (borrowed from the user's repository, which lost them).
	CommitIncomplete
	// CommitComplete: everything needed to restore the commit is there.
	CommitComplete
)

// CheckCommit reports how much of commit the workspace's shadow repository
// holds. While the repository borrows objects from the user's repository
// (see Snapshot), every object of the commit's tree is checked, so objects
// the user's git pruned are noticed; otherwise the commit and its root tree
// are. A workspace never snapshotted has no commits.
func (m *Manager) CheckCommit(ctx context.Context, root, commit string) (CommitState, error) {
	s, err := m.existing(ctx, root)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Code == NotFound {
			return CommitAbsent, nil
		}
		return CommitAbsent, err
	}
	if commit == "" || strings.HasPrefix(commit, "-") {
		return CommitAbsent, nil
	}
	o := runOpts{okCodes: []int{1, 128}}
	_, code, err := m.runCode(ctx, s, o, "cat-file", "-e", commit+"^{commit}")
	if err != nil || code != 0 {
		return CommitAbsent, err
	}
	if !hasAlternates(s) {
		_, code, err := m.runCode(ctx, s, o, "cat-file", "-e", commit+"^{tree}")
		if err != nil || code != 0 {
			return CommitIncomplete, err
		}
		return CommitComplete, nil
	}
	out, code, err := m.runCode(ctx, s, o, "rev-list", "--objects", "--no-walk", "--no-object-names", "--missing=print", commit)
	if err != nil || code != 0 {
		return CommitIncomplete, err
	}
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(line, "?") {
			return CommitIncomplete, nil
		}
	}
	return CommitComplete, nil
}

// HasCommit reports whether commit exists in the workspace's shadow
// repository with everything needed to restore it (CheckCommit says
// CommitComplete).
func (m *Manager) HasCommit(ctx context.Context, root, commit string) (bool, error) {
	state, err := m.CheckCommit(ctx, root, commit)
	return state == CommitComplete, err
}

func hasAlternates(s *shadow) bool {
	fi, err := os.Stat(filepath.Join(s.repo, "objects", "info", "alternates"))
	return err == nil && fi.Size() > 0
}

// Fsck checks that every object reachable from the shadow repository's refs
// and private index is present (including objects borrowed from the user's
// repository). It returns an *Error with code Corrupted naming what is
// missing. It checks connectivity only, not object contents, so it stays
// fast.
func (m *Manager) Fsck(ctx context.Context, root string) error {
	s, err := m.existing(ctx, root)
	if err != nil {
		return err
	}
	return m.fsck(ctx, s)
}

func (m *Manager) fsck(ctx context.Context, s *shadow) error {
	_, err := m.run(ctx, s, runOpts{mergeStderr: true}, "fsck", "--connectivity-only", "--no-dangling", "--no-progress")
	var gerr *gitError
	if errors.As(err, &gerr) {
		return errorf(Corrupted, err, "shadow repository of %s is damaged", s.root)
	}
	if err != nil {
		return fmt.Errorf("fsck %s: %w", s.root, err)
	}
	return nil
}

// CommitMessage returns the full message of a commit in the shadow
// repository, or an *Error with code NotFound.
func (m *Manager) CommitMessage(ctx context.Context, root, commit string) (string, error) {
	s, err := m.existing(ctx, root)
	if err != nil {
		return "", err
	}
	return m.commitMessage(ctx, s, commit)
}

// commitMessage is CommitMessage in the shadow repository of s.
func (m *Manager) commitMessage(ctx context.Context, s *shadow, commit string) (string, error) {
	id, err := m.resolveCommit(ctx, s, commit)
	if err != nil {
		return "", err
	}
	out, err := m.run(ctx, s, runOpts{}, "cat-file", "commit", id)
	if err != nil {
		return "", fmt.Errorf("read commit %s: %w", id, err)
	}
	_, msg, _ := bytes.Cut(out, []byte("\n\n"))
	return string(msg), nil
}

// Refs returns the refs of the shadow repository below prefix (a full ref
// hierarchy such as "refs/belay/<session>", matched component by
// component), mapped to the commits they point at. A workspace never
// snapshotted has none.
func (m *Manager) Refs(ctx context.Context, root, prefix string) (map[string]string, error) {
	if !strings.HasPrefix(prefix, "refs/") {
		return nil, fmt.Errorf("refs: prefix %q must start with refs/", prefix)
	}
	s, err := m.existing(ctx, root)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Code == NotFound {
			return map[string]string{}, nil
		}
		return nil, err
	}
	return m.refs(ctx, s, prefix)
}

func (m *Manager) refs(ctx context.Context, s *shadow, prefix string) (map[string]string, error) {
	// Ref names cannot contain newlines or spaces, so this format is
	// unambiguous without -z (which for-each-ref lacks).
	out, err := m.run(ctx, s, runOpts{}, "for-each-ref", "--format=%(objectname) %(refname)", "--", strings.TrimSuffix(prefix, "/"))
	if err != nil {
		return nil, fmt.Errorf("list refs of %s: %w", s.root, err)
	}
	refs := make(map[string]string)
	for line := range strings.Lines(string(out)) {
		id, ref, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		if ok {
			refs[ref] = id
		}
	}
	return refs, nil
}

// DeleteRefs deletes the shadow repository's refs below prefix and reclaims
// what only they used, as Collect does: when no snapshot is left, the whole
// shadow directory goes; otherwise the private index lets go of the deleted
// snapshots' files, the repository is repacked (copying in objects borrowed
// from the user's repository, so the borrowing ends) and pruned; while a
// ref of the repository is damaged, only the refs go (see reclaim). The
// workspace itself may be gone. It takes the workspace lock.
func (m *Manager) DeleteRefs(ctx context.Context, root, prefix string) (*Reclaimed, error) {
	if !strings.HasPrefix(prefix, "refs/") {
		return nil, fmt.Errorf("delete refs: prefix %q must start with refs/", prefix)
	}
	s, unlock, err := m.lockLocated(ctx, root)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := m.clearRefLocks(ctx, s); err != nil {
		return nil, err
	}
	refs, err := m.refs(ctx, s, prefix)
	if err != nil {
		return nil, err
	}
	return m.reclaim(ctx, s, false, slices.Collect(maps.Keys(refs)), nil)
}

// lockLocated takes the lock of root's shadow repository, found as locate
// finds it (the workspace itself may be gone), and returns it with its
// unlock.
func (m *Manager) lockLocated(ctx context.Context, root string) (*shadow, func(), error) {
	s, err := m.locate(ctx, root)
	if err != nil {
		return nil, nil, err
	}
	unlock, err := m.lock(ctx, s)
	if err != nil {
		return nil, nil, err
	}
	return s, unlock, nil
}

// DeleteRefList deletes exactly the given refs (missing ones are fine) and
// reclaims the space only they held, like DeleteRefs.
func (m *Manager) DeleteRefList(ctx context.Context, root string, refs []string) (*Reclaimed, error) {
	for _, ref := range refs {
		if !strings.HasPrefix(ref, "refs/") {
			return nil, fmt.Errorf("delete refs: %q must start with refs/", ref)
		}
	}
	s, unlock, err := m.lockLocated(ctx, root)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := m.clearRefLocks(ctx, s); err != nil {
		return nil, err
	}
	return m.reclaim(ctx, s, false, refs, nil)
}

// RestoreRefs makes each snapshot ref of refs (ref → commit) that the
// shadow repository lacks point at its commit, when the repository has that
// commit, and returns the refs it made; existing refs stay as they are. The
// workspace itself may be gone. It takes the workspace lock.
func (m *Manager) RestoreRefs(ctx context.Context, root string, refs map[string]string) ([]string, error) {
	s, unlock, err := m.lockLocated(ctx, root)
	if err != nil {
		return nil, err
	}
	defer unlock()
	have, err := m.refs(ctx, s, "refs/")
	if err != nil {
		return nil, err
	}
	return m.restoreRefs(ctx, s, have, refs, false)
}

// restoreRefs is RestoreRefs for the refs the repository has; with dryRun
// it only says which refs it would make. The caller holds the lock.
func (m *Manager) restoreRefs(ctx context.Context, s *shadow, have, refs map[string]string, dryRun bool) ([]string, error) {
	var made []string
	for _, ref := range slices.Sorted(maps.Keys(refs)) {
		commit := refs[ref]
		if !snapshotRef(ref) || have[ref] != "" || !isObjectID(commit) || !m.isCommit(ctx, s, commit) {
			continue
		}
		if dryRun {
			made = append(made, ref)
			continue
		}
		if err := m.updateRef(ctx, s, ref, commit); err != nil {
			return made, fmt.Errorf("restore ref %s: %w", ref, err)
		}
		made = append(made, ref)
	}
	return made, nil
}

// clearRefLocks repairs the repository's setup and removes the lock files of
// refs: under the workspace lock every one is stale, left by a git a crash
// killed. The caller holds the lock.
func (m *Manager) clearRefLocks(ctx context.Context, s *shadow) error {
	if err := m.open(ctx, s); err != nil {
		return fmt.Errorf("delete refs of %s: %w", s.root, err)
	}
	locks, err := lockFiles(s, true)
	if err != nil {
		return err
	}
	for _, name := range locks {
		if err := os.Remove(filepath.Join(s.dir, filepath.FromSlash(name))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete refs of %s: %w", s.root, err)
		}
	}
	return nil
}

// deleteRefs deletes refs (missing ones are fine) in one transaction; the
// caller holds the lock.
func (m *Manager) deleteRefs(ctx context.Context, s *shadow, refs []string) error {
	var cmds bytes.Buffer
	for _, ref := range refs {
		fmt.Fprintf(&cmds, "delete %s\x00\x00", ref)
	}
	if cmds.Len() == 0 {
		return nil
	}
	if _, err := m.run(ctx, s, runOpts{stdin: cmds.Bytes()}, "update-ref", "-z", "--stdin"); err != nil {
		return fmt.Errorf("delete refs of %s: %w", s.root, err)
	}
	return nil
}

// WriteBundle writes the given refs of the shadow repository, with all the
// objects they need (borrowed ones included), to a git bundle at path. The
// file appears atomically.
func (m *Manager) WriteBundle(ctx context.Context, root string, refs []string, path string) error {
	s, err := m.existing(ctx, root)
	if err != nil {
		return err
	}
	if len(refs) == 0 {
		return fmt.Errorf("write bundle: no refs given")
	}
	for _, ref := range refs {
		if !strings.HasPrefix(ref, "refs/") {
			return fmt.Errorf("write bundle: %q is not a full ref", ref)
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("write bundle: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".tmp*")
	if err != nil {
		return fmt.Errorf("write bundle: %w", err)
	}
	tmp := f.Name()
	f.Close()
	defer os.Remove(tmp)
	// git bundle refuses to overwrite an existing file.
	os.Remove(tmp)
	if _, err := m.run(ctx, s, runOpts{stdin: []byte(strings.Join(refs, "\n") + "\n")}, "bundle", "create", "-q", tmp, "--stdin"); err != nil {
		return fmt.Errorf("write bundle of %s: %w", s.root, err)
	}
	if err := os.Rename(tmp, abs); err != nil {
		return fmt.Errorf("write bundle: %w", err)
	}
	return nil
}

// ReadBundle verifies the bundle at path and fetches its refs into the
// workspace's shadow repository (creating it if needed). A bundle whose
// trees hold a name no restore writes (see safeName) is an *Error with code
// InvalidBundle, and none of its refs is made. It returns the bundle's refs
// mapped to their commits.
// An existing ref is only moved forward, never rewound. It takes the
// workspace lock.
func (m *Manager) ReadBundle(ctx context.Context, root, path string) (map[string]string, error) {
	unlock, err := m.Lock(ctx, root)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return m.ReadBundleLocked(ctx, root, path)
}

// ReadBundleLocked is ReadBundle for a caller holding the workspace lock
// (Lock): an import keeps it until the session that refers to the fetched
// snapshots is stored, so a garbage collection cannot take them for an
// orphan's in between.
func (m *Manager) ReadBundleLocked(ctx context.Context, root, path string) (map[string]string, error) {
	s, err := m.workspaceFor(ctx, root)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("read bundle: %w", err)
	}
	if err := m.open(ctx, s); err != nil {
		return nil, fmt.Errorf("read bundle into %s: %w", s.root, err)
	}
	if _, err := m.run(ctx, s, runOpts{}, "bundle", "verify", "-q", abs); err != nil {
		return nil, fmt.Errorf("read bundle %s: %w", abs, err)
	}
	out, err := m.run(ctx, s, runOpts{}, "bundle", "list-heads", abs)
	if err != nil {
		return nil, fmt.Errorf("read bundle %s: %w", abs, err)
	}
	refs := make(map[string]string)
	var refspecs bytes.Buffer
	for line := range strings.Lines(string(out)) {
		id, ref, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		if !ok || !strings.HasPrefix(ref, "refs/") {
			continue
		}
		refs[ref] = id
		fmt.Fprintf(&refspecs, "%s:%s\n", ref, ref)
	}
	if len(refs) == 0 {
		return refs, nil
	}
	// git is no guard against a tree naming .git or ..: older versions
	// fetching from a bundle ignore fetch.fsckObjects, and fsck takes those
	// names for warnings. So the objects go in without a ref, their trees
	// are checked, and only then are the refs fetched.
	if _, err := m.run(ctx, s, runOpts{}, "bundle", "unbundle", abs); err != nil {
		return nil, fmt.Errorf("read bundle %s: %w", abs, err)
	}
	bad, err := m.unsafeEntries(ctx, s, slices.Collect(maps.Values(refs)))
	if err != nil {
		return nil, fmt.Errorf("read bundle %s: %w", abs, err)
	}
	if len(bad) > 0 {
		return nil, errorf(InvalidBundle, nil, "the bundle's snapshots hold names no restore writes (.git, empty, . or .., or with a slash): %s", strings.Join(bad, ", "))
	}
	if _, err := m.run(ctx, s, runOpts{stdin: refspecs.Bytes()},
		"fetch", "-q", "--no-tags", "--no-write-fetch-head", "--no-auto-gc", "--no-write-commit-graph", "--stdin", abs); err != nil {
		return nil, fmt.Errorf("read bundle %s: %w", abs, err)
	}
	return refs, nil
}

// unsafeEntries returns (up to ten of) the tree entries reachable from
// commits whose names no restore writes (see safeName), each as its name in
// its tree. Each tree is read once, however many commits hold it.
func (m *Manager) unsafeEntries(ctx context.Context, s *shadow, commits []string) ([]string, error) {
	objects, err := m.run(ctx, s, runOpts{stdin: []byte(strings.Join(commits, "\n") + "\n")}, "rev-list", "--objects", "--no-object-names", "--stdin")
	if err != nil {
		return nil, err
	}
	typed, err := m.run(ctx, s, runOpts{stdin: objects}, "cat-file", "--batch-check=%(objecttype) %(objectname)")
	if err != nil {
		return nil, err
	}
	var trees []string
	for line := range strings.Lines(string(typed)) {
		if id, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "tree "); ok {
			trees = append(trees, id)
		}
	}
	const most = 10
	var bad []string
	next := 0
	err = m.catObjects(ctx, s, "tree", trees, func(r io.Reader, size int64) error {
		id := trees[next]
		next++
		data, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		// Entries are "<mode> <name>\0" and a 20-byte object name.
		for len(data) > 0 && len(bad) < most {
			sp, nul := bytes.IndexByte(data, ' '), bytes.IndexByte(data, 0)
			if sp < 0 || nul < sp || len(data) < nul+21 {
				return errorf(Corrupted, nil, "tree %s is damaged", id)
			}
			if name := string(data[sp+1 : nul]); !safeName(name) {
				bad = append(bad, fmt.Sprintf("%q in tree %s", name, id))
			}
			data = data[nul+21:]
		}
		return nil
	})
	return bad, err
}

// DiskUsage returns the bytes used by the workspace's shadow directory
// (repository, index and bookkeeping; not objects borrowed from the user's
// repository). A workspace never snapshotted uses none.
func (m *Manager) DiskUsage(ctx context.Context, root string) (int64, error) {
	s, err := m.workspaceFor(ctx, root)
	if err != nil {
		return 0, err
	}
	n, err := dirBytes(ctx, s.dir)
	if err != nil {
		return 0, fmt.Errorf("disk usage of %s: %w", s.root, err)
	}
	return n, nil
}
