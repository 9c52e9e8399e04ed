package workspace

import (
	"context"
	"strings"
	"testing"
)

// TestRestoreTemporaryNamesAreNoUsersFiles: the temporary file a restore
// writes through is named afresh, never after the file: a file of the old
// fixed name (.<name>.belay-restore) is the user's and stays, and a file
// whose name leaves no room for a longer one is restored all the same.
func TestRestoreTemporaryNamesAreNoUsersFiles(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	long := strings.Repeat("n", 250)
	writeFiles(t, root, map[string]string{"a.txt": "a1\n", ".a.txt.belay-restore": "mine\n", long: "l1\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	want := treeState(t, root)
	writeFiles(t, root, map[string]string{"a.txt": "a2\n", long: "l2\n"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)

	res, err := m.Restore(context.Background(), root, s2.Commit, s1.Commit, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 2 {
		t.Errorf("changes %v, want a.txt and the long name", res.Changes)
	}
	diffStates(t, "after restore", want, treeState(t, root))
}
