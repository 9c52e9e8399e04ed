package cli_test

import (
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
)

// TestNumbersOutOfRangeAreUsageErrors: a zero or negative timeout, limit
// or count where none means anything is refused, naming the flag, instead
// of being read as "none" or "all"; so is a checkpoint name that reads as a
// checkpoint number, which no lookup by name would find.
func TestNumbersOutOfRangeAreUsageErrors(t *testing.T) {
	c := newHITLCLI(t)
	cp := c.request(t, "", belay.HITLInput{})
	for _, args := range [][]string{
		{"ask", "Q?", "--session", cp.SessionID, "--no-snapshot", "--timeout", "-5m"},
		{"ask", "Q?", "--session", cp.SessionID, "--no-snapshot", "--timeout", "-5m", "--default", "approve"},
		{"ask", "Q?", "--session", cp.SessionID, "--no-snapshot", "--timeout", "0", "--default", "approve"},
		{"ask", "Q?", "--session", cp.SessionID, "--no-snapshot", "--timeout", "0"},
		{"wait", cp.ID, "--timeout", "-1s"},
		{"checkpoints", "--session", cp.SessionID, "--limit", "0"},
		{"checkpoints", "--session", cp.SessionID, "--limit", "-1"},
		{"checkpoints", "--session", cp.SessionID, "--limit", "100000"},
		{"sessions", "--limit", "0"},
		{"search", "plan", "--top-k", "0"},
		{"search", "plan", "--top-k", "100000"},
		{"cleanup", "--dry-run", "--keep-last", "-1"},
		{"retention", "--keep-last", "-1"},
		{"webhook", "deliveries", "--limit", "0"},
		{"save", "-m", "x", "--session", cp.SessionID, "--no-snapshot", "--name", "4"},
		{"save", "-m", "x", "--session", cp.SessionID, "--no-snapshot", "--name", "#4"},
		{"cleanup", "--dry-run", "--older-than", "213504d"},
		{"cleanup", "--dry-run", "--older-than", "1000000h"},
		{"retention", "--max-age", "36501d"},
	} {
		flag := args[len(args)-2]
		if args[0] == "ask" && args[len(args)-2] == "--default" {
			flag = "--timeout"
		}
		r := c.run(t, nil, args...)
		if r.code != cli.ExitUsage || !strings.Contains(r.stderr.String(), flag) {
			t.Errorf("belay %s: exit %d, stderr %q; want %d naming %s", strings.Join(args, " "), r.code, r.stderr, cli.ExitUsage, flag)
		}
	}
	if out := c.ok(t, nil, "pending"); strings.Count(out, "Q?") != 0 {
		t.Errorf("a refused ask was saved:\n%s", out)
	}
	if out := c.ok(t, nil, "wait", "--help"); !strings.Contains(out, "0 waits forever") {
		t.Errorf("wait --help does not say what --timeout 0 means:\n%s", out)
	}
}
