package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayhq/belay/cli"
)

// TestCheckpointsTree: after a rollback new checkpoints branch from the
// target, and --tree draws that, with the head marked.
func TestCheckpointsTree(t *testing.T) {
	h := newHarness(t)
	h.ok(t, "", "save", "-m", "one")
	h.ok(t, "", "save", "-m", "two")
	// Unsaved work, so the rollback saves a pre-rollback checkpoint.
	if err := os.WriteFile(filepath.Join(h.project, "unsaved.txt"), []byte("work"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.ok(t, "", "rollback", "1")
	h.ok(t, "", "save", "-m", "branch", "--no-snapshot")
	out := h.ok(t, "", "checkpoints", "--tree")
	// The pre-rollback snapshot descends from where the session was (#2);
	// the work after the rollback from the target (#1).
	want := []string{
		"└─ #1 manual -  one",
		"   ├─ #2 manual -  two",
		"   │  └─ #3 auto pre-rollback  State before rolling back to #1",
		"   └─ #4 manual -  branch  ← head",
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(want)+1 || !strings.HasPrefix(lines[0], "Session ") {
		t.Fatalf("tree:\n%s\nwant a session line and %d checkpoint lines", out, len(want))
	}
	for i, w := range want {
		if lines[i+1] != w {
			t.Errorf("line %d = %q, want %q", i+2, lines[i+1], w)
		}
	}
	roots := okJSON[[]map[string]any](t, h, "checkpoints", "--tree")
	kids := func(n map[string]any) []map[string]any {
		var out []map[string]any
		for _, c := range n["children"].([]any) {
			out = append(out, c.(map[string]any))
		}
		return out
	}
	if len(roots) != 1 || len(kids(roots[0])) != 2 {
		t.Fatalf("--tree --json = %v; want #1 with two children", roots)
	}
	branch := kids(roots[0])[1]
	if branch["seq"] != float64(4) || branch["head"] != true || len(kids(kids(roots[0])[0])) != 1 {
		t.Errorf("--tree --json = %v; want #2 (with #3 under it) and the head #4 under #1", roots)
	}
	if r := h.run(t, "", "--data-dir", t.TempDir(), "checkpoints", "--tree"); r.code != cli.ExitUsage {
		t.Errorf("--tree without a session: exit %d, want %d", r.code, cli.ExitUsage)
	}
}
