package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// SnapshotRequest describes one snapshot.
type SnapshotRequest struct {
	// Root is the absolute path of the workspace; it must exist, be a
	// directory and not lie inside DataDir.
	Root string
	// Ref is the full ref that will point at the new commit, e.g.
	// refs/belay/<session>/<seq>.
	Ref string
	// Parent is the commit the change lists are computed against; "" means
	// none (every file counts as created). The new commit does not name it
	// as its parent: every snapshot commit is a root, so deleting one's ref
	// (a deleted checkpoint's) lets gc reclaim what only it held, however
	// many snapshots came after it.
	Parent string
	// Message is the full commit message, trailers included.
	Message string
	// MessageFunc, when set, builds the commit message instead of Message,
	// from the snapshot about to be committed: its Tree, change lists and
	// Skipped are filled in, its Commit is not yet. So a message can list
	// the changed files without a second snapshot.
	MessageFunc func(*Snapshot) (string, error)
	// Paths, when not empty, lists the paths (relative to Root, slash or OS
	// separated) the caller touched since the previous snapshot: only these
	// are re-hashed, created or removed, and the rest of the tree is taken
	// from the private index as it is. A path that is an existing directory
	// has everything below it looked at. Empty means a full scan (which is
	// also cheap: unchanged files are recognised by their stat data). A
	// Manager with Options.WatchFiles uses its watcher's list instead of
	// either when the watcher vouches for it.
	Paths []string
	// MaxFileSize, when positive, replaces Options.MaxFileSize for this
	// snapshot.
	MaxFileSize int64
	// Progress, when set, is told how the snapshot is getting on, from the
	// calling goroutine; it must return quickly.
	Progress func(Progress)
}

// Progress is how far a snapshot has got: the files it hashes and stores,
// and their bytes, out of how many. Phase is "scanning" (looking for
// changed files, totals unknown), "hashing", or "copying" (the first
// snapshot of a git project copying in the objects it borrowed, no totals).
type Progress struct {
	Phase             string
	Files, TotalFiles int64
	Bytes, TotalBytes int64
}

// Skipped is a file left out of a snapshot.
type Skipped struct {
	Path   string // relative to the workspace root, slash separated
	Reason string
}

// Snapshot is the result of a snapshot.
type Snapshot struct {
	Commit string // the new commit, which Ref now points at
	Tree   string // its tree
	// Created, Modified and Deleted are relative to Parent's tree, slash
	// separated and sorted. A type change (file to symlink) counts as
	// modified.
	Created, Modified, Deleted []string
	// Skipped lists new or changed files that were not stored: larger than
	// MaxFileSize, unreadable, or not a regular file or symlink (a named
	// pipe, a socket, a device); and, from a scan of the whole work tree,
	// the directories that could not be read, by their path. A skipped file
	// that an earlier snapshot stored keeps its earlier content in this
	// snapshot.
	Skipped []Skipped
}

// Snapshot records the current state of the workspace as a commit in its
// shadow repository and points req.Ref at it. It takes the workspace lock,
// first removes the lock files of git commands killed with their belay
// process and finishes a restore that a crash interrupted, and never writes
// to the work tree or to the user's repository.
//
// What is stored: every file git would add with `git add -A` under the
// workspace's .gitignore files, its repository's .git/info/exclude,
// .belayignore (gitignore syntax, at the root) and the built-in excludes
// (.git, node_modules/, .venv/, __pycache__/, target/, dist/, build/,
// .DS_Store, *.pyc, .belay/, belay's own *.belay.tar.gz archives); symlinks
// as symlinks; the working files of nested git repositories as ordinary
// files (never their .git). Files are stored byte for byte: .gitattributes conversions are off.
// As in git, a file stays stored once stored, even if an ignore rule later
// matches it, until it is deleted.
//
// The first snapshot of a workspace that is the top of a git repository
// starts from a copy of the user's index and reads the user's objects
// (objects/info/alternates), so it hashes no unchanged file: it costs about
// one `git status`. Before it returns, the objects it borrowed are copied
// into the shadow repository (one `git repack`, which reuses the user's
// compressed objects as they are) and the alternate is dropped, so no
// snapshot depends on the user's .git once taken: deleting it, or a
// `git gc --prune=now` after rewriting history, loses none. A shadow
// repository found still borrowing (left by an older belay, or by a copy a
// crash cut short) is copied in first by the next Snapshot or Restore; when
// the borrowed objects are already gone, that fails with Corrupted
// (CheckCommit says which snapshots are incomplete).
func (m *Manager) Snapshot(ctx context.Context, req SnapshotRequest) (*Snapshot, error) {
	s, err := m.workspaceFor(ctx, req.Root)
	if err != nil {
		return nil, err
	}
	unlock, err := m.lock(ctx, s)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return m.snapshot(ctx, s, req)
}

// SnapshotLocked is Snapshot for a caller that already holds Lock(req.Root).
func (m *Manager) SnapshotLocked(ctx context.Context, req SnapshotRequest) (*Snapshot, error) {
	s, err := m.lockedWorkspace(ctx, req.Root, "SnapshotLocked")
	if err != nil {
		return nil, err
	}
	return m.snapshot(ctx, s, req)
}

func (m *Manager) snapshot(ctx context.Context, s *shadow, req SnapshotRequest) (*Snapshot, error) {
	if !strings.HasPrefix(req.Ref, "refs/") {
		return nil, fmt.Errorf("snapshot %s: ref %q must be a full ref starting with refs/", s.root, req.Ref)
	}
	if err := m.open(ctx, s); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", s.root, err)
	}
	// A restore waiting for its caller (BeginRestoreLocked) stays pending:
	// its files are moved, which is what the snapshot records.
	if _, err := m.recoverRestore(ctx, s); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", s.root, err)
	}
	if err := m.ownObjects(ctx, s); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", s.root, err)
	}
	// A full object name needs no git command to resolve: diff-tree below
	// fails on one that names no commit, and only then is it looked up, for
	// the error.
	parent := req.Parent
	if parent != "" && !isObjectID(parent) {
		var err error
		if parent, err = m.resolveCommit(ctx, s, req.Parent); err != nil {
			return nil, fmt.Errorf("snapshot %s: parent: %w", s.root, err)
		}
	}
	maxSize := m.maxFileSize
	if req.MaxFileSize > 0 {
		maxSize = req.MaxFileSize
	}
	opts := treeOpts{paths: req.Paths, maxFileSize: maxSize, specials: true, native: true, progress: req.Progress}
	if clock, err := scanClock(s); err == nil {
		opts.clock = clock
	}
	claim := m.claimChanges(ctx, s)
	if m.claimed != nil {
		m.claimed(claim)
	}
	if claim != nil && claim.ok {
		opts.paths, opts.vouched, opts.indexTree = claim.paths, true, claim.tree
	}
	settled := false
	defer func() {
		if !settled {
			claim.abandon()
		}
	}()
	built, err := m.buildTree(ctx, s, s.index, opts)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", s.root, err)
	}
	tree := built.tree
	snap := &Snapshot{Tree: tree, Skipped: built.skipped}
	if parent == "" {
		out, err := m.run(ctx, s, runOpts{}, "ls-tree", "-r", "-z", "--name-only", tree)
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: list files: %w", s.root, err)
		}
		snap.Created = splitNUL(out)
	} else if !opts.vouched || parent != claim.commit || tree != claim.tree {
		// (A parent that is the snapshot the index was left by, with the
		// same tree, has no changes against it.)
		changes := built.changes
		if built.base == "" || m.treeOfCommit(s, parent) != built.base {
			if changes, err = m.treeChanges(ctx, s, parent+"^{commit}", tree); err != nil {
				return nil, m.parentError(ctx, s, req.Parent, err)
			}
		}
		for _, c := range changes {
			switch c.status {
			case 'A':
				snap.Created = append(snap.Created, c.path)
			case 'D':
				snap.Deleted = append(snap.Deleted, c.path)
			default:
				snap.Modified = append(snap.Modified, c.path)
			}
		}
	}
	slices.Sort(snap.Created)
	slices.Sort(snap.Modified)
	slices.Sort(snap.Deleted)
	msg := req.Message
	if req.MessageFunc != nil {
		if msg, err = req.MessageFunc(snap); err != nil {
			return nil, fmt.Errorf("snapshot %s: message: %w", s.root, err)
		}
	}
	if snap.Commit, err = m.commitTree(ctx, s, tree, msg); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", s.root, err)
	}
	// The ref is synced in full however it is written, after the commit:
	// that flush also makes durable what buildTree's commands wrote out.
	if err := m.updateRef(ctx, s, req.Ref, snap.Commit); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", s.root, err)
	}
	settled = true
	m.native.noteCommit(s.key, snap.Commit, tree)
	claim.settle(readIndexID(s), built.full || opts.vouched, tree, snap.Commit)
	// A snapshot that seeded its index from the user's borrowed their
	// objects: it is not taken until they are copied in.
	if req.Progress != nil && hasAlternates(s) {
		req.Progress(Progress{Phase: "copying"})
	}
	if err := m.ownObjects(ctx, s); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", s.root, err)
	}
	if built.packed {
		m.tidyPacks(ctx, s)
	}
	return snap, nil
}

// maxPacks is how many packs a shadow repository collects (one per
// snapshot built without git) before they are rolled up.
const maxPacks = 50

// tidyPacks rolls the small packs snapshots write into bigger ones when
// there are many: git looks for an object in each pack in turn. A failure
// is left for the next snapshot (or gc) to retry: the snapshot is done.
func (m *Manager) tidyPacks(ctx context.Context, s *shadow) {
	packs, err := filepath.Glob(filepath.Join(s.repo, "objects", "pack", "pack-*.pack"))
	if err != nil || len(packs) <= maxPacks {
		return
	}
	args := []string{"repack", "-d", "-l", "-q", "--geometric=2"}
	if !m.geometric {
		args = []string{"repack", "-a", "-d", "-l", "-q"}
	}
	m.run(ctx, s, runOpts{}, args...)
}

// commitTree writes the commit of a snapshot, a root commit: itself when it
// can (see objects.go), else with git commit-tree.
func (m *Manager) commitTree(ctx context.Context, s *shadow, tree, msg string) (string, error) {
	if body, ok := commitBody(tree, msg, m.now().Unix()); ok {
		return writeLooseObject(s.repo, "commit", body)
	}
	out, err := m.run(ctx, s, runOpts{stdin: []byte(msg)}, "commit-tree", tree, "-F", "-")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// parentError explains a failure of a git command given the snapshot's
// parent: NotFound when the parent names no commit, err otherwise.
func (m *Manager) parentError(ctx context.Context, s *shadow, parent string, err error) error {
	if parent != "" {
		if _, perr := m.resolveCommit(ctx, s, parent); perr != nil {
			return fmt.Errorf("snapshot %s: parent: %w", s.root, perr)
		}
	}
	return fmt.Errorf("snapshot %s: %w", s.root, err)
}

// treeChange is one line of `git diff-tree -r --raw --no-renames`.
type treeChange struct {
	path             string
	status           byte // A, D, M or T
	oldMode, newMode string
	oldID, newID     string
}

// treeChanges lists the differences between two commits or trees.
func (m *Manager) treeChanges(ctx context.Context, s *shadow, from, to string) ([]treeChange, error) {
	out, err := m.run(ctx, s, runOpts{}, "diff-tree", "-r", "-z", "--no-renames", "--no-ext-diff", from, to)
	if err != nil {
		return nil, fmt.Errorf("compare %s and %s: %w", from, to, err)
	}
	fields := splitNUL(out)
	changes := make([]treeChange, 0, len(fields)/2)
	for i := 0; i+1 < len(fields); i += 2 {
		// :<old mode> <new mode> <old id> <new id> <status>
		meta := strings.Fields(strings.TrimPrefix(fields[i], ":"))
		if len(meta) != 5 {
			return nil, fmt.Errorf("compare %s and %s: unexpected diff-tree output %q", from, to, fields[i])
		}
		changes = append(changes, treeChange{
			path:    fields[i+1],
			status:  meta[4][0],
			oldMode: meta[0], newMode: meta[1],
			oldID: meta[2], newID: meta[3],
		})
	}
	return changes, nil
}

// treeOpts tailors buildTree.
type treeOpts struct {
	// paths, when not empty, are the only paths looked at.
	paths []string
	// vouched says paths are all that changed, even when empty (a watcher
	// vouches for them): no path then means nothing to look at.
	vouched bool
	// indexTree, when vouched, is the tree the index holds (that of the
	// snapshot that left it), so with no path changed no tree is written.
	indexTree   string
	maxFileSize int64
	// specials looks for the named pipes, sockets and devices of the work
	// tree on a full scan, to report them as skipped: git's own listing
	// passes over them without a word. A snapshot does; a diff need not.
	specials bool
	// native lets the tree be built without git (native.go): a snapshot's,
	// into the private index.
	native   bool
	progress func(Progress)
	// clock is the scan clock (ns, see scanClock) read before the watcher's
	// claim, from when a change may be in neither the claim nor the scan;
	// 0 has the native build read it itself.
	clock int64
}

// builtTree is what buildTree wrote.
type builtTree struct {
	tree    string
	skipped []Skipped
	// full is true when every file of the work tree was looked at.
	full bool
	// changes, when base is set, are the changes from the tree base (the
	// index's before the snapshot) to tree.
	base    string
	changes []treeChange
	// packed says the tree's new objects went into a pack of their own.
	packed bool
}

// buildTree brings the index at indexPath up to date with the work tree and
// writes its tree. Its git commands write out what they store without
// flushing the disk cache (runOpts.writeoutOnly): a caller that needs it
// durable syncs something afterwards (a snapshot, its commit and ref).
func (m *Manager) buildTree(ctx context.Context, s *shadow, indexPath string, opts treeOpts) (builtTree, error) {
	excludesChanged, err := syncExcludes(ctx, s)
	if err != nil {
		return builtTree{}, err
	}
	paths := opts.paths
	report := func(Progress) {}
	if opts.progress != nil {
		report = opts.progress
	}
	report(Progress{Phase: "scanning"})
	// Paths are relative to what the index holds; a new index holds nothing
	// or the user's index, so the first snapshot always scans everything.
	// New exclude rules may make any untracked file count.
	full := len(paths) == 0 && !opts.vouched || excludesChanged
	if _, err := os.Stat(indexPath); errors.Is(err, fs.ErrNotExist) {
		full = true
		if err := m.seedIndex(ctx, s, indexPath); err != nil {
			return builtTree{}, err
		}
	}
	if opts.vouched && !full && len(paths) == 0 && opts.indexTree != "" {
		return builtTree{tree: opts.indexTree}, nil
	}
	if opts.native && !excludesChanged {
		built, ok, err := m.nativeBuild(ctx, s, opts, full)
		if ok || err != nil {
			return built, err
		}
	}
	o := runOpts{index: indexPath}
	var candidates []string
	if !full && len(paths) > 0 {
		var err error
		if candidates, full, err = m.touchedFiles(ctx, s, o, paths); err != nil {
			return builtTree{}, err
		}
	}
	var scan specialScan
	var walked chan struct{}
	if full && opts.specials {
		// The walk reads the same directories as git's scan beside it, so
		// running both at once costs little more than git's alone.
		walked = make(chan struct{})
		go func() {
			scan = m.walkSpecials(ctx, s)
			close(walked)
		}()
		defer func() { <-walked }()
	}
	if full {
		out, err := m.run(ctx, s, o, "ls-files", "-z", "--others", "--modified", "--exclude-standard")
		if err != nil {
			return builtTree{}, fmt.Errorf("list changed files: %w", err)
		}
		candidates = splitNUL(out)
	}
	add, sizes, remove, skipped, err := m.classify(ctx, s, candidates, opts.maxFileSize)
	if err != nil {
		return builtTree{}, err
	}
	if walked != nil {
		<-walked
		special, err := m.reportSpecials(ctx, s, o, scan)
		if err != nil {
			return builtTree{}, err
		}
		skipped = append(skipped, special...)
	}
	if len(remove) > 0 {
		if _, err := m.run(ctx, s, runOpts{index: indexPath, stdin: joinNUL(remove), writeoutOnly: true}, "update-index", "--force-remove", "-z", "--stdin"); err != nil {
			return builtTree{}, fmt.Errorf("record deleted files: %w", err)
		}
	}
	if len(add) > 0 {
		p := Progress{Phase: "hashing", TotalFiles: int64(len(add))}
		for _, n := range sizes {
			p.TotalBytes += n
		}
		report(p)
		batches := [][]string{add}
		if opts.progress != nil {
			batches = progressBatches(add, sizes)
		}
		for _, batch := range batches {
			if _, err := m.run(ctx, s, runOpts{index: indexPath, stdin: joinNUL(batch), writeoutOnly: true}, "update-index", "--add", "--replace", "-z", "--stdin"); err != nil {
				return builtTree{}, fmt.Errorf("record changed files: %w", err)
			}
			for range batch {
				p.Bytes += sizes[p.Files]
				p.Files++
			}
			report(p)
		}
	}
	wo := o
	wo.writeoutOnly = true
	out, err := m.run(ctx, s, wo, "write-tree")
	if err != nil {
		return builtTree{}, fmt.Errorf("write tree: %w", err)
	}
	return builtTree{tree: strings.TrimSpace(string(out)), skipped: skipped, full: full}, nil
}

// maxScannedDirs is how many touched directories touchedFiles lists below;
// more make a full scan.
const maxScannedDirs = 256

// touchedFiles turns the caller's list of touched paths into candidates for
// classify. Paths that no longer exist are dropped from the index here (with
// everything below them, for a deleted directory); ignored paths are left
// out; a directory stands for everything below it, as git lists it. full
// is true when the list amounts to the whole tree: then a full scan is
// needed.
func (m *Manager) touchedFiles(ctx context.Context, s *shadow, o runOpts, paths []string) (candidates []string, full bool, err error) {
	var existing, missing, scanned []string
	seen := make(map[string]bool, len(paths))
	dirs := make(map[string]bool)
	for _, p := range paths {
		rel, err := cleanRelative(p)
		if err != nil {
			return nil, false, err
		}
		if rel == "." {
			return nil, true, nil
		}
		if seen[rel] || hasGitComponent(rel) {
			continue
		}
		seen[rel] = true
		if beyondSymlink(s.root, rel, dirs) {
			missing = append(missing, rel)
			continue
		}
		fi, err := os.Lstat(filepath.Join(s.root, filepath.FromSlash(rel)))
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
			missing = append(missing, rel)
		case err != nil:
			// classify reports it as skipped.
			existing = append(existing, rel)
		case fi.IsDir():
			scanned = append(scanned, rel)
			if len(scanned) > maxScannedDirs {
				return nil, true, nil
			}
		default:
			existing = append(existing, rel)
		}
	}
	if len(missing) > 0 {
		ro := o
		ro.stdin, ro.writeoutOnly = joinNUL(missing), true
		if _, err := m.run(ctx, s, ro, "--literal-pathspecs", "rm", "--cached", "-r", "-f", "-q", "--ignore-unmatch", "--pathspec-from-file=-", "--pathspec-file-nul"); err != nil {
			return nil, false, fmt.Errorf("record deleted files: %w", err)
		}
	}
	if len(scanned) > 0 {
		// What changed below a directory (new, changed, deleted, not
		// ignored), and the directory itself when it replaced a file.
		out, err := m.run(ctx, s, o, append([]string{"--literal-pathspecs", "ls-files", "-z", "--others", "--modified", "--exclude-standard", "--"}, scanned...)...)
		if err != nil {
			return nil, false, fmt.Errorf("list changed files: %w", err)
		}
		candidates = splitNUL(out)
	}
	if len(existing) == 0 {
		return candidates, false, nil
	}
	ignored, err := m.ignored(ctx, s, o, existing)
	if err != nil {
		return nil, false, err
	}
	for _, p := range existing {
		if !ignored[p] {
			candidates = append(candidates, p)
		}
	}
	return candidates, false, nil
}

// ignored returns which of paths are ignored and not tracked (a tracked
// file stays tracked, as with git add). The first check skips reading the
// index, which costs more than the check; the few ignored paths are then
// checked again against it.
func (m *Manager) ignored(ctx context.Context, s *shadow, o runOpts, paths []string) (map[string]bool, error) {
	for _, noIndex := range []bool{true, false} {
		if len(paths) == 0 {
			break
		}
		var err error
		if paths, err = m.checkIgnore(ctx, s, o, paths, noIndex); err != nil {
			return nil, err
		}
	}
	ignored := make(map[string]bool, len(paths))
	for _, p := range paths {
		ignored[p] = true
	}
	return ignored, nil
}

// ignoredUntracked returns which of paths, none of which the index holds,
// are ignored.
func (m *Manager) ignoredUntracked(ctx context.Context, s *shadow, paths []string) (map[string]bool, error) {
	out, err := m.checkIgnore(ctx, s, runOpts{}, paths, true)
	if err != nil {
		return nil, err
	}
	ignored := make(map[string]bool, len(out))
	for _, p := range out {
		ignored[p] = true
	}
	return ignored, nil
}

// checkIgnore returns the paths git check-ignore reports as ignored; with
// noIndex it does not read the index (so tracked files count too).
func (m *Manager) checkIgnore(ctx context.Context, s *shadow, o runOpts, paths []string, noIndex bool) ([]string, error) {
	args := []string{"check-ignore", "-z", "--stdin"}
	if noIndex {
		args = append(args, "--no-index")
	}
	o.stdin = joinNUL(paths)
	o.okCodes = []int{1} // none ignored
	out, err := m.run(ctx, s, o, args...)
	if err != nil {
		return nil, fmt.Errorf("check ignored files: %w", err)
	}
	return splitNUL(out), nil
}

// cleanRelative validates a caller-supplied relative path and returns it
// slash separated and cleaned.
func cleanRelative(p string) (string, error) {
	if p == "" || filepath.IsAbs(p) || strings.ContainsRune(p, 0) {
		return "", errorf(InvalidWorkspace, nil, "path %q must be relative to the workspace root", p)
	}
	rel := path.Clean(filepath.ToSlash(p))
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", errorf(InvalidWorkspace, nil, "path %q is outside the workspace", p)
	}
	return rel, nil
}

// hasGitComponent reports whether a path goes through a .git entry, which
// git never stores.
func hasGitComponent(rel string) bool {
	for part := range strings.SplitSeq(rel, "/") {
		if strings.EqualFold(part, ".git") {
			return true
		}
	}
	return false
}

// beyondSymlink reports whether a leading component of rel is not a real
// directory (a symlink or a file): git would refuse to store such a path,
// and following the link could leave the workspace. dirs caches directories
// already seen to be real.
func beyondSymlink(root, rel string, dirs map[string]bool) bool {
	for i := 0; i < len(rel); i++ {
		if rel[i] != '/' {
			continue
		}
		dir := rel[:i]
		if dirs[dir] {
			continue
		}
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(dir)))
		if err != nil || !fi.IsDir() {
			return true
		}
		dirs[dir] = true
	}
	return false
}

// classify decides, for each candidate path, whether update-index should add
// it, drop it from the index, or skip it. Entries ending in "/" are nested
// git repositories: their files are listed and classified instead.
func (m *Manager) classify(ctx context.Context, s *shadow, candidates []string, maxFileSize int64) (add []string, sizes []int64, remove []string, skipped []Skipped, err error) {
	seen := make(map[string]bool, len(candidates))
	dirs := make(map[string]bool)
	queue := candidates
	for len(queue) > 0 {
		rel := queue[0]
		queue = queue[1:]
		if seen[rel] {
			continue
		}
		seen[rel] = true
		if strings.HasSuffix(rel, "/") {
			files, err := m.nestedRepoFiles(ctx, s, rel)
			if err != nil {
				return nil, nil, nil, nil, err
			}
			queue = append(queue, files...)
			continue
		}
		if beyondSymlink(s.root, rel, dirs) {
			remove = append(remove, rel)
			continue
		}
		name := filepath.Join(s.root, filepath.FromSlash(rel))
		fi, err := os.Lstat(name)
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
			remove = append(remove, rel)
		case err != nil:
			skipped = append(skipped, Skipped{Path: rel, Reason: err.Error()})
		case fi.Mode()&fs.ModeSymlink != 0:
			add, sizes = append(add, rel), append(sizes, fi.Size())
		case fi.IsDir():
			// A tracked file became a directory; its files are listed as new.
			remove = append(remove, rel)
		case !fi.Mode().IsRegular():
			remove = append(remove, rel)
			skipped = append(skipped, Skipped{Path: rel, Reason: specialReason(fi.Mode())})
		case fi.Size() > maxFileSize:
			skipped = append(skipped, Skipped{Path: rel, Reason: fmt.Sprintf("larger than %d bytes (%d bytes)", maxFileSize, fi.Size())})
		default:
			f, err := m.openFile(name)
			if outOfResources(err) {
				return nil, nil, nil, nil, fmt.Errorf("read %s: %w", rel, err)
			}
			if err != nil {
				skipped = append(skipped, Skipped{Path: rel, Reason: "unreadable: " + err.Error()})
				continue
			}
			f.Close()
			add, sizes = append(add, rel), append(sizes, fi.Size())
		}
	}
	return add, sizes, remove, skipped, nil
}

// progressBatches splits the files to hash into about twenty batches, so
// that progress can be told between them (git tells nothing while it hashes),
// each of at least 200 files or 16 MiB. A set too small to take long stays
// one batch.
func progressBatches(add []string, sizes []int64) [][]string {
	var total int64
	for _, n := range sizes {
		total += n
	}
	maxFiles, maxBytes := max(len(add)/20, 200), max(total/20, 16<<20)
	var batches [][]string
	start, bytes := 0, int64(0)
	for i := range add {
		bytes += sizes[i]
		if i+1-start >= maxFiles || bytes >= maxBytes {
			batches = append(batches, add[start:i+1])
			start, bytes = i+1, 0
		}
	}
	if start < len(add) {
		batches = append(batches, add[start:])
	}
	return batches
}

// specialModes are the file types a snapshot cannot store.
const specialModes = fs.ModeNamedPipe | fs.ModeSocket | fs.ModeDevice | fs.ModeCharDevice | fs.ModeIrregular

// specialReason says why a file that is neither a regular file, a directory
// nor a symlink was skipped.
func specialReason(mode fs.FileMode) string {
	kind := "a special file"
	switch {
	case mode&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case mode&fs.ModeSocket != 0:
		kind = "a socket"
	case mode&fs.ModeDevice != 0:
		kind = "a device"
	}
	return kind + ": only regular files and symlinks are snapshotted"
}

// unsearched are directory names a search for special files does not enter:
// git never stores .git, and the built-in excludes rarely hold anything but
// many files.
var unsearched = map[string]bool{".git": true, "node_modules": true, ".venv": true, "__pycache__": true,
	"target": true, "dist": true, "build": true, ".belay": true}

// specialScan is what walkSpecials found: special files by path (relative,
// slash separated) with their type, and the directories it could not read
// with the reason.
type specialScan struct {
	found      map[string]fs.FileMode
	unreadable map[string]string
	err        error
}

// walkSpecials looks for the named pipes, sockets and devices in the work
// tree, and the directories it cannot read, which git's scan passes over
// with a warning nobody sees. It reads directories only (their entries
// carry the file type), never a file's inode.
func (m *Manager) walkSpecials(ctx context.Context, s *shadow) specialScan {
	found, unreadable := map[string]fs.FileMode{}, map[string]string{}
	err := filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == s.root {
				return err
			}
			// A directory that cannot be read; the reason without the path,
			// which names the workspace.
			rel, rerr := filepath.Rel(s.root, p)
			if rerr != nil {
				return rerr
			}
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			unreadable[filepath.ToSlash(rel)] = "unreadable directory: " + err.Error()
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			if p != s.root && (unsearched[d.Name()] || p == m.dataDir) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type()&specialModes != 0 {
			rel, err := filepath.Rel(s.root, p)
			if err != nil {
				return err
			}
			found[filepath.ToSlash(rel)] = d.Type()
		}
		return nil
	})
	if err != nil {
		err = fmt.Errorf("look for special files: %w", err)
	}
	return specialScan{found: found, unreadable: unreadable, err: err}
}

// reportSpecials turns the special files and unreadable directories no
// ignore rule covers into skipped files.
func (m *Manager) reportSpecials(ctx context.Context, s *shadow, o runOpts, scan specialScan) ([]Skipped, error) {
	if scan.err != nil || len(scan.found)+len(scan.unreadable) == 0 {
		return nil, scan.err
	}
	reasons := maps.Clone(scan.unreadable)
	for rel, mode := range scan.found {
		reasons[rel] = specialReason(mode)
	}
	paths := slices.Sorted(maps.Keys(reasons))
	ignored, err := m.ignored(ctx, s, o, paths)
	if err != nil {
		return nil, err
	}
	var out []Skipped
	for _, rel := range paths {
		if !ignored[rel] {
			out = append(out, Skipped{Path: rel, Reason: reasons[rel]})
		}
	}
	return out, nil
}

// nestedRepoFiles lists the files of the nested git repository at dir (a
// path ending in "/") that a snapshot should store, as git would list them
// if the repository were a plain directory: every ignore rule of the
// workspace applies (the .gitignore files above it and in it, info/exclude
// anchored at the workspace root, the built-in excludes), its .git never
// appears. Git itself does not descend into a nested repository it has no
// index entries under, so it is listed as its own work tree against an
// empty index, with its own .gitignore files and the built-in excludes
// (none of which is anchored) only, and what this lists is then checked
// against all the rules from the workspace root. Once its files are in the
// index, git descends into it like any directory.
func (m *Manager) nestedRepoFiles(ctx context.Context, s *shadow, dir string) ([]string, error) {
	excludes, err := os.CreateTemp("", "belay-exclude-*")
	if err != nil {
		return nil, fmt.Errorf("list nested repository %s: %w", dir, err)
	}
	defer os.Remove(excludes.Name())
	_, err = excludes.WriteString(strings.Join(builtinExcludes, "\n") + "\n")
	if cerr := excludes.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("list nested repository %s: %w", dir, err)
	}
	o := runOpts{
		workTree: filepath.Join(s.root, filepath.FromSlash(strings.TrimSuffix(dir, "/"))),
		// Never created: ls-files reads a missing index as empty.
		index: filepath.Join(s.dir, "empty-index"),
	}
	list := func(args ...string) ([]string, error) {
		out, err := m.run(ctx, s, o, append([]string{"--literal-pathspecs", "ls-files", "-z", "--others"}, args...)...)
		if err != nil {
			return nil, fmt.Errorf("list nested repository %s: %w", dir, err)
		}
		files := splitNUL(out)
		for i, f := range files {
			files[i] = dir + f
		}
		return files, nil
	}
	// Not --exclude-standard: the shadow repository's info/exclude is
	// anchored at the workspace root, not at dir. --exclude-from ranks the
	// built-in excludes below the .gitignore files, as core.excludesFile.
	listed, err := list("--exclude-per-directory=.gitignore", "--exclude-from="+excludes.Name())
	if err != nil {
		return nil, err
	}
	// A rule of the workspace (in .belayignore, say) can re-include what
	// the built-in excludes leave out: what they left out and no rule
	// ignores is listed too.
	pruned, err := list("--ignored", "--directory", "--exclude-from="+excludes.Name())
	if err != nil {
		return nil, err
	}
	ignored := map[string]bool{}
	if len(pruned) > 0 {
		if ignored, err = m.ignoredUntracked(ctx, s, pruned); err != nil {
			return nil, fmt.Errorf("list nested repository %s: %w", dir, err)
		}
	}
	var reincluded []string
	for _, p := range pruned {
		switch {
		case ignored[p]:
		case strings.HasSuffix(p, "/"):
			reincluded = append(reincluded, strings.TrimPrefix(p, dir))
		default:
			listed = append(listed, p)
		}
	}
	if len(reincluded) > 0 {
		more, err := list(append([]string{"--exclude-per-directory=.gitignore", "--"}, reincluded...)...)
		if err != nil {
			return nil, err
		}
		listed = append(listed, more...)
	}
	if len(listed) == 0 {
		return nil, nil
	}
	ignored, err = m.ignoredUntracked(ctx, s, listed)
	if err != nil {
		return nil, fmt.Errorf("list nested repository %s: %w", dir, err)
	}
	files := listed[:0]
	for _, f := range listed {
		if !ignored[f] {
			files = append(files, f)
		}
	}
	return files, nil
}

// userRepo is the user's own git repository when the workspace root is the
// top of its work tree.
type userRepo struct {
	gitDir    string // per-worktree git dir (HEAD, index)
	commonDir string // shared git dir (objects, refs)
	sha1      bool
}

// findUserRepo returns the repository whose work tree top is the workspace
// root, or nil when there is none. Under Confine, one whose git directories
// lie outside the roots (a .git file or symlink leads there) fails with code
// Forbidden before git reads them.
func (m *Manager) findUserRepo(ctx context.Context, s *shadow) (*userRepo, error) {
	gitDir := userGitDir(s.root)
	if gitDir == "" {
		return nil, nil
	}
	if err := checkUserGitDir(ctx, s, gitDir); err != nil {
		return nil, err
	}
	out, _, err := m.runCode(ctx, s, runOpts{discover: true, okCodes: []int{128}},
		"rev-parse", "--absolute-git-dir", "--git-common-dir", "--show-toplevel", "--show-object-format")
	if err != nil {
		return nil, fmt.Errorf("inspect user repository: %w", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != 4 {
		return nil, nil // not a usable repository (e.g. corrupt): treat as none
	}
	top, err := filepath.EvalSymlinks(lines[2])
	if err != nil || top != s.root {
		return nil, nil
	}
	common := lines[1]
	if !filepath.IsAbs(common) {
		common = filepath.Join(s.root, common)
	}
	for _, dir := range []string{lines[0], common} {
		if err := checkUserGitDir(ctx, s, dir); err != nil {
			return nil, err
		}
	}
	if err := checkUserAlternates(ctx, s, filepath.Join(common, "objects")); err != nil {
		return nil, err
	}
	return &userRepo{gitDir: lines[0], commonDir: common, sha1: lines[3] == "sha1"}, nil
}

// checkUserAlternates enforces Confine for the user's object directory and
// those it borrows from (objects/info/alternates, followed as git does,
// five deep): a snapshot borrowing the user's objects, and export-branch
// writing there, read them too.
func checkUserAlternates(ctx context.Context, s *shadow, objects string) error {
	dirs := []string{objects}
	for depth := 0; depth <= 5 && len(dirs) > 0; depth++ {
		var next []string
		for _, dir := range dirs {
			if err := checkUserGitDir(ctx, s, dir); err != nil {
				return err
			}
			data, err := os.ReadFile(filepath.Join(dir, "info", "alternates"))
			if err != nil {
				continue
			}
			for line := range strings.Lines(string(data)) {
				alt := strings.TrimSpace(line)
				if alt == "" || strings.HasPrefix(alt, "#") {
					continue
				}
				if strings.HasPrefix(alt, `"`) {
					// git's C-style quoting, which Go's matches
					if alt, err = strconv.Unquote(alt); err != nil {
						return errorf(Forbidden, err, "the git directory of workspace %s borrows objects from a directory belay cannot read", s.root)
					}
				}
				if !filepath.IsAbs(alt) {
					alt = filepath.Join(dir, alt)
				}
				next = append(next, alt)
			}
		}
		dirs = next
	}
	return nil
}

// seedIndex prepares a missing private index. For a workspace that is a git
// repository it points the shadow repository at the user's objects and
// starts from a copy of the user's index (read only; the user's file is
// never written), so unchanged files are neither hashed nor stored again.
// An index git cannot use as is (split index, sparse checkout,
// assume-unchanged or skip-worktree bits, unresolved conflicts, another
// hash) is not copied: the snapshot then adds every file, still without
// storing objects the user's repository already has.
func (m *Manager) seedIndex(ctx context.Context, s *shadow, indexPath string) error {
	user, err := m.findUserRepo(ctx, s)
	if isCode(err, Forbidden) {
		// The repository lies outside what the caller may use (a linked
		// worktree's main repository, borrowed objects): the snapshot reads
		// nothing of it and adds every file itself.
		return nil
	}
	if err != nil || user == nil || !user.sha1 {
		return err
	}
	if err := m.addAlternate(s, filepath.Join(user.commonDir, "objects")); err != nil {
		return err
	}
	tmp := indexPath + ".seed"
	if err := copyFile(filepath.Join(user.gitDir, "index"), tmp); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("seed index: %w", err)
	}
	defer os.Remove(tmp)
	out, _, err := m.runCode(ctx, s, runOpts{index: tmp}, "ls-files", "-z", "--stage", "-v")
	if err != nil {
		var gerr *gitError
		if errors.As(err, &gerr) {
			return nil // an index this git cannot read alone (split index): add from scratch
		}
		return fmt.Errorf("seed index: %w", err)
	}
	var gitlinks []string
	for _, entry := range splitNUL(out) {
		// "<tag> <mode> <id> <stage>\t<path>"
		meta, name, ok := strings.Cut(entry, "\t")
		fields := strings.Fields(meta)
		if !ok || len(fields) != 4 || fields[0] != "H" || fields[3] != "0" {
			return nil
		}
		if fields[1] == "160000" {
			gitlinks = append(gitlinks, name)
		}
	}
	if len(gitlinks) > 0 {
		// Submodules are stored by their files, like any nested repository.
		if _, err := m.run(ctx, s, runOpts{index: tmp, stdin: joinNUL(gitlinks)}, "update-index", "--force-remove", "-z", "--stdin"); err != nil {
			return fmt.Errorf("seed index: %w", err)
		}
	}
	if err := os.Rename(tmp, indexPath); err != nil {
		return fmt.Errorf("seed index: %w", err)
	}
	return nil
}

// ownObjects copies into the shadow repository the objects it borrows from
// the user's repository, if any, and drops the alternate (packReachable).
// It waits while a restore is unfinished, as gc does. When the copy fails
// because borrowed objects are gone, it returns an *Error with code
// Corrupted.
func (m *Manager) ownObjects(ctx context.Context, s *shadow) error {
	if !hasAlternates(s) || unfinishedRestore(s) {
		return nil
	}
	err := m.packReachable(ctx, s)
	if err == nil {
		return nil
	}
	var gone *Error
	if ferr := m.fsck(ctx, s); errors.As(ferr, &gone) && gone.Code == Corrupted {
		return errorf(Corrupted, ferr, "objects its snapshots borrowed from the project's own git repository are gone (its .git deleted, or pruned by git gc), so they cannot be copied in")
	}
	return fmt.Errorf("copy in the objects borrowed from the project's own git repository: %w", err)
}

// addAlternate lets the shadow repository read objects from dir.
func (m *Manager) addAlternate(s *shadow, dir string) error {
	path := filepath.Join(s.repo, "objects", "info", "alternates")
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read alternates: %w", err)
	}
	if slices.Contains(strings.Split(string(data), "\n"), dir) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return writeFileAtomic(path, append(data, []byte(dir+"\n")...), 0o600)
}
