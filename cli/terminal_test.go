//go:build linux

package cli_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
	"github.com/belayhq/belay/cmd/belay/wire"
	"github.com/belayhq/belay/internal/testtree"
)

// openPTY returns a pseudo-terminal: what the program writes to tty, the
// test reads from the returned buffer.
func openPTY(t *testing.T) (tty *os.File, out *lockedBuffer) {
	t.Helper()
	tty, out, _ = openPTYWithInput(t)
	return tty, out
}

// openPTYWithInput is openPTY with a function that types keys on the terminal.
func openPTYWithInput(t *testing.T) (tty *os.File, out *lockedBuffer, keys func(string)) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	var n uint32
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatal(e)
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatal(e)
	}
	size := [4]uint16{24, 80, 0, 0} // rows, columns: a terminal people use
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCSWINSZ, uintptr(unsafe.Pointer(&size))); e != 0 {
		t.Fatal(e)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	out = &lockedBuffer{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			out.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		tty.Close()
		master.Close()
		<-done
	})
	return tty, out, func(s string) { master.WriteString(s) }
}

// TestProgressOnATerminal: a save shows the files it hashes on a terminal,
// and nothing extra with --json or when standard error is not a terminal.
func TestProgressOnATerminal(t *testing.T) {
	defer cli.SetProgressDelay(0)()
	project := t.TempDir()
	files := map[string]string{}
	for i := range 1000 {
		files[fmt.Sprintf("d%02d/f%03d.txt", i%10, i)] = strings.Repeat("x", 1000+i)
	}
	testtree.Write(t, project, files)
	data, home := t.TempDir(), t.TempDir()
	run := func(stderr *os.File, args ...string) (int, string) {
		var out strings.Builder
		env := map[string]string{"HOME": home, "BELAY_DATA_DIR": data}
		code := cli.Run(context.Background(), args, cli.Env{Backend: wire.Backend(),
			Stdin: strings.NewReader(""), Stdout: &out, Stderr: stderr,
			Getenv: func(k string) string { return env[k] },
			Getwd:  func() (string, error) { return project, nil },
		})
		return code, out.String()
	}

	tty, shown := openPTY(t)
	if code, out := run(tty, "save", "-m", "on a terminal"); code != 0 || !strings.HasPrefix(out, "Saved checkpoint #1") {
		t.Fatalf("save: exit %d, %q", code, out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.HasSuffix(shown.String(), "\r\x1b[K") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := shown.String()
	if !strings.Contains(got, "snapshot: hashing files") || !strings.Contains(got, "/1000") || !strings.Contains(got, "KiB of") ||
		!strings.HasSuffix(got, "\r\x1b[K") {
		t.Errorf("progress on the terminal: %q", got)
	}

	jsonTTY, jsonShown := openPTY(t)
	testtree.Write(t, project, map[string]string{"d00/f000.txt": "changed"})
	if code, out := run(jsonTTY, "--json", "save", "-m", "json"); code != 0 || !strings.HasPrefix(out, "{") {
		t.Fatalf("save --json: exit %d, %q", code, out)
	}
	time.Sleep(50 * time.Millisecond)
	if got := jsonShown.String(); got != "" {
		t.Errorf("--json showed progress: %q", got)
	}

	pipeR, pipeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	testtree.Write(t, project, map[string]string{"d00/f000.txt": "changed again"})
	code, _ := run(pipeW, "save", "-m", "piped")
	pipeW.Close()
	var piped strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := pipeR.Read(buf)
		piped.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if code != 0 || piped.Len() != 0 {
		t.Errorf("piped save: exit %d, stderr %q", code, piped.String())
	}
}

// TestPagerAndColor: on a terminal a diff goes through $PAGER, coloured;
// NO_COLOR turns the colour off, --no-pager the pager, and neither applies
// when standard output is not a terminal.
func TestPagerAndColor(t *testing.T) {
	project := t.TempDir()
	testtree.Write(t, project, map[string]string{"a.txt": "one\n"})
	data, home := t.TempDir(), t.TempDir()
	run := func(stdout *os.File, extra map[string]string, args ...string) int {
		env := map[string]string{"HOME": home, "BELAY_DATA_DIR": data, "PAGER": "sed s/^/paged:/"}
		for k, v := range extra {
			env[k] = v
		}
		var errOut strings.Builder
		code := cli.Run(context.Background(), args, cli.Env{Backend: wire.Backend(),
			Stdin: strings.NewReader(""), Stdout: stdout, Stderr: &errOut,
			Getenv: func(k string) string { return env[k] },
			Getwd:  func() (string, error) { return project, nil },
		})
		if code != 0 {
			t.Errorf("belay %q: exit %d, %s", args, code, errOut.String())
		}
		return code
	}
	devNull, _ := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	defer devNull.Close()
	run(devNull, nil, "save", "-m", "one")
	testtree.Write(t, project, map[string]string{"a.txt": "two\n"})

	shown := func(extra map[string]string, until string, args ...string) string {
		t.Helper()
		tty, out := openPTY(t)
		run(tty, extra, args...)
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(out.String(), until) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		return out.String()
	}
	got := shown(nil, "two", "diff", "1")
	if !strings.Contains(got, "paged:") || !strings.Contains(got, "\x1b[32m+two\x1b[0m") || !strings.Contains(got, "\x1b[31m-one") {
		t.Errorf("diff on a terminal: %q", got)
	}
	if got := shown(map[string]string{"NO_COLOR": "1"}, "two", "diff", "1"); !strings.Contains(got, "paged:") || strings.Contains(got, "\x1b[") {
		t.Errorf("diff with NO_COLOR: %q", got)
	}
	if got := shown(nil, "two", "--no-pager", "diff", "1"); strings.Contains(got, "paged:") || !strings.Contains(got, "\x1b[32m+two") {
		t.Errorf("diff --no-pager: %q", got)
	}
	if got := shown(nil, "1 of 1", "checkpoints"); !strings.Contains(got, "paged:SEQ") {
		t.Errorf("checkpoints on a terminal: %q", got)
	}
}

// TestSessionsDeleteAsksOnATerminal: on a terminal, sessions delete asks
// first; no keeps the session.
func TestSessionsDeleteAsksOnATerminal(t *testing.T) {
	project := t.TempDir()
	testtree.Write(t, project, map[string]string{"a.txt": "a"})
	c := newWSCLI(t, project)
	cp := wsJSON[belay.Checkpoint](t, c, "save", "-m", "one")
	for _, answer := range []string{"n", "y"} {
		tty, out, keys := openPTYWithInput(t)
		env := map[string]string{"HOME": c.home, "BELAY_DATA_DIR": c.data, "TERM": "xterm"}
		done := make(chan int, 1)
		go func() {
			done <- cli.Run(context.Background(), []string{"sessions", "delete", cp.SessionID}, cli.Env{Backend: wire.Backend(),
				Stdin: tty, Stdout: tty, Stderr: tty,
				Getenv: func(k string) string { return env[k] },
				Getwd:  func() (string, error) { return project, nil },
			})
		}()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(hitlANSI.ReplaceAllString(out.String(), ""), "Delete session") && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		keys(answer)
		var code int
		select {
		case code = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("answer %q: no exit; the terminal shows %q", answer, out.String())
		}
		if shown := hitlANSI.ReplaceAllString(out.String(), ""); !strings.Contains(shown, "Delete session "+cp.SessionID) {
			t.Errorf("answer %q: the terminal shows %q", answer, shown)
		}
		_, _, errOut := c.run("session-info", cp.SessionID)
		gone := strings.Contains(errOut, "SESSION_NOT_FOUND")
		if answer == "n" && (code != cli.ExitError || gone) || answer == "y" && (code != 0 || !gone) {
			t.Errorf("answer %q: exit %d, session gone %v; the terminal shows %q", answer, code, gone, out.String())
		}
	}
}
