package cli_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
)

// TestInterruptSaysSo: Ctrl-C (the command's context ending) on a command
// that waits ends it with exit code 130 and says so on stderr in one line;
// with --json it says nothing, its stderr being JSON. `belay run` says how to
// resume instead.
func TestInterruptSaysSo(t *testing.T) {
	c := newHITLCLI(t)
	cp := c.request(t, "", belay.HITLInput{})
	for _, tc := range []struct {
		name   string
		args   []string
		stderr *regexp.Regexp
	}{
		{"wait", []string{"wait", cp.ID}, regexp.MustCompile(`^belay: interrupted\n$`)},
		{"wait with timeout", []string{"wait", cp.ID, "--timeout", "1m"}, regexp.MustCompile(`^belay: interrupted\n$`)},
		{"wait --json", []string{"wait", cp.ID, "--json"}, regexp.MustCompile(`^$`)},
		{"watch", []string{"watch"}, regexp.MustCompile(`^belay: interrupted\n$`)},
		{"run", []string{"run", "--", "sleep", "30"},
			regexp.MustCompile(`^belay: running "sleep 30" under session \S+\nbelay: stopped; resume with: belay resume \S+\n$`)},
		{"run, before a restart", []string{"run", "--restart", "1", "--", "false"},
			regexp.MustCompile(`^belay: running "false" under session \S+\nbelay: the command exited with 1; restarting in 1s \(1 of 1\)\n` +
				`belay: stopped; resume with: belay resume \S+\n$`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			keys, typing := io.Pipe()
			defer typing.Close()
			_, done := c.start(ctx, keys, tc.args...)
			time.Sleep(200 * time.Millisecond)
			cancel()
			select {
			case res := <-done:
				if res.code != cli.ExitInterrupted || !tc.stderr.MatchString(res.stderr.String()) {
					t.Errorf("belay %s interrupted: exit %d, stderr %q; want 130 and %s", strings.Join(tc.args, " "), res.code, res.stderr, tc.stderr)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("belay %s still runs 10s after the interrupt", strings.Join(tc.args, " "))
			}
		})
	}
}

// TestWaitTimeoutLeavesNoTailerBehind: `belay wait --timeout` on the local
// database stops the event tailer before the database closes, so nothing
// reads the closed database afterwards (it used to log "database is closed").
func TestWaitTimeoutLeavesNoTailerBehind(t *testing.T) {
	logged := &hitlOutput{}
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(logged, nil)))
	defer slog.SetDefault(old)

	c := newHITLCLI(t)
	cp := c.request(t, "", belay.HITLInput{})
	r := c.run(t, nil, "wait", cp.ID, "--timeout", "300ms")
	if r.code != cli.ExitNoDecision || r.stderr.String() != "belay: no decision yet\n" {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	// The tailer polls every 250 ms: one left running would have read by now.
	time.Sleep(600 * time.Millisecond)
	slog.SetDefault(old)
	if s := logged.String(); s != "" {
		t.Errorf("logged after the command ended:\n%s", s)
	}
}

// TestInterruptBinary: SIGINT to the real `belay wait` exits 130 and says
// it was interrupted.
func TestInterruptBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := belayBinary(t)
	c := newHITLCLI(t)
	cp := c.request(t, "", belay.HITLInput{})
	cmd := exec.Command(bin, "wait", cp.ID)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "BELAY_DATA_DIR=" + c.dir}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // past start-up, into the wait
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != cli.ExitInterrupted || stderr.String() != "belay: interrupted\n" || stdout.String() != "" {
		t.Errorf("belay wait after SIGINT: %v, stdout %q, stderr %q; want exit 130 and \"belay: interrupted\" on stderr", err, stdout.String(), stderr.String())
	}
}
