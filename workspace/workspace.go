// Package workspace snapshots an agent's workspace into a private "shadow" git
// repository and moves the work tree between snapshots, without ever writing
// to the user's own git repository (except ExportBranch, which is asked to).
//
// Each workspace root gets a shadow directory DataDir/workspaces/<key>/ with
//
//	repo.git/   a bare repository holding the snapshot objects and refs
//	index       the persistent private index (the stat cache that makes
//	            snapshots of large trees cheap; never rebuilt from scratch)
//	exclude     built-in excludes (core.excludesFile of the shadow repo)
//	lock        flock(2) target serialising work on the workspace
//	meta.json   the absolute workspace root the directory belongs to
//	restore.json  the journal of an unfinished restore, or of one whose
//	            caller has yet to record it (BeginRestoreLocked), if any
//
// Every git call runs the git binary with GIT_DIR, GIT_WORK_TREE and
// GIT_INDEX_FILE pointing at the shadow repository, the workspace and the
// private index, and with system and global git configuration disabled, so
// the user's hooks, filters, excludes and identity never apply. The few
// commands run in the user's repository (finding it, ExportBranch) override
// its hooks and fsmonitor (userRepoArgs). git syncs
// what it writes there (core.fsync), and a git command inherits the
// workspace lock, so lock files it leaves when killed are known to be stale
// and removed by the next command (see Lock, Check and RepairLocked).
//
// The workspace root is resolved to its real path once per operation and
// checked again before each git command and each restore: a directory on
// the path replaced by a symlink meanwhile stops the operation, and a
// restore writes only through a handle on the checked directory (see
// Confine for keeping callers inside given roots).
//
// The package needs a unix system (flock) and git 2.30 or newer.
package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Code classifies an *Error so callers can map it to their own error codes.
type Code string

// Error codes returned in *Error.
const (
	// InvalidWorkspace: the root does not exist, is not a directory, lies
	// inside DataDir, changed while in use (a directory on its path was
	// replaced), a path is outside the workspace, or (ExportBranch) the
	// workspace is not a git repository or the branch cannot be written.
	InvalidWorkspace Code = "InvalidWorkspace"
	// GitMissing: the git binary cannot be run.
	GitMissing Code = "GitMissing"
	// RestoreFailed: a restore could not be completed; the work tree was
	// rolled back to the state it had before the restore, unless the message
	// says otherwise.
	RestoreFailed Code = "RestoreFailed"
	// NotFound: a commit or ref does not exist in the shadow repository, or
	// the workspace has never been snapshotted.
	NotFound Code = "NotFound"
	// Corrupted: the shadow repository is missing objects (see Fsck),
	// typically ones borrowed from the user's repository that the user's git
	// pruned.
	Corrupted Code = "Corrupted"
	// Forbidden: the workspace's real path, or that of the git directory
	// its .git leads to, lies outside the roots the operation is confined
	// to (see Confine).
	Forbidden Code = "Forbidden"
	// UnsafePath: a snapshot holds a path no restore writes: one with a
	// .git component (in any case, as git refuses it), an empty, "." or
	// ".." component, or an absolute one. belay's snapshots never do; a
	// crafted one (an imported archive's) may. Error.Paths lists them.
	UnsafePath Code = "UnsafePath"
	// WouldOverwrite: a restore would write over files that the snapshot it
	// starts from does not hold (ignored ones, or ones that snapshot left
	// out), so that no snapshot holds them; nothing was changed.
	// Error.Paths lists them.
	WouldOverwrite Code = "WouldOverwrite"
)

// Error is the error type returned for failures a caller may want to tell
// apart; other failures (I/O, git itself failing) are returned wrapped as is.
type Error struct {
	Code Code
	Msg  string
	Err  error // underlying cause, if any
	// Paths are the paths the error is about, when it names some.
	Paths []string
}

// isCode reports whether err is an *Error with code.
func isCode(err error, code Code) bool {
	var we *Error
	return errors.As(err, &we) && we.Code == code
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

func errorf(code Code, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...), Err: cause}
}

// Options configures a Manager.
type Options struct {
	// DataDir is belay's data directory; shadow repositories live under
	// DataDir/workspaces/<first 16 hex digits of sha256(absolute root)>/.
	DataDir string
	// MaxFileSize is the size above which new or changed files are skipped
	// and reported in Snapshot.Skipped. Zero means 50 MiB.
	MaxFileSize int64
	// Git is the git binary to run. Empty means "git" from PATH.
	Git string
	// WatchFiles keeps a file-system watcher (inotify, Linux only) on each
	// workspace the Manager snapshots, from its first snapshot until Close,
	// so that later snapshots look only at the paths that changed instead of
	// statting every file. Whenever the watcher cannot vouch for its list
	// (see watch.go) a snapshot scans the whole tree as without it. For a
	// long-running process (belay serve); call Close when done.
	WatchFiles bool
}

// DefaultMaxFileSize is used when Options.MaxFileSize is zero.
const DefaultMaxFileSize = 50 << 20

// Manager snapshots and restores workspaces. It is safe for concurrent use;
// operations on the same workspace are serialised across goroutines and
// processes by Lock.
type Manager struct {
	dataDir     string
	maxFileSize int64
	git         string
	// geometric says git can roll small packs up (repack --geometric, 2.32).
	geometric bool

	// now supplies commit dates; tests may fix it.
	now func() time.Time
	// beforeWrite, when set, is called before each file the restore writes or
	// removes; tests use it to inject faults mid-restore.
	beforeWrite func(path string) error
	// openFile opens a file to check it is readable before it is hashed;
	// tests replace it because root can read any file.
	openFile func(name string) (*os.File, error)
	// claimed, when set, is told of each snapshot's watcher claim (nil
	// without a watcher); tests use it to see which snapshots a watcher
	// vouched for.
	claimed func(*changeClaim)

	mu    sync.Mutex
	locks map[string]*workspaceLock

	watchFiles bool
	watch      watchers
	native     nativeStates
}

// New returns a Manager. It fails with code GitMissing when the git binary
// cannot be run, and creates DataDir if needed.
func New(opts Options) (*Manager, error) {
	if opts.DataDir == "" {
		return nil, errors.New("workspace: Options.DataDir is required")
	}
	dataDir, err := canonicalPath(opts.DataDir, true)
	if err != nil {
		return nil, fmt.Errorf("workspace: data dir: %w", err)
	}
	gitBin := opts.Git
	if gitBin == "" {
		gitBin = "git"
	}
	path, err := exec.LookPath(gitBin)
	if err != nil {
		return nil, errorf(GitMissing, err, "git binary not found: install git (2.30 or newer) or set the git path (%q)", gitBin)
	}
	out, err := exec.Command(path, "version").Output()
	if err != nil {
		return nil, errorf(GitMissing, err, "git binary %q does not run: install git (2.30 or newer)", path)
	}
	if !recentGit(string(out)) {
		return nil, errorf(GitMissing, nil, "%s is too old: install git 2.30 or newer", strings.TrimSpace(string(out)))
	}
	maxSize := opts.MaxFileSize
	if maxSize <= 0 {
		maxSize = DefaultMaxFileSize
	}
	return &Manager{
		dataDir:     dataDir,
		maxFileSize: maxSize,
		git:         path,
		geometric:   gitAtLeast(string(out), 2, 32),
		now:         time.Now,
		openFile:    os.Open,
		locks:       make(map[string]*workspaceLock),
		watchFiles:  opts.WatchFiles,
		watch:       watchers{byKey: map[string]*treeWatcher{}, failed: map[string]time.Time{}},
	}, nil
}

// recentGit reports whether `git version` output names git 2.30 or newer,
// the first with every option this package uses (fetch --stdin and
// --no-write-fetch-head, rm --pathspec-from-file, rev-parse
// --show-object-format).
func recentGit(version string) bool {
	return gitAtLeast(version, 2, 30)
}

// gitAtLeast reports whether `git version` output names git major.minor or
// newer.
func gitAtLeast(version string, wantMajor, wantMinor int) bool {
	fields := strings.Fields(version) // "git version 2.39.5", maybe more after
	if len(fields) < 3 {
		return false
	}
	parts := strings.SplitN(fields[2], ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return err1 == nil && err2 == nil && (major > wantMajor || major == wantMajor && minor >= wantMinor)
}

// canonicalPath returns the absolute path with symlinks resolved, so one
// workspace reached through different paths maps to one shadow repository.
// With create, a missing directory is created first.
func canonicalPath(p string, create bool) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if create {
		if err := os.MkdirAll(abs, 0o700); err != nil {
			return "", err
		}
	}
	return filepath.EvalSymlinks(abs)
}

// shadow describes one workspace and its shadow directory.
type shadow struct {
	root  string // canonical workspace root
	dir   string // DataDir/workspaces/<key>
	key   string
	repo  string // dir/repo.git
	index string // dir/index
	// gone is set when the workspace no longer exists: only the shadow
	// repository is left to maintain, git runs without a work tree.
	gone bool
	// lockFile is the flocked lock file while the caller holds the lock;
	// git commands inherit it (see Lock).
	lockFile *os.File
}

func (s *shadow) journalPath() string { return filepath.Join(s.dir, "restore.json") }

// workspaceFor validates root and returns its shadow description; it does not
// create anything. When ctx confines operations to roots (Confine), the real
// path of root must lie inside one of them.
func (m *Manager) workspaceFor(ctx context.Context, root string) (*shadow, error) {
	if root == "" || !filepath.IsAbs(root) {
		return nil, errorf(InvalidWorkspace, nil, "workspace root %q must be an absolute path", root)
	}
	canon, err := canonicalPath(root, false)
	if err != nil {
		return nil, errorf(InvalidWorkspace, err, "workspace root %q does not exist", root)
	}
	if err := checkConfined(ctx, root, canon); err != nil {
		return nil, err
	}
	fi, err := os.Stat(canon)
	if err != nil {
		return nil, errorf(InvalidWorkspace, err, "workspace root %q", root)
	}
	if !fi.IsDir() {
		return nil, errorf(InvalidWorkspace, nil, "workspace root %q is not a directory", root)
	}
	if within(canon, m.dataDir) {
		return nil, errorf(InvalidWorkspace, nil, "workspace root %q is inside the belay data dir %q", root, m.dataDir)
	}
	key := shadowKey(canon)
	dir := filepath.Join(m.dataDir, "workspaces", key)
	return &shadow{
		root:  canon,
		dir:   dir,
		key:   key,
		repo:  filepath.Join(dir, "repo.git"),
		index: filepath.Join(dir, "index"),
	}, nil
}

// shadowKey names the shadow directory of a canonical workspace root.
func shadowKey(canon string) string {
	sum := sha256.Sum256([]byte(canon))
	return hex.EncodeToString(sum[:])[:16]
}

// within reports whether path equals dir or lies below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

type meta struct {
	Root    string    `json:"root"`
	Created time.Time `json:"created"`
}

// builtinExcludes are never snapshotted unless a .gitignore re-includes them:
// they are written to the shadow repository's core.excludesFile, which git
// ranks below .gitignore files and info/exclude (where .belayignore and the
// user's .git/info/exclude go).
var builtinExcludes = []string{
	".git",
	"node_modules/",
	".venv/",
	"__pycache__/",
	"target/",
	"dist/",
	"build/",
	".DS_Store",
	"*.pyc",
	".belay/",
	// belay's own export archives, and their temporary files while written.
	"*" + ArchiveSuffix,
	"*" + ArchiveSuffix + ".tmp*",
}

// ArchiveSuffix ends the name of belay's export archives, which snapshots
// never hold: an archive written into the workspace would otherwise be
// snapshotted by the next save and deleted by a rollback.
const ArchiveSuffix = ".belay.tar.gz"

// attributes switches off every content conversion a workspace .gitattributes
// could ask for (eol, filters, ident, encodings): snapshots must store and
// restore bytes exactly. info/attributes outranks .gitattributes files.
const attributes = "* -text -ident -filter -working-tree-encoding\n"

// shadowConfig is the configuration of every shadow repository, new or
// older (see writeSetup).
var shadowConfig = [][2]string{
	{"core.autocrlf", "false"},
	{"core.symlinks", "true"},
	{"core.fileMode", "true"},
	{"core.untrackedCache", "false"},
	// Snapshots read and write the index themselves (native.go), in the
	// one-file form.
	{"core.splitIndex", "false"},
	{"core.logAllRefUpdates", "false"},
	// Large files go in without delta search; they are rare and slow to diff.
	{"core.bigFileThreshold", "16m"},
	// We gc explicitly (DeleteRefs, Collect); auto gc would stall a snapshot.
	{"gc.auto", "0"},
	{"maintenance.auto", "false"},
	// ReadBundle has git check the objects it fetches (from a bundle only
	// newer versions of git do; the names in its trees ReadBundle checks
	// itself).
	{"fetch.fsckObjects", "true"},
	// git syncs the objects, refs and index it writes, so a snapshot belay
	// reported survives a crash; batch syncs all the objects of one command
	// at once (git 2.36 and newer; older versions ignore both settings).
	{"core.fsync", "committed,index"},
	{"core.fsyncMethod", "batch"},
}

// open creates the shadow repository if needed, or brings an existing one up
// to date. It is called with the lock held (the lock file lives in the
// shadow directory, which flock created), so lock files git left in the
// shadow directory are stale (see Lock) and are removed. meta.json is
// written last, so a crash midway makes the next call set the repository up
// again (git init and the settings are idempotent).
func (m *Manager) open(ctx context.Context, s *shadow) error {
	if _, err := os.Stat(filepath.Join(s.dir, "meta.json")); err == nil {
		if err := m.checkMeta(s); err != nil {
			return err
		}
		if err := removeLeftovers(s); err != nil {
			return err
		}
		return m.writeSetup(s, false)
	}
	if _, err := m.run(ctx, s, runOpts{gitDir: s.repo}, "init", "--bare", "-q", "--template="); err != nil {
		return fmt.Errorf("create shadow repository: %w", err)
	}
	if err := m.writeSetup(s, false); err != nil {
		return err
	}
	data, err := json.Marshal(meta{Root: s.root, Created: m.now().UTC()})
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(s.dir, "meta.json"), data, 0o600)
}

// setupFile is a file of the shadow directory whose whole content belay
// decides.
type setupFile struct {
	name string // relative to the shadow directory, slash separated
	data []byte
}

// setupFiles returns the built-in excludes and the attributes as they must
// be.
func (m *Manager) setupFiles(s *shadow) []setupFile {
	excludes := strings.Join(builtinExcludes, "\n") + "\n"
	if rel, err := filepath.Rel(s.root, m.dataDir); err == nil && within(m.dataDir, s.root) && rel != "." {
		// The data dir lives inside the workspace under another name than
		// .belay: never snapshot belay's own files.
		excludes += "/" + filepath.ToSlash(rel) + "/\n"
	}
	return []setupFile{
		{"exclude", []byte(excludes)},
		{"repo.git/info/attributes", []byte(attributes)},
	}
}

// configMarker starts belay's part of the shadow repository's configuration.
// What comes before is git init's, which depends on the file system (e.g.
// core.ignorecase) and is kept.
const configMarker = "# belay's settings, rewritten by belay:\n"

// oldConfigStart is where belay's part began before configMarker existed.
const oldConfigStart = "[core]\n\tautocrlf = "

// configFile returns the configuration the shadow repository must have,
// given the one it has: git init's part of have, then shadowConfig. With
// have empty or damaged, git init's part is rebuilt.
func configFile(s *shadow, have []byte) []byte {
	prefix := have
	if i := bytes.Index(have, []byte(configMarker)); i >= 0 {
		prefix = have[:i]
	} else if i := bytes.Index(have, []byte(oldConfigStart)); i > 0 {
		prefix = have[:i]
	}
	if !bytes.HasPrefix(prefix, []byte("[core]\n")) {
		prefix = []byte("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n")
		// As git init probes it: the lock file under another case.
		if _, err := os.Stat(filepath.Join(s.dir, "LoCk")); err == nil {
			prefix = append(prefix, "\tignorecase = true\n"...)
		}
	}
	entries := slices.Concat(shadowConfig, [][2]string{{"core.excludesFile", filepath.Join(s.dir, "exclude")}})
	var sections []string
	keys := map[string][]string{}
	for _, kv := range entries {
		sec, key, _ := strings.Cut(kv[0], ".")
		if keys[sec] == nil {
			sections = append(sections, sec)
		}
		keys[sec] = append(keys[sec], fmt.Sprintf("\t%s = %s\n", key, quoteConfig(kv[1])))
	}
	cfg := bytes.NewBuffer(append(bytes.Clone(prefix), configMarker...))
	for _, sec := range sections {
		fmt.Fprintf(cfg, "[%s]\n%s", sec, strings.Join(keys[sec], ""))
	}
	return cfg.Bytes()
}

// writeSetup writes the configuration and each setup file when they do not
// hold what they must (a new repository, an older one, or one a crash left a
// file of empty), and HEAD when it is not a valid HEAD. With freshConfig the
// configuration is rebuilt whole (it is damaged).
func (m *Manager) writeSetup(s *shadow, freshConfig bool) error {
	if err := os.MkdirAll(filepath.Join(s.repo, "info"), 0o700); err != nil {
		return err
	}
	configPath := filepath.Join(s.repo, "config")
	have, err := os.ReadFile(configPath)
	if err != nil || freshConfig {
		have = nil
	}
	files := append(m.setupFiles(s), setupFile{"repo.git/config", configFile(s, have)})
	for _, f := range files {
		path := filepath.Join(s.dir, filepath.FromSlash(f.name))
		if have, err := os.ReadFile(path); err == nil && bytes.Equal(have, f.data) {
			continue
		}
		if err := writeFileAtomic(path, f.data, 0o600); err != nil {
			return fmt.Errorf("configure shadow repository: %w", err)
		}
	}
	head := filepath.Join(s.repo, "HEAD")
	if data, err := os.ReadFile(head); err != nil || !validHEAD(data) {
		// The shadow repository never uses HEAD, but git needs a valid one.
		return writeFileAtomic(head, []byte("ref: refs/heads/master\n"), 0o600)
	}
	return nil
}

// validHEAD reports whether data is a symbolic ref or an object id.
func validHEAD(data []byte) bool {
	line, ok := bytes.CutSuffix(data, []byte("\n"))
	if !ok {
		return false
	}
	if target, ok := bytes.CutPrefix(line, []byte("ref: refs/")); ok {
		return len(target) > 0 && !bytes.ContainsAny(target, " \t\x00")
	}
	return isObjectID(string(line))
}

// isObjectID reports whether id is a full SHA-1 object name.
func isObjectID(id string) bool {
	if len(id) != 40 {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// quoteConfig quotes a git config value.
func quoteConfig(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(v) + `"`
}

// checkMeta guards against two roots hashing to the same key.
func (m *Manager) checkMeta(s *shadow) error {
	data, err := os.ReadFile(filepath.Join(s.dir, "meta.json"))
	if err != nil {
		return fmt.Errorf("read shadow metadata: %w", err)
	}
	var md meta
	if err := json.Unmarshal(data, &md); err != nil {
		return errorf(Corrupted, err, "the snapshot repository of %s is damaged: its metadata file is unreadable", s.root)
	}
	if md.Root != s.root {
		return errorf(InvalidWorkspace, nil, "shadow directory %s belongs to %q, not %q", s.dir, md.Root, s.root)
	}
	return nil
}

// existing returns the shadow of root, or NotFound when it was never
// snapshotted; used by read-only operations that must not create a repository.
func (m *Manager) existing(ctx context.Context, root string) (*shadow, error) {
	s, err := m.workspaceFor(ctx, root)
	if err != nil {
		return nil, err
	}
	return s, m.requireShadow(s)
}

// requireShadow fails with NotFound when s was never snapshotted.
func (m *Manager) requireShadow(s *shadow) error {
	if _, err := os.Stat(filepath.Join(s.dir, "meta.json")); err != nil {
		return errorf(NotFound, nil, "workspace %q has no snapshots", s.root)
	}
	return m.checkMeta(s)
}

// syncExcludes writes the shadow repository's info/exclude, whose patterns
// git applies relative to the workspace root: the user's own
// .git/info/exclude (which git would not read, the shadow repository being
// another repository) followed by <root>/.belayignore, so .belayignore can
// re-include what the former excludes. It reports whether the file changed.
func syncExcludes(ctx context.Context, s *shadow) (bool, error) {
	userExclude, err := userExcludeFile(ctx, s)
	switch {
	case isCode(err, Forbidden):
		userExclude = "" // outside what the caller may use: not read
	case err != nil:
		return false, err
	}
	var want []byte
	for _, name := range []string{userExclude, filepath.Join(s.root, ".belayignore")} {
		if name == "" {
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return false, fmt.Errorf("read %s: %w", name, err)
		}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			data = append(data, '\n')
		}
		want = append(want, data...)
	}
	path := filepath.Join(s.repo, "info", "exclude")
	have, err := os.ReadFile(path)
	if err == nil && bytes.Equal(have, want) {
		return false, nil
	}
	return true, writeFileAtomic(path, want, 0o600)
}

// userExcludeFile returns the info/exclude file of the git repository whose
// work tree root is, found without running git: <root>/.git/info/exclude,
// or for a linked worktree (.git is a file naming its git dir) the main
// repository's. "" when root holds no .git. Under Confine, a git directory
// or an exclude file outside the roots (links lead anywhere) fails with
// code Forbidden (checkUserGitDir).
func userExcludeFile(ctx context.Context, s *shadow) (string, error) {
	gitDir := userGitDir(s.root)
	if gitDir == "" {
		return "", nil
	}
	if err := checkUserGitDir(ctx, s, gitDir); err != nil {
		return "", err
	}
	if common, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		c := strings.TrimSpace(string(common))
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitDir, c)
		}
		gitDir = c
	}
	exclude := filepath.Join(gitDir, "info", "exclude")
	if err := checkUserGitDir(ctx, s, exclude); err != nil {
		return "", err
	}
	return exclude, nil
}

// userGitDir returns the git directory that <root>/.git is or leads to (a
// symlink, or a file naming it as git does), found without running git; ""
// when there is none.
func userGitDir(root string) string {
	dotGit := filepath.Join(root, ".git")
	fi, err := os.Stat(dotGit)
	if err != nil {
		return ""
	}
	if fi.IsDir() {
		return dotGit
	}
	data, err := os.ReadFile(dotGit)
	if err != nil {
		return ""
	}
	gitDir, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir: ")
	if !ok {
		return ""
	}
	if !filepath.IsAbs(gitDir) {
		gitDir = filepath.Join(root, gitDir)
	}
	return gitDir
}

// writeFileAtomic replaces path with data via a temporary file and rename, so
// a crash never leaves a truncated file; the file and its directory are
// synced, so once it returns the new content survives a crash.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(f.Name(), perm)
	}
	if werr == nil {
		werr = os.Rename(f.Name(), path)
	}
	if werr == nil {
		werr = syncDir(filepath.Dir(path))
	}
	if werr != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}

// removeDurably removes path and syncs its directory, so the removal
// survives a crash.
func removeDurably(path string) error {
	if err := os.Remove(path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir makes the entries of dir (renames, removals) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// userRepoArgs come first in every git command that may read the user's
// repository's configuration (runOpts.gitDir, runOpts.discover): settings on
// the command line outrank the repository's, so none of the commands it
// configures runs as belay's user. Those commands only read refs and write
// one (ExportBranch): hooks (reference-transaction runs on any ref update)
// and fsmonitor are the configured commands they could start; they run no
// transport, filter, pager or editor, and gc.auto is for commands that
// write objects, which never run there.
var userRepoArgs = []string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"}

// runOpts tailors one git invocation.
type runOpts struct {
	stdin []byte
	// index overrides the private index (e.g. a temporary one).
	index string
	// workTree overrides the workspace root (nested repository listing).
	workTree string
	// gitDir runs against that repository alone (the user's, or the shadow
	// repository while it is created): no work tree or index is set.
	gitDir string
	// discover runs git in the workspace root with no GIT_DIR, so git finds
	// the user's repository there (and not above the root).
	discover bool
	// okCodes are exit codes that are not errors (e.g. check-ignore's 1).
	okCodes []int
	// env adds variables (e.g. commit dates); later ones win.
	env []string
	// mergeStderr sends stderr to the returned output (for fsck, which
	// reports on both).
	mergeStderr bool
	// writeoutOnly has git write out what it must sync without flushing the
	// disk cache (core.fsyncMethod=writeout-only): for the commands of a
	// snapshot, whose commit or ref is synced in full afterwards, before
	// the snapshot is reported. That one flush makes the objects and the
	// index they wrote durable too, as git's batch mode does with its
	// single flush at the end of one command.
	writeoutOnly bool
}

// gitError is a failed git invocation with its stderr.
type gitError struct {
	args   []string
	stderr string
	err    error
}

func (e *gitError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	if msg == "" {
		msg = e.err.Error()
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.args, " "), msg)
}

// Unwrap returns the exit error and, when git's message names one, the
// storage fault it met (its strerror text, which Go's errno texts match
// but for case), so callers see git's faults as belay's own writes'.
func (e *gitError) Unwrap() []error {
	errs := []error{e.err}
	stderr := strings.ToLower(e.stderr)
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EIO} {
		if strings.Contains(stderr, errno.Error()) {
			errs = append(errs, errno)
		}
	}
	return errs
}

// run executes git and returns its stdout. The environment is built from
// scratch for git: any GIT_* variable of the caller (e.g. when belay runs in
// a git hook) is dropped.
func (m *Manager) run(ctx context.Context, s *shadow, o runOpts, args ...string) ([]byte, error) {
	out, _, err := m.runCode(ctx, s, o, args...)
	return out, err
}

// runCode is run that also returns the exit code (for okCodes).
func (m *Manager) runCode(ctx context.Context, s *shadow, o runOpts, args ...string) ([]byte, int, error) {
	if !s.gone {
		if err := s.checkRoot(); err != nil {
			return nil, -1, err
		}
	}
	cmd := m.command(ctx, s, o, args...)
	if o.stdin != nil {
		cmd.Stdin = bytes.NewReader(o.stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if o.mergeStderr {
		cmd.Stderr = &stdout
	}
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), 0, nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, -1, fmt.Errorf("git %s: %w", args[0], ctxErr)
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code := exitErr.ExitCode()
		for _, ok := range o.okCodes {
			if code == ok {
				return stdout.Bytes(), code, nil
			}
		}
		msg := stderr.String()
		if o.mergeStderr {
			msg = stdout.String()
		}
		return nil, code, &gitError{args: args, stderr: msg, err: err}
	}
	return nil, -1, errorf(GitMissing, err, "run git")
}

// command prepares a git invocation. When ctx is done git gets SIGTERM,
// which it handles by removing its lock files (index.lock, ref locks), so a
// cancelled operation does not block the next one; SIGKILL follows if it
// does not exit.
func (m *Manager) command(ctx context.Context, s *shadow, o runOpts, args ...string) *exec.Cmd {
	if s.lockFile != nil && o.gitDir == "" && (o.index == "" || o.index == s.index) {
		// git reads the private index as it is on disk; without the lock
		// nothing reads it that needs it current.
		m.flushNative(s)
	}
	if o.writeoutOnly {
		args = append([]string{"-c", "core.fsyncMethod=writeout-only"}, args...)
	}
	if o.gitDir != "" || o.discover {
		args = append(slices.Clone(userRepoArgs), args...)
	}
	cmd := exec.CommandContext(ctx, m.git, args...)
	cmd.Env = m.env(s, o)
	cmd.Dir = s.root
	if s.gone {
		cmd.Dir = s.dir
	}
	if o.workTree != "" {
		cmd.Dir = o.workTree
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if s.lockFile != nil {
		cmd.ExtraFiles = []*os.File{s.lockFile}
	}
	return cmd
}

func (m *Manager) env(s *shadow, o runOpts) []string {
	env := make([]string, 0, 32)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	date := strconv.FormatInt(m.now().Unix(), 10) + " +0000"
	env = append(env,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_AUTHOR_NAME=belay",
		"GIT_AUTHOR_EMAIL=belay@localhost",
		"GIT_AUTHOR_DATE="+date,
		"GIT_COMMITTER_NAME=belay",
		"GIT_COMMITTER_EMAIL=belay@localhost",
		"GIT_COMMITTER_DATE="+date,
	)
	switch {
	case o.discover:
		env = append(env, "GIT_CEILING_DIRECTORIES="+filepath.Dir(s.root), "GIT_OPTIONAL_LOCKS=0")
	case o.gitDir != "":
		// Never let git refresh the user's index or take optional locks
		// behind our back.
		env = append(env, "GIT_DIR="+o.gitDir, "GIT_OPTIONAL_LOCKS=0")
	default:
		index, workTree := s.index, s.root
		if o.index != "" {
			index = o.index
		}
		if o.workTree != "" {
			workTree = o.workTree
		}
		env = append(env, "GIT_DIR="+s.repo, "GIT_INDEX_FILE="+index)
		if !s.gone {
			env = append(env, "GIT_WORK_TREE="+workTree)
		}
	}
	return append(env, o.env...)
}

// splitNUL splits -z output into its fields, dropping the final terminator.
func splitNUL(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	b = bytes.TrimSuffix(b, []byte{0})
	parts := bytes.Split(b, []byte{0})
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = string(p)
	}
	return out
}

// joinNUL builds --stdin -z input.
func joinNUL(paths []string) []byte {
	var buf bytes.Buffer
	for _, p := range paths {
		buf.WriteString(p)
		buf.WriteByte(0)
	}
	return buf.Bytes()
}

// resolveCommit returns the full id of a commit in the shadow repository, or
// NotFound.
func (m *Manager) resolveCommit(ctx context.Context, s *shadow, rev string) (string, error) {
	if rev == "" || strings.HasPrefix(rev, "-") {
		return "", errorf(NotFound, nil, "commit %q not found", rev)
	}
	out, err := m.run(ctx, s, runOpts{okCodes: []int{1, 128}}, "rev-parse", "-q", "--verify", "--end-of-options", rev+"^{commit}")
	id := strings.TrimSpace(string(out))
	if err != nil {
		return "", err
	}
	if id == "" {
		return "", errorf(NotFound, nil, "commit %q not found in the shadow repository of %s", rev, s.root)
	}
	return id, nil
}

// copyFile copies src to dst via a temporary file, keeping src's mtime (git's
// racy-entry detection compares entries against the index file's mtime).
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp*")
	if err != nil {
		return err
	}
	_, err = io.Copy(tmp, in)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chtimes(tmp.Name(), fi.ModTime(), fi.ModTime())
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return nil
}
