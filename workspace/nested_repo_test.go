package workspace

import (
	"slices"
	"testing"
)

// TestNestedRepositoryOuterIgnoreRules: the files of a nested repository
// are stored as git would store them if it were a plain directory (see
// Snapshot), so the ignore rules of the directories above it apply, and
// .belayignore's anchored patterns are anchored at the workspace root, from
// the first snapshot that sees the repository on. Its files must not depend
// on whether a snapshot saw the repository before: a second snapshot of the
// same work tree changes nothing.
func TestNestedRepositoryOuterIgnoreRules(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		".gitignore":               "*.log\n",
		".belayignore":             "/private/\n",
		"vendor/.gitignore":        "tmp/\n",
		"vendor/lib/lib.go":        "package lib\n",
		"vendor/lib/debug.log":     "ignored by the root .gitignore\n",
		"vendor/lib/tmp/t.txt":     "ignored by vendor/.gitignore\n",
		"vendor/lib/private/p.txt": "stored: /private/ is anchored at the root\n",
	})
	initUserRepo(t, root+"/vendor/lib")
	want := []string{
		"100644 .belayignore", "100644 .gitignore", "100644 vendor/.gitignore",
		"100644 vendor/lib/lib.go", "100644 vendor/lib/private/p.txt",
	}
	snapshotsTwice(t, m, root, want)
}

// TestSnapshotPathsInNestedRepository: a directory given among a
// snapshot's paths (or found by a watcher) has everything below it looked
// at, in a nested repository too. Git lists nothing below such a directory
// when its parent is not in the index yet, so new/deeper/f.txt must not be
// left to `git ls-files -- new/deeper` alone.
func TestSnapshotPathsInNestedRepository(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"vendor/lib/lib.go": "package lib\n"})
	initUserRepo(t, root+"/vendor/lib")
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	writeFiles(t, root, map[string]string{"vendor/lib/new/deeper/f.txt": "f\n"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit, "vendor/lib/new/deeper")
	if want := []string{"vendor/lib/new/deeper/f.txt"}; !slices.Equal(s2.Created, want) {
		t.Errorf("created %q, want %q", s2.Created, want)
	}
}

// TestNestedRepositoriesFollowTheWorkspaceRules: a repository nested in a
// nested repository, in a workspace that is itself a repository, is stored
// as git would store plain directories: the user's .git/info/exclude is
// anchored at the root, a nested .gitignore or .belayignore can re-include
// what the built-in excludes leave out, and the nested repositories' own
// info/exclude files play no part, as a plain directory has none.
func TestNestedRepositoriesFollowTheWorkspaceRules(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"README": "outer\n"})
	initUserRepo(t, root)
	writeFiles(t, root, map[string]string{
		".git/info/exclude":                  "/vendor/lib/inner/secret.txt\n/ok.txt\n",
		".belayignore":                       "!dist/\n",
		"vendor/lib/dist/d.txt":              "stored: re-included by .belayignore\n",
		"vendor/lib/dist/node_modules/m.js":  "still a built-in exclude\n",
		"vendor/lib/cache/c.pyc":             "a built-in exclude\n",
		"vendor/lib/lib.go":                  "package lib\n",
		"vendor/lib/inner/.gitignore":        "!build/\n",
		"vendor/lib/inner/ok.txt":            "stored: /ok.txt is anchored at the root\n",
		"vendor/lib/inner/secret.txt":        "ignored by the user's info/exclude\n",
		"vendor/lib/inner/build/out.txt":     "stored: re-included by inner/.gitignore\n",
		"vendor/lib/inner/node_modules/m.js": "a built-in exclude\n",
	})
	initUserRepo(t, root+"/vendor/lib/inner")
	initUserRepo(t, root+"/vendor/lib")
	writeFiles(t, root, map[string]string{"vendor/lib/.git/info/exclude": "*.go\n"})
	want := []string{
		"100644 .belayignore", "100644 README", "100644 vendor/lib/dist/d.txt",
		"100644 vendor/lib/inner/.gitignore", "100644 vendor/lib/inner/build/out.txt",
		"100644 vendor/lib/inner/ok.txt", "100644 vendor/lib/lib.go",
	}
	snapshotsTwice(t, m, root, want)
}

// snapshotsTwice snapshots root, which must store the files want lists
// (mode and path), and again, which must find nothing changed.
func snapshotsTwice(t *testing.T, m *Manager, root string, want []string) {
	t.Helper()
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	if got := treeFiles(t, m, root, s1.Commit); !slices.Equal(got, want) {
		t.Errorf("first snapshot stored %q, want %q", got, want)
	}
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	if len(s2.Created)+len(s2.Modified)+len(s2.Deleted) != 0 {
		t.Errorf("second snapshot of the same work tree: created %q modified %q deleted %q", s2.Created, s2.Modified, s2.Deleted)
	}
}
