package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
	"github.com/belayhq/belay/cmd/belay/wire"
)

// TestWatchFS: while `belay watch-fs` runs, saves of its workspace use its
// watcher (through the socket it serves) and record every change; it stops
// on interrupt and removes its socket.
func TestWatchFS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("watchers need inotify")
	}
	h := newHarness(t)
	if out := h.ok(t, "", "watch-fs", "--help"); !strings.Contains(out, "watch-fs [DIR...]") || !strings.Contains(out, "--json") {
		t.Errorf("watch-fs --help:\n%s", out)
	}
	if r := h.run(t, "", "watch-fs", "/no/such/dir"); r.code != cli.ExitError || !strings.Contains(r.stderr, `"/no/such/dir" does not exist`) ||
		!strings.Contains(r.stderr, "(VALIDATION_ERROR)") {
		t.Errorf("watch-fs of a missing directory: exit %d\n%s", r.code, r.stderr)
	}
	writeProject(t, h.project, map[string]string{"a.txt": "a\n", "src/b.txt": "b\n"})

	ctx, cancel := context.WithCancel(context.Background())
	stdout := &lockedBuffer{}
	exited := make(chan int, 1)
	go func() {
		exited <- cli.Run(ctx, []string{"--json", "watch-fs"}, cli.Env{Backend: wire.Backend(),
			Stdin: strings.NewReader(""), Stdout: stdout, Stderr: stdout,
			Getenv: func(k string) string { return h.env[k] },
			Getwd:  func() (string, error) { return h.project, nil },
		})
	}()
	defer func() {
		cancel()
		<-exited
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stdout.String(), "watching") {
		if time.Now().After(deadline) {
			t.Fatalf("watch-fs did not start: %s", stdout.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	var announced map[string]string
	out := stdout.String()
	if err := json.Unmarshal([]byte(out), &announced); err != nil || announced["watching"] != h.project || strings.Count(out, "\n") != 1 {
		t.Errorf("watch-fs --json printed %q, want one line", out)
	}
	sockets, _ := filepath.Glob(filepath.Join(h.env["BELAY_DATA_DIR"], "workspaces", "*", "watch.sock"))
	if len(sockets) != 1 {
		t.Fatalf("sockets %q", sockets)
	}

	h.ok(t, "", "save", "-m", "first")
	writeProject(t, h.project, map[string]string{"a.txt": "a2\n", "src/new/c.txt": "c\n"})
	if err := os.Remove(filepath.Join(h.project, "src", "b.txt")); err != nil {
		t.Fatal(err)
	}
	h.ok(t, "", "save", "-m", "second")
	cp := okJSON[belay.Checkpoint](t, h, "show", "2")
	if cp.Files == nil || !slices.Equal(cp.Files.Created, []string{"src/new/c.txt"}) ||
		!slices.Equal(cp.Files.Modified, []string{"a.txt"}) || !slices.Equal(cp.Files.Deleted, []string{"src/b.txt"}) {
		t.Errorf("second save's files: %+v", cp.Files)
	}

	cancel()
	if code := <-exited; code != cli.ExitOK {
		t.Errorf("watch-fs exited %d: %s", code, stdout.String())
	}
	exited <- cli.ExitOK
	if _, err := os.Stat(sockets[0]); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
}

func writeProject(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
