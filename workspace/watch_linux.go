package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// treeWatcher watches every directory of one work tree through inotify
// (fsnotify), one watch per directory, added as directories appear. All its
// watches share one inotify queue, whose events arrive in the order they
// happened: a claim writes a cookie file into the shadow directory and
// waits for its event, so every change made before the claim has been
// recorded when the claim reads the change list.
type treeWatcher struct {
	root      string // canonical workspace root
	dataDir   string // never watched: belay's own files
	cookieDir string
	fsw       *fsnotify.Watcher
	done      chan struct{} // closed when run returns

	// gate is held by run while it handles an event; a test holds it to
	// stall the reader until the kernel queue overflows.
	gate sync.Mutex

	mu      sync.Mutex
	dirs    map[string]bool // watched directories, absolute
	dirty   map[string]bool // changed paths since the last claim, relative
	gen     uint64          // counts the events that end vouching
	valid   bool            // the index matched the tree at the last claim
	pending bool            // a claim is neither settled nor abandoned yet
	index   indexID         // the index the last settled snapshot left
	tree    string          // that snapshot's tree
	commit  string          // and commit
	broken  error           // run stopped or a watch could not be added
	cookies map[string]chan struct{}
}

// cookieSeq names cookie files uniquely within the process.
var cookieSeq atomic.Uint64

// unwatchedFS are the magic numbers (statfs f_type) of file systems where
// inotify misses changes made by other machines or by the server side.
var unwatchedFS = map[int64]bool{
	0x6969:     true, // NFS
	0x517b:     true, // SMB
	0xff534d42: true, // CIFS
	0xfe534d42: true, // SMB2
	0x65735546: true, // FUSE
	0x01021997: true, // 9p
	0x00c36400: true, // Ceph
	0x5346414f: true, // AFS
	0x47504653: true, // GPFS
	0x0bd00bd0: true, // Lustre
}

// startWatcher watches the work tree of s. It fails on a file system
// without reliable events and when the watch limit
// (fs.inotify.max_user_watches) is reached.
func startWatcher(s *shadow, dataDir string) (*treeWatcher, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(s.root, &st); err != nil {
		return nil, fmt.Errorf("watch %s: %w", s.root, err)
	}
	if unwatchedFS[int64(st.Type)] {
		return nil, fmt.Errorf("watch %s: %w", s.root, errNoEvents)
	}
	cookieDir := filepath.Join(s.dir, "cookies")
	if err := os.MkdirAll(cookieDir, 0o700); err != nil {
		return nil, fmt.Errorf("watch %s: %w", s.root, err)
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", s.root, err)
	}
	w := &treeWatcher{
		root: s.root, dataDir: dataDir, cookieDir: cookieDir, fsw: fsw,
		done:    make(chan struct{}),
		dirs:    map[string]bool{},
		dirty:   map[string]bool{},
		cookies: map[string]chan struct{}{},
	}
	if err := fsw.Add(cookieDir); err != nil {
		fsw.Close()
		return nil, fmt.Errorf("watch %s: %w", cookieDir, err)
	}
	go w.run()
	if err := w.addTree(s.root); err != nil {
		w.close()
		return nil, fmt.Errorf("watch %s: %w", s.root, err)
	}
	return w, nil
}

// addTree watches dir and every directory below it, except .git
// directories (never stored) and the data directory.
func (w *treeWatcher) addTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != dir && errors.Is(err, fs.ErrNotExist) {
				return nil // removed meanwhile: its parent's event says so
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if d.Name() == ".git" && p != w.root || within(p, w.dataDir) {
			return filepath.SkipDir
		}
		if err := w.fsw.Add(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return filepath.SkipDir
			}
			return err
		}
		w.mu.Lock()
		w.dirs[p] = true
		w.mu.Unlock()
		return nil
	})
}

// run records events until the watcher is closed.
func (w *treeWatcher) run() {
	defer close(w.done)
	for {
		select {
		case ev, ok := <-w.fsw.Events:
			if !ok {
				w.stop(errors.New("watcher closed"))
				return
			}
			w.gate.Lock()
			w.handle(ev)
			w.gate.Unlock()
		case err, ok := <-w.fsw.Errors:
			if !ok {
				w.stop(errors.New("watcher closed"))
				return
			}
			w.gate.Lock()
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				w.invalidate()
			} else {
				w.stop(err)
			}
			w.gate.Unlock()
		}
	}
}

// handle records one event.
func (w *treeWatcher) handle(ev fsnotify.Event) {
	if filepath.Dir(ev.Name) == w.cookieDir {
		w.mu.Lock()
		if c := w.cookies[filepath.Base(ev.Name)]; c != nil {
			delete(w.cookies, filepath.Base(ev.Name))
			close(c)
		}
		w.mu.Unlock()
		return
	}
	rel, err := filepath.Rel(w.root, ev.Name)
	if err != nil || rel == "." || !filepath.IsLocal(rel) || within(ev.Name, w.dataDir) {
		return
	}
	rel = filepath.ToSlash(rel)
	switch base := filepath.Base(ev.Name); {
	case rel == ".git":
		// The user's repository: its info/exclude is compared at each
		// snapshot (syncExcludes).
		return
	case base == ".git":
		// A nested repository appeared or went: git lists its files
		// differently from then on.
		w.invalidate()
		return
	case base == ".gitignore" || base == ".belayignore":
		// What is ignored changed anywhere below.
		w.invalidate()
		return
	}
	w.mu.Lock()
	watched := w.dirs[ev.Name]
	w.mu.Unlock()
	if watched && ev.Has(fsnotify.Rename) {
		// The watches below a moved directory keep reporting its old path.
		w.stop(fmt.Errorf("directory %s was moved", rel))
		return
	}
	if watched && ev.Has(fsnotify.Remove) {
		w.mu.Lock()
		delete(w.dirs, ev.Name)
		w.mu.Unlock()
	}
	if ev.Has(fsnotify.Create) {
		if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
			if err := w.addTree(ev.Name); err != nil {
				w.stop(err)
				return
			}
		}
	}
	w.mu.Lock()
	w.dirty[rel] = true
	if len(w.dirty) > maxDirty {
		w.gen++
		w.valid = false
		clear(w.dirty)
	}
	w.mu.Unlock()
}

// invalidate ends vouching until a snapshot settles a complete scan.
func (w *treeWatcher) invalidate() {
	w.mu.Lock()
	w.gen++
	w.valid = false
	clear(w.dirty)
	w.mu.Unlock()
}

// abandon ends a claim whose snapshot failed: the watcher stops vouching.
func (w *treeWatcher) abandon() {
	w.invalidate()
	w.mu.Lock()
	w.pending = false
	w.mu.Unlock()
}

// stop marks the watcher unusable; the next claim replaces it.
func (w *treeWatcher) stop(err error) {
	w.mu.Lock()
	if w.broken == nil {
		w.broken = err
	}
	w.gen++
	w.valid = false
	clear(w.dirty)
	for name, c := range w.cookies {
		delete(w.cookies, name)
		close(c)
	}
	w.mu.Unlock()
}

// claim returns the paths changed since the previous claim and whether the
// watcher vouches that nothing else changed since then and that index is
// the one the previous snapshot left. The change list is emptied either
// way: the snapshot looks at them, or at everything.
func (w *treeWatcher) claim(ctx context.Context, index indexID) *changeClaim {
	synced := w.sync(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	c := &changeClaim{w: w, gen: w.gen}
	// An earlier claim still pending belongs to a snapshot that died (its
	// connection's end not yet seen): its paths may not be in the index.
	c.ok = synced && w.broken == nil && w.valid && !w.pending && w.index == index
	w.pending = true
	if c.ok {
		c.paths = slices.Sorted(maps.Keys(w.dirty))
		c.tree, c.commit = w.tree, w.commit
	}
	clear(w.dirty)
	return c
}

// sync waits until every event that happened before it was recorded: it
// creates a cookie file and waits for the event of its creation, which the
// kernel queues after theirs.
func (w *treeWatcher) sync(ctx context.Context) bool {
	name := "cookie-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(cookieSeq.Add(1), 10)
	arrived := make(chan struct{})
	w.mu.Lock()
	if w.broken != nil {
		w.mu.Unlock()
		return false
	}
	w.cookies[name] = arrived
	w.mu.Unlock()
	path := filepath.Join(w.cookieDir, name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		// The shadow directory was removed and made anew: watch again.
		w.stop(err)
		return false
	}
	f.Close()
	defer os.Remove(path)
	timer := time.NewTimer(2 * time.Second)
	defer timer.Stop()
	select {
	case <-arrived:
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.broken == nil
	case <-timer.C:
	case <-ctx.Done():
	}
	w.mu.Lock()
	delete(w.cookies, name)
	w.mu.Unlock()
	return false
}

// settle records the index a snapshot left (see changeClaim.settle).
func (w *treeWatcher) settle(gen uint64, index indexID, complete bool, tree, commit string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = false
	switch {
	case !complete:
		w.valid = false
	case w.gen == gen:
		// Nothing that ends vouching happened since the claim.
		w.valid, w.index, w.tree, w.commit = true, index, tree, commit
	}
}

// close stops watching.
func (w *treeWatcher) close() error {
	err := w.fsw.Close()
	<-w.done
	return err
}

// readIndexID returns the identity of the private index and the excludes
// of s (zero values for missing files).
func readIndexID(s *shadow) indexID {
	return indexID{index: readFileID(s.index), exclude: readFileID(filepath.Join(s.repo, "info", "exclude"))}
}

// claimChanges returns the watcher's claim for a snapshot of s: from the
// Manager's own watcher (Options.WatchFiles), started first when s has none
// (that first claim does not vouch), else from a process serving one
// (ServeWatch). It returns nil when there is no watcher.
func (m *Manager) claimChanges(ctx context.Context, s *shadow) *changeClaim {
	if !m.watchFiles {
		return claimRemote(ctx, s)
	}
	return m.claimLocal(ctx, s, readIndexID(s))
}

// claimLocal claims from this Manager's watcher of s. A watcher found to be
// broken only once its queue is read (a directory moved just before) is
// replaced at once, so that this snapshot's full scan settles the new one.
func (m *Manager) claimLocal(ctx context.Context, s *shadow, index indexID) *changeClaim {
	w := m.watcherFor(s)
	if w == nil {
		return nil
	}
	c := w.claim(ctx, index)
	if !c.ok {
		w.mu.Lock()
		broken := w.broken != nil
		w.mu.Unlock()
		if broken {
			if w = m.watcherFor(s); w == nil {
				return nil
			}
			c = w.claim(ctx, index)
		}
	}
	return c
}

// watcherFor returns the watcher of s, started or restarted when needed;
// nil when it cannot start or the Manager is closed.
func (m *Manager) watcherFor(s *shadow) *treeWatcher {
	m.watch.mu.Lock()
	defer m.watch.mu.Unlock()
	if m.watch.closed {
		return nil
	}
	w := m.watch.byKey[s.key]
	if w != nil {
		w.mu.Lock()
		broken := w.broken != nil
		w.mu.Unlock()
		if !broken {
			return w
		}
		delete(m.watch.byKey, s.key)
		w.close()
	}
	if time.Since(m.watch.failed[s.key]) < watchRetry {
		return nil
	}
	w, err := startWatcher(s, m.dataDir)
	if err != nil {
		m.watch.failed[s.key] = time.Now()
		return nil
	}
	m.watch.byKey[s.key] = w
	return w
}

// watchSocket is the unix socket in the shadow directory through which a
// process running ServeWatch lends its watcher to other processes.
const watchSocket = "watch.sock"

// watchRequest is one request on the watch socket: "claim" (with the index
// the snapshot found) or "settle" (with the index it left).
type watchRequest struct {
	Op       string     `json:"op"`
	Index    [10]uint64 `json:"index"`
	Gen      uint64     `json:"gen,omitempty"`
	Complete bool       `json:"complete,omitempty"`
	Tree     string     `json:"tree,omitempty"`
	Commit   string     `json:"commit,omitempty"`
}

// watchReply answers a claim; a settle is answered with an empty one.
type watchReply struct {
	OK     bool     `json:"ok"`
	Paths  []string `json:"paths,omitempty"`
	Gen    uint64   `json:"gen"`
	Tree   string   `json:"tree,omitempty"`
	Commit string   `json:"commit,omitempty"`
}

func (id indexID) wire() [10]uint64 {
	var v [10]uint64
	for i, f := range []fileID{id.index, id.exclude} {
		copy(v[5*i:], []uint64{f.dev, f.ino, f.size, uint64(f.mtime), uint64(f.ctime)})
	}
	return v
}

func indexFromWire(v [10]uint64) indexID {
	file := func(v []uint64) fileID {
		return fileID{dev: v[0], ino: v[1], size: v[2], mtime: int64(v[3]), ctime: int64(v[4])}
	}
	return indexID{index: file(v[:5]), exclude: file(v[5:])}
}

// ServeWatch keeps a file-system watcher on the workspace at root and lends
// it, through a unix socket in its shadow directory, to the snapshots that
// other processes sharing DataDir take of it (the CLI's saves), until ctx
// ends: they then look only at the paths that changed, as with
// Options.WatchFiles. ready, when set, is called once the socket listens.
// It fails when another process serves the workspace already.
func (m *Manager) ServeWatch(ctx context.Context, root string, ready func()) error {
	s, err := m.workspaceFor(ctx, root)
	if err != nil {
		return err
	}
	unlock, err := m.lock(ctx, s)
	if err != nil {
		return err
	}
	err = m.open(ctx, s)
	unlock()
	if err != nil {
		return fmt.Errorf("watch %s: %w", s.root, err)
	}
	sock := filepath.Join(s.dir, watchSocket)
	if c, err := net.Dial("unix", sock); err == nil {
		c.Close()
		return errorf(InvalidWorkspace, nil, "workspace %s is watched by another process already", s.root)
	}
	os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("watch %s: %w", s.root, err)
	}
	defer os.Remove(sock)
	m.watch.mu.Lock()
	if m.watch.closed {
		m.watch.mu.Unlock()
		ln.Close()
		return errors.New("watch: the Manager is closed")
	}
	delete(m.watch.failed, s.key)
	m.watch.mu.Unlock()
	if m.watcherFor(s) == nil {
		ln.Close()
		return fmt.Errorf("watch %s: the watcher cannot start (a network or FUSE file system, or the inotify watch limit)", s.root)
	}
	if ready != nil {
		ready()
	}
	var conns sync.WaitGroup
	defer conns.Wait()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch %s: %w", s.root, err)
		}
		conns.Go(func() {
			defer conn.Close()
			closeOnDone := context.AfterFunc(ctx, func() { conn.Close() })
			defer closeOnDone()
			m.serveClaims(ctx, s, conn)
		})
	}
}

// serveClaims answers one snapshot's claim and settle. A connection that
// ends between the two is a failed snapshot: the watcher stops vouching.
func (m *Manager) serveClaims(ctx context.Context, s *shadow, conn net.Conn) {
	dec, enc := json.NewDecoder(conn), json.NewEncoder(conn)
	var claim *changeClaim
	defer func() { claim.abandon() }()
	for {
		var req watchRequest
		if err := dec.Decode(&req); err != nil {
			return
		}
		switch req.Op {
		case "claim":
			claim.abandon()
			claim = nil
			reply := watchReply{}
			if claim = m.claimLocal(ctx, s, indexFromWire(req.Index)); claim != nil {
				reply = watchReply{OK: claim.ok, Paths: claim.paths, Gen: claim.gen, Tree: claim.tree, Commit: claim.commit}
			}
			if enc.Encode(reply) != nil {
				return
			}
		case "settle":
			if claim != nil && claim.gen == req.Gen {
				claim.settle(indexFromWire(req.Index), req.Complete, req.Tree, req.Commit)
				claim = nil
			}
			if enc.Encode(watchReply{}) != nil {
				return
			}
		default:
			return
		}
	}
}

// claimRemote asks the process serving a watcher for s (ServeWatch), if
// any, for a claim; nil when none answers.
func claimRemote(ctx context.Context, s *shadow) *changeClaim {
	sock := filepath.Join(s.dir, watchSocket)
	if _, err := os.Stat(sock); err != nil {
		return nil
	}
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil
	}
	rc := &remoteClaim{conn: conn, dec: json.NewDecoder(conn), enc: json.NewEncoder(conn)}
	var reply watchReply
	if err := rc.call(watchRequest{Op: "claim", Index: readIndexID(s).wire()}, &reply); err != nil {
		conn.Close()
		return nil
	}
	return &changeClaim{remote: rc, paths: reply.Paths, ok: reply.OK, gen: reply.Gen, tree: reply.Tree, commit: reply.Commit}
}

// remoteClaim is a claim made through the watch socket.
type remoteClaim struct {
	conn net.Conn
	dec  *json.Decoder
	enc  *json.Encoder
}

// call sends one request and reads its reply, within a few seconds.
func (rc *remoteClaim) call(req watchRequest, reply *watchReply) error {
	if err := rc.conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	if err := rc.enc.Encode(req); err != nil {
		return err
	}
	return rc.dec.Decode(reply)
}

func (rc *remoteClaim) settle(gen uint64, index indexID, complete bool, tree, commit string) {
	var reply watchReply
	rc.call(watchRequest{Op: "settle", Gen: gen, Index: index.wire(), Complete: complete, Tree: tree, Commit: commit}, &reply)
	rc.conn.Close()
}

func (rc *remoteClaim) abandon() { rc.conn.Close() }

// watchInvalidate makes the watcher of s, if any, stop vouching until a
// snapshot completes a full scan.
func (m *Manager) watchInvalidate(s *shadow) {
	m.watch.mu.Lock()
	w := m.watch.byKey[s.key]
	m.watch.mu.Unlock()
	if w != nil {
		w.invalidate()
	}
}

// watchIndexWritten tells the watcher of s that its private index, which
// the watcher's list is relative to, was written out from old to new
// without a change (a write behind, see flushNative).
func (m *Manager) watchIndexWritten(s *shadow, old, new fileID) {
	m.watch.mu.Lock()
	w := m.watch.byKey[s.key]
	m.watch.mu.Unlock()
	if w == nil {
		return
	}
	w.mu.Lock()
	if w.index.index == old {
		w.index.index = new
	}
	w.mu.Unlock()
}
