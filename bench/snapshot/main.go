// Command snapshot benchmarks belay's workspace snapshots against plain git
// on a generated workspace (by default 50,000 files in a git repository) and
// prints a table with the ratios and the targets.
//
//	go run ./bench/snapshot -files 50000 -changed 10 -runs 5
//
// The git baselines run in the same workspace and the same user repository,
// interleaved with belay's runs on identical changes, so both see the same
// files, page cache and dirty state (copying 50,000 files on every run would
// take longer than the measurements).
//
// A second Manager with Options.WatchFiles (as belay serve runs it) snapshots
// the same changes into its own data directory, so the table shows the
// snapshot with and without a file-system watcher side by side. The git
// processes per snapshot are counted last, through a wrapper around git.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/belayhq/belay/workspace"
)

func main() {
	files := flag.Int("files", 50000, "files in the generated workspace")
	changed := flag.Int("changed", 10, "files changed between snapshots")
	runs := flag.Int("runs", 5, "runs per measurement (the median is shown)")
	growth := flag.Int("growth", 20, "snapshots in the growth measurement")
	keep := flag.Bool("keep", false, "keep the temporary directory")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the snapshots after changes, full and watched, here")
	flag.Parse()
	log.SetFlags(0)

	tmp, err := os.MkdirTemp("", "belay-bench-")
	if err != nil {
		log.Fatal(err)
	}
	if *keep {
		log.Printf("working in %s", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	b := &bench{root: filepath.Join(tmp, "workspace"), tmp: tmp, files: *files, changed: *changed, rng: rand.New(rand.NewPCG(1, 2)), cpuprofile: *cpuprofile}
	if err := b.run(*runs, *growth); err != nil {
		log.Fatal(err)
	}
}

type bench struct {
	root, tmp string
	files     int
	changed   int
	names     []string
	rng       *rand.Rand
	edits     int
	// cpuprofile names the file of a CPU profile of the snapshots after
	// changes (full and watched; git runs in processes of its own).
	cpuprofile string
}

func (b *bench) run(runs, growth int) error {
	ctx := context.Background()
	start := time.Now()
	if err := b.generate(); err != nil {
		return err
	}
	log.Printf("generated %d files in a git repository in %v", b.files, time.Since(start).Round(time.Millisecond))
	userObjects, err := objectBytes(filepath.Join(b.root, ".git", "objects"))
	if err != nil {
		return err
	}

	// First snapshot: a fresh data dir each run.
	var first []time.Duration
	var firstObjects, firstShadow []int64
	var m *workspace.Manager
	for i := range runs {
		dataDir := filepath.Join(b.tmp, fmt.Sprintf("data%d", i))
		mgr, err := workspace.New(workspace.Options{DataDir: dataDir})
		if err != nil {
			return err
		}
		t0 := time.Now()
		if _, err := mgr.Snapshot(ctx, workspace.SnapshotRequest{Root: b.root, Ref: "refs/belay/bench/0", Message: "first\n"}); err != nil {
			return err
		}
		first = append(first, time.Since(t0))
		n, err := mgr.DiskUsage(ctx, b.root)
		if err != nil {
			return err
		}
		firstShadow = append(firstShadow, n)
		if n, err = objectBytes(filepath.Join(dataDir, "workspaces", "*", "repo.git", "objects")); err != nil {
			return err
		}
		firstObjects = append(firstObjects, n)
		m = mgr
	}
	watched, err := workspace.New(workspace.Options{DataDir: filepath.Join(b.tmp, "data-watched"), WatchFiles: true})
	if err != nil {
		return err
	}
	defer watched.Close()
	watchedSeq, watchedParent := 0, ""
	snapWatched := func() (time.Duration, error) {
		watchedSeq++
		t0 := time.Now()
		s, err := watched.Snapshot(ctx, workspace.SnapshotRequest{
			Root: b.root, Ref: fmt.Sprintf("refs/belay/bench/%d", watchedSeq), Parent: watchedParent, Message: "bench\n",
		})
		if err != nil {
			return 0, err
		}
		watchedParent = s.Commit
		return time.Since(t0), nil
	}
	// The first snapshot starts the watcher and scans everything.
	if _, err := snapWatched(); err != nil {
		return err
	}
	seq, parent := 0, ""
	snap := func(paths []string) (*workspace.Snapshot, time.Duration, error) {
		seq++
		t0 := time.Now()
		s, err := m.Snapshot(ctx, workspace.SnapshotRequest{
			Root: b.root, Ref: fmt.Sprintf("refs/belay/bench/%d", seq), Parent: parent, Message: "bench\n", Paths: paths,
		})
		if err != nil {
			return nil, 0, err
		}
		parent = s.Commit
		return s, time.Since(t0), nil
	}
	gitCommit := func(config ...string) (time.Duration, error) {
		t0 := time.Now()
		if err := b.git(append(config, "add", "-A")...); err != nil {
			return 0, err
		}
		err := b.git(append(config, "commit", "-q", "-m", "bench")...)
		return time.Since(t0), err
	}
	// Bring belay and git to the same state before measuring.
	if _, _, err := snap(nil); err != nil {
		return err
	}

	var full, withWatcher, paths, gitFull, gitPaths, gitStatus []time.Duration
	if b.cpuprofile != "" {
		f, err := os.Create(b.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	for range runs {
		if _, err := b.edit(); err != nil {
			return err
		}
		_, d, err := snap(nil)
		if err != nil {
			return err
		}
		full = append(full, d)
		if d, err = snapWatched(); err != nil {
			return err
		}
		withWatcher = append(withWatcher, d)
		// One stat scan of every file, the floor for a full snapshot.
		t0 := time.Now()
		if err := b.git("status", "--porcelain", "--untracked-files=all"); err != nil {
			return err
		}
		gitStatus = append(gitStatus, time.Since(t0))
		if d, err = gitCommit(); err != nil {
			return err
		}
		gitFull = append(gitFull, d)
	}
	pprof.StopCPUProfile()
	// git syncs nothing of add and commit by default; belay syncs what a
	// snapshot writes (core.fsync=committed,index). The same for git:
	var gitSynced []time.Duration
	for range runs {
		if _, err := b.edit(); err != nil {
			return err
		}
		d, err := gitCommit("-c", "core.fsync=committed,index", "-c", "core.fsyncMethod=batch")
		if err != nil {
			return err
		}
		gitSynced = append(gitSynced, d)
	}
	for range runs {
		touched, err := b.edit()
		if err != nil {
			return err
		}
		_, d, err := snap(touched)
		if err != nil {
			return err
		}
		paths = append(paths, d)
		if d, err = gitCommit(); err != nil {
			return err
		}
		gitPaths = append(gitPaths, d)
	}

	// Restore: belay and git both go back from the same 10-file change to
	// the state that is both belay's last snapshot and git's HEAD.
	base, _, err := snap(nil)
	if err != nil {
		return err
	}
	var restore, snapRestore, gitRestore []time.Duration
	for range runs {
		saved, err := b.editSaved()
		if err != nil {
			return err
		}
		from, d, err := snap(nil)
		if err != nil {
			return err
		}
		t0 := time.Now()
		res, err := m.Restore(ctx, b.root, from.Commit, base.Commit, false)
		if err != nil {
			return err
		}
		restore = append(restore, time.Since(t0))
		snapRestore = append(snapRestore, d+time.Since(t0))
		if len(res.Changes) != b.changed {
			return fmt.Errorf("restore changed %d files, want %d", len(res.Changes), b.changed)
		}
		if err := saved.apply(); err != nil { // the same change again, for git
			return err
		}
		t0 = time.Now()
		if err := b.git("reset", "-q", "--hard"); err != nil {
			return err
		}
		if err := b.git("clean", "-fdq"); err != nil {
			return err
		}
		gitRestore = append(gitRestore, time.Since(t0))
	}

	before, err := m.DiskUsage(ctx, b.root)
	if err != nil {
		return err
	}
	for range growth {
		if _, err := b.edit(); err != nil {
			return err
		}
		if _, _, err := snap(nil); err != nil {
			return err
		}
	}
	after, err := m.DiskUsage(ctx, b.root)
	if err != nil {
		return err
	}

	procsFull, procsWatched, err := b.countProcesses(ctx)
	if err != nil {
		return err
	}
	load, _ := os.ReadFile("/proc/loadavg")

	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "\n%d files, %d changed per step, median of %d runs, %d cores, load average %s\n",
		b.files, b.changed, runs, runtime.NumCPU(), strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " "))
	fmt.Fprintln(w, "measurement\tbelay\tgit\tratio\ttarget\t")
	fmt.Fprintf(w, "first snapshot\t%v\t\t\t≤ 1s\t\n", median(first))
	// It copies in the objects of the files it borrowed from the user's
	// repository, so that it outlives the user's .git: about what git's own
	// store holds of the tree.
	fmt.Fprintf(w, "  objects it stored\t%s\t%s (.git/objects)\t%.2f×\t≤ 1×\t\n",
		size(medianInt(firstObjects)), size(userObjects), float64(medianInt(firstObjects))/float64(userObjects))
	fmt.Fprintf(w, "  whole shadow dir (with the private index)\t%s\t\t\t\t\n", size(medianInt(firstShadow)))
	row := func(name string, belay, git []time.Duration, gitName, target string) {
		bm, gm := median(belay), median(git)
		fmt.Fprintf(w, "%s\t%v\t%v (%s)\t%.2f×\t%s\t\n", name, bm, gm, gitName, float64(bm)/float64(gm), target)
	}
	row(fmt.Sprintf("snapshot after %d changes", b.changed), full, gitFull, "add -A && commit", "≤ 0.5×")
	row("  the same with a file-system watcher", withWatcher, gitFull, "add -A && commit", "≤ 0.1×")
	row("  with a watcher, against git synced as belay is", withWatcher, gitSynced, "the same, core.fsync=committed,index", "")
	row("  git status alone (one stat scan: the floor)", gitStatus, gitFull, "add -A && commit", "")
	row("snapshot with Paths", paths, gitPaths, "add -A && commit", "≤ 0.2×")
	row(fmt.Sprintf("restore of a %d-file change", b.changed), restore, gitRestore, "reset --hard && clean -fd", "≤ 0.25×")
	row("  snapshot + restore (a full rollback)", snapRestore, gitRestore, "reset --hard && clean -fd", "")
	fmt.Fprintf(w, "git processes per snapshot\t%.1f\t\t\t(%.1f with a watcher)\t\t\n", procsFull, procsWatched)
	fmt.Fprintf(w, "growth: %d snapshots of %d changed files\t+%s\t\t\t(%s per snapshot; shadow dir %s)\t\n",
		growth, b.changed, size(after-before), size((after-before)/int64(growth)), size(after))
	return w.Flush()
}

// generate writes the workspace and makes it a git repository with one
// commit. The commit is written with fast-import (one pack) because writing
// 50,000 loose objects with `git add` takes minutes on slow disks; the index
// is then built and refreshed as `git add` would leave it.
func (b *bench) generate() error {
	var imp bytes.Buffer
	w := bufio.NewWriter(&imp)
	perDir := 100
	for i := range b.files {
		name := fmt.Sprintf("src/m%02d/p%03d/f%05d.go", i/(perDir*10)%100, i/perDir, i)
		b.names = append(b.names, name)
		content := fileContent(i, 0)
		path := filepath.Join(b.root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(w, "blob\nmark :%d\ndata %d\n%s\n", i+1, len(content), content)
	}
	fmt.Fprintf(w, "commit refs/heads/main\nauthor bench <bench@localhost> 1700000000 +0000\ncommitter bench <bench@localhost> 1700000000 +0000\ndata 8\ninitial\n")
	for i, name := range b.names {
		fmt.Fprintf(w, "M 100644 :%d %s\n", i+1, name)
	}
	w.Flush()
	if err := b.git("init", "-q", "-b", "main"); err != nil {
		return err
	}
	cmd := b.gitCmd("fast-import", "--quiet")
	cmd.Stdin = &imp
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git fast-import: %v\n%s", err, out)
	}
	if err := b.git("read-tree", "HEAD"); err != nil {
		return err
	}
	return b.git("update-index", "-q", "--refresh")
}

func fileContent(i, version int) []byte {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "package p%d\n\n// File %d, version %d.\n", i/100, i, version)
	for line := range 20 {
		fmt.Fprintf(&buf, "var v%d_%d = %q\n", i, line, strings.Repeat("x", line+i%7))
	}
	return buf.Bytes()
}

// edit rewrites `changed` random files with new content and returns their
// names, relative to the workspace root.
func (b *bench) edit() ([]string, error) {
	e, err := b.editSaved()
	if err != nil {
		return nil, err
	}
	names := make([]string, len(e.files))
	for i, f := range e.files {
		names[i] = f.name
	}
	return names, nil
}

// savedEdit is an edit that can be applied again.
type savedEdit struct {
	root  string
	files []struct {
		name    string
		content []byte
	}
}

func (e *savedEdit) apply() error {
	for _, f := range e.files {
		if err := os.WriteFile(filepath.Join(e.root, f.name), f.content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// editSaved is edit that returns the edit, to apply it again.
func (b *bench) editSaved() (*savedEdit, error) {
	b.edits++
	e := &savedEdit{root: b.root}
	for _, i := range b.rng.Perm(b.files)[:b.changed] {
		e.files = append(e.files, struct {
			name    string
			content []byte
		}{b.names[i], fileContent(i, b.edits)})
	}
	return e, e.apply()
}

// countProcesses runs a few snapshots of 10 changes through a wrapper that
// counts the git processes they start, without and with a watcher, and
// returns the processes per snapshot.
func (b *bench) countProcesses(ctx context.Context) (full, watched float64, err error) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		return 0, 0, err
	}
	counter := filepath.Join(b.tmp, "git-count")
	wrapper := filepath.Join(b.tmp, "git-counting")
	script := fmt.Sprintf("#!/bin/sh\necho >> '%s'\nexec '%s' \"$@\"\n", counter, gitPath)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		return 0, 0, err
	}
	const snaps = 5
	count := func(watch bool) (float64, error) {
		m, err := workspace.New(workspace.Options{DataDir: filepath.Join(b.tmp, fmt.Sprintf("data-count-%v", watch)), Git: wrapper, WatchFiles: watch})
		if err != nil {
			return 0, err
		}
		defer m.Close()
		parent := ""
		for i := range snaps + 2 {
			if i == 2 { // after the first snapshot and one that settles the watcher
				if err := os.Remove(counter); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return 0, err
				}
			}
			if _, err := b.edit(); err != nil {
				return 0, err
			}
			s, err := m.Snapshot(ctx, workspace.SnapshotRequest{Root: b.root, Ref: fmt.Sprintf("refs/belay/count/%d", i), Parent: parent, Message: "count\n"})
			if err != nil {
				return 0, err
			}
			parent = s.Commit
		}
		data, err := os.ReadFile(counter)
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil // no git process at all
		}
		if err != nil {
			return 0, err
		}
		return float64(bytes.Count(data, []byte("\n"))) / snaps, os.Remove(counter)
	}
	if full, err = count(false); err != nil {
		return 0, 0, err
	}
	watched, err = count(true)
	return full, watched, err
}

// objectBytes sums the sizes of the files under the objects directories
// that pattern (a filepath.Glob pattern) matches, the alternates file left
// out: what a repository stores itself.
func objectBytes(pattern string) (int64, error) {
	dirs, err := filepath.Glob(pattern)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() || d.Name() == "alternates" {
				return err
			}
			fi, err := d.Info()
			total += fi.Size()
			return err
		})
		if err != nil {
			return 0, err
		}
	}
	return total, nil
}

func (b *bench) gitCmd(args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = b.root
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@localhost",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@localhost")
	return cmd
}

func (b *bench) git(args ...string) error {
	if err := os.MkdirAll(b.root, 0o755); err != nil {
		return err
	}
	if out, err := b.gitCmd(args...).CombinedOutput(); err != nil {
		return fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(100 * time.Microsecond)
}

func medianInt(ns []int64) int64 {
	s := slices.Clone(ns)
	slices.Sort(s)
	return s[len(s)/2]
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
