package cli_test

import (
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testtree"
)

// TestShellCompletion: the shell completes checkpoint numbers, names and
// ids, session ids, and the values of enumerated flags.
func TestShellCompletion(t *testing.T) {
	project := t.TempDir()
	testtree.Write(t, project, map[string]string{"a.txt": "a"})
	c := newWSCLI(t, project)
	first := wsJSON[belay.Checkpoint](t, c, "save", "-m", "architecture approved", "--name", "architecture")
	second := wsJSON[belay.Checkpoint](t, c, "save", "-m", "tests pass")

	if script := c.ok(t, "completion", "bash"); !strings.Contains(script, "__start_belay") {
		t.Errorf("completion bash printed no bash script:\n%.200s", script)
	}
	complete := func(args ...string) []string {
		t.Helper()
		out := c.ok(t, append([]string{"__complete"}, args...)...)
		var got []string
		for line := range strings.Lines(out) {
			if !strings.HasPrefix(line, ":") {
				got = append(got, strings.TrimSuffix(line, "\n"))
			}
		}
		return got
	}
	got := strings.Join(complete("rollback", ""), "\n")
	for _, want := range []string{"1\tarchitecture approved", "architecture\t#1 architecture approved", first.ID + "\t#1", "2\ttests pass", second.ID} {
		if !strings.Contains(got, want) {
			t.Errorf("rollback completions lack %q:\n%s", want, got)
		}
	}
	if got := complete("diff", "1", ""); len(got) < 3 {
		t.Errorf("diff's second argument completions: %q", got)
	}
	if got := strings.Join(complete("sessions", "delete", ""), "\n"); !strings.Contains(got, first.SessionID) {
		t.Errorf("sessions delete completions: %s", got)
	}
	if got := strings.Join(complete("save", "--type", ""), " "); got != "auto phase hitl error manual" {
		t.Errorf("save --type completions: %q", got)
	}
	if got := strings.Join(complete("serve", "--log-format", ""), " "); got != "text json" {
		t.Errorf("serve --log-format completions: %q", got)
	}
}
