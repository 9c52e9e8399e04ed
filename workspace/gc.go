package workspace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// trashPrefix names a shadow directory being removed: it is renamed first,
// so nothing treats it as a workspace's any more, then deleted.
const trashPrefix = ".trash-"

// ShadowInfo is one shadow directory in the data dir.
type ShadowInfo struct {
	// ID names the directory for Collect and RemoveShadow.
	ID string
	// Root is the workspace the directory belongs to; "" for one left over
	// from an interrupted creation or removal.
	Root string
	// Bytes is the space the directory uses.
	Bytes int64
}

// Reclaimed is what a clean-up gave back: the bytes of the shadow directory
// before and after.
type Reclaimed struct {
	Before, After int64
	// Removed is set when the whole shadow directory went (or, in a dry run,
	// would go): it held no snapshot any more.
	Removed bool
}

// Shadows lists every shadow directory in the data dir, with the workspace it
// belongs to and the space it uses, whether or not anyone still refers to it.
func (m *Manager) Shadows(ctx context.Context) ([]ShadowInfo, error) {
	base := filepath.Join(m.dataDir, "workspaces")
	entries, err := os.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list shadow directories: %w", err)
	}
	var out []ShadowInfo
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(base, e.Name())
		n, err := dirBytes(ctx, dir)
		if err != nil {
			return nil, err
		}
		info := ShadowInfo{ID: e.Name(), Bytes: n}
		if !strings.HasPrefix(e.Name(), trashPrefix) {
			if md, err := readMeta(dir); err == nil {
				info.Root = md.Root
			}
		}
		// A directory holding only its lock file is a workspace whose
		// snapshots were all deleted: nothing to show or reclaim.
		if info.Root == "" && n == 0 {
			continue
		}
		out = append(out, info)
	}
	return out, nil
}

// Canonical returns the path a workspace's shadow directory records for root
// (see ShadowInfo.Root): absolute with symlinks resolved, or only cleaned
// when root no longer exists.
func (m *Manager) Canonical(root string) string {
	if c, err := canonicalPath(root, false); err == nil {
		return c
	}
	return filepath.Clean(root)
}

// Collect reclaims the space of the shadow directory id that no snapshot
// needs: the objects of deleted snapshots, of failed saves and of diffs, and
// objects borrowed from the user's repository are copied in so the borrowing
// ends. A directory without snapshots is removed. plan, when not nil, is
// asked with the workspace lock held (so no snapshot of the workspace starts
// meanwhile), given the repository's refs (name to commit), which of them to
// delete first and which missing snapshot refs to make again (see
// RestoreRefs), so that the commits they name are kept; message reads a
// commit's message there (see CommitMessage), also when the workspace itself
// is gone.
// With dryRun nothing changes and After is an estimate (without the refs drop
// names). It takes the workspace lock.
func (m *Manager) Collect(ctx context.Context, id string, dryRun bool,
	plan func(refs map[string]string, message func(commit string) (string, error)) (drop []string, restore map[string]string, err error)) (*Reclaimed, error) {
	s, err := m.shadowByID(id)
	if err != nil {
		return nil, err
	}
	if s.trash() {
		return m.removeTrash(ctx, s, dryRun)
	}
	unlock, err := m.lock(ctx, s)
	if err != nil {
		return nil, err
	}
	defer unlock()
	var dropped []string
	kept := map[string]string{}
	if plan != nil {
		refs, err := m.refs(ctx, s, "refs/")
		if err != nil {
			return nil, err
		}
		message := func(commit string) (string, error) { return m.commitMessage(ctx, s, commit) }
		var restore map[string]string
		if dropped, restore, err = plan(refs, message); err != nil {
			return nil, err
		}
		if (len(dropped) > 0 || len(restore) > 0) && !dryRun {
			if err := m.clearRefLocks(ctx, s); err != nil {
				return nil, err
			}
		}
		made, err := m.restoreRefs(ctx, s, refs, restore, dryRun)
		if err != nil {
			return nil, err
		}
		for _, ref := range made {
			kept[ref] = restore[ref]
		}
	}
	return m.reclaim(ctx, s, dryRun, dropped, kept)
}

// ErrInUse is returned by RemoveShadow when unused, asked under the
// workspace lock, says the workspace is in use after all.
var ErrInUse = errors.New("the workspace is in use")

// RemoveShadow deletes the shadow directory id with every snapshot in it,
// for a workspace nothing refers to any more. unused, when not nil, is asked
// once the workspace lock is held (so no snapshot of the workspace can start
// meanwhile) whether that is still so; if not, RemoveShadow returns ErrInUse.
// It refuses while a restore of the workspace is unfinished (the next
// snapshot there finishes it).
func (m *Manager) RemoveShadow(ctx context.Context, id string, dryRun bool, unused func() (bool, error)) (*Reclaimed, error) {
	s, err := m.shadowByID(id)
	if err != nil {
		return nil, err
	}
	if s.trash() {
		return m.removeTrash(ctx, s, dryRun)
	}
	unlock, err := m.lock(ctx, s)
	if err != nil {
		return nil, err
	}
	defer unlock()
	before, err := dirBytes(ctx, s.dir)
	if err != nil {
		return nil, err
	}
	if unused != nil {
		ok, err := unused()
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, ErrInUse
		}
	}
	if unfinishedRestore(s) {
		return nil, errorf(RestoreFailed, nil, "a restore of %s was interrupted; run a belay command there to finish it first", s.root)
	}
	if !dryRun {
		if err := m.removeShadow(s); err != nil {
			return nil, err
		}
	}
	return &Reclaimed{Before: before, Removed: true}, nil
}

// shadowByID describes the shadow directory id of the data dir.
func (m *Manager) shadowByID(id string) (*shadow, error) {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, `/\`) {
		return nil, errorf(NotFound, nil, "no shadow directory %q", id)
	}
	dir := filepath.Join(m.dataDir, "workspaces", id)
	if _, err := os.Stat(dir); err != nil {
		return nil, errorf(NotFound, err, "no shadow directory %q", id)
	}
	s := &shadow{dir: dir, key: id, repo: filepath.Join(dir, "repo.git"), index: filepath.Join(dir, "index")}
	if md, err := readMeta(dir); err == nil {
		s.root = md.Root
	}
	if _, err := os.Stat(s.root); s.root == "" || err != nil {
		s.gone = true
	}
	return s, nil
}

// locate returns the shadow of root for maintenance: as workspaceFor when
// root exists, else found by the root its metadata records. NotFound when
// there is none.
func (m *Manager) locate(ctx context.Context, root string) (*shadow, error) {
	s, err := m.workspaceFor(ctx, root)
	if err == nil {
		return s, m.requireShadow(s)
	}
	if !filepath.IsAbs(root) {
		return nil, err
	}
	shadows, lerr := m.Shadows(ctx)
	if lerr != nil {
		return nil, lerr
	}
	for _, sh := range shadows {
		if sh.Root != "" && sh.Root == filepath.Clean(root) {
			return m.shadowByID(sh.ID)
		}
	}
	return nil, errorf(NotFound, err, "workspace %q has no snapshots", root)
}

func (s *shadow) trash() bool { return strings.HasPrefix(s.key, trashPrefix) }

func unfinishedRestore(s *shadow) bool {
	_, err := os.Stat(s.journalPath())
	return err == nil
}

// reclaim is Collect with the lock held, after deleting the refs drop (in a
// dry run, counting without them, and with the refs made, name to commit,
// that the run makes again). While a ref is damaged it deletes only drop.
func (m *Manager) reclaim(ctx context.Context, s *shadow, dryRun bool, drop []string, made map[string]string) (*Reclaimed, error) {
	before, err := dirBytes(ctx, s.dir)
	if err != nil {
		return nil, err
	}
	if !dryRun {
		if err := m.deleteRefs(ctx, s, drop); err != nil {
			return nil, err
		}
	}
	rec := &Reclaimed{Before: before, After: before}
	if _, err := os.Stat(filepath.Join(s.dir, "meta.json")); err != nil {
		// Left over from an interrupted creation: nothing in it is a snapshot.
		if !dryRun {
			if err := m.removeShadow(s); err != nil {
				return nil, err
			}
		}
		rec.After, rec.Removed = 0, true
		return rec, nil
	}
	if unfinishedRestore(s) {
		return rec, nil // the restore needs its objects; the next snapshot finishes it
	}
	// git passes over a damaged ref (a file a crash left empty) as if it
	// were not there, so its snapshot would go with the unreachable objects,
	// or the whole repository as left without snapshots; a checkpoint (of
	// this database or of another sharing the data directory) may need it,
	// and validate --repair rebuilds the ref from its row. Nothing is
	// reclaimed until then.
	if broken, err := brokenRefs(s); err != nil || len(broken) > 0 {
		return rec, err
	}
	refs, err := m.refs(ctx, s, "refs/")
	if err != nil {
		return nil, err
	}
	if dryRun {
		for _, ref := range drop {
			delete(refs, ref)
		}
		maps.Copy(refs, made) // the refs the run would make again
	}
	if len(refs) == 0 {
		if !dryRun {
			if err := m.removeShadow(s); err != nil {
				return nil, err
			}
		}
		rec.After, rec.Removed = 0, true
		return rec, nil
	}
	if dryRun {
		rec.After = before - m.unreachableBytes(ctx, s, refs)
		return rec, nil
	}
	if err := m.releaseIndex(ctx, s); err != nil {
		return nil, err
	}
	if err := m.packReachable(ctx, s); err != nil {
		return nil, err
	}
	if _, err := m.run(ctx, s, runOpts{}, "prune", "--expire=now"); err != nil {
		return nil, fmt.Errorf("prune %s: %w", s.root, err)
	}
	if rec.After, err = dirBytes(ctx, s.dir); err != nil {
		return nil, err
	}
	return rec, nil
}

// packReachable packs everything reachable from the refs and the private
// index of the shadow repository into one pack, and deletes the packs it
// replaces with the unreachable objects they held (loose ones wait for
// prune). Without -l, the objects borrowed from the user's repository are
// packed too; the alternate is dropped only once that pack and its entry in
// the directory are on disk, so a crash leaves the repository borrowing as
// before or whole, never missing objects. The caller holds the lock, and no
// restore is unfinished: its journal may name commits no ref reaches.
func (m *Manager) packReachable(ctx context.Context, s *shadow) error {
	if _, err := m.run(ctx, s, runOpts{}, "repack", "-a", "-d", "-q"); err != nil {
		return fmt.Errorf("repack %s: %w", s.root, err)
	}
	if !hasAlternates(s) {
		return nil
	}
	if err := syncDir(filepath.Join(s.repo, "objects", "pack")); err != nil {
		return fmt.Errorf("repack %s: %w", s.root, err)
	}
	if err := removeDurably(filepath.Join(s.repo, "objects", "info", "alternates")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("repack %s: %w", s.root, err)
	}
	return nil
}

// releaseIndex makes the private index stop holding objects no snapshot
// has. It holds the tree of the last snapshot or restore; when no ref
// reaches that tree any more (its snapshot was deleted), the index is moved
// to the newest snapshot's tree with a two-way merge, which keeps the stat
// data of every unchanged file, so the next snapshot re-hashes only the files
// that differ.
func (m *Manager) releaseIndex(ctx context.Context, s *shadow) error {
	if _, err := os.Stat(s.index); err != nil {
		return nil
	}
	out, err := m.run(ctx, s, runOpts{}, "write-tree")
	if err != nil {
		return fmt.Errorf("read the private index of %s: %w", s.root, err)
	}
	indexTree := strings.TrimSpace(string(out))
	out, err = m.run(ctx, s, runOpts{}, "for-each-ref", "--sort=-committerdate", "--format=%(objectname) %(tree)", "refs/")
	if err != nil {
		return fmt.Errorf("list refs of %s: %w", s.root, err)
	}
	newest := ""
	for line := range strings.Lines(string(out)) {
		commit, tree, _ := strings.Cut(strings.TrimSpace(line), " ")
		if newest == "" {
			newest = commit
		}
		if tree == indexTree {
			return nil // a snapshot holds it
		}
	}
	if newest == "" {
		return nil
	}
	// Older snapshots may hold it too: look through every commit's tree.
	out, err = m.run(ctx, s, runOpts{}, "log", "--all", "--format=%T")
	if err != nil {
		return fmt.Errorf("list snapshots of %s: %w", s.root, err)
	}
	if bytes.Contains(out, []byte(indexTree+"\n")) {
		return nil
	}
	// -i: files changed in the work tree keep their entry as it is (the next
	// snapshot looks at them), instead of failing the merge.
	if _, err := m.run(ctx, s, runOpts{}, "read-tree", "-m", "-i", indexTree, newest); err != nil {
		return fmt.Errorf("move the private index of %s: %w", s.root, err)
	}
	return nil
}

// unreachableBytes estimates the bytes of objects neither refs (name to
// commit) nor an index entry reaches: the object store's size less what the
// reachable objects use. It returns 0 when git cannot tell (--disk-usage
// needs git 2.31).
func (m *Manager) unreachableBytes(ctx context.Context, s *shadow, refs map[string]string) int64 {
	total, err := objectBytes(ctx, filepath.Join(s.repo, "objects"))
	if err != nil {
		return 0
	}
	var tips bytes.Buffer
	for _, commit := range refs {
		tips.WriteString(commit + "\n")
	}
	out, err := m.run(ctx, s, runOpts{stdin: tips.Bytes()}, "rev-list", "--objects", "--stdin", "--indexed-objects", "--disk-usage")
	if err != nil {
		return 0
	}
	used, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return 0
	}
	return max(total-used, 0)
}

// packFraming is what a pack file holds besides its objects: a 12-byte
// header and a 20-byte checksum.
const packFraming = 12 + 20

// objectBytes returns the bytes the objects in the object directory dir
// take themselves, as rev-list --disk-usage counts them: loose objects, and
// packs without their framing. The packs' indexes and the directory's other
// files are no object, and a collect does not free them.
func objectBytes(ctx context.Context, dir string) (int64, error) {
	return sumFiles(ctx, dir, func(p string, size int64) int64 {
		switch parent := filepath.Base(filepath.Dir(p)); {
		case len(parent) == 2 && strings.Trim(parent, "0123456789abcdef") == "":
			return size
		case parent == "pack" && strings.HasSuffix(p, ".pack"):
			return max(size-packFraming, 0)
		}
		return 0
	})
}

// removeShadow deletes a shadow directory, with its lock held: renamed out
// of the way first, so a crash midway leaves trash for Collect rather than a
// half workspace. Its lock file goes with it; processes waiting for that
// lock notice and lock the new one (see flock).
func (m *Manager) removeShadow(s *shadow) error {
	trash := filepath.Join(filepath.Dir(s.dir), trashPrefix+s.key+"-"+strconv.FormatInt(m.now().UnixNano(), 36))
	if err := os.Rename(s.dir, trash); err != nil {
		return fmt.Errorf("remove shadow directory of %s: %w", s.root, err)
	}
	if err := os.RemoveAll(trash); err != nil {
		return fmt.Errorf("remove shadow directory of %s: %w", s.root, err)
	}
	return nil
}

func (m *Manager) removeTrash(ctx context.Context, s *shadow, dryRun bool) (*Reclaimed, error) {
	before, err := dirBytes(ctx, s.dir)
	if err != nil {
		return nil, err
	}
	if !dryRun {
		if err := os.RemoveAll(s.dir); err != nil {
			return nil, fmt.Errorf("remove %s: %w", s.dir, err)
		}
	}
	return &Reclaimed{Before: before, Removed: true}, nil
}

func readMeta(dir string) (*meta, error) {
	data, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return nil, err
	}
	var md meta
	if err := json.Unmarshal(data, &md); err != nil {
		return nil, err
	}
	return &md, nil
}

// dirBytes sums the sizes of the regular files below dir; a missing dir
// holds none.
func dirBytes(ctx context.Context, dir string) (int64, error) {
	return sumFiles(ctx, dir, func(_ string, size int64) int64 { return size })
}

// sumFiles walks dir and adds up count of each regular file's path and size.
// A file removed while walking (a temporary one) counts nothing.
func sumFiles(ctx context.Context, dir string, count func(path string, size int64) int64) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking (e.g. a temporary file)
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				total += count(p, fi.Size())
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("disk usage of %s: %w", dir, err)
	}
	return total, nil
}
