package cli_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/belayhq/belay"
)

// The e2e tests build the real binary once, into a directory TestMain removes.
var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// belayBinary returns the path of a freshly built belay command.
func belayBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "belay-e2e-"); buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(buildDir, "belay"), "./cmd/belay")
		cmd.Dir = ".." // the module root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "belay")
}

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var servingRE = regexp.MustCompile(`serving on (http://\S+)`)

// startServer runs `belay serve` on a free loopback port, with extra flags,
// and returns its URL and the admin token it prints on first start.
func startServer(t *testing.T, bin string, env []string, extra ...string) (cmd *exec.Cmd, url, token string, stderr *lockedBuffer, exited <-chan error) {
	t.Helper()
	cmd = exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0"}, extra...)...)
	cmd.Env = env
	stderr = &lockedBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done, finished := make(chan error, 1), make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-finished:
		default: // the test failed before it stopped the server
			cmd.Process.Kill()
			<-finished
		}
	})

	type ready struct{ url, token string }
	readyc := make(chan ready, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		var r ready
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if strings.HasPrefix(line, "belay_") {
				r.token = line
			}
			if m := servingRE.FindStringSubmatch(line); m != nil && r.url == "" {
				r.url = m[1]
				readyc <- r
			}
		}
		// Wait only after stdout is drained, as os/exec requires.
		done <- cmd.Wait()
		close(finished)
		close(readyc)
	}()
	select {
	case r, ok := <-readyc:
		if !ok {
			t.Fatalf("belay serve exited before serving; stderr:\n%s", stderr.String())
		}
		return cmd, r.url, r.token, stderr, done
	case <-time.After(30 * time.Second):
		t.Fatalf("belay serve did not print its address within 30s; stderr:\n%s", stderr.String())
	}
	return nil, "", "", nil, nil
}

func TestServeEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs it as separate processes")
	}
	bin := belayBinary(t)
	home, serverData, clientData, project := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	base := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C"}
	srv, url, token, srvErr, exited := startServer(t, bin, slices.Concat(base, []string{"BELAY_DATA_DIR=" + serverData}))
	if !strings.HasPrefix(url, "http://127.0.0.1:") || strings.HasSuffix(url, ":0") {
		t.Fatalf("server URL = %q, want the real loopback port", url)
	}
	if !strings.HasPrefix(token, "belay_") {
		t.Fatalf("no bootstrap token printed")
	}

	// The dashboard is served by the same process: the printed token signs
	// a browser in.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noFollow.PostForm(url+"/signin", neturl.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) == 0 {
		t.Fatalf("dashboard sign-in: %s, cookies %v", res.Status, res.Cookies())
	}
	req, _ := http.NewRequest("GET", url+"/", nil)
	req.AddCookie(res.Cookies()[0])
	res, err = noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(page), "Waiting for you") {
		t.Fatalf("dashboard inbox: %s\n%.500s", res.Status, page)
	}

	// belay runs a command as its own process against the server. Its data
	// directory is empty and must stay so: everything goes over HTTP.
	belayCmd := func(stdin string, env []string, args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = project
		cmd.Env = slices.Concat(base, []string{"BELAY_DATA_DIR=" + clientData}, env)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("run belay %v: %v", args, err)
		}
		return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
	}
	remote := []string{"BELAY_URL=" + url, "BELAY_TOKEN=" + token}
	mustRun := func(stdin string, args ...string) string {
		t.Helper()
		code, out, errOut := belayCmd(stdin, remote, args...)
		if code != 0 {
			t.Fatalf("belay %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}

	if out := mustRun("", "save", "-m", "e2e first", "--tag", "e2e", "--type", "phase"); !strings.HasPrefix(out, "Saved checkpoint #1 ") {
		t.Errorf("save printed %q", out)
	}
	if out := mustRun(`{"step": 2}`, "save", "-m", "e2e second", "--state-file", "-"); !strings.HasPrefix(out, "Saved checkpoint #2 ") {
		t.Errorf("second save printed %q", out)
	}
	var list belay.CheckpointList
	if err := json.Unmarshal([]byte(mustRun("", "checkpoints", "--json")), &list); err != nil {
		t.Fatalf("checkpoints --json: %v", err)
	}
	if len(list.Items) != 2 || list.Items[0].Seq != 2 || list.Items[1].Summary != "e2e first" || list.Items[1].ProjectPath != project {
		t.Errorf("checkpoints --json = %+v", list)
	}
	if out := mustRun("", "show", "1"); !strings.Contains(out, "Checkpoint #1  "+list.Items[1].ID) || !strings.Contains(out, "e2e first") {
		t.Errorf("show 1 printed:\n%s", out)
	}
	var second belay.Checkpoint
	if err := json.Unmarshal([]byte(mustRun("", "--json", "show", "2")), &second); err != nil {
		t.Fatal(err)
	}
	if second.ParentID != list.Items[1].ID || !strings.Contains(string(second.AgentState), `"step"`) {
		t.Errorf("show 2 = %+v", second)
	}
	if code, _, errOut := belayCmd("", remote, "show", "99"); code != 1 || !strings.Contains(errOut, "CHECKPOINT_NOT_FOUND") {
		t.Errorf("show 99 over HTTP: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := belayCmd("", []string{"BELAY_URL=" + url}, "checkpoints"); code != 1 || !strings.Contains(errOut, "UNAUTHENTICATED") ||
		!strings.Contains(errOut, "hint: set BELAY_TOKEN") {
		t.Errorf("without a token: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := belayCmd("", []string{"BELAY_URL=" + url, "BELAY_TOKEN=belay_garbage"}, "checkpoints"); code != 1 || !strings.Contains(errOut, "UNAUTHENTICATED") ||
		!strings.Contains(errOut, "hint: BELAY_TOKEN is not a valid token") {
		t.Errorf("with a wrong token: exit %d, stderr %q", code, errOut)
	}
	// A token limited to another project is told so, not sent to the
	// workspace roots.
	var limited belay.NewToken
	if err := json.Unmarshal([]byte(mustRun("", "--json", "token", "create", "--user", "agent", "--project", t.TempDir())), &limited); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := belayCmd("", []string{"BELAY_URL=" + url, "BELAY_TOKEN=" + limited.Secret}, "save", "-m", "elsewhere"); code != 1 ||
		!strings.Contains(errOut, "UNAUTHORIZED") || !strings.Contains(errOut, "hint: the token is limited to other projects") {
		t.Errorf("a save outside the token's project: exit %d, stderr %q", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(clientData, "belay.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a remote command opened a local database: %v", err)
	}
	resp, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"ok"`) {
		t.Errorf("healthz: %d %s", resp.StatusCode, body)
	}

	// SIGTERM stops the server gracefully: exit status 0.
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("server exit after SIGTERM: %v; stderr:\n%s", err, srvErr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("server did not stop within 30s of SIGTERM; stderr:\n%s", srvErr.String())
	}
	if !strings.Contains(srvErr.String(), "shutting down") {
		t.Errorf("server stderr lacks the shutdown log:\n%s", srvErr.String())
	}

	// What the server wrote is in its database, readable without a server.
	code, out, errOut := belayCmd("", []string{"BELAY_DATA_DIR=" + serverData}, "checkpoints", "--all", "--json")
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || list.TotalCount != 2 {
		t.Errorf("local read after shutdown: exit %d, %v, %+v, stderr %q", code, err, list, errOut)
	}
}
