package workspace

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A snapshot builds its tree here, without git, whenever it can: the
// private index is kept in memory between snapshots (read again whenever its
// file is not the one last read or written here), the work tree is scanned
// by a few goroutines at once with one fstatat per file, changed files are
// hashed and stored in one pack per snapshot (objwriter.go), only the trees
// on the path of a change are written again, and the index is written back
// in git's format (gitindex.go) for the git commands of restores, diffs and
// gc — with a watcher, behind the snapshot (flushNative). What it does not
// handle goes to git as before (buildTree): a first snapshot, an index git
// wrote in a form read here as unsupported, changed excludes, a new nested
// repository, an unreadable directory.
//
// Ignore rules stay git's: names the scan finds that the index does not hold
// are asked of `git check-ignore` once, and the answers are kept until an
// ignore file changes, so a steady work tree (build output, caches) costs no
// git process at all.

// nativeFile is a tracked file.
type nativeFile struct {
	seen uint32 // the scan that last saw it
	mode uint32
	oid  [20]byte
	stat statData
}

// nativeDir is a tracked directory: its files and subdirectories by name,
// and its tree object while no change below it was made.
type nativeDir struct {
	seen   uint32 // the scan that last saw it
	files  map[string]*nativeFile
	dirs   map[string]*nativeDir
	tree   [20]byte
	treeOK bool
	count  int      // files below, valid with treeOK
	order  []string // names in git order (directories with a trailing /), nil when stale
}

func newNativeDir() *nativeDir {
	return &nativeDir{files: map[string]*nativeFile{}, dirs: map[string]*nativeDir{}}
}

// nativeState is a workspace's index as the last snapshot here left it.
type nativeState struct {
	id   fileID // of the index file as read or written
	root *nativeDir
	// ignored holds what check-ignore said of untracked paths (directories
	// with a trailing /), until an ignore file changes.
	ignored map[string]bool
	// ignoreFiles are the .gitignore files the last full scan saw, and
	// excludes the identities of the shadow's two exclude files when
	// ignored was filled.
	ignoreFiles map[string]statData
	excludes    [2]fileID
	scans       uint32 // scans made, to mark what each saw
	// dirty says the index file is older than this state: a Manager with a
	// watcher writes it behind its snapshots (see flushNative).
	dirty  bool
	shadow *shadow // whose index it is, for a write behind
	timer  *time.Timer
	// lastCommit and lastTree are the last snapshot written from this state.
	lastCommit, lastTree string
	// scanned is the scan clock (ns) of the snapshot that last brought the
	// state up to date: a change after it may not be in the state. The index
	// written from the state bears it as its mtime, however late it is
	// written (see writeIndex).
	scanned int64
}

// nativeStates keeps the states of the workspaces a Manager snapshotted.
type nativeStates struct {
	mu    sync.Mutex
	byKey map[string]*nativeState
}

// maxNativeStates bounds the workspaces whose index stays in memory (those
// whose index is still to be written stay beyond it, until written).
const maxNativeStates = 16

// flushDelay is how long a Manager with a watcher leaves the index of a
// workspace unwritten after a snapshot: another snapshot meanwhile writes
// none either, and anything else that reads it writes it first.
const flushDelay = 2 * time.Second

func (n *nativeStates) take(key string) *nativeState {
	n.mu.Lock()
	defer n.mu.Unlock()
	st := n.byKey[key]
	delete(n.byKey, key)
	return st
}

func (n *nativeStates) put(key string, st *nativeState) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.byKey == nil {
		n.byKey = map[string]*nativeState{}
	}
	if len(n.byKey) >= maxNativeStates {
		for k, old := range n.byKey {
			if !old.dirty {
				delete(n.byKey, k)
				break
			}
		}
	}
	n.byKey[key] = st
}

// flushNative writes the index of s when the state in memory is ahead of
// it; the caller holds the lock of s. Anything that reads the private index
// other than a snapshot built here calls it first (every git command does,
// see Manager.command). When the write fails, the state is dropped and the
// watcher stops vouching: its list is relative to the state.
func (m *Manager) flushNative(s *shadow) {
	m.native.mu.Lock()
	st := m.native.byKey[s.key]
	if st == nil || !st.dirty {
		m.native.mu.Unlock()
		return
	}
	delete(m.native.byKey, s.key)
	if st.timer != nil {
		st.timer.Stop()
	}
	m.native.mu.Unlock()
	old := readFileID(s.index)
	if old != st.id {
		return // written by another process: the watcher's claims fail on it
	}
	if err := st.writeIndex(s); err != nil {
		m.watchInvalidate(s)
		return
	}
	st.dirty = false
	m.watchIndexWritten(s, old, st.id)
	m.native.put(s.key, st)
}

// flushLater writes the index of s after flushDelay, unless something
// writes it first.
func (m *Manager) flushLater(s *shadow, st *nativeState) {
	st.shadow = &shadow{root: s.root, dir: s.dir, key: s.key, repo: s.repo, index: s.index}
	if st.timer != nil {
		st.timer.Reset(flushDelay)
		return
	}
	key := s.key
	st.timer = time.AfterFunc(flushDelay, func() {
		m.native.mu.Lock()
		cur := m.native.byKey[key]
		m.native.mu.Unlock()
		if cur == nil || !cur.dirty {
			return
		}
		sh := *cur.shadow
		unlock, err := m.lock(context.Background(), &sh)
		if err != nil {
			return
		}
		defer unlock()
		m.flushNative(&sh)
	})
}

// flushAll writes every index still to be written (Close).
func (m *Manager) flushAll() {
	m.native.mu.Lock()
	var dirty []shadow
	for _, st := range m.native.byKey {
		if st.dirty {
			dirty = append(dirty, *st.shadow)
		}
	}
	m.native.mu.Unlock()
	for _, sh := range dirty {
		unlock, err := m.lock(context.Background(), &sh)
		if err != nil {
			continue
		}
		m.flushNative(&sh)
		unlock()
	}
}

// dropNative forgets the state of s (its index is replaced); a state ahead
// of the file ends the watcher's vouching.
func (m *Manager) dropNative(s *shadow) {
	st := m.native.take(s.key)
	if st != nil && st.dirty {
		if st.timer != nil {
			st.timer.Stop()
		}
		m.watchInvalidate(s)
	}
}

// noteCommit records the snapshot just written from key's state.
func (n *nativeStates) noteCommit(key, commit, tree string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if st := n.byKey[key]; st != nil {
		st.lastCommit, st.lastTree = commit, tree
	}
}

// treeOfCommit returns the tree of commit, known from the last snapshot or
// read off its loose object; "" when neither tells.
func (m *Manager) treeOfCommit(s *shadow, commit string) string {
	m.native.mu.Lock()
	st := m.native.byKey[s.key]
	if st != nil && st.lastCommit == commit {
		m.native.mu.Unlock()
		return st.lastTree
	}
	m.native.mu.Unlock()
	if !isObjectID(commit) {
		return ""
	}
	f, err := os.Open(filepath.Join(s.repo, "objects", commit[:2], commit[2:]))
	if err != nil {
		return ""
	}
	defer f.Close()
	zr, err := zlib.NewReader(f)
	if err != nil {
		return ""
	}
	head := make([]byte, 64)
	n, _ := io.ReadFull(zr, head)
	head = head[:n]
	_, rest, ok := bytes.Cut(head, []byte{0})
	if !ok || !bytes.HasPrefix(head, []byte("commit ")) {
		return ""
	}
	tree, ok := bytes.CutPrefix(rest, []byte("tree "))
	if !ok || len(tree) < 41 || tree[40] != '\n' || !isObjectID(string(tree[:40])) {
		return ""
	}
	return string(tree[:40])
}

// loadNative returns the state of s's private index, from memory when the
// file is the one last seen, or nil when git must build the snapshot;
// damaged is set when the file is not a whole index.
func (m *Manager) loadNative(s *shadow) (st *nativeState, damaged bool) {
	st = m.native.take(s.key)
	id := readFileID(s.index)
	if st != nil && st.id == id {
		return st, false
	}
	if st != nil && st.timer != nil {
		// Another process wrote the index (the watcher's claim, made
		// against the file, fails too): this state is stale.
		st.timer.Stop()
	}
	if id == (fileID{}) {
		return nil, false
	}
	data, err := os.ReadFile(s.index)
	if err != nil {
		return nil, false
	}
	ix, err := parseIndex(data)
	if err != nil {
		return nil, !errors.Is(err, errUnsupportedIndex)
	}
	root := newNativeDir()
	for i := range ix.entries {
		e := &ix.entries[i]
		dir, name := root, e.path
		for {
			head, rest, ok := strings.Cut(name, "/")
			if !ok {
				break
			}
			if _, clash := dir.files[head]; clash {
				return nil, false // a file and a directory of one name: git's to sort out
			}
			sub := dir.dirs[head]
			if sub == nil {
				sub = newNativeDir()
				dir.dirs[head] = sub
			}
			dir, name = sub, rest
		}
		if _, clash := dir.dirs[name]; clash {
			return nil, false
		}
		dir.files[name] = &nativeFile{mode: e.mode, oid: e.oid, stat: e.stat}
	}
	countFiles(root)
	if ix.tree != nil {
		adoptCacheTree(root, ix.tree)
	}
	return &nativeState{id: id, root: root, ignored: map[string]bool{}}, false
}

// countFiles sets the file counts of d and below and returns d's.
func countFiles(d *nativeDir) int {
	n := len(d.files)
	for _, sub := range d.dirs {
		n += countFiles(sub)
	}
	d.count = n
	return n
}

// adoptCacheTree takes the trees of the index's TREE extension that cover
// exactly the files the index holds below them.
func adoptCacheTree(d *nativeDir, t *cacheTree) {
	if t.valid && t.entries == d.count && len(t.subs) == len(d.dirs) {
		d.tree, d.treeOK = t.oid, true
	}
	for name, sub := range d.dirs {
		if st := t.subs[name]; st != nil {
			adoptCacheTree(sub, st)
		} else {
			d.treeOK = false
		}
	}
	if d.treeOK {
		for _, sub := range d.dirs {
			if !sub.treeOK {
				d.treeOK = false
			}
		}
	}
}

// scanResult is what a scan of some directories found.
type scanResult struct {
	mu sync.Mutex
	// changed are tracked files whose stat data differ from the index's
	// (or that are racily clean): candidates to hash.
	changed []string
	// gone are tracked paths (files, or directories with everything below)
	// that are no longer there as what the index holds.
	gone []string
	// unknown are untracked entries: path (directories with a trailing /)
	// and whether it is a directory.
	unknown []string
	// nestedRepo is set when an untracked directory holds a .git.
	nestedRepo  bool
	ignoreFiles map[string]statData
	err         error
}

func (r *scanResult) merge(changed, gone, unknown []string, ignoreFiles map[string]statData, nested bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changed = append(r.changed, changed...)
	r.gone = append(r.gone, gone...)
	r.unknown = append(r.unknown, unknown...)
	for k, v := range ignoreFiles {
		r.ignoreFiles[k] = v
	}
	r.nestedRepo = r.nestedRepo || nested
	if err != nil && r.err == nil {
		r.err = err
	}
}

// scanner walks directories in parallel.
type scanner struct {
	root      string
	gen       uint32 // marks the entries this scan saw
	racyAfter int64  // files recorded as modified at or after this (ns) are hashed anyway
	res       *scanResult
	wg        sync.WaitGroup
	sem       chan struct{}
}

// scanWorkers is how many directories are read at once.
const scanWorkers = 4

func newScanner(root string, gen uint32, racyAfter int64) *scanner {
	return &scanner{root: root, gen: gen, racyAfter: racyAfter,
		res: &scanResult{ignoreFiles: map[string]statData{}}, sem: make(chan struct{}, scanWorkers)}
}

// dir schedules the scan of directory rel ("" is the root) against d, the
// index's view of it (nil: untracked, everything in it is unknown).
func (sc *scanner) dir(rel string, d *nativeDir) {
	sc.wg.Add(1)
	select {
	case sc.sem <- struct{}{}:
		go func() {
			defer func() { <-sc.sem }()
			sc.scanDir(rel, d)
		}()
	default:
		sc.scanDir(rel, d)
	}
}

func (sc *scanner) wait() *scanResult {
	sc.wg.Wait()
	return sc.res
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func (sc *scanner) scanDir(rel string, d *nativeDir) {
	defer sc.wg.Done()
	abs := filepath.Join(sc.root, filepath.FromSlash(rel))
	var changed, gone, unknown, subdirs []string
	var ignoreFiles map[string]statData
	nested := false
	fd, err := unix.Open(abs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		if d != nil && (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)) {
			sc.res.merge(nil, []string{rel}, nil, nil, false, nil)
			return
		}
		sc.res.merge(nil, nil, nil, nil, false, fmt.Errorf("scan %s: %w", rel, err))
		return
	}
	defer unix.Close(fd)
	var seenFiles, seenDirs int
	err = readDirents(fd, func(name []byte, typ uint8) bool {
		// git stores no .git in any case (.GIT is the repository on a
		// case-insensitive file system), and a restore writes none; only
		// .git itself makes a nested repository.
		if strings.EqualFold(string(name), ".git") {
			if string(name) == ".git" && rel != "" && d == nil {
				nested = true
			}
			return true
		}
		var st unix.Stat_t
		statted := false
		if typ == unix.DT_UNKNOWN {
			if unix.Fstatat(fd, string(name), &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				return true // gone meanwhile
			}
			statted = true
			typ = dtype(uint32(st.Mode))
		}
		isDir := typ == unix.DT_DIR
		var tracked *nativeFile
		var trackedDir *nativeDir
		if d != nil {
			tracked, trackedDir = d.files[string(name)], d.dirs[string(name)]
			if tracked != nil {
				tracked.seen = sc.gen
			}
			if trackedDir != nil {
				trackedDir.seen = sc.gen
			}
		}
		if string(name) == ".gitignore" && !isDir {
			var ist unix.Stat_t
			if unix.Fstatat(fd, ".gitignore", &ist, unix.AT_SYMLINK_NOFOLLOW) == nil {
				ignoreFiles = map[string]statData{join(rel, ".gitignore"): statFrom(&ist)}
			}
		}
		switch {
		case isDir && trackedDir != nil:
			seenDirs++
			subdirs = append(subdirs, string(name))
		case isDir:
			if tracked != nil {
				seenFiles++
				gone = append(gone, join(rel, string(name)))
			}
			unknown = append(unknown, join(rel, string(name))+"/")
		case tracked != nil:
			seenFiles++
			if !statted && unix.Fstatat(fd, string(name), &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				changed = append(changed, join(rel, string(name))) // classify sees what it is
				return true
			}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				gone = append(gone, join(rel, string(name)))
				unknown = append(unknown, join(rel, string(name))+"/")
				return true
			}
			if !tracked.clean(&st, sc.racyAfter) {
				changed = append(changed, join(rel, string(name)))
			}
		default:
			if trackedDir != nil {
				seenDirs++
				gone = append(gone, join(rel, string(name)))
			}
			unknown = append(unknown, join(rel, string(name)))
		}
		return true
	})
	if err != nil {
		sc.res.merge(nil, nil, nil, nil, false, fmt.Errorf("scan %s: %w", rel, err))
		return
	}
	if d != nil && (seenFiles != len(d.files) || seenDirs != len(d.dirs)) {
		for name, f := range d.files {
			if f.seen != sc.gen {
				gone = append(gone, join(rel, name))
			}
		}
		for name, sub := range d.dirs {
			if sub.seen != sc.gen {
				gone = append(gone, join(rel, name))
			}
		}
	}
	sc.res.merge(changed, gone, unknown, ignoreFiles, nested, nil)
	for _, name := range subdirs {
		sc.dir(join(rel, name), d.dirs[name])
	}
}

// emptyDir reports whether the directory at name holds nothing (false
// when it cannot be read: the scan then says what is wrong).
func emptyDir(name string) bool {
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	empty := true
	err = readDirents(fd, func([]byte, uint8) bool {
		empty = false
		return false
	})
	return err == nil && empty
}

// dtype is the directory entry type of a file of mode m.
func dtype(m uint32) uint8 {
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		return unix.DT_DIR
	case unix.S_IFREG:
		return unix.DT_REG
	case unix.S_IFLNK:
		return unix.DT_LNK
	}
	return unix.DT_UNKNOWN
}

// statFrom is the index's view of st.
func statFrom(st *unix.Stat_t) statData {
	return statData{
		ctimeSec: uint32(st.Ctim.Sec), ctimeNsec: uint32(st.Ctim.Nsec),
		mtimeSec: uint32(st.Mtim.Sec), mtimeNsec: uint32(st.Mtim.Nsec),
		dev: uint32(st.Dev), ino: uint32(st.Ino),
		uid: st.Uid, gid: st.Gid, size: uint32(st.Size),
	}
}

// fileMode is the mode git records for a file of mode m (0 for what git
// stores neither as a file nor as a symlink).
func fileMode(m uint32) uint32 {
	switch m & unix.S_IFMT {
	case unix.S_IFREG:
		if m&0o100 != 0 {
			return 0o100755
		}
		return 0o100644
	case unix.S_IFLNK:
		return 0o120000
	}
	return 0
}

// emptyBlob is the id of the empty blob.
var emptyBlob = [20]byte{0xe6, 0x9d, 0xe2, 0x9b, 0xb2, 0xd1, 0xd6, 0x43, 0x4b, 0x8b, 0x29, 0xae, 0x77, 0x5a, 0xd8, 0xc2, 0xe4, 0x8c, 0x53, 0x91}

// clean reports whether st shows the file unchanged since the index
// recorded it: git's rules (every field but the device; a size of 0
// recorded for a file that was not empty means "look again"; a file
// recorded as modified at or after racyAfter, when the index was written,
// is looked at again).
func (f *nativeFile) clean(st *unix.Stat_t, racyAfter int64) bool {
	s := statFrom(st)
	s.dev = f.stat.dev
	if s != f.stat || fileMode(uint32(st.Mode)) != f.mode {
		return false
	}
	if f.stat.size == 0 && f.oid != emptyBlob {
		return false
	}
	return st.Mtim.Nano() < racyAfter
}

// sorted returns d's names in the order of a tree's entries and of the
// index: bytewise, a directory as if its name ended in / (and so written).
func (d *nativeDir) sorted() []string {
	if d.order != nil {
		return d.order
	}
	order := make([]string, 0, len(d.files)+len(d.dirs))
	for name := range d.files {
		order = append(order, name)
	}
	for name := range d.dirs {
		order = append(order, name+"/")
	}
	slices.Sort(order)
	d.order = order
	return order
}

// lookupDir returns the tracked directory at rel ("" is the root), or nil.
func (d *nativeDir) lookupDir(rel string) *nativeDir {
	if rel == "" {
		return d
	}
	for part := range strings.SplitSeq(rel, "/") {
		if d = d.dirs[part]; d == nil {
			return nil
		}
	}
	return d
}

// nativeChange is a change the snapshot made to a tracked path.
type nativeChange struct {
	old, new *nativeFile // nil: absent
}

// nativeTree applies a scan to the state and writes the snapshot's tree.
type nativeTree struct {
	st      *nativeState
	objs    *objectWriter
	changes map[string]*nativeChange
}

// record notes the change of path from old to new.
func (t *nativeTree) record(p string, old, new *nativeFile) {
	if c := t.changes[p]; c != nil {
		c.new = new
		return
	}
	t.changes[p] = &nativeChange{old: old, new: new}
}

// invalidate marks the trees from the root down to directory rel as stale,
// and rel's order: a name is added or removed there.
func (t *nativeTree) invalidate(rel string) {
	d := t.st.root
	d.treeOK = false
	if rel != "" {
		for part := range strings.SplitSeq(rel, "/") {
			if d = d.dirs[part]; d == nil {
				return
			}
			d.treeOK = false
		}
	}
	d.order = nil
}

// remove drops the tracked file or directory at p.
func (t *nativeTree) remove(p string) {
	dir, name := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	parent := t.st.root.lookupDir(dir)
	if parent == nil {
		return
	}
	if f := parent.files[name]; f != nil {
		t.invalidate(dir)
		delete(parent.files, name)
		t.record(p, f, nil)
		return
	}
	if sub := parent.dirs[name]; sub != nil {
		t.invalidate(dir)
		delete(parent.dirs, name)
		t.removeAll(p, sub)
	}
}

func (t *nativeTree) removeAll(p string, d *nativeDir) {
	for name, f := range d.files {
		t.record(p+"/"+name, f, nil)
	}
	for name, sub := range d.dirs {
		t.removeAll(p+"/"+name, sub)
	}
}

// set records f at p, creating directories and replacing a file or
// directory in the way, as `git update-index --add --replace` does.
func (t *nativeTree) set(p string, f *nativeFile) {
	d := t.st.root
	d.treeOK = false
	rest, prefix := p, ""
	for {
		head, tail, ok := strings.Cut(rest, "/")
		if !ok {
			break
		}
		if old := d.files[head]; old != nil {
			delete(d.files, head)
			d.order = nil
			t.record(join(prefix, head), old, nil)
		}
		sub := d.dirs[head]
		if sub == nil {
			sub = newNativeDir()
			d.dirs[head] = sub
			d.order = nil
		}
		prefix = join(prefix, head)
		d, rest = sub, tail
		d.treeOK = false
	}
	if sub := d.dirs[rest]; sub != nil {
		delete(d.dirs, rest)
		d.order = nil
		t.removeAll(p, sub)
	}
	old := d.files[rest]
	if old == nil {
		d.order = nil
	}
	d.files[rest] = f
	t.record(p, old, f)
}

// writeTrees writes the stale trees of d and below (counting their files)
// and returns d's; empty directories are dropped.
func (t *nativeTree) writeTrees(d *nativeDir) ([20]byte, error) {
	if d.treeOK {
		return d.tree, nil
	}
	for name, sub := range d.dirs {
		if !sub.treeOK {
			if _, err := t.writeTrees(sub); err != nil {
				return [20]byte{}, err
			}
		}
		if sub.count == 0 {
			delete(d.dirs, name)
			d.order = nil
		}
	}
	var body bytes.Buffer
	count := len(d.files)
	for _, name := range d.sorted() {
		if dirName, ok := strings.CutSuffix(name, "/"); ok {
			sub := d.dirs[dirName]
			count += sub.count
			body.WriteString("40000 ")
			body.WriteString(dirName)
			body.WriteByte(0)
			body.Write(sub.tree[:])
			continue
		}
		f := d.files[name]
		body.WriteString(strconv.FormatUint(uint64(f.mode), 8))
		body.WriteByte(' ')
		body.WriteString(name)
		body.WriteByte(0)
		body.Write(f.oid[:])
	}
	id, err := t.objs.store("tree", body.Bytes())
	if err != nil {
		return [20]byte{}, err
	}
	d.tree, d.treeOK, d.count = id, true, count
	return id, nil
}

// hashed is a file read for the snapshot.
type hashed struct {
	path string
	file *nativeFile // nil: gone, or not a file any more
	skip string      // why it was not stored, if it was not
	err  error       // what fails the snapshot: no fault of the file's
}

// hashFile stores the file at rel as a blob and returns its entry.
func (m *Manager) hashFile(s *shadow, objs *objectWriter, rel string, maxSize int64) hashed {
	name := filepath.Join(s.root, filepath.FromSlash(rel))
	var st unix.Stat_t
	if err := unix.Lstat(name, &st); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return hashed{path: rel}
		}
		return hashed{path: rel, skip: err.Error()}
	}
	mode := fileMode(uint32(st.Mode))
	var body []byte
	switch mode {
	case 0:
		return hashed{path: rel}
	case 0o120000:
		target, err := os.Readlink(name)
		if err != nil {
			return hashed{path: rel, skip: "unreadable: " + err.Error()}
		}
		body = []byte(target)
	default:
		if st.Size > maxSize {
			return hashed{path: rel, skip: fmt.Sprintf("larger than %d bytes (%d bytes)", maxSize, st.Size)}
		}
		f, err := m.openFile(name)
		if outOfResources(err) {
			return hashed{path: rel, err: fmt.Errorf("read %s: %w", rel, err)}
		}
		if err != nil {
			return hashed{path: rel, skip: "unreadable: " + err.Error()}
		}
		// The stat data recorded are those of the open file before it is
		// read: a change while it is read makes them differ next time.
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			f.Close()
			return hashed{path: rel, skip: "unreadable: " + err.Error()}
		}
		if fileMode(uint32(st.Mode)) != mode {
			f.Close()
			return hashed{path: rel, skip: "changed while being read"}
		}
		body = make([]byte, 0, st.Size+1)
		body, err = readAllInto(f, body)
		f.Close()
		if err != nil {
			return hashed{path: rel, skip: "unreadable: " + err.Error()}
		}
	}
	id, err := objs.store("blob", body)
	if err != nil {
		// belay's own repository failed to take it: the snapshot fails.
		return hashed{path: rel, err: err}
	}
	return hashed{path: rel, file: &nativeFile{mode: mode, oid: id, stat: statFrom(&st)}}
}

func readAllInto(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// writeIndex writes the state's index file: the files in index order with
// a TREE extension, through index.lock and a rename. The rename does not
// wait for the write-out: an index a crash cut short fails its checksum,
// and the next snapshot rebuilds it (see nativeBuild).
func (st *nativeState) writeIndex(s *shadow) error {
	enc := newIndexEncoder(st.root.count)
	var walk func(prefix []byte, d *nativeDir) []byte
	walk = func(prefix []byte, d *nativeDir) []byte {
		n := len(prefix)
		for _, name := range d.sorted() {
			prefix = append(prefix[:n], name...)
			if dirName, ok := strings.CutSuffix(name, "/"); ok {
				prefix = walk(prefix, d.dirs[dirName])
				continue
			}
			f := d.files[name]
			enc.add(prefix, f.mode, &f.oid, &f.stat)
		}
		return prefix[:n]
	}
	walk(make([]byte, 0, 256), st.root)
	data := enc.finish(st.root.cacheTree())
	lock := s.index + ".lock"
	out, err := os.OpenFile(lock, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	_, werr := out.Write(data)
	if werr == nil {
		werr = startWriteout(out)
	}
	if cerr := out.Close(); werr == nil {
		werr = cerr
	}
	// Git trusts an entry's stat data only when the entry's mtime is older
	// than the index file's, in whole seconds (Debian's git, like git's
	// default build, ignores nanoseconds), and looks at the content of the
	// others. Written when the state was scanned, the file bears that time;
	// written later (behind a watched snapshot, or just later in the
	// second), it would vouch for files changed after the scan within the
	// second of their recorded mtime. So it bears the scan's time.
	if werr == nil && st.scanned != 0 {
		t := time.Unix(0, st.scanned)
		werr = os.Chtimes(lock, t, t)
	}
	if werr == nil {
		werr = os.Rename(lock, s.index)
	}
	if werr != nil {
		os.Remove(lock)
		return fmt.Errorf("write index: %w", werr)
	}
	st.id = readFileID(s.index)
	return nil
}

// cacheTree is d's trees as the TREE extension holds them.
func (d *nativeDir) cacheTree() *cacheTree {
	t := &cacheTree{valid: d.treeOK, oid: d.tree, entries: d.count, subs: make(map[string]*cacheTree, len(d.dirs))}
	for name, sub := range d.dirs {
		if sub.holdsFiles() {
			t.subs[name] = sub.cacheTree()
		}
	}
	return t
}

// holdsFiles reports whether any file is below d (a directory whose files
// were all removed is dropped when its tree is next written).
func (d *nativeDir) holdsFiles() bool {
	if d.treeOK {
		return d.count > 0
	}
	if len(d.files) > 0 {
		return true
	}
	for _, sub := range d.dirs {
		if sub.holdsFiles() {
			return true
		}
	}
	return false
}

// readFileID returns the identity of the file at path (zero for a missing
// one).
func readFileID(path string) fileID {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fileID{}
	}
	return fileID{
		dev: uint64(st.Dev), ino: uint64(st.Ino), size: uint64(st.Size),
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(),
	}
}

// scanClock returns the file system's current time (ns), as it stamps a
// file modified now: a file modified at or after it may change again within
// the same clock tick without its stat data showing it.
func scanClock(s *shadow) (int64, error) {
	name := filepath.Join(s.dir, "scan-clock")
	if err := touchNow(name); err != nil {
		return 0, err
	}
	var st unix.Stat_t
	if err := unix.Stat(name, &st); err != nil {
		return 0, err
	}
	return st.Mtim.Nano(), nil
}

// nativeBuild is buildTree without git for the snapshot of s (see the top
// of this file); ok is false when git must build it instead, before
// anything was written. full asks for a scan of the whole work tree, else
// opts.paths are looked at.
func (m *Manager) nativeBuild(ctx context.Context, s *shadow, opts treeOpts, full bool) (built builtTree, ok bool, err error) {
	st, damaged := m.loadNative(s)
	if damaged {
		// A crash cut the index short: rebuild it from the newest snapshot
		// (or, failing that, remove it) and let git bring it up to date.
		m.rebuildIndex(ctx, s)
	}
	if st == nil {
		return builtTree{}, false, nil
	}
	// Until the state is changed it goes back as it was, to be written
	// first if git builds the snapshot instead (Manager.command); a state
	// changed by a snapshot that then failed is dropped.
	keep := true
	defer func() {
		switch {
		case keep:
			m.native.put(s.key, st)
		case st.dirty:
			if st.timer != nil {
				st.timer.Stop()
			}
			m.watchInvalidate(s)
		}
	}()
	racyAfter := opts.clock
	if racyAfter == 0 {
		var err error
		if racyAfter, err = scanClock(s); err != nil {
			return builtTree{}, false, nil
		}
	}
	report := func(Progress) {}
	if opts.progress != nil {
		report = opts.progress
	}
	// Git's rule for the entries it wrote: one modified at or after the
	// index was written may have changed since without its stat data
	// showing it.
	st.scans++
	sc := newScanner(s.root, st.scans, st.id.mtime)
	var unknown, candidates, gone []string
	ignoreChanged := false
	if !full {
		var rescan bool
		if candidates, unknown, gone, rescan, err = st.lookPaths(s, sc, opts.paths); err != nil {
			return builtTree{}, false, err
		}
		full = rescan
	}
	if full {
		sc.dir("", st.root)
	}
	res := sc.wait()
	if res.err != nil || res.nestedRepo {
		return builtTree{}, false, nil
	}
	candidates = append(candidates, res.changed...)
	gone = append(gone, res.gone...)
	unknown = append(unknown, res.unknown...)
	if full {
		ignoreChanged = !maps.Equal(res.ignoreFiles, st.ignoreFiles)
		st.ignoreFiles = res.ignoreFiles
	} else {
		for _, p := range slices.Concat(candidates, unknown, gone) {
			if path.Base(strings.TrimSuffix(p, "/")) == ".gitignore" {
				ignoreChanged = true
			}
		}
	}
	excludes := [2]fileID{readFileID(filepath.Join(s.repo, "info", "exclude")), readFileID(filepath.Join(s.dir, "exclude"))}
	if ignoreChanged || excludes != st.excludes {
		clear(st.ignored)
		st.excludes = excludes
	}
	// Untracked names: ignored ones are left, others are candidates (files)
	// or looked into (directories), a level of new directories at a time.
	for len(unknown) > 0 {
		var ask []string
		kept := unknown[:0]
		for _, u := range unknown {
			if dir, isDir := strings.CutSuffix(u, "/"); isDir && emptyDir(filepath.Join(s.root, filepath.FromSlash(dir))) {
				continue // git stores no directory, only files
			}
			kept = append(kept, u)
			if _, known := st.ignored[u]; !known {
				ask = append(ask, strings.TrimSuffix(u, "/"))
			}
		}
		unknown = kept
		if len(ask) > 0 {
			ignored, err := m.ignoredUntracked(ctx, s, ask)
			if err != nil {
				return builtTree{}, false, err
			}
			for _, u := range unknown {
				if _, known := st.ignored[u]; !known {
					st.ignored[u] = ignored[strings.TrimSuffix(u, "/")]
				}
			}
		}
		deeper := newScanner(s.root, 0, st.id.mtime)
		for _, u := range unknown {
			if st.ignored[u] {
				continue
			}
			if dir, isDir := strings.CutSuffix(u, "/"); isDir {
				deeper.dir(dir, nil)
			} else {
				candidates = append(candidates, u)
			}
		}
		res := deeper.wait()
		if res.err != nil || res.nestedRepo {
			return builtTree{}, false, nil
		}
		unknown = res.unknown
		if full {
			maps.Copy(st.ignoreFiles, res.ignoreFiles)
		}
	}
	add, sizes, remove, skipped, err := m.classify(ctx, s, candidates, opts.maxFileSize)
	if err != nil {
		return builtTree{}, false, err
	}
	// From here on the state is changed: it is kept only when the snapshot's
	// tree and index are written.
	keep = false
	var total int64
	for _, n := range sizes {
		total += n
	}
	t := &nativeTree{st: st, objs: newObjectWriter(s.repo, len(add), total), changes: map[string]*nativeChange{}}
	defer t.objs.abort()
	base := ""
	if st.root.treeOK {
		base = hex.EncodeToString(st.root.tree[:])
	}
	for _, p := range slices.Concat(gone, remove) {
		t.remove(p)
	}
	hashedFiles, err := m.hashFiles(ctx, s, t.objs, add, sizes, opts.maxFileSize, report)
	if err != nil {
		return builtTree{}, false, err
	}
	for _, h := range hashedFiles {
		switch {
		case h.skip != "":
			skipped = append(skipped, Skipped{Path: h.path, Reason: h.skip})
		case h.file == nil:
			t.remove(h.path)
		default:
			if st := &h.file.stat; int64(st.mtimeSec)*1e9+int64(st.mtimeNsec) >= racyAfter {
				// Modified at or after the scan began: it may change again
				// within the same clock tick without its stat data showing
				// it. Size 0 makes the next look hash it again, as git's
				// "smudging" of racily clean entries does.
				st.size = 0
			}
			t.set(h.path, h.file)
		}
	}
	root, err := t.writeTrees(st.root)
	if err != nil {
		return builtTree{}, false, err
	}
	if err := t.objs.finish(); err != nil {
		return builtTree{}, false, err
	}
	st.scanned = racyAfter
	if m.watchFiles {
		// The watcher's claims are relative to this state: the index is
		// written behind.
		st.dirty = true
		m.flushLater(s, st)
	} else if err := st.writeIndex(s); err != nil {
		return builtTree{}, false, err
	}
	built = builtTree{tree: hex.EncodeToString(root[:]), skipped: skipped, full: full, base: base, packed: t.objs.packed}
	if base != "" {
		built.changes = t.list()
	}
	keep = true
	return built, true, nil
}

// list returns the changes that changed a path's content or mode.
func (t *nativeTree) list() []treeChange {
	out := make([]treeChange, 0, len(t.changes))
	for p, c := range t.changes {
		switch {
		case c.old == nil && c.new == nil:
		case c.old == nil:
			out = append(out, treeChange{path: p, status: 'A'})
		case c.new == nil:
			out = append(out, treeChange{path: p, status: 'D'})
		case c.old.mode != c.new.mode || c.old.oid != c.new.oid:
			out = append(out, treeChange{path: p, status: 'M'})
		}
	}
	return out
}

// lookPaths looks at the paths a caller or watcher says changed: tracked
// files whose stat data differ become candidates, missing paths are gone,
// untracked ones unknown, directories are scanned with sc. rescan is true
// when the list amounts to the whole tree.
func (st *nativeState) lookPaths(s *shadow, sc *scanner, paths []string) (candidates, unknown, gone []string, rescan bool, err error) {
	seen := make(map[string]bool, len(paths))
	dirs := make(map[string]bool)
	for _, p := range paths {
		rel, err := cleanRelative(p)
		if err != nil {
			return nil, nil, nil, false, err
		}
		if rel == "." {
			return nil, nil, nil, true, nil
		}
		if seen[rel] || hasGitComponent(rel) {
			continue
		}
		seen[rel] = true
		parentRel, name := path.Split(rel)
		parent := st.root.lookupDir(strings.TrimSuffix(parentRel, "/"))
		var tracked *nativeFile
		var trackedDir *nativeDir
		if parent != nil {
			tracked, trackedDir = parent.files[name], parent.dirs[name]
		}
		if beyondSymlink(s.root, rel, dirs) {
			gone = append(gone, rel)
			continue
		}
		var fi unix.Stat_t
		err = unix.Lstat(filepath.Join(s.root, filepath.FromSlash(rel)), &fi)
		switch {
		case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
			gone = append(gone, rel)
		case err != nil:
			candidates = append(candidates, rel) // classify reports it
		case fi.Mode&unix.S_IFMT == unix.S_IFDIR:
			if tracked != nil {
				gone = append(gone, rel)
			}
			if trackedDir != nil {
				sc.dir(rel, trackedDir)
			} else {
				unknown = append(unknown, rel+"/")
			}
		case tracked != nil:
			if !tracked.clean(&fi, sc.racyAfter) {
				candidates = append(candidates, rel)
			}
		default:
			if trackedDir != nil {
				gone = append(gone, rel)
			}
			unknown = append(unknown, rel)
		}
	}
	return candidates, unknown, gone, false, nil
}

// hashFiles stores the files to add, a few at a time, telling progress
// from the calling goroutine.
func (m *Manager) hashFiles(ctx context.Context, s *shadow, objs *objectWriter, add []string, sizes []int64, maxSize int64, report func(Progress)) ([]hashed, error) {
	out := make([]hashed, len(add))
	if len(add) == 0 {
		return out, nil
	}
	p := Progress{Phase: "hashing", TotalFiles: int64(len(add))}
	for _, n := range sizes {
		p.TotalBytes += n
	}
	report(p)
	work := make(chan int)
	done := make(chan int)
	var wg sync.WaitGroup
	for range min(scanWorkers, len(add)) {
		wg.Go(func() {
			for i := range work {
				out[i] = m.hashFile(s, objs, add[i], maxSize)
				done <- i
			}
		})
	}
	go func() {
		defer close(work)
		for i := range add {
			select {
			case work <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(done)
	}()
	for i := range done {
		p.Files++
		p.Bytes += sizes[i]
		if p.Files%200 == 0 || p.Files == p.TotalFiles {
			report(p)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, h := range out {
		if h.err != nil {
			return nil, h.err
		}
	}
	return out, nil
}

// outOfResources says whether err is the process's or the system's lack of
// file descriptors or memory, no fault of the file being opened: a snapshot
// fails on it rather than leave the file out.
func outOfResources(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) || errors.Is(err, unix.ENOMEM)
}

// setNativeEntries is setIndexEntries on the index in memory, written at
// once (or behind, with a watcher, which then stops vouching: its list is
// relative to the snapshot that left the index). ok is false when the index
// cannot be read here: git then does it.
func (m *Manager) setNativeEntries(s *shadow, ops []fileOp) (ok bool, err error) {
	files := make([]*nativeFile, len(ops))
	for i, op := range ops {
		if op.absent() {
			continue
		}
		f := &nativeFile{}
		switch op.mode {
		case "100644":
			f.mode = 0o100644
		case "100755":
			f.mode = 0o100755
		case "120000":
			f.mode = 0o120000
		default:
			return false, nil // not something a snapshot stores (a gitlink): git's to record
		}
		if len(op.id) != 40 {
			return false, nil
		}
		if _, err := hex.Decode(f.oid[:], []byte(op.id)); err != nil {
			return false, nil
		}
		files[i] = f
	}
	st, _ := m.loadNative(s)
	if st == nil {
		return false, nil
	}
	t := &nativeTree{st: st, changes: map[string]*nativeChange{}}
	for i, op := range ops {
		if files[i] == nil {
			t.remove(op.path)
		} else {
			t.set(op.path, files[i])
		}
	}
	if m.watchFiles {
		st.dirty = true
		m.flushLater(s, st)
		m.watchInvalidate(s)
	} else if err := st.writeIndex(s); err != nil {
		return true, fmt.Errorf("update index: %w", err)
	}
	m.native.put(s.key, st)
	return true, nil
}
