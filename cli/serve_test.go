package cli_test

import (
	"encoding/json"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// TestServeLogsRequests: serve logs each request (method, path, status,
// duration, user) at info, in the format and from the level asked for.
func TestServeLogsRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs it as a separate process")
	}
	bin := belayBinary(t)
	env := []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "BELAY_DATA_DIR=" + t.TempDir()}

	if out, err := exec.Command(bin, "serve", "--log-level", "chatty").CombinedOutput(); err == nil || !strings.Contains(string(out), "--log-level") {
		t.Errorf("serve --log-level chatty: %v\n%s", err, out)
	} else if code := err.(*exec.ExitError).ExitCode(); code != 2 {
		t.Errorf("serve --log-level chatty: exit %d, want 2", code)
	}

	srv, url, token, stderr, exited := startServer(t, bin, env, "--log-format", "json", "--log-level", "debug")
	batch := "/trpc/sessions.list" + strings.Repeat(",sessions.list", 3)
	for _, path := range []string{"/healthz", "/v1/sessions", batch + "?batch=1&input=%7B%7D"} {
		req, _ := http.NewRequest(http.MethodGet, url+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// The dashboard: sign in with the token, then a page with the cookie.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.PostForm(url+"/signin", neturl.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	req, _ := http.NewRequest(http.MethodGet, url+"/sessions", nil)
	for _, c := range resp.Cookies() {
		req.AddCookie(c)
	}
	if resp, err = noRedirect.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("dashboard page after signing in: %s", resp.Status)
	}
	if resp, err = http.Get(url + "/v1/" + strings.Repeat("x", 5000)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	srv.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	var requests []map[string]any
	for line := range strings.Lines(stderr.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a log line is not JSON: %q", line)
		}
		if m["msg"] == "request" {
			requests = append(requests, m)
		}
	}
	if len(requests) != 6 || requests[0]["path"] != "/healthz" || requests[0]["level"] != "DEBUG" ||
		requests[1]["path"] != "/v1/sessions" || requests[1]["level"] != "INFO" || requests[1]["user"] != "admin" ||
		requests[1]["status"] != float64(200) || requests[1]["method"] != "GET" || requests[1]["duration"] == nil {
		t.Errorf("request log: %v\nstderr:\n%s", requests, stderr.String())
	}
	if len(requests) > 2 && requests[2]["path"] != batch {
		t.Errorf("request log of a tRPC batch: path %q, want %q", requests[2]["path"], batch)
	}
	if long, _ := requests[len(requests)-1]["path"].(string); utf8.RuneCountInString(long) > 500 || !strings.HasSuffix(long, "…") {
		t.Errorf("request log of a path of 5,000 characters: %d of them, %.40q…", utf8.RuneCountInString(long), long)
	}
	// Handlers that authenticate themselves name the user too.
	for _, i := range []int{2, 4} {
		if i < len(requests) && requests[i]["user"] != "admin" {
			t.Errorf("request log of %v %v: user %q, want admin", requests[i]["method"], requests[i]["path"], requests[i]["user"])
		}
	}
}
