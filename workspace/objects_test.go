package workspace

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestCommitWrittenAsGitWritesIt: the commits and refs a snapshot writes
// itself are byte for byte what git commit-tree and update-ref write, and
// git reads and checks them.
func TestCommitWrittenAsGitWritesIt(t *testing.T) {
	m := newManager(t)
	m.now = func() time.Time { return time.Unix(1700000000, 0) }
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a\n"})
	first := snapshot(t, m, root, "refs/belay/s/1", "")
	ctx := context.Background()
	s, err := m.workspaceFor(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	tree := strings.TrimSpace(shadowGit(t, m, root, "rev-parse", first.Commit+"^{tree}"))
	for _, msg := range []string{"", "one line", "subject\n\nbody\n\nBelay-Record: {\"a\":1}\n", "ünïcödé ✓\n", "trailing spaces   \n\n\n"} {
		got, err := m.commitTree(ctx, s, tree, msg)
		if err != nil {
			t.Fatal(err)
		}
		out, err := m.run(ctx, s, runOpts{stdin: []byte(msg)}, "commit-tree", tree, "-F", "-")
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.TrimSpace(string(out)); got != want {
			t.Errorf("message %q: wrote %s, git writes %s", msg, got, want)
		}
	}
	// A message git would re-encode goes to git.
	latin1 := "caf\xe9\n"
	if _, ok := commitBody(tree, latin1, 0); ok {
		t.Error("a message that is not UTF-8 was not left to git")
	}
	if _, err := m.commitTree(ctx, s, tree, latin1); err != nil {
		t.Fatal(err)
	}

	second := snapshot(t, m, root, "refs/belay/other-session/2", first.Commit)
	if got := strings.TrimSpace(shadowGit(t, m, root, "rev-parse", "refs/belay/other-session/2")); got != second.Commit {
		t.Errorf("ref names %s, want %s", got, second.Commit)
	}
	if got := shadowGit(t, m, root, "for-each-ref", "--format=%(refname)"); got != "refs/belay/other-session/2\nrefs/belay/s/1\n" {
		t.Errorf("refs:\n%s", got)
	}
	shadowGit(t, m, root, "fsck", "--strict", "--no-dangling")
	for _, ref := range []string{"refs/belay/s/1", "refs/belay/a_b-c.d/12"} {
		if !snapshotRef(ref) {
			t.Errorf("%s written by git", ref)
		}
	}
	for _, ref := range []string{"refs/belay/s", "refs/belay/s/1/2", "refs/belay/.s/1", "refs/belay/s/1.lock", "refs/belay/s/a..b", "refs/belay/s/a b", "refs/belay/s/", "refs/other/s/1", "refs/belay-export/tip"} {
		if snapshotRef(ref) {
			t.Errorf("%s written directly", ref)
		}
	}
}
