package cli_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
	"github.com/belayhq/belay/cmd/belay/wire"
)

// runWith runs belay in h's directories with stdin and stdout as given.
func (h *harness) runWith(t *testing.T, stdin io.Reader, stdout io.Writer, args ...string) (int, string) {
	t.Helper()
	var errOut bytes.Buffer
	code := cli.Run(context.Background(), args, cli.Env{Backend: wire.Backend(),
		Stdin: stdin, Stdout: stdout, Stderr: &errOut,
		Getenv: func(k string) string { return h.env[k] },
		Getwd:  func() (string, error) { return h.project, nil },
	})
	return code, errOut.String()
}

// TestNoPromptWithoutATerminal: a command that would ask a question refuses
// with a usage error naming the flag that answers it when standard input is
// a pipe or /dev/null (a character device, yet no terminal): a script's
// blank lines must never pick the default option or confirm a deletion.
func TestNoPromptWithoutATerminal(t *testing.T) {
	devNull := func(t *testing.T) *os.File {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	stdins := map[string]func(t *testing.T) io.Reader{
		"pipe":      func(*testing.T) io.Reader { return strings.NewReader("\n\n\n") },
		"/dev/null": func(t *testing.T) io.Reader { return devNull(t) },
	}
	for name, stdin := range stdins {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.ok(t, "", "save", "-m", "start", "--no-snapshot")
			asked := okJSON[belay.Checkpoint](t, h, "ask", "Ship it?", "--no-snapshot")
			h.ok(t, "t1: Design\nt2: Build\n", "plan", "set", "-")
			h.env["EDITOR"] = "sed -i /^t1:/d"
			for _, tc := range []struct {
				args []string
				flag string
			}{
				{[]string{"decide", asked.ID}, "--option"},
				{[]string{"decide"}, "--option"},
				{[]string{"sessions", "delete", asked.SessionID}, "--yes"},
				{[]string{"plan", "edit"}, "--yes"},
			} {
				var out bytes.Buffer
				code, errOut := h.runWith(t, stdin(t), &out, tc.args...)
				if code != cli.ExitUsage || !strings.Contains(errOut, tc.flag) || !strings.Contains(errOut, "terminal") {
					t.Errorf("belay %s: exit %d, stderr %q; want %d naming %s", strings.Join(tc.args, " "), code, errOut, cli.ExitUsage, tc.flag)
				}
				if strings.Contains(out.String(), "\x1b[") || strings.Contains(out.String(), "Select option") {
					t.Errorf("belay %s showed a prompt: %q", strings.Join(tc.args, " "), out.String())
				}
			}
			cp := okJSON[belay.Checkpoint](t, h, "show", asked.ID)
			if cp.Decision != nil {
				t.Errorf("decided without a terminal: %+v", cp.Decision)
			}
			if plan := okJSON[belay.Session](t, h, "session-info").Plan; plan == nil || len(plan.Tasks) != 2 || plan.Tasks[0].Status != belay.TaskPending {
				t.Errorf("plan edited without a terminal: %+v", plan)
			}
		})
	}
}
