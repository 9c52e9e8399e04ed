package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ExportBranch writes branch refs/heads/<branch> in the user's repository
// (the workspace's own .git) pointing at a linear chain of new commits, one
// per checkpoint commit in commits, in order: each has that checkpoint's
// tree, message, author and dates, and the previous one as parent; the first
// has the user's current HEAD commit as parent (none when HEAD is unborn),
// so the branch reads as ordinary history on top of the user's work. The
// chain is deterministic, so exporting again with more commits
// fast-forwards the branch; a branch that has diverged is not overwritten.
//
// The objects are written into the user's repository as one pack, and the
// branch moves only from the value it was read at; HEAD, the index, the
// work tree and every other ref are left alone. Nothing the user's
// repository configures runs (hooks, fsmonitor, transports: see
// userRepoArgs). It refuses a branch checked out in any worktree and a name
// that is not a valid branch name or reads as another ref (HEAD, @,
// refs/...), and fails with code InvalidWorkspace then and when the
// workspace is not the top of a git repository. Under Confine, a git
// directory outside the roots, or one whose refs, reflogs or objects lead
// out of them, fails with code Forbidden.
// It takes the workspace lock.
func (m *Manager) ExportBranch(ctx context.Context, root, branch string, commits []string) error {
	s, err := m.existing(ctx, root)
	if err != nil {
		return err
	}
	if len(commits) == 0 {
		return fmt.Errorf("export %s: no commits given", s.root)
	}
	unlock, err := m.lock(ctx, s)
	if err != nil {
		return err
	}
	defer unlock()
	if err := m.open(ctx, s); err != nil {
		return fmt.Errorf("export %s: %w", s.root, err)
	}
	user, err := m.findUserRepo(ctx, s)
	if err != nil {
		return fmt.Errorf("export %s: %w", s.root, err)
	}
	if user == nil {
		return errorf(InvalidWorkspace, nil, "export %s: the workspace is not the top of a git repository", s.root)
	}
	if !user.sha1 {
		return errorf(InvalidWorkspace, nil, "export %s: the repository does not use SHA-1 object names", s.root)
	}
	inUser := runOpts{gitDir: user.gitDir, okCodes: []int{1, 128}}
	ref := "refs/heads/" + branch
	// check-ref-format --branch would also expand @{-1} and the like in the
	// user's repository; names that read as another ref are refused here.
	_, code, err := m.runCode(ctx, s, inUser, "check-ref-format", ref)
	if err != nil || code != 0 || strings.HasPrefix(branch, "-") || branch == "HEAD" || branch == "@" || strings.HasPrefix(branch, "refs/") {
		return errorf(InvalidWorkspace, err, "export %s: invalid branch name %q", s.root, branch)
	}
	out, err := m.run(ctx, s, runOpts{gitDir: user.gitDir}, "worktree", "list", "--porcelain")
	if err != nil {
		return fmt.Errorf("export %s: list worktrees: %w", s.root, err)
	}
	for line := range strings.Lines(string(out)) {
		if strings.TrimSuffix(line, "\n") == "branch "+ref {
			return errorf(InvalidWorkspace, nil, "export %s: branch %q is checked out; choose another name", s.root, branch)
		}
	}
	out, _, err = m.runCode(ctx, s, inUser, "rev-parse", "-q", "--verify", "HEAD^{commit}")
	if err != nil {
		return fmt.Errorf("export %s: read HEAD: %w", s.root, err)
	}
	parent := strings.TrimSpace(string(out))
	base := parent
	// What update-ref writes (the objects were checked by findUserRepo)
	// lies where the workspace does, whatever links lead there.
	for _, p := range []string{ref, "logs/" + ref, "packed-refs"} {
		if err := checkUserGitDir(ctx, s, filepath.Join(user.commonDir, filepath.FromSlash(p))); err != nil {
			return err
		}
	}

	// The chain's first parent lives in the user's repository: borrow its
	// objects for as long as the export runs unless already borrowing.
	userObjects := filepath.Join(user.commonDir, "objects")
	alternates := filepath.Join(s.repo, "objects", "info", "alternates")
	saved, err := os.ReadFile(alternates)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("export %s: %w", s.root, err)
	}
	if err := m.addAlternate(s, userObjects); err != nil {
		return fmt.Errorf("export %s: %w", s.root, err)
	}
	defer func() {
		if saved == nil {
			os.Remove(alternates)
		} else {
			writeFileAtomic(alternates, saved, 0o600)
		}
	}()

	for _, c := range commits {
		id, err := m.resolveCommit(ctx, s, c)
		if err != nil {
			return fmt.Errorf("export %s: %w", s.root, err)
		}
		if parent, err = m.recommit(ctx, s, id, parent); err != nil {
			return fmt.Errorf("export %s: %w", s.root, err)
		}
	}
	// A branch there already moves only forward, to an export that holds it.
	out, _, err = m.runCode(ctx, s, inUser, "rev-parse", "-q", "--verify", ref+"^{commit}")
	if err != nil {
		return fmt.Errorf("export %s: read branch %q: %w", s.root, branch, err)
	}
	old := strings.TrimSpace(string(out))
	if old != "" {
		_, code, err := m.runCode(ctx, s, runOpts{okCodes: []int{1}}, "merge-base", "--is-ancestor", old, parent)
		if err != nil {
			return fmt.Errorf("export %s: compare with branch %q: %w", s.root, branch, err)
		}
		if code != 0 {
			return errorf(InvalidWorkspace, nil, "export %s: branch %q exists and has commits this export does not hold; choose another name, or delete the branch first", s.root, branch)
		}
	}
	// The chain's objects go straight into the user's object directory:
	// pack-objects runs with the shadow repository's configuration, its
	// temporary file beside the pack (the same file system), and reads the
	// shadow's objects as an alternate. No transport runs, so nothing the
	// user's configuration names for one (upload-pack, URL rewrites, ssh,
	// alternate refs commands) can.
	revs := parent + "\n"
	if base != "" {
		revs += "^" + base + "\n"
	}
	// The pack gets the permissions the user's repository asks of its
	// files (core.sharedRepository: a group's repository is readable by the
	// group), as a fetch there would give it.
	packArgs := []string{"pack-objects", "-q", "--revs", filepath.Join(userObjects, "pack", "pack")}
	shared, _, err := m.runCode(ctx, s, runOpts{gitDir: user.gitDir, okCodes: []int{1}}, "config", "--get", "core.sharedRepository")
	if err != nil {
		return fmt.Errorf("export %s: read core.sharedRepository: %w", s.root, err)
	}
	if v := strings.TrimSpace(string(shared)); v != "" {
		packArgs = append([]string{"-c", "core.sharedRepository=" + v}, packArgs...)
	}
	if _, err := m.run(ctx, s, runOpts{stdin: []byte(revs), env: []string{
		"GIT_OBJECT_DIRECTORY=" + userObjects, "GIT_ALTERNATE_OBJECT_DIRECTORIES=" + filepath.Join(s.repo, "objects"),
	}}, packArgs...); err != nil {
		return fmt.Errorf("export %s: write objects: %w", s.root, err)
	}
	// The ref moves from the value read above or not at all (a branch
	// made or moved meanwhile is left alone).
	if _, err := m.run(ctx, s, runOpts{gitDir: user.gitDir},
		"update-ref", "-m", "belay: export", "--", ref, parent, old); err != nil {
		return errorf(InvalidWorkspace, nil, "export %s: git could not write branch %q (was it changed meanwhile?)", s.root, branch)
	}
	return nil
}

// recommit creates a commit with the tree, message, author and dates of
// commit and the given parent ("" for none), and returns its id.
func (m *Manager) recommit(ctx context.Context, s *shadow, commit, parent string) (string, error) {
	raw, err := m.run(ctx, s, runOpts{}, "cat-file", "commit", commit)
	if err != nil {
		return "", fmt.Errorf("read commit %s: %w", commit, err)
	}
	header, msg, _ := bytes.Cut(raw, []byte("\n\n"))
	var tree string
	var env []string
	for line := range strings.Lines(string(header)) {
		key, value, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		switch key {
		case "tree":
			tree = value
		case "author", "committer":
			// "<name> <<email>> <unix time> <zone>"
			lt := strings.LastIndex(value, " <")
			gt := strings.LastIndex(value, "> ")
			if lt < 0 || gt < lt {
				return "", fmt.Errorf("read commit %s: malformed %s line", commit, key)
			}
			who := strings.ToUpper(key)
			env = append(env,
				"GIT_"+who+"_NAME="+value[:lt],
				"GIT_"+who+"_EMAIL="+value[lt+2:gt],
				"GIT_"+who+"_DATE="+value[gt+2:])
		}
	}
	args := []string{"commit-tree", tree}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	out, err := m.run(ctx, s, runOpts{stdin: msg, env: env}, args...)
	if err != nil {
		return "", fmt.Errorf("copy commit %s: %w", commit, err)
	}
	return strings.TrimSpace(string(out)), nil
}
