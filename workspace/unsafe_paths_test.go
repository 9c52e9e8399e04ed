package workspace

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// craftedCommit writes to root's shadow repository a commit whose tree is
// that of base with one more file ("evil\n", executable) at the path made of
// names, each a tree entry's name written as is: git's plumbing never checks
// them, so an archive's bundle may hold any.
func craftedCommit(t *testing.T, m *Manager, root, base string, names ...string) string {
	t.Helper()
	s, err := m.workspaceFor(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	write := func(args []string, stdin []byte) string {
		out, err := m.run(context.Background(), s, runOpts{stdin: stdin}, args...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	entry := func(mode, name, id string) []byte {
		raw, err := hex.DecodeString(id)
		if err != nil {
			t.Fatal(err)
		}
		return append([]byte(mode+" "+name+"\x00"), raw...)
	}
	obj := write([]string{"hash-object", "-w", "--stdin"}, []byte("evil\n"))
	mode := "100755"
	for i := len(names) - 1; i > 0; i-- {
		obj = write([]string{"hash-object", "-w", "--literally", "-t", "tree", "--stdin"}, entry(mode, names[i], obj))
		mode = "40000"
	}
	// Every name tried sorts before the base tree's ("a.txt"), as git
	// orders a tree's entries.
	baseTree := []byte(shadowGit(t, m, root, "cat-file", "tree", base+"^{tree}"))
	tree := write([]string{"hash-object", "-w", "--literally", "-t", "tree", "--stdin"}, append(entry(mode, names[0], obj), baseTree...))
	return write([]string{"commit-tree", "-m", "crafted", tree}, nil)
}

var unsafeNames = map[string][]string{
	"a hook in .git":      {".git", "hooks", "pre-commit"},
	".git in upper case":  {".GIT", "hooks", "pre-commit"},
	".git below":          {"_", ".Git", "config"},
	"..":                  {"..", "x"},
	".":                   {".", "x"},
	"a name with slashes": {"a/../../x"},
	"an absolute name":    {"/abs"},
}

// TestRestoreRefusesUnsafePaths: a snapshot holding a path with a .git
// component (in any case), an empty, . or .. component, or an absolute
// one is refused before anything is written.
func TestRestoreRefusesUnsafePaths(t *testing.T) {
	for what, names := range unsafeNames {
		t.Run(what, func(t *testing.T) {
			m := newManager(t)
			root := t.TempDir()
			writeFiles(t, root, map[string]string{"a.txt": "a\n", "z.txt": "z1\n"})
			initUserRepo(t, root)
			s1 := snapshot(t, m, root, "refs/belay/s/1", "")
			writeFiles(t, root, map[string]string{"z.txt": "z2\n"})
			s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
			evil := craftedCommit(t, m, root, s1.Commit, names...)
			before := hashTree(t, filepath.Dir(root))

			_, err := m.Restore(context.Background(), root, s2.Commit, evil, false)
			wantCode(t, err, UnsafePath)
			diffStates(t, "after a refused restore", before, hashTree(t, filepath.Dir(root)))
			if _, err := os.Lstat(filepath.Join(root, ".git", "hooks", "pre-commit")); err == nil {
				t.Error("the restore wrote a git hook")
			}
			// Back from it is refused too: it would remove those paths.
			_, err = m.Restore(context.Background(), root, evil, s2.Commit, true)
			wantCode(t, err, UnsafePath)
		})
	}
}

// TestReadBundleRefusesUnsafePaths: a bundle whose snapshots hold such a
// path is refused before any of its refs is made.
func TestReadBundleRefusesUnsafePaths(t *testing.T) {
	for what, names := range unsafeNames {
		t.Run(what, func(t *testing.T) {
			m := newManager(t)
			root := t.TempDir()
			writeFiles(t, root, map[string]string{"a.txt": "a\n"})
			s1 := snapshot(t, m, root, "refs/belay/s/1", "")
			evil := craftedCommit(t, m, root, s1.Commit, names...)
			shadowGit(t, m, root, "update-ref", "refs/belay/s/2", evil)
			bundle := filepath.Join(t.TempDir(), "session.bundle")
			if err := m.WriteBundle(context.Background(), root, []string{"refs/belay/s/1", "refs/belay/s/2"}, bundle); err != nil {
				t.Fatal(err)
			}

			other := newManager(t)
			root2 := t.TempDir()
			_, err := other.ReadBundle(context.Background(), root2, bundle)
			wantCode(t, err, InvalidBundle)
			if refs := shadowGit(t, other, root2, "for-each-ref"); refs != "" {
				t.Errorf("refs made of a refused bundle:\n%s", refs)
			}
		})
	}
}

// TestSnapshotsHoldNoDotGitInAnyCase: git stores no .git in any case (on a
// case-insensitive file system .GIT is the repository), so neither does a
// snapshot belay builds itself, and a restore never meets one in a tree of
// its own.
func TestSnapshotsHoldNoDotGitInAnyCase(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a\n", ".GIT/x": "x\n", "d/.Git/y": "y\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "") // through git
	writeFiles(t, root, map[string]string{"b.txt": "b\n", ".GIT/z": "z\n"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit) // built by belay
	for _, s := range []*Snapshot{s1, s2} {
		for _, f := range treeFiles(t, m, root, s.Commit) {
			if name := strings.Fields(f)[1]; !safePath(name) {
				t.Errorf("snapshot %s holds %q", s.Commit, name)
			}
		}
	}
}
