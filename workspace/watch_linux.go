package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
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
	index   indexID         // the index the last settled snapshot left
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
	c.ok = synced && w.broken == nil && w.valid && w.index == index
	if c.ok {
		c.paths = slices.Sorted(maps.Keys(w.dirty))
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
func (w *treeWatcher) settle(gen uint64, index indexID, complete bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case !complete:
		w.valid = false
	case w.gen == gen:
		// Nothing that ends vouching happened since the claim.
		w.valid, w.index = true, index
	}
}

// close stops watching.
func (w *treeWatcher) close() error {
	err := w.fsw.Close()
	<-w.done
	return err
}

// claimChanges returns the watcher's claim for a snapshot of s, starting a
// watcher first when s has none (that first claim does not vouch). It
// returns nil when the Manager does not watch or the watcher cannot start.
func (m *Manager) claimChanges(ctx context.Context, s *shadow) *changeClaim {
	if !m.watchFiles {
		return nil
	}
	m.watch.mu.Lock()
	if m.watch.closed {
		m.watch.mu.Unlock()
		return nil
	}
	w := m.watch.byKey[s.key]
	if w != nil {
		w.mu.Lock()
		broken := w.broken != nil
		w.mu.Unlock()
		if broken {
			delete(m.watch.byKey, s.key)
			w.close()
			w = nil
		}
	}
	if w == nil {
		if time.Since(m.watch.failed[s.key]) < watchRetry {
			m.watch.mu.Unlock()
			return nil
		}
		var err error
		if w, err = startWatcher(s, m.dataDir); err != nil {
			m.watch.failed[s.key] = time.Now()
			m.watch.mu.Unlock()
			return nil
		}
		m.watch.byKey[s.key] = w
	}
	m.watch.mu.Unlock()
	return w.claim(ctx, readIndexID(s.index))
}
