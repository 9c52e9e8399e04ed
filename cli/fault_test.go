//go:build linux

package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// setFileSizeLimit sets the soft RLIMIT_FSIZE of process pid: beyond it a
// write fails with EFBIG (Go ignores SIGXFSZ).
func setFileSizeLimit(t *testing.T, pid int, limit uint64) {
	t.Helper()
	var lim unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, nil, &lim); err != nil {
		t.Fatalf("read the server's file size limit: %v", err)
	}
	lim.Cur = min(limit, lim.Max)
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &lim, nil); err != nil {
		t.Fatalf("set the server's file size limit: %v", err)
	}
}

// TestServeStorageFault runs `belay serve` and takes its storage away for a
// while (the process may write no byte to any file): writes answer 503
// STORAGE_UNAVAILABLE with a message for people, the CLI prints it, /healthz
// is 503 with that code; once the storage is back a write succeeds and
// /healthz is 200; and after the server is killed, every checkpoint it
// acknowledged is in the database.
func TestServeStorageFault(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs it as separate processes")
	}
	bin := belayBinary(t)
	home, data, project := t.TempDir(), t.TempDir(), t.TempDir()
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C", "BELAY_DATA_DIR=" + data}
	srv, url, token, srvErr, exited := startServer(t, bin, env)

	do := func(method, path string, in any) (int, map[string]any, error) {
		var body bytes.Buffer
		if in != nil {
			json.NewEncoder(&body).Encode(in)
		}
		req, err := http.NewRequest(method, url+path, &body)
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return 0, nil, fmt.Errorf("%s %s: decode: %w", method, path, err)
		}
		return resp.StatusCode, out, nil
	}
	call := func(method, path string, in any) (int, map[string]any) {
		t.Helper()
		status, out, err := do(method, path, in)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return status, out
	}
	var mu sync.Mutex
	var acked []string
	// save creates a checkpoint and remembers it when the server acknowledged it.
	save := func(summary string) (int, map[string]any, error) {
		status, out, err := do("POST", "/v1/checkpoints", map[string]any{"projectPath": project, "summary": summary})
		if status == http.StatusCreated {
			mu.Lock()
			acked = append(acked, out["id"].(string))
			mu.Unlock()
		}
		return status, out, err
	}
	wantUnavailable := func(what string, status int, out map[string]any) {
		t.Helper()
		e, _ := out["error"].(map[string]any)
		if status != http.StatusServiceUnavailable || e["code"] != "STORAGE_UNAVAILABLE" || e["message"] != "storage I/O error" {
			t.Errorf("%s: %d %v; want 503 STORAGE_UNAVAILABLE \"storage I/O error\"", what, status, out)
		}
	}

	for i := range 5 {
		if status, out, err := save(fmt.Sprint("before ", i)); status != http.StatusCreated {
			t.Fatalf("save before the fault: %d %v %v", status, out, err)
		}
	}

	setFileSizeLimit(t, srv.Process.Pid, 0)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			status, out, err := save(fmt.Sprint("during ", i))
			if err != nil {
				t.Errorf("save during the fault: %v", err)
				return
			}
			wantUnavailable("save during the fault", status, out)
		})
	}
	wg.Wait()
	cmd := exec.Command(bin, "save", "-m", "from the CLI", "--no-snapshot")
	cmd.Dir = project
	cmd.Env = append(env, "BELAY_URL="+url, "BELAY_TOKEN="+token)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "belay: storage I/O error (STORAGE_UNAVAILABLE)") {
		t.Errorf("belay save during the fault: %v\n%s", err, out)
	}
	status, out := call("GET", "/healthz", nil)
	wantUnavailable("/healthz during the fault", status, out)

	setFileSizeLimit(t, srv.Process.Pid, unix.RLIM_INFINITY)
	// /healthz's own write shows that writes work again, before any
	// request writes (a load balancer sends none to an unhealthy server).
	if status, out := call("GET", "/healthz", nil); status != http.StatusOK {
		t.Errorf("/healthz once the storage is back: %d %v", status, out)
	}
	if status, out, err := save("after"); status != http.StatusCreated {
		t.Fatalf("save after the fault: %d %v %v", status, out, err)
	}

	if err := srv.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	_, url, _, _, _ = startServer(t, bin, env)
	for _, id := range acked {
		if status, out := call("GET", "/v1/checkpoints/"+id, nil); status != http.StatusOK {
			t.Errorf("acknowledged checkpoint %s after the restart: %d %v", id, status, out)
		}
	}
	if _, out := call("GET", "/v1/checkpoints?projectPath="+project, nil); out["totalCount"] != float64(len(acked)) {
		t.Errorf("%v checkpoints after the restart, want the %d acknowledged", out["totalCount"], len(acked))
	}
	if t.Failed() {
		t.Logf("server stderr:\n%s", srvErr.String())
	}
}
