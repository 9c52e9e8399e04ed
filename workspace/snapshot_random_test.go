package workspace

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The randomized differential tests change a work tree at random, round
// after round, snapshot it in each way a caller can (a full scan, the
// touched paths, a watcher) and compare every snapshot with what git itself
// records for the same work tree. Replay a failure with the seed it prints:
//
//	go test ./workspace/ -run Random -snaprand.seed=N [-snaprand.rounds=M]
//
// or SNAPRAND_SEED=N (and SNAPRAND_ROUNDS=M) in the environment.
var (
	randSeedFlag   = flag.Uint64("snaprand.seed", 0, "seed of the randomized snapshot tests (0: $SNAPRAND_SEED, else 1)")
	randRoundsFlag = flag.Int("snaprand.rounds", 0, "rounds of the randomized snapshot tests (0: $SNAPRAND_ROUNDS, else 10)")
)

const (
	defaultRandSeed   = 1
	defaultRandRounds = 10
	// randMaxFileSize is the size cap of the snapshots: the test makes
	// files above it to see them skipped, and keeps every other file below.
	randMaxFileSize = 2048
)

// randParams returns the seed and the number of rounds: flag, then
// environment, then default.
func randParams(t *testing.T) (uint64, int) {
	t.Helper()
	seed, rounds := *randSeedFlag, *randRoundsFlag
	if v := os.Getenv("SNAPRAND_SEED"); seed == 0 && v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SNAPRAND_SEED=%q: %v", v, err)
		}
		seed = n
	}
	if v := os.Getenv("SNAPRAND_ROUNDS"); rounds == 0 && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("SNAPRAND_ROUNDS=%q: %v", v, err)
		}
		rounds = n
	}
	if seed == 0 {
		seed = defaultRandSeed
	}
	if rounds <= 0 {
		rounds = defaultRandRounds
	}
	return seed, rounds
}

// TestSnapshotRandom changes a work tree at random (edits, racy edits,
// deletions, creations, renames of files and directories, mode changes,
// files and directories and symlinks replacing one another, ignore rules
// changed, files made in ignored places, a nested repository changed, named
// pipes and too-large files made) and after each round checks the snapshot
// of three Managers against git: a full scan, a snapshot given the touched
// paths, and (on Linux) a watcher's.
func TestSnapshotRandom(t *testing.T) {
	t.Parallel()
	runRandom(t, false)
}

// TestSnapshotRandomRestore is TestSnapshotRandom with a restore to an
// earlier snapshot every third round, by each Manager in turn: the work tree
// must then hold that snapshot, and the snapshots after it must still match
// git.
func TestSnapshotRandomRestore(t *testing.T) {
	t.Parallel()
	runRandom(t, true)
}

func runRandom(t *testing.T, restores bool) {
	seed, rounds := randParams(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay: go test ./workspace/ -run '^%s$' -snaprand.seed=%d -snaprand.rounds=%d", t.Name(), seed, rounds)
		}
	})
	r := newRandTest(t, seed)
	r.build()
	r.snapshotAll()
	ops := 0
	for r.round = 1; r.round <= rounds; r.round++ {
		if restores && r.round%3 == 0 {
			r.restore(r.managers[r.round/3%len(r.managers)])
			continue
		}
		for range 1 + r.rng.IntN(8) {
			r.randomOp()
			ops++
		}
		r.snapshotAll()
	}
	t.Logf("seed %d: %d rounds, %d operations", seed, rounds, ops)
	for _, rm := range r.managers {
		if rm.watched {
			t.Logf("the watcher vouched for %d of %d snapshots", rm.vouchedCount, rm.seq)
		}
	}
}

// randManager is one way of taking snapshots, with its own Manager, data
// directory and chain of snapshots, and the model of its private index.
type randManager struct {
	name string
	m    *Manager
	// report passes the paths touched since its previous snapshot.
	report bool
	// watched: the Manager watches the work tree; vouched says whether the
	// watcher vouched for the last snapshot.
	watched      bool
	vouched      bool
	vouchedCount int
	// index is the model's index for this Manager: what `git add -A` leaves
	// after the same snapshots and restores. Like the private index it keeps
	// a file once stored even if an ignore rule later matches it.
	index  string
	seq    int
	parent string // the commit of its previous snapshot
	tree   string // the expected tree of its previous snapshot
	// history lists its snapshots, restore targets.
	history []randSnap
}

type randSnap struct{ commit, tree string }

// randTest is the work tree, the Managers snapshotting it and the model:
// a scratch repository with the shadow repositories' excludes and
// attributes, whose work tree is a copy of the work tree without any .git
// (so a nested repository is a plain directory) and without the files a
// snapshot skips.
type randTest struct {
	t     *testing.T
	rng   *rand.Rand
	seed  uint64
	round int
	root  string
	model string // the scratch repository (bare)
	// mirror is the model's work tree, a copy of the work tree; mirrored,
	// what it holds.
	mirror   string
	mirrored map[string]mirrorEntry
	next     int // numbers fresh names

	managers []*randManager
	// touched lists the paths changed since the previous snapshots, as an
	// agent would report them; made, the named pipes and too-large files
	// made meanwhile.
	touched []string
	made    []string
	// log lists the operations of the round, for failure messages.
	log []string
}

func newRandTest(t *testing.T, seed uint64) *randTest {
	r := &randTest{
		t:      t,
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		seed:   seed,
		root:   t.TempDir(),
		mirror: t.TempDir(),
	}
	base := t.TempDir()
	r.model = filepath.Join(base, "model.git")
	userGit(t, base, "init", "--bare", "-q", "--template=", r.model)
	exclude := filepath.Join(base, "exclude")
	r.do(os.WriteFile(exclude, []byte(strings.Join(builtinExcludes, "\n")+"\n"), 0o644))
	r.do(os.MkdirAll(filepath.Join(r.model, "info"), 0o755))
	r.do(os.WriteFile(filepath.Join(r.model, "info", "attributes"), []byte(attributes), 0o644))
	for _, kv := range [][2]string{
		{"core.excludesFile", exclude}, {"core.fileMode", "true"}, {"core.symlinks", "true"},
		{"core.autocrlf", "false"}, {"core.untrackedCache", "false"},
	} {
		r.git(nil, "", "config", kv[0], kv[1])
	}
	ways := []struct {
		name          string
		report, watch bool
	}{{"full", false, false}, {"paths", true, false}, {"watch", false, true}}
	for _, w := range ways {
		if w.watch && runtime.GOOS != "linux" {
			continue
		}
		m, err := New(Options{DataDir: t.TempDir(), MaxFileSize: randMaxFileSize, WatchFiles: w.watch})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		rm := &randManager{name: w.name, m: m, report: w.report, watched: w.watch, index: filepath.Join(base, w.name+".index")}
		if w.watch {
			m.claimed = func(c *changeClaim) { rm.vouched = c != nil && c.ok }
		}
		r.managers = append(r.managers, rm)
	}
	return r
}

func (r *randTest) do(err error) {
	r.t.Helper()
	if err != nil {
		r.t.Fatalf("seed %d round %d: %v", r.seed, r.round, err)
	}
}

func (r *randTest) errorf(format string, args ...any) {
	r.t.Helper()
	r.t.Errorf("seed %d round %d: %s", r.seed, r.round, fmt.Sprintf(format, args...))
}

// git runs git on the model: its repository, the current copy of the work
// tree and the given index. It returns the output and the exit code, which
// may be 1 (check-ignore finding nothing); others fail the test.
func (r *randTest) git(stdin []byte, index string, args ...string) (string, int) {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.mirror
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1",
		"GIT_DIR="+r.model, "GIT_WORK_TREE="+r.mirror)
	if index != "" {
		cmd.Env = append(cmd.Env, "GIT_INDEX_FILE="+index)
	}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 {
		return string(out), 1
	}
	if err != nil {
		r.t.Fatalf("seed %d round %d: model: git %s: %v\n%s", r.seed, r.round, strings.Join(args, " "), err, stderr.String())
	}
	return string(out), 0
}

// abs returns the absolute path of a work tree path.
func (r *randTest) abs(rel string) string {
	return filepath.Join(r.root, filepath.FromSlash(rel))
}

// fresh returns a name never used before, numbered, with ext.
func (r *randTest) fresh(prefix, ext string) string {
	r.next++
	return prefix + strconv.Itoa(r.next) + ext
}

// content returns n random bytes, text mostly, with CRLF line ends, a
// keyword ident would expand and now and then a NUL.
func (r *randTest) content(n int) []byte {
	const alphabet = "abcdefghij \n\n\r$Id:\x00"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.rng.IntN(len(alphabet))]
	}
	return b
}

// randomSize is the size of a new or edited file: empty sometimes, always
// at most randMaxFileSize.
func (r *randTest) randomSize() int {
	if r.rng.IntN(8) == 0 {
		return 0
	}
	return 1 + r.rng.IntN(300)
}

// touch records paths an agent would report for its changes.
func (r *randTest) touch(paths ...string) {
	r.touched = append(r.touched, paths...)
}

func (r *randTest) writeFile(rel string, data []byte, perm os.FileMode) {
	r.t.Helper()
	r.do(os.MkdirAll(filepath.Dir(r.abs(rel)), 0o755))
	r.do(os.WriteFile(r.abs(rel), data, perm))
}

// build makes the first work tree: a user repository at the root (for its
// info/exclude), ignore rules of every kind, files the built-in excludes
// cover, a nested repository, symlinks, executable and empty files, content
// .gitattributes would convert, named pipes, too-large files and a few
// hundred files in nested directories.
func (r *randTest) build() {
	userGit(r.t, r.root, "init", "-q")
	fixed := map[string]string{
		".git/info/exclude": "*.local\n/scratch/\n",
		".gitignore": "*.log\n!keep.log\n/anchored.txt\n/out/\ntmp/\n**/cache/**\ndocs/**/*.bak\nlogs/\n!logs/important.txt\n" +
			"# a comment\n\\#literal\n*.sw?\n",
		".belayignore":           "*.secret\n/private/\n!keep.secret\n",
		".gitattributes":         "*.txt text eol=crlf\n*.md ident\n*.go filter=absent\n",
		"src/.gitignore":         "*.gen\n!main.gen\n!keep.pyc\ngen-*/\n/only-here.txt\n",
		"docs/guide/.gitignore":  "*.md\n!README.md\n",
		"keep.log":               "kept despite *.log\n",
		"x.log":                  "ignored\n",
		"anchored.txt":           "ignored at the root\n",
		"src/anchored.txt":       "not ignored below\n",
		"out/o.txt":              "ignored\n",
		"src/out/o.txt":          "stored: /out/ is anchored\n",
		"tmp/t.txt":              "ignored\n",
		"a/tmp/t.txt":            "ignored too\n",
		"a/cache/c.txt":          "ignored\n",
		"a/b/cache/d/c.txt":      "ignored\n",
		"docs/x.bak":             "ignored\n",
		"docs/a/b/y.bak":         "ignored\n",
		"x.bak":                  "stored\n",
		"logs/important.txt":     "ignored: its directory is\n",
		"#literal":               "ignored\n",
		"node_modules/m/i.js":    "ignored\n",
		"src/node_modules/x.js":  "ignored\n",
		"__pycache__/x.pyc":      "ignored\n",
		"a.pyc":                  "ignored\n",
		"src/keep.pyc":           "re-included\n",
		"src/main.gen":           "re-included\n",
		"src/other.gen":          "ignored\n",
		"src/gen-1/x.go":         "ignored\n",
		"src/only-here.txt":      "ignored\n",
		"build/out.bin":          "ignored\n",
		"dist/d.js":              "ignored\n",
		".venv/lib.py":           "ignored\n",
		"a.secret":               "ignored by .belayignore\n",
		"keep.secret":            "re-included\n",
		"private/p.txt":          "ignored\n",
		"src/private/p.txt":      "stored\n",
		"x.local":                "ignored by info/exclude\n",
		"scratch/s.txt":          "ignored by info/exclude\n",
		"crlf.txt":               "a\r\nb\n",
		"ident.md":               "$Id$\n",
		"filtered.go":            "package x\n",
		"with space.txt":         "space\n",
		"ünï/çödé.txt":           "unicode\n",
		"empty.txt":              "",
		"a/b/empty":              "",
		"link-file":              "->x.bak",
		"link-dir":               "->src",
		"dangling":               "->nowhere",
		"abs-link":               "->/nonexistent/abs",
		"a/up-link":              "->../src/main.gen",
		"vendor/lib/lib.go":      "package lib\n",
		"vendor/lib/.gitignore":  "*.o\n",
		"vendor/lib/lib.o":       "ignored by the nested .gitignore\n",
		"vendor/lib/sub/s.go":    "package sub\n",
		"vendor/lib/docs/a.md":   "nested\n",
		"vendor/lib/bin/tool.sh": "#!/bin/sh\n",
	}
	writeFiles(r.t, r.root, fixed)
	r.do(os.Chmod(r.abs("vendor/lib/bin/tool.sh"), 0o755))

	dirs := []string{"", "src", "src/pkg", "src/pkg/deep", "a", "a/b", "a/b/c", "docs", "docs/guide", "m1", "m1/m2",
		"logs", "cache", "x/cache/y", "tmp", "out", "src/out", "build", "data", "data/raw"}
	exts := []string{".txt", ".txt", ".txt", ".go", ".go", ".md", ".log", ".pyc", ".bak", ".gen", ".tmp", ".secret", ".local", ""}
	// No rule outside the nested repository covers its files (see
	// TestNestedRepositoryOuterIgnoreRules).
	nestedDirs := []string{"vendor/lib", "vendor/lib/sub", "vendor/lib/sub/deep"}
	nestedExts := []string{".txt", ".go", ".md", ".o", ".pyc", ".secret"}
	for i := range 200 {
		name := path.Join(r.pick(dirs), r.fresh("n", r.pick(exts)))
		if i%10 == 0 {
			name = path.Join(r.pick(nestedDirs), r.fresh("n", r.pick(nestedExts)))
		}
		perm := os.FileMode(0o644)
		if i%9 == 0 {
			perm = 0o755
		}
		r.writeFile(name, r.content(r.randomSize()), perm)
	}
	userGit(r.t, r.abs("vendor/lib"), "init", "-q")
	userGit(r.t, r.abs("vendor/lib"), "add", "-A")
	userGit(r.t, r.abs("vendor/lib"), "commit", "-q", "-m", "nested")
	r.writeFile("vendor/lib/untracked.txt", []byte("not committed in the nested repository\n"), 0o644)
	r.do(os.MkdirAll(r.abs("pipes"), 0o755))
	for _, p := range []string{"pipes/p1", "src/p2", "pipes/ignored.log"} {
		r.do(syscall.Mkfifo(r.abs(p), 0o644))
	}
	for _, p := range []string{"big.bin", "src/big.dat", "big.log"} {
		r.writeFile(p, r.content(randMaxFileSize+1+r.rng.IntN(500)), 0o644)
	}
}

// nestedKeeper is a file of the nested repository the operations leave
// alone: while a snapshot holds a file of it, git lists the repository as
// a plain directory, so it is never seen afresh (see
// TestNestedRepositoryOuterIgnoreRules).
const nestedKeeper = "vendor/lib/lib.go"

// randEntries is the work tree as the operations see it; .git and
// nestedKeeper never appear.
type randEntries struct {
	files  []string // regular files up to randMaxFileSize, ignore files aside
	dirs   []string // "" is the root
	links  []string
	ignore []string // .gitignore files
	nested []string // roots of nested repositories
}

func (r *randTest) entries() randEntries {
	r.t.Helper()
	var e randEntries
	err := filepath.WalkDir(r.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(r.root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			rel = ""
		}
		switch {
		case d.Name() == ".git":
			if d.IsDir() {
				if rel != ".git" {
					e.nested = append(e.nested, path.Dir(rel))
				}
				return filepath.SkipDir
			}
		case d.IsDir():
			e.dirs = append(e.dirs, rel)
		case d.Type()&fs.ModeSymlink != 0:
			e.links = append(e.links, rel)
		case d.Name() == ".gitignore" && d.Type().IsRegular():
			e.ignore = append(e.ignore, rel)
		case d.Type().IsRegular() && d.Name() != ".belayignore" && rel != nestedKeeper:
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if fi.Size() <= randMaxFileSize {
				e.files = append(e.files, rel)
			}
		}
		return nil
	})
	r.do(err)
	return e
}

func (r *randTest) pick(list []string) string {
	return list[r.rng.IntN(len(list))]
}

// freshPath returns a new path in dir with ext.
func (r *randTest) freshPath(dir, ext string) string {
	return path.Join(dir, r.fresh("n", ext))
}

// randOp is one kind of change; it returns false when the work tree has
// nothing it applies to.
type randOp struct {
	name   string
	weight int
	apply  func(r *randTest, e randEntries) bool
}

var randOps = []randOp{
	{"edit, same size", 6, func(r *randTest, e randEntries) bool {
		if len(e.files) == 0 {
			return false
		}
		f := r.pick(e.files)
		data, err := os.ReadFile(r.abs(f))
		r.do(err)
		r.do(os.WriteFile(r.abs(f), r.content(len(data)), 0o644))
		r.touch(f)
		return true
	}},
	{"edit, another size", 6, func(r *randTest, e randEntries) bool {
		if len(e.files) == 0 {
			return false
		}
		f := r.pick(e.files)
		fi, err := os.Stat(r.abs(f))
		r.do(err)
		n := r.randomSize()
		if int64(n) == fi.Size() {
			n++
		}
		r.do(os.WriteFile(r.abs(f), r.content(n), 0o644))
		r.touch(f)
		return true
	}},
	// Two edits of the same size at once, often within the second of the
	// previous snapshot: git's racy-entry handling must see the second.
	// (An edit that also puts the mtime back is seen only if the ctime
	// tells it: git compares whole seconds; TestRacyEdit covers the case
	// where it does.)
	{"edit twice at once, same size", 4, func(r *randTest, e randEntries) bool {
		if len(e.files) == 0 {
			return false
		}
		f := r.pick(e.files)
		fi, err := os.Stat(r.abs(f))
		r.do(err)
		r.do(os.WriteFile(r.abs(f), r.content(int(fi.Size())), 0o644))
		r.do(os.WriteFile(r.abs(f), r.content(int(fi.Size())), 0o644))
		r.touch(f)
		return true
	}},
	{"delete a file", 4, func(r *randTest, e randEntries) bool {
		if len(e.files) == 0 {
			return false
		}
		f := r.pick(e.files)
		r.do(os.Remove(r.abs(f)))
		r.touch(f)
		return true
	}},
	{"delete a directory", 1, func(r *randTest, e randEntries) bool {
		if len(e.dirs) < 2 {
			return false
		}
		d := r.pick(e.dirs[1:])
		r.do(os.RemoveAll(r.abs(d)))
		r.touch(d)
		return true
	}},
	{"create a file in new directories", 3, func(r *randTest, e randEntries) bool {
		dir := r.pick(e.outsideNested())
		for range 1 + r.rng.IntN(3) {
			dir = path.Join(dir, r.fresh("m", ""))
		}
		f := r.freshPath(dir, ".txt")
		r.writeFile(f, r.content(r.randomSize()), 0o644)
		r.touch(f)
		return true
	}},
	{"create a file", 5, func(r *randTest, e randEntries) bool {
		f := r.freshPath(r.pick(e.dirs), r.pick([]string{".txt", ".go", ".md", ""}))
		r.writeFile(f, r.content(r.randomSize()), 0o644)
		r.touch(f)
		return true
	}},
	{"create a file in an ignored directory", 2, func(r *randTest, e randEntries) bool {
		dir := path.Join(r.pick(e.outsideNested()), r.pick([]string{"node_modules", "build", "__pycache__", ".venv", "tmp", "logs", "cache", "private", "out", "gen-2"}))
		f := r.freshPath(dir, ".txt")
		r.writeFile(f, r.content(r.randomSize()), 0o644)
		r.touch(f)
		return true
	}},
	{"create a file an ignore rule matches", 2, func(r *randTest, e randEntries) bool {
		f := r.freshPath(r.pick(e.dirs), r.pick([]string{".log", ".pyc", ".secret", ".local", ".gen", ".o", ".swp", ArchiveSuffix}))
		r.writeFile(f, r.content(r.randomSize()), 0o644)
		r.touch(f)
		return true
	}},
	{"rename a file", 4, func(r *randTest, e randEntries) bool {
		if len(e.files) == 0 {
			return false
		}
		f := r.pick(e.files)
		to := r.freshPath(r.pick(e.dirs), path.Ext(f))
		r.do(os.Rename(r.abs(f), r.abs(to)))
		r.touch(f, to)
		return true
	}},
	{"rename a directory", 2, func(r *randTest, e randEntries) bool {
		if len(e.dirs) < 2 {
			return false
		}
		d := r.pick(e.dirs[1:])
		for _, n := range e.nested {
			if n == d || strings.HasPrefix(n, d+"/") {
				// A nested repository moved is seen afresh (see
				// TestNestedRepositoryOuterIgnoreRules).
				return false
			}
		}
		var parents []string
		for _, p := range e.outsideNested() {
			if p != d && !strings.HasPrefix(p, d+"/") {
				parents = append(parents, p)
			}
		}
		name := r.fresh("m", "")
		if r.rng.IntN(4) == 0 {
			name = r.pick([]string{"build", "node_modules", "cache", "tmp", "private"})
		}
		to := path.Join(r.pick(parents), name)
		if _, err := os.Lstat(r.abs(to)); err == nil {
			return false
		}
		r.do(os.Rename(r.abs(d), r.abs(to)))
		// An agent names the two directories, or their parents.
		if r.rng.IntN(2) == 0 && path.Dir(d) != "." && path.Dir(to) != "." {
			r.touch(path.Dir(d), path.Dir(to))
		} else {
			r.touch(d, to)
		}
		return true
	}},
	{"chmod +x or -x", 3, func(r *randTest, e randEntries) bool {
		if len(e.files) == 0 {
			return false
		}
		f := r.pick(e.files)
		fi, err := os.Stat(r.abs(f))
		r.do(err)
		r.do(os.Chmod(r.abs(f), fi.Mode().Perm()^0o111))
		r.touch(f)
		return true
	}},
	{"file replaced by a directory", 2, func(r *randTest, e randEntries) bool {
		if len(e.files) == 0 {
			return false
		}
		f := r.pick(e.files)
		if inNested(f, e.nested) {
			return false // see outsideNested
		}
		r.do(os.Remove(r.abs(f)))
		r.writeFile(path.Join(f, r.fresh("n", ".txt")), r.content(r.randomSize()), 0o644)
		r.touch(f)
		return true
	}},
	{"directory replaced by a file", 1, func(r *randTest, e randEntries) bool {
		if len(e.dirs) < 2 {
			return false
		}
		d := r.pick(e.dirs[1:])
		// Not by an ignored file: a snapshot given paths stores it (see
		// TestSnapshotPathsIgnoredFileReplacingADirectory).
		r.syncMirror()
		if out, _ := r.git([]byte(d), "", "check-ignore", "--no-index", "--stdin"); out != "" {
			return false
		}
		r.do(os.RemoveAll(r.abs(d)))
		r.writeFile(d, r.content(r.randomSize()), 0o644)
		r.touch(d)
		return true
	}},
	{"file replaced by a symlink", 2, func(r *randTest, e randEntries) bool {
		if len(e.files) == 0 {
			return false
		}
		f := r.pick(e.files)
		r.do(os.Remove(r.abs(f)))
		r.do(os.Symlink(r.linkTarget(f, e), r.abs(f)))
		r.touch(f)
		return true
	}},
	{"symlink replaced by a file", 2, func(r *randTest, e randEntries) bool {
		if len(e.links) == 0 {
			return false
		}
		l := r.pick(e.links)
		r.do(os.Remove(r.abs(l)))
		r.writeFile(l, r.content(r.randomSize()), 0o644)
		r.touch(l)
		return true
	}},
	{"create a symlink", 2, func(r *randTest, e randEntries) bool {
		l := r.freshPath(r.pick(e.dirs), "")
		r.do(os.Symlink(r.linkTarget(l, e), r.abs(l)))
		r.touch(l)
		return true
	}},
	{"touch, content unchanged", 3, func(r *randTest, e randEntries) bool {
		if len(e.files) == 0 {
			return false
		}
		f := r.pick(e.files)
		fi, err := os.Stat(r.abs(f))
		r.do(err)
		later := fi.ModTime().Add(time.Duration(1 + r.rng.Int64N(int64(time.Second))))
		r.do(os.Chtimes(r.abs(f), later, later))
		r.touch(f)
		return true
	}},
	{"edit a .gitignore", 3, func(r *randTest, e randEntries) bool {
		var gi string
		if len(e.ignore) == 0 || r.rng.IntN(3) == 0 {
			gi = path.Join(r.pick(e.dirs), ".gitignore")
		} else {
			gi = r.pick(e.ignore)
		}
		r.editIgnoreFile(gi)
		// Ignore rules govern their whole directory: the agent names it (a
		// snapshot given paths looks only at them).
		r.touch(gi, path.Dir(gi))
		return true
	}},
	{"edit .belayignore", 1, func(r *randTest, e randEntries) bool {
		r.editIgnoreFile(".belayignore")
		r.touch(".belayignore")
		return true
	}},
	{"edit the user's info/exclude", 1, func(r *randTest, e randEntries) bool {
		r.editIgnoreFile(".git/info/exclude")
		return true
	}},
	{"change the nested repository", 3, func(r *randTest, e randEntries) bool {
		if len(e.nested) == 0 {
			return false
		}
		repo := r.pick(e.nested)
		var inside []string
		for _, f := range e.files {
			if strings.HasPrefix(f, repo+"/") {
				inside = append(inside, f)
			}
		}
		f := r.freshPath(repo, r.pick([]string{".go", ".o", ".txt"}))
		if len(inside) > 0 && r.rng.IntN(2) == 0 {
			f = r.pick(inside)
		}
		r.do(os.WriteFile(r.abs(f), r.content(r.randomSize()), 0o644))
		r.touch(f)
		return true
	}},
	{"make a named pipe", 1, func(r *randTest, e randEntries) bool {
		p := r.freshPath(r.pick(e.dirs), r.pick([]string{"", ".fifo", ".log"}))
		r.do(syscall.Mkfifo(r.abs(p), 0o644))
		r.touch(p)
		r.made = append(r.made, p)
		return true
	}},
	{"make a too-large file", 1, func(r *randTest, e randEntries) bool {
		p := r.freshPath(r.pick(e.dirs), r.pick([]string{".bin", ".log"}))
		r.writeFile(p, r.content(randMaxFileSize+1+r.rng.IntN(500)), 0o644)
		r.touch(p)
		r.made = append(r.made, p)
		return true
	}},
}

// linkTarget returns what a new symlink at rel points to: a file, a
// directory, or nothing.
func (r *randTest) linkTarget(rel string, e randEntries) string {
	var to string
	switch r.rng.IntN(3) {
	case 0:
		if len(e.files) == 0 {
			return "nowhere"
		}
		to = r.pick(e.files)
	case 1:
		to = r.pick(e.dirs)
	default:
		return r.fresh("nowhere-", "")
	}
	target, err := filepath.Rel(filepath.Dir(r.abs(rel)), r.abs(to))
	r.do(err)
	return target
}

// ignorePatterns are the lines the test adds to ignore files: negations,
// directory-only, anchored and ** patterns, aimed at the names it makes.
var ignorePatterns = []string{
	"*.txt", "!*.txt", "*.md", "!*.md", "n1*", "!n2*", "/n3*", "m1*/", "!m1*/", "**/m2*/", "m3*/**/n*",
	"*.go", "!n4*.go", "n*[05].txt", "/m*/n6*", "src/", "!src/", "!*.log", "a/", "/a", "**/b", "n7*/",
	"*.bin", "!*.pyc", "docs/**", "!keep*", "n8*", "# n9*", "\\!n1*", "*", "!*/", "!.gitignore",
}

// outsideNested returns the directories that are not in a nested
// repository, where operations may make directories: below a directory
// that is new in a nested repository, git lists nothing when given a
// directory as a pathspec (see TestSnapshotPathsInNestedRepository), as a
// snapshot given paths, or a watcher's, does.
func (e randEntries) outsideNested() []string {
	var dirs []string
	for _, d := range e.dirs {
		if !slices.Contains(e.nested, d) && !inNested(d, e.nested) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// inNested reports whether rel lies in one of the nested repositories.
func inNested(rel string, nested []string) bool {
	for _, n := range nested {
		if strings.HasPrefix(rel, n+"/") {
			return true
		}
	}
	return false
}

// editIgnoreFile adds a pattern to an ignore file, creating it, or removes
// one of its lines.
func (r *randTest) editIgnoreFile(rel string) {
	data, err := os.ReadFile(r.abs(rel))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.do(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(data) == 0 {
		lines = nil
	}
	if len(lines) > 0 && r.rng.IntN(3) == 0 {
		i := r.rng.IntN(len(lines))
		lines = slices.Delete(lines, i, i+1)
	} else {
		lines = append(lines, r.pick(ignorePatterns))
	}
	out := strings.Join(lines, "\n")
	if len(lines) > 0 && r.rng.IntN(4) != 0 {
		out += "\n"
	}
	r.writeFile(rel, []byte(out), 0o644)
}

// randomOp applies one operation, drawn by weight among those the work tree
// allows.
func (r *randTest) randomOp() {
	e := r.entries()
	total := 0
	for _, op := range randOps {
		total += op.weight
	}
	for {
		n := r.rng.IntN(total)
		for _, op := range randOps {
			if n -= op.weight; n < 0 {
				before := len(r.touched)
				if op.apply(r, e) {
					r.log = append(r.log, fmt.Sprintf("%s %q", op.name, r.touched[before:]))
					return
				}
				break
			}
		}
	}
}

// mirrorEntry is a directory, a symlink (data is its target) or a regular
// file of the mirror.
type mirrorEntry struct {
	kind fs.FileMode // fs.ModeDir, fs.ModeSymlink or 0
	perm fs.FileMode
	data string
}

// syncMirror brings the mirror up to date with the work tree as the model
// sees it: without .git directories (a nested repository is an ordinary
// directory to a snapshot), named pipes and files a snapshot skips for
// their size (the test never makes a stored file that large). A changed
// file is written anew (another inode), so git's stat data tells it
// changed. The model's info/exclude is the user's .git/info/exclude
// followed by .belayignore, as the shadow repository's is.
func (r *randTest) syncMirror() {
	r.t.Helper()
	want := map[string]mirrorEntry{}
	err := filepath.WalkDir(r.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(r.root, p)
		if err != nil || rel == "." {
			return err
		}
		switch {
		case d.Name() == ".git":
			if d.IsDir() {
				return filepath.SkipDir
			}
		case d.IsDir():
			want[rel] = mirrorEntry{kind: fs.ModeDir}
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			want[rel] = mirrorEntry{kind: fs.ModeSymlink, data: target}
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil || fi.Size() > randMaxFileSize {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			want[rel] = mirrorEntry{perm: fi.Mode().Perm(), data: string(data)}
		}
		return nil
	})
	r.do(err)
	for rel, have := range r.mirrored {
		if w, ok := want[rel]; !ok || w.kind != have.kind {
			r.do(os.RemoveAll(filepath.Join(r.mirror, rel)))
			delete(r.mirrored, rel)
		}
	}
	for _, rel := range slices.Sorted(maps.Keys(want)) {
		w, dst := want[rel], filepath.Join(r.mirror, rel)
		have, ok := r.mirrored[rel]
		switch {
		case ok && have == w:
		case w.kind == fs.ModeDir:
			r.do(os.Mkdir(dst, 0o755))
		case w.kind == fs.ModeSymlink:
			r.do(os.RemoveAll(dst))
			r.do(os.Symlink(w.data, dst))
		case ok && have.data == w.data:
			r.do(os.Chmod(dst, w.perm))
		case !ok:
			r.do(os.WriteFile(dst, []byte(w.data), w.perm))
			r.do(os.Chmod(dst, w.perm))
		default:
			r.do(os.WriteFile(dst+".new", []byte(w.data), w.perm))
			r.do(os.Chmod(dst+".new", w.perm))
			r.do(os.Rename(dst+".new", dst))
		}
	}
	r.mirrored = want
	var excludes []byte
	for _, name := range []string{".git/info/exclude", ".belayignore"} {
		data, err := os.ReadFile(r.abs(name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.do(err)
		}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			data = append(data, '\n')
		}
		excludes = append(excludes, data...)
	}
	r.do(os.WriteFile(filepath.Join(r.model, "info", "exclude"), excludes, 0o644))
}

// expectedTree is what git records for the work tree into index: `git add
// -A`, then its tree.
func (r *randTest) expectedTree(index string) string {
	r.t.Helper()
	r.git(nil, index, "add", "-A")
	out, _ := r.git(nil, index, "write-tree")
	return strings.TrimSpace(out)
}

// expectedSkipped lists what a full scan must report as skipped: the named
// pipes and too-large files that are not ignored (or are in index). A full
// scan does not look for named pipes in directories named as the built-in
// excluded ones (unsearched), even where an ignore rule re-includes them:
// those are listed in unsought, which a snapshot given paths reports.
func (r *randTest) expectedSkipped(index string) (want, unsought []string) {
	r.t.Helper()
	var found []string
	unsearchedPipe := map[string]bool{}
	err := filepath.WalkDir(r.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(r.root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeNamedPipe != 0:
			found = append(found, rel)
			for _, dir := range strings.Split(path.Dir(rel), "/") {
				unsearchedPipe[rel] = unsearchedPipe[rel] || unsearched[dir]
			}
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if fi.Size() > randMaxFileSize {
				found = append(found, rel)
			}
		}
		return nil
	})
	r.do(err)
	if len(found) == 0 {
		return nil, nil
	}
	out, _ := r.git(joinNUL(found), index, "check-ignore", "-z", "--stdin")
	ignored := splitNUL([]byte(out))
	for _, p := range found {
		switch {
		case slices.Contains(ignored, p):
		case unsearchedPipe[p]:
			unsought = append(unsought, p)
		default:
			want = append(want, p)
		}
	}
	return want, unsought
}

// snapshotAll snapshots the work tree with each Manager and checks each
// snapshot; a round with a mismatch ends the test.
func (r *randTest) snapshotAll() {
	r.t.Helper()
	r.syncMirror()
	for _, rm := range r.managers {
		r.snapshot(rm)
	}
	if r.t.Failed() {
		ops := "none: the first tree"
		if r.round > 0 {
			ops = strings.Join(r.log, "\n  ")
		}
		r.t.Fatalf("seed %d round %d: the round's operations:\n  %s", r.seed, r.round, ops)
	}
	r.touched, r.made, r.log = nil, nil, nil
}

func (r *randTest) snapshot(rm *randManager) {
	r.t.Helper()
	wantSkipped, unsought := r.expectedSkipped(rm.index)
	var paths []string
	if rm.report && rm.seq > 0 {
		paths = slices.Clone(r.touched)
	}
	rm.seq++
	snap, err := rm.m.Snapshot(context.Background(), SnapshotRequest{
		Root: r.root, Ref: "refs/belay/" + rm.name + "/" + strconv.Itoa(rm.seq), Parent: rm.parent,
		Message: "round " + strconv.Itoa(r.round) + "\n", Paths: paths,
	})
	if err != nil {
		r.t.Fatalf("seed %d round %d: %s snapshot: %v", r.seed, r.round, rm.name, err)
	}
	if rm.vouched {
		rm.vouchedCount++
	}
	want := r.expectedTree(rm.index)
	if snap.Tree != want {
		r.errorf("%s snapshot (paths %q): tree %s, git records %s:\n%s", rm.name, paths, snap.Tree, want,
			strings.Join(r.treeDiff(rm, want, snap.Tree), "\n"))
	} else {
		r.checkChanges(rm, snap, want)
	}
	r.checkSkipped(rm, snap, wantSkipped, unsought, paths)
	rm.parent, rm.tree = snap.Commit, want
	rm.history = append(rm.history, randSnap{commit: snap.Commit, tree: snap.Tree})
}

// treeEntries reads `ls-tree -r -z` output as path -> "mode type id".
func treeEntries(out string) map[string]string {
	entries := map[string]string{}
	for _, entry := range splitNUL([]byte(out)) {
		meta, name, _ := strings.Cut(entry, "\t")
		entries[name] = meta
	}
	return entries
}

// treeDiff lists the paths where the snapshot's tree (in the shadow
// repository) and the expected one (in the model) differ.
func (r *randTest) treeDiff(rm *randManager, want, got string) []string {
	r.t.Helper()
	wantEntries := r.modelTree(want)
	gotEntries := treeEntries(shadowGit(r.t, rm.m, r.root, "ls-tree", "-r", "-z", got))
	paths := slices.Collect(maps.Keys(wantEntries))
	for p := range gotEntries {
		if _, ok := wantEntries[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	var diffs []string
	for _, p := range paths {
		if wantEntries[p] != gotEntries[p] {
			diffs = append(diffs, fmt.Sprintf("  %q: git %q, snapshot %q", p, wantEntries[p], gotEntries[p]))
		}
	}
	return diffs
}

// checkChanges compares the snapshot's change lists with git's diff
// between the expected trees of the previous snapshot and this one.
func (r *randTest) checkChanges(rm *randManager, snap *Snapshot, want string) {
	r.t.Helper()
	var created, modified, deleted []string
	if rm.tree == "" {
		out, _ := r.git(nil, "", "ls-tree", "-r", "-z", "--name-only", want)
		created = splitNUL([]byte(out))
	} else {
		out, _ := r.git(nil, "", "diff-tree", "-r", "-z", "--no-renames", rm.tree, want)
		fields := splitNUL([]byte(out))
		for i := 0; i+1 < len(fields); i += 2 {
			switch status := fields[i][len(fields[i])-1]; status {
			case 'A':
				created = append(created, fields[i+1])
			case 'D':
				deleted = append(deleted, fields[i+1])
			default:
				modified = append(modified, fields[i+1])
			}
		}
	}
	for _, c := range []struct {
		what      string
		want, got []string
	}{{"created", created, snap.Created}, {"modified", modified, snap.Modified}, {"deleted", deleted, snap.Deleted}} {
		slices.Sort(c.want)
		if !slices.Equal(c.want, c.got) {
			r.errorf("%s snapshot: %s %q, git diff-tree says %q", rm.name, c.what, c.got, c.want)
		}
	}
}

// checkSkipped compares the snapshot's skipped files with the named pipes
// and too-large files of the work tree (see expectedSkipped). A full scan
// reports all it looks for; a snapshot that looked at some paths only
// reports some of them, and among them those made at the paths it was
// given.
func (r *randTest) checkSkipped(rm *randManager, snap *Snapshot, want, unsought, paths []string) {
	r.t.Helper()
	var got []string
	for _, s := range snap.Skipped {
		got = append(got, s.Path)
		if s.Reason == "" {
			r.errorf("%s snapshot: %s skipped without a reason", rm.name, s.Path)
		}
	}
	slices.Sort(got)
	full := !rm.report && !rm.watched || rm.report && len(paths) == 0 || rm.watched && !rm.vouched
	if full {
		if !slices.Equal(got, want) {
			r.errorf("%s snapshot: skipped %q, want %q", rm.name, got, want)
		}
		return
	}
	allowed := slices.Concat(want, unsought)
	for _, p := range got {
		if !slices.Contains(allowed, p) {
			r.errorf("%s snapshot: skipped %q, which is not a named pipe or too-large file git would list", rm.name, p)
		}
	}
	if rm.report {
		for _, p := range r.made {
			if slices.Contains(allowed, p) && !slices.Contains(got, p) {
				r.errorf("%s snapshot: %q, made this round and among its paths, not reported as skipped (skipped %q)", rm.name, p, got)
			}
		}
	}
}

// restore moves the work tree back to a random earlier snapshot of rm,
// checks that the work tree then holds it, and snapshots it with every
// Manager: the one that restored has its private index at that snapshot,
// the others are told the restored paths (the one given paths) or see them
// (the watcher). Snapshots the work tree would make the restore fail for
// (see inTheWay) are not chosen: a failed restore may not roll back (see
// TestRestoreRollbackRemovesTheDirectoriesItMade).
func (r *randTest) restore(rm *randManager) {
	r.t.Helper()
	var target randSnap
	for _, i := range r.rng.Perm(len(rm.history) - 1) {
		if !r.inTheWay(rm.tree, rm.history[i].tree) {
			target = rm.history[i]
			break
		}
	}
	if target.commit == "" {
		r.log = append(r.log, rm.name+" finds no snapshot to restore")
		r.snapshotAll()
		return
	}
	r.log = append(r.log, fmt.Sprintf("%s restores its snapshot %s", rm.name, target.commit))
	res, err := rm.m.Restore(context.Background(), r.root, rm.parent, target.commit, false)
	if err != nil {
		r.t.Fatalf("seed %d round %d: %s restore to %s: %v", r.seed, r.round, rm.name, target.commit, err)
	}
	for _, c := range res.Changes {
		r.touch(c.Path)
		if path.Base(c.Path) == ".gitignore" {
			r.touch(path.Dir(c.Path))
		}
	}
	r.git(nil, rm.index, "read-tree", target.tree)
	r.syncMirror()
	// The work tree holds the target's files, and beside them only files
	// neither tree knows (untouched, and no longer ignored when the
	// restore brought back an older ignore file).
	from, want := r.modelTree(rm.tree), r.modelTree(target.tree)
	have := r.modelTree(r.expectedTree(rm.index))
	for _, p := range slices.Sorted(maps.Keys(have)) {
		if have[p] != want[p] && (want[p] != "" || from[p] != "") {
			r.errorf("%s restore to %s: %q is %q in the work tree, %q in the snapshot", rm.name, target.commit, p, have[p], want[p])
		}
	}
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if have[p] == "" {
			r.errorf("%s restore to %s: %q is missing from the work tree, %q in the snapshot", rm.name, target.commit, p, want[p])
		}
	}
	r.snapshotAll()
}

// inTheWay reports whether a restore from tree from to tree target may meet
// something it must not remove: a directory where target has a file, or a
// file or symlink from does not know where target has a directory.
func (r *randTest) inTheWay(from, target string) bool {
	r.t.Helper()
	known := r.modelTree(from)
	for p := range r.modelTree(target) {
		for q := p; q != "."; q = path.Dir(q) {
			fi, err := os.Lstat(r.abs(q))
			if err != nil {
				continue
			}
			if q == p && fi.IsDir() || q != p && !fi.IsDir() && known[q] == "" {
				return true
			}
		}
	}
	return false
}

// modelTree lists the entries of a tree of the model.
func (r *randTest) modelTree(tree string) map[string]string {
	r.t.Helper()
	out, _ := r.git(nil, "", "ls-tree", "-r", "-z", tree)
	return treeEntries(out)
}
