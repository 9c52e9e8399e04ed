package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// FileDiff is one file in a Diff.
type FileDiff struct {
	Path    string // path in `to`; for a deleted file, its path in `from`
	OldPath string // path in `from` for a renamed file, else ""
	Status  string // "added", "modified", "deleted" or "renamed"
	// Additions and Deletions count lines; both are zero for a binary file.
	Additions, Deletions int
	Binary               bool
}

// Diff is the difference between two states of a workspace.
type Diff struct {
	Files     []FileDiff // sorted by path, as git lists them
	Additions int        // sum over Files
	Deletions int        // sum over Files
	Patch     string     // unified diff (renames detected; binary files named, not encoded)
}

// Diff compares commit from with commit to. With to == "" it compares from
// with the current work tree, seen through the same excludes and rules as a
// snapshot; it then takes the workspace lock, writes no commit or ref and
// leaves the private index as it is (it works on a temporary copy).
func (m *Manager) Diff(ctx context.Context, root, from, to string) (*Diff, error) {
	s, err := m.existing(ctx, root)
	if err != nil {
		return nil, err
	}
	fromID, err := m.resolveCommit(ctx, s, from)
	if err != nil {
		return nil, fmt.Errorf("diff %s: from: %w", s.root, err)
	}
	var toTree string
	if to == "" {
		if toTree, err = m.workTreeTree(ctx, s); err != nil {
			return nil, fmt.Errorf("diff %s: %w", s.root, err)
		}
	} else if toTree, err = m.resolveCommit(ctx, s, to); err != nil {
		return nil, fmt.Errorf("diff %s: to: %w", s.root, err)
	}
	d, err := m.diffTrees(ctx, s, fromID, toTree)
	if err != nil {
		return nil, fmt.Errorf("diff %s: %w", s.root, err)
	}
	return d, nil
}

// workTreeTree writes the tree of the current work tree using a temporary
// copy of the private index (so unchanged files are not re-hashed). The
// blobs it writes are unreferenced and go at the next DeleteRefs.
func (m *Manager) workTreeTree(ctx context.Context, s *shadow) (string, error) {
	unlock, err := m.lock(ctx, s)
	if err != nil {
		return "", err
	}
	defer unlock()
	f, err := os.CreateTemp(s.dir, "diff-index-*")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	f.Close()
	defer os.Remove(tmp)
	m.flushNative(s)
	if err := copyFile(s.index, tmp); errors.Is(err, fs.ErrNotExist) {
		// No snapshot yet: let buildTree seed a fresh index.
		os.Remove(tmp)
	} else if err != nil {
		return "", err
	}
	built, err := m.buildTree(ctx, s, tmp, treeOpts{maxFileSize: m.maxFileSize})
	return built.tree, err
}

func (m *Manager) diffTrees(ctx context.Context, s *shadow, from, to string) (*Diff, error) {
	common := []string{"diff-tree", "-r", "-z", "-M", "--no-ext-diff", "--no-textconv"}
	statusOut, err := m.run(ctx, s, runOpts{}, append(common, "--name-status", from, to)...)
	if err != nil {
		return nil, err
	}
	numOut, err := m.run(ctx, s, runOpts{}, append(common, "--numstat", from, to)...)
	if err != nil {
		return nil, err
	}
	patch, err := m.run(ctx, s, runOpts{}, "diff-tree", "-r", "-p", "-M", "--no-color", "--no-ext-diff", "--no-textconv", from, to)
	if err != nil {
		return nil, err
	}
	d := &Diff{Patch: string(patch)}
	// --name-status -z: "<status>\0<path>\0", or "R<score>\0<old>\0<new>\0".
	status := splitNUL(statusOut)
	for i := 0; i < len(status); {
		fd := FileDiff{}
		code := status[i]
		if code == "" || i+1 >= len(status) {
			return nil, fmt.Errorf("unexpected diff-tree output %q", code)
		}
		switch code[0] {
		case 'A':
			fd.Status = "added"
		case 'D':
			fd.Status = "deleted"
		case 'R':
			fd.Status = "renamed"
		default: // M, T
			fd.Status = "modified"
		}
		if code[0] == 'R' {
			if i+2 >= len(status) {
				return nil, fmt.Errorf("unexpected diff-tree output for rename %q", status[i+1])
			}
			fd.OldPath, fd.Path = status[i+1], status[i+2]
			i += 3
		} else {
			fd.Path = status[i+1]
			i += 2
		}
		d.Files = append(d.Files, fd)
	}
	// --numstat -z lists the same files in the same order:
	// "<add>\t<del>\t<path>\0", or "<add>\t<del>\t\0<old>\0<new>\0";
	// binary files have "-" counts.
	num := splitNUL(numOut)
	for i, n := 0, 0; i < len(num); n++ {
		if n >= len(d.Files) {
			return nil, fmt.Errorf("diff-tree --numstat lists more files than --name-status")
		}
		line := num[i]
		parts := strings.SplitN(line, "\t", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("unexpected numstat output %q", line)
		}
		name := parts[2]
		if name == "" && i+2 < len(num) { // rename: the two paths follow
			name = num[i+2]
			i += 3
		} else {
			i++
		}
		fd := &d.Files[n]
		if name != fd.Path {
			return nil, fmt.Errorf("diff-tree --numstat and --name-status disagree at %q", fd.Path)
		}
		if parts[0] == "-" {
			fd.Binary = true
			continue
		}
		if fd.Additions, err = strconv.Atoi(parts[0]); err != nil {
			return nil, fmt.Errorf("unexpected numstat output %q", line)
		}
		if fd.Deletions, err = strconv.Atoi(parts[1]); err != nil {
			return nil, fmt.Errorf("unexpected numstat output %q", line)
		}
		d.Additions += fd.Additions
		d.Deletions += fd.Deletions
	}
	return d, nil
}
