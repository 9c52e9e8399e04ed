package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// watchFixture is a Manager with a watcher on one workspace, recording
// whether the watcher vouched for each snapshot.
type watchFixture struct {
	t       *testing.T
	m       *Manager
	root    string
	seq     int
	parent  string
	vouched []bool
}

func newWatchFixture(t *testing.T, files map[string]string) *watchFixture {
	t.Helper()
	m, err := New(Options{DataDir: t.TempDir(), WatchFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	f := &watchFixture{t: t, m: m, root: t.TempDir()}
	m.claimed = func(c *changeClaim) { f.vouched = append(f.vouched, c != nil && c.ok) }
	writeFiles(t, f.root, files)
	return f
}

// snap takes a snapshot and checks that its tree is the one git itself
// records for the directory (git add -A into an empty index, with the same
// excludes), and whether the watcher vouched for it.
func (f *watchFixture) snap(what string, wantVouched bool) *Snapshot {
	f.t.Helper()
	s, got := f.snapAny(what)
	if got != wantVouched {
		f.t.Errorf("%s: watcher vouched %v, want %v", what, got, wantVouched)
	}
	return s
}

// snapAny is snap, reporting whether the watcher vouched instead of
// checking it.
func (f *watchFixture) snapAny(what string) (*Snapshot, bool) {
	f.t.Helper()
	f.seq++
	s := snapshot(f.t, f.m, f.root, "refs/belay/s/"+strconv.Itoa(f.seq), f.parent)
	f.parent = s.Commit
	if want := gitTree(f.t, f.m, f.root); s.Tree != want {
		f.t.Errorf("%s: snapshot tree %s, git add -A records %s\nsnapshot: %q\ngit:      %q", what, s.Tree, want,
			shadowGit(f.t, f.m, f.root, "ls-tree", "-r", s.Tree), shadowGit(f.t, f.m, f.root, "ls-tree", "-r", want))
	}
	return s, f.vouched[len(f.vouched)-1]
}

// gitTree is the tree `git add -A` records for root into an empty index of
// its shadow repository.
func gitTree(t *testing.T, m *Manager, root string) string {
	t.Helper()
	ctx := context.Background()
	s, err := m.workspaceFor(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	o := runOpts{index: filepath.Join(t.TempDir(), "index")}
	if _, err := m.run(ctx, s, o, "add", "-A"); err != nil {
		t.Fatal(err)
	}
	out, err := m.run(ctx, s, o, "write-tree")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

func (f *watchFixture) watcher() *treeWatcher {
	f.t.Helper()
	s, err := f.m.workspaceFor(context.Background(), f.root)
	if err != nil {
		f.t.Fatal(err)
	}
	f.m.watch.mu.Lock()
	defer f.m.watch.mu.Unlock()
	w := f.m.watch.byKey[s.key]
	if w == nil {
		f.t.Fatal("no watcher")
	}
	return w
}

func (f *watchFixture) path(name string) string {
	return filepath.Join(f.root, filepath.FromSlash(name))
}

func (f *watchFixture) do(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

// TestWatcherSnapshotsMatchGit changes files in every way while the watcher
// runs and compares each snapshot with what git records for the same
// directory; the watcher must vouch for ordinary changes and must not after
// a directory rename, an ignore file change, a restore, a queue overflow or
// a restart.
func TestWatcherSnapshotsMatchGit(t *testing.T) {
	f := newWatchFixture(t, map[string]string{
		"a.txt": "a\n", "b.txt": "b\n", "d.txt": "d\n", "dir/x.txt": "x\n", "dir/sub/y.txt": "y\n",
		"keep/k.txt": "k\n", "ignored.log": "log\n", ".gitignore": "*.log\n",
	})
	first := f.snap("first snapshot", false)
	f.snap("nothing changed", true)

	writeFiles(t, f.root, map[string]string{"a.txt": "a2\n"})
	s := f.snap("edit", true)
	if !slices.Equal(s.Modified, []string{"a.txt"}) {
		t.Errorf("edit: modified %q", s.Modified)
	}
	removeFiles(t, f.root, "b.txt")
	writeFiles(t, f.root, map[string]string{"n1/n2/n3/new.txt": "new\n", "c.txt": "c\n", "more.log": "ignored\n"})
	s = f.snap("delete, create, nested new directories", true)
	if !slices.Equal(s.Created, []string{"c.txt", "n1/n2/n3/new.txt"}) || !slices.Equal(s.Deleted, []string{"b.txt"}) {
		t.Errorf("created %q deleted %q", s.Created, s.Deleted)
	}
	f.do(os.Rename(f.path("d.txt"), f.path("e.txt")))
	f.do(os.Chmod(f.path("a.txt"), 0o755))
	f.snap("rename a file, chmod +x", true)
	writeFiles(t, f.root, map[string]string{"link": "->a.txt", "dirlink": "->dir"})
	f.snap("symlinks", true)
	f.do(os.RemoveAll(f.path("dir")))
	writeFiles(t, f.root, map[string]string{"dir": "now a file\n"})
	f.snap("directory replaced by a file", true)
	f.do(os.Remove(f.path("dir")))
	writeFiles(t, f.root, map[string]string{"dir/again/z.txt": "z\n"})
	f.snap("file replaced by a directory", true)
	f.do(os.Mkdir(f.path("late"), 0o755))
	f.snap("empty directory", true)
	writeFiles(t, f.root, map[string]string{"late/deep/file.txt": "late\n"})
	f.snap("files in a directory made before the snapshot", true)

	f.do(os.Rename(f.path("keep"), f.path("moved")))
	f.snap("directory renamed: the watcher restarts", false)
	writeFiles(t, f.root, map[string]string{"moved/k.txt": "k2\n"})
	f.snap("after the restart", true)

	writeFiles(t, f.root, map[string]string{".gitignore": "*.log\n*.tmp\n", "x.tmp": "tmp\n"})
	f.snap("ignore rules changed", false)
	writeFiles(t, f.root, map[string]string{"a.txt": "a3\n"})
	f.snap("after the ignore change", true)

	if _, err := f.m.Restore(context.Background(), f.root, f.parent, first.Commit, false); err != nil {
		t.Fatal(err)
	}
	f.snap("after a restore (the index changed)", false)
	writeFiles(t, f.root, map[string]string{"b.txt": "b after restore\n"})
	f.snap("after the restore", true)

	f.watcher().stop(os.ErrClosed)
	writeFiles(t, f.root, map[string]string{"a.txt": "while stopped\n"})
	f.snap("watcher stopped: a new one starts", false)
	writeFiles(t, f.root, map[string]string{"c.txt": "c again\n"})
	f.snap("with the new watcher", true)
}

// TestWatcherQueueOverflow stalls the watcher until the kernel's event
// queue overflows: the change made meanwhile must be in the next snapshot,
// which must not trust the watcher, and the one after may again.
func TestWatcherQueueOverflow(t *testing.T) {
	data, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Skip("no inotify limits to overflow")
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || limit > 200000 {
		t.Skipf("max_queued_events %q is too large to overflow in a test", data)
	}
	f := newWatchFixture(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	f.snap("first snapshot", false)
	writeFiles(t, f.root, map[string]string{"a.txt": "a1\n"})
	f.snap("before the overflow", true)

	w := f.watcher()
	w.gate.Lock()
	// Files created in the cookie directory share the queue and change
	// nothing the snapshot looks at. fsnotify's reader takes up to 64 KiB of
	// events off the queue (about 2,000 of these) before it waits for the
	// gate, more when it wakes late on a loaded machine: twice the limit
	// overflows whatever it took.
	for i := range 2*limit + 100 {
		f.do(os.WriteFile(filepath.Join(w.cookieDir, "flood-"+strconv.Itoa(i)), nil, 0o600))
	}
	writeFiles(t, f.root, map[string]string{"a.txt": "lost in the overflow\n"})
	w.gate.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for {
		w.mu.Lock()
		valid := w.valid
		w.mu.Unlock()
		if !valid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watcher did not notice the overflow")
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.snap("after the overflow", false)
	writeFiles(t, f.root, map[string]string{"b.txt": "b2\n"})
	f.snap("after the full scan", true)
}

// TestRacyEdit changes a file right after a snapshot without changing its
// size or mtime (as an edit within the file system's time granularity
// would): the next snapshot must store the new content, with and without a
// watcher.
func TestRacyEdit(t *testing.T) {
	for _, watch := range []bool{false, true} {
		t.Run("watch="+strconv.FormatBool(watch), func(t *testing.T) {
			m, err := New(Options{DataDir: t.TempDir(), WatchFiles: watch})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			root := t.TempDir()
			writeFiles(t, root, map[string]string{"f.txt": "one\n", "g.txt": "g\n"})
			s1 := snapshot(t, m, root, "refs/belay/s/1", "")
			name := filepath.Join(root, "f.txt")
			fi, err := os.Stat(name)
			if err != nil {
				t.Fatal(err)
			}
			writeFiles(t, root, map[string]string{"g.txt": "g2\n"})
			s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
			if err := os.WriteFile(name, []byte("two\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(name, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
			s3 := snapshot(t, m, root, "refs/belay/s/3", s2.Commit)
			if !slices.Equal(s3.Modified, []string{"f.txt"}) {
				t.Fatalf("modified %q, want f.txt", s3.Modified)
			}
			if got := shadowGit(t, m, root, "cat-file", "-p", s3.Commit+":f.txt"); got != "two\n" {
				t.Errorf("stored %q", got)
			}
		})
	}
}

// TestServeWatch lends a watcher to another Manager over the watch socket,
// as `belay watch-fs` does to the CLI's saves: its snapshots are vouched for
// and match git; once the server stops they scan everything again.
func TestServeWatch(t *testing.T) {
	dataDir := t.TempDir()
	server, err := New(Options{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	f := newWatchFixture(t, map[string]string{"a.txt": "a\n", "dir/b.txt": "b\n"})
	if f.m, err = New(Options{DataDir: dataDir}); err != nil {
		t.Fatal(err)
	}
	f.m.claimed = func(c *changeClaim) { f.vouched = append(f.vouched, c != nil && c.ok) }
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	ready := make(chan struct{})
	go func() { served <- server.ServeWatch(ctx, f.root, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-served:
		t.Fatal(err)
	}
	if err := server.ServeWatch(ctx, f.root, nil); err == nil {
		t.Error("a second ServeWatch of the same workspace succeeded")
	}

	f.snap("first snapshot through the socket", false)
	writeFiles(t, f.root, map[string]string{"a.txt": "a2\n", "dir/new/c.txt": "c\n"})
	removeFiles(t, f.root, "dir/b.txt")
	s := f.snap("changes through the socket", true)
	if !slices.Equal(s.Created, []string{"dir/new/c.txt"}) || !slices.Equal(s.Modified, []string{"a.txt"}) || !slices.Equal(s.Deleted, []string{"dir/b.txt"}) {
		t.Errorf("created %q modified %q deleted %q", s.Created, s.Modified, s.Deleted)
	}
	// A claim whose snapshot never settles (the process died) ends vouching.
	sh, err := f.m.workspaceFor(ctx, f.root)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, f.root, map[string]string{"lost.txt": "claimed, never stored\n"})
	c := claimRemote(ctx, sh)
	if c == nil || !c.ok || !slices.Equal(c.paths, []string{"lost.txt"}) {
		t.Fatalf("claim %+v", c)
	}
	c.abandon()
	f.snap("after an abandoned claim", false)
	// Vouching resumes once the watcher has settled on that full snapshot:
	// at once, or a snapshot or two later on a loaded machine; each snapshot
	// meanwhile is a correct full scan.
	vouched := false
	for i := 0; i < 5 && !vouched; i++ {
		writeFiles(t, f.root, map[string]string{"a.txt": fmt.Sprintf("a3-%d\n", i)})
		_, vouched = f.snapAny("vouched again")
	}
	if !vouched {
		t.Error("the watcher never vouched again after an abandoned claim")
	}

	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	writeFiles(t, f.root, map[string]string{"a.txt": "a4\n"})
	f.snap("server stopped", false)
}

// TestWatcherUserExcludeChanged: the user's .git/info/exclude is not
// watched; a change to it, even one a diff has already copied into the
// shadow repository, makes the next snapshot scan everything.
func TestWatcherUserExcludeChanged(t *testing.T) {
	f := newWatchFixture(t, map[string]string{"a.txt": "a\n", "x.secret": "hidden\n"})
	userGit(t, f.root, "init", "-q")
	exclude := filepath.Join(f.root, ".git", "info", "exclude")
	f.do(os.MkdirAll(filepath.Dir(exclude), 0o755))
	f.do(os.WriteFile(exclude, []byte("*.secret\n"), 0o644))
	f.snap("first snapshot", false)
	writeFiles(t, f.root, map[string]string{"y.secret": "also hidden\n"})
	f.snap("an excluded file created", true)

	f.do(os.WriteFile(exclude, nil, 0o644))
	if _, err := f.m.Diff(context.Background(), f.root, f.parent, ""); err != nil {
		t.Fatal(err)
	}
	s := f.snap("exclude emptied, then a diff", false)
	if !slices.Equal(s.Created, []string{"x.secret", "y.secret"}) {
		t.Errorf("created %q", s.Created)
	}
}

// TestIndexWrittenLateKeepsGitLooking: a file edited again within the second
// of the mtime a watched snapshot recorded, same size, while that snapshot's
// index waits to be written (flushDelay). The index is then written in a
// later second, and the next snapshot goes through git (the user's excludes
// changed). Git, comparing whole seconds, trusts an entry whose stat data
// match unless the entry is as new as the index file: the index must bear
// the time of the scan it was made from, not of its late write, or git takes
// the edit for no change.
func TestIndexWrittenLateKeepsGitLooking(t *testing.T) {
	m, err := New(Options{DataDir: t.TempDir(), WatchFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	root := t.TempDir()
	userGit(t, root, "init", "-q")
	writeFiles(t, root, map[string]string{"g.txt": "g\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")

	// Just after a second begins: write, snapshot and write again within it.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 20*time.Millisecond)))
	name := filepath.Join(root, "f.txt")
	if err := os.WriteFile(name, []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A clock tick (4 ms at most) later, so the snapshot does not take the
	// file for racily clean (smudged entries are looked at again anyway).
	time.Sleep(10 * time.Millisecond)
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	if err := os.WriteFile(name, []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(name, &st); err != nil {
		t.Fatal(err)
	}
	// The index waits for flushDelay; have it written in a later second.
	time.Sleep(time.Until(time.Unix(st.Mtim.Sec+1, 20e6)))
	m.flushAll()
	s, err := m.workspaceFor(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(s.index); err != nil {
		t.Fatal(err)
	} else if fi.ModTime().Unix() > st.Mtim.Sec {
		t.Errorf("the index, written at %v, bears a second after the edit's mtime (%d): git would trust its stat data", fi.ModTime(), st.Mtim.Sec)
	}

	exclude := filepath.Join(root, ".git", "info", "exclude")
	if err := os.WriteFile(exclude, []byte("*.secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s3 := snapshot(t, m, root, "refs/belay/s/3", s2.Commit)
	if got := shadowGit(t, m, root, "cat-file", "-p", s3.Commit+":f.txt"); got != "two\n" {
		t.Errorf("f.txt stored as %q after its second edit, want \"two\\n\"", got)
	}
}
