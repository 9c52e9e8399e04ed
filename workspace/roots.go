package workspace

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// InsideRoots reports whether the real path of path — absolute, with every
// symlink resolved — is one of roots or lies below one, each root compared by
// its real path too. A path that does not exist yet is judged by the real path
// of its nearest existing ancestor; a dangling symlink on the way is never
// inside. Lexical checks are not enough: a symlink under a root may point
// anywhere.
func InsideRoots(path string, roots []string) bool {
	real, err := RealPath(path)
	if err != nil {
		return false
	}
	return RealInsideRoots(real, roots)
}

// InsideFixedRoots reports whether the real path of path lies inside one of
// roots taken as they are, not resolved: roots whose real paths were taken
// when they were given (a token's projects), which a link swapped in for
// one of them since must not move.
func InsideFixedRoots(path string, roots []string) bool {
	real, err := RealPath(path)
	return err == nil && realInsideFixed(real, roots)
}

// realInsideFixed reports whether real, a path RealPath returned, lies inside
// one of dirs taken as they are.
func realInsideFixed(real string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return within(real, filepath.Clean(d)) })
}

// RealInsideRoots reports whether real, a path RealPath returned, lies
// inside one of roots, each compared by its real path.
func RealInsideRoots(real string, roots []string) bool {
	for _, r := range roots {
		if rr, err := RealPath(r); err == nil && within(real, rr) {
			return true
		}
	}
	return false
}

// RealPath returns the absolute path p with every symlink resolved. Missing
// trailing components are kept as they are (they cannot be symlinks); a
// symlink that leads nowhere is an error.
func RealPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err == nil {
		return real, nil
	}
	if _, lerr := os.Lstat(abs); !errors.Is(err, fs.ErrNotExist) || !errors.Is(lerr, fs.ErrNotExist) {
		return "", err
	}
	parent := filepath.Dir(abs)
	if parent == abs {
		return "", err
	}
	realParent, err := RealPath(parent)
	if err != nil {
		return "", err
	}
	return filepath.Join(realParent, filepath.Base(abs)), nil
}

type confineKey struct{}

type confineFixedKey struct{}

// Confine returns a context under which every operation of a Manager refuses,
// with code Forbidden, a workspace whose real path is not inside one of roots
// (as InsideRoots judges). The real path is resolved when the operation uses
// the workspace, so a caller that checked the path earlier is protected from
// a symlink swapped in since. With no roots every workspace is refused.
func Confine(ctx context.Context, roots []string) context.Context {
	return context.WithValue(ctx, confineKey{}, append([]string{}, roots...))
}

// ConfineFixed is Confine to directories taken as they are, not resolved
// (see InsideFixedRoots): a token's projects, resolved when it was created.
// It holds beside Confine's roots: a workspace must be inside both.
func ConfineFixed(ctx context.Context, dirs []string) context.Context {
	return context.WithValue(ctx, confineFixedKey{}, append([]string{}, dirs...))
}

// checkConfined enforces Confine and ConfineFixed for the workspace root
// resolved to canon. The message names root as given, never where it leads.
func checkConfined(ctx context.Context, root, canon string) error {
	if confined(ctx, canon) {
		return nil
	}
	return errorf(Forbidden, nil, "workspace %s is outside the directories this caller may use", root)
}

// confined reports whether real, a path RealPath returned, lies inside what
// Confine and ConfineFixed allow under ctx.
func confined(ctx context.Context, real string) bool {
	roots, ok := ctx.Value(confineKey{}).([]string)
	inRoots := !ok || RealInsideRoots(real, roots)
	dirs, ok := ctx.Value(confineFixedKey{}).([]string)
	inDirs := !ok || realInsideFixed(real, dirs)
	return inRoots && inDirs
}

// checkUserGitDir enforces Confine and ConfineFixed for a git directory of
// the user's repository at the workspace root s (its own, or the common
// one of a linked worktree), which a .git file or symlink may place
// anywhere: belay reads and writes it as the workspace's. The message
// names the workspace, never where its .git leads.
func checkUserGitDir(ctx context.Context, s *shadow, dir string) error {
	_, inRoots := ctx.Value(confineKey{}).([]string)
	_, inDirs := ctx.Value(confineFixedKey{}).([]string)
	if !inRoots && !inDirs {
		return nil // a path that leads nowhere is git's to report
	}
	real, err := RealPath(dir)
	if err == nil && confined(ctx, real) {
		return nil
	}
	return errorf(Forbidden, err, "the git directory of workspace %s is outside the directories this caller may use", s.root)
}

// checkRoot makes sure the workspace root still resolves to itself: s.root
// was symlink-free when resolved, so a symlink found on it now means a
// directory on the path was replaced, and following it could lead anywhere.
// Every git command and every restore checks it first.
func (s *shadow) checkRoot() error {
	real, err := filepath.EvalSymlinks(s.root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errorf(InvalidWorkspace, err, "workspace root %s no longer exists", s.root)
	case err != nil || real != s.root:
		return errorf(InvalidWorkspace, err, "workspace root %s changed while in use: a directory on its path was moved or replaced", s.root)
	}
	return nil
}

// openRoot opens the workspace root for a restore, after and before checking
// that its path still leads to the same directory. Every write of the restore
// goes through the handle, which never leaves the directory (os.Root), so a
// later swap of the path cannot redirect it.
func (s *shadow) openRoot() (*os.Root, error) {
	if err := s.checkRoot(); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(s.root)
	if err != nil {
		return nil, err
	}
	opened, err := root.Stat(".")
	if err == nil {
		var now fs.FileInfo
		if now, err = os.Lstat(s.root); err == nil && !os.SameFile(opened, now) {
			err = errorf(InvalidWorkspace, nil, "workspace root %s changed while in use: a directory on its path was moved or replaced", s.root)
		}
	}
	if err == nil {
		err = s.checkRoot()
	}
	if err != nil {
		root.Close()
		return nil, err
	}
	return root, nil
}
