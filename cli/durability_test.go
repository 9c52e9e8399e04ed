package cli_test

import (
	"strings"
	"testing"

	"github.com/belayhq/belay/cli"
)

// TestDurabilityFlag: --durability is a global flag taking full or relaxed;
// anything else is wrong usage.
func TestDurabilityFlag(t *testing.T) {
	h := newHarness(t)
	h.ok(t, "", "--durability", "relaxed", "save", "-m", "relaxed", "--no-snapshot")
	h.ok(t, "", "save", "--durability", "full", "-m", "full", "--no-snapshot")
	if out := h.ok(t, "", "checkpoints"); !strings.Contains(out, "relaxed") || !strings.Contains(out, "full") {
		t.Errorf("checkpoints after saving in both modes:\n%s", out)
	}
	r := h.run(t, "", "--durability", "normal", "checkpoints")
	if r.code != cli.ExitUsage || !strings.Contains(r.stderr, "durability must be full or relaxed") {
		t.Errorf("--durability normal: exit %d, stderr %q; want usage error naming the modes", r.code, r.stderr)
	}
}
