package workspace

import (
	"errors"
	"sync"
	"time"
)

// A watcher (Options.WatchFiles) lets a snapshot look only at the paths that
// changed since the previous one instead of statting the whole tree. It
// vouches for a change list only when it saw every event since the private
// index was last brought up to date by a snapshot it also watched; otherwise
// (just started, a queue overflow, a directory renamed, an ignore file
// changed, the index written by anything else, a watch it could not add) the
// snapshot scans everything, as without a watcher, and the watcher vouches
// again from then on.

// watchRetry is how long a workspace whose watcher could not start (a
// file system without events, the inotify watch limit) goes without one
// before the next try.
const watchRetry = time.Minute

// maxDirty is how many changed paths a watcher keeps before it gives up
// vouching for them: beyond that a full scan costs about as much.
const maxDirty = 10000

// fileID identifies one version of a file that is only ever replaced
// through a rename (git's index, belay's atomic writes): any write changes
// it.
type fileID struct {
	dev, ino, size uint64
	mtime, ctime   int64 // nanoseconds
}

// indexID identifies what a watched snapshot's list of paths is relative
// to: the private index, and the excludes it was checked against
// (info/exclude, rewritten when the user's .git/info/exclude or
// .belayignore changes, by a snapshot or a diff).
type indexID struct {
	index, exclude fileID
}

// changeClaim is what a watcher tells a snapshot: the paths that changed
// since the previous claim, and whether it vouches that nothing else did.
type changeClaim struct {
	w      *treeWatcher
	remote *remoteClaim // a watcher of another process (ServeWatch)
	paths  []string     // relative, slash separated
	ok     bool
	gen    uint64
	// tree and commit are those of the snapshot that left the index, when
	// the watcher vouches: with no path changed, they are this snapshot's
	// tree and, as a parent, a commit with no change against it.
	tree, commit string
}

// settle tells the watcher the snapshot that made the claim is recorded:
// with complete (it looked at every path that may have changed), the index
// now matches the work tree as of the claim, and the watcher vouches for
// later claims against that index. Without it, later claims fall back to a
// full scan until one completes.
func (c *changeClaim) settle(index indexID, complete bool, tree, commit string) {
	switch {
	case c == nil:
	case c.remote != nil:
		c.remote.settle(c.gen, index, complete, tree, commit)
	case c.w != nil:
		c.w.settle(c.gen, index, complete, tree, commit)
	}
}

// abandon tells the watcher the snapshot failed: the claimed paths may not
// be in the index, so it no longer vouches.
func (c *changeClaim) abandon() {
	switch {
	case c == nil:
	case c.remote != nil:
		c.remote.abandon()
	case c.w != nil:
		c.w.abandon()
	}
}

// errNoEvents is why a watcher does not start on a file system whose
// changes do not all produce events (network and FUSE file systems).
var errNoEvents = errors.New("the file system does not report every change")

// watchers keeps the watcher of each workspace of a Manager.
type watchers struct {
	mu     sync.Mutex
	byKey  map[string]*treeWatcher
	failed map[string]time.Time // when a watcher last failed to start
	closed bool
}

// Close writes the private indexes still to be written and stops the
// file-system watchers of the Manager (Options.WatchFiles). Later snapshots
// scan the whole work tree. It is safe to call more than once.
func (m *Manager) Close() error {
	m.flushAll()
	m.watch.mu.Lock()
	ws := m.watch.byKey
	m.watch.byKey, m.watch.closed = nil, true
	m.watch.mu.Unlock()
	var errs []error
	for _, w := range ws {
		errs = append(errs, w.close())
	}
	return errors.Join(errs...)
}
