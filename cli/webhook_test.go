package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
	"github.com/belayhq/belay/cmd/belay/wire"
	"github.com/belayhq/belay/webhook"
)

// webhookEnv runs belay in-process on a temp data directory and project.
type webhookEnv struct {
	project, dataDir string
	env              map[string]string
}

func newWebhookEnv(t *testing.T) *webhookEnv {
	t.Helper()
	return &webhookEnv{project: t.TempDir(), dataDir: t.TempDir(), env: map[string]string{"HOME": t.TempDir()}}
}

// run runs belay with --data-dir and returns the exit code, stdout and stderr.
func (e *webhookEnv) run(ctx context.Context, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	env := cli.Env{Backend: wire.Backend(),
		Stdin:  strings.NewReader(""),
		Stdout: &out,
		Stderr: &errOut,
		Getenv: func(k string) string { return e.env[k] },
		Getwd:  func() (string, error) { return e.project, nil },
	}
	code := cli.Run(ctx, append([]string{"--data-dir", e.dataDir}, args...), env)
	return code, out.String(), errOut.String()
}

func (e *webhookEnv) ok(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := e.run(context.Background(), args...)
	if code != cli.ExitOK {
		t.Fatalf("belay %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func (e *webhookEnv) okJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out := e.ok(t, append([]string{"--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("belay --json %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// serve runs `belay serve` in-process until the test ends.
func (e *webhookEnv) serve(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var code int
	var out, errOut string
	go func() {
		code, out, errOut = e.run(ctx, "serve", "--addr", "127.0.0.1:0")
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if code != cli.ExitOK {
			t.Errorf("belay serve: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
		}
	})
}

func waitForWebhook(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type hookRequest struct {
	header http.Header
	body   []byte
}

func TestWebhookCommands(t *testing.T) {
	e := newWebhookEnv(t)
	var mu sync.Mutex
	var got []hookRequest
	rc := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, hookRequest{r.Header.Clone(), body})
		mu.Unlock()
	}))
	defer rc.Close()

	var saves belay.Webhook
	e.okJSON(t, &saves, "webhook", "add", rc.URL+"/saves", "--event", belay.EventCheckpointCreated)
	if !strings.HasPrefix(saves.Secret, "whsec_") || saves.URL != rc.URL+"/saves" || len(saves.Events) != 1 {
		t.Fatalf("added %+v", saves)
	}
	code, out, errOut := e.run(context.Background(), "webhook", "add", rc.URL+"/hitl", "--events", "hitl.required,hitl.decided")
	if code != cli.ExitOK || !strings.Contains(out, "Secret: whsec_") || !strings.Contains(out, "hitl.required,hitl.decided") ||
		!strings.Contains(errOut, "not shown again") {
		t.Fatalf("webhook add: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	hitlID := strings.Fields(out)[1]

	list := e.ok(t, "webhook", "list")
	// The position is an event's number, not a count of deliveries.
	if header := strings.SplitN(list, "\n", 2)[0]; !regexp.MustCompile(`^ID\s+URL\s+EVENTS\s+AT EVENT #\s+CREATED$`).MatchString(header) {
		t.Errorf("webhook list header = %q", header)
	}
	for _, want := range []string{saves.ID, hitlID, rc.URL + "/saves", belay.EventCheckpointCreated, "hitl.required,hitl.decided"} {
		if !strings.Contains(list, want) {
			t.Errorf("webhook list lacks %q:\n%s", want, list)
		}
	}
	var hooks []belay.Webhook
	e.okJSON(t, &hooks, "webhook", "list")
	if len(hooks) != 2 || strings.Contains(list, "whsec_") || hooks[0].Secret != "" {
		t.Errorf("webhook list shows secrets or misses webhooks:\n%s\n%+v", list, hooks)
	}

	// `belay serve` delivers a checkpoint saved from the command line.
	e.ok(t, "save", "-m", "delivered")
	e.serve(t)
	waitForWebhook(t, "a delivery", func() bool {
		var log []belay.Delivery
		e.okJSON(t, &log, "webhook", "deliveries")
		return len(log) == 1
	})
	mu.Lock()
	req := got[0]
	mu.Unlock()
	if !webhook.VerifySignature(saves.Secret, req.header.Get(webhook.HeaderTimestamp), req.body, req.header.Get(webhook.HeaderSignature)) {
		t.Errorf("signature does not verify: %v", req.header)
	}
	var ev belay.Event
	if err := json.Unmarshal(req.body, &ev); err != nil || ev.Type != belay.EventCheckpointCreated {
		t.Errorf("body %s: %v", req.body, err)
	}

	var log []belay.Delivery
	e.okJSON(t, &log, "webhook", "deliveries", "--webhook", saves.ID[:13], "--limit", "5")
	if len(log) != 1 || log[0].WebhookID != saves.ID || log[0].StatusCode != 200 || log[0].Attempt != 1 || log[0].EventSeq != ev.Seq {
		t.Errorf("deliveries = %+v", log)
	}
	table := e.ok(t, "webhook", "deliveries")
	for _, want := range []string{"TIME", "WEBHOOK", "ATTEMPT", saves.ID[:8], belay.EventCheckpointCreated, "200"} {
		if !strings.Contains(table, want) {
			t.Errorf("deliveries table lacks %q:\n%s", want, table)
		}
	}
	if out := e.ok(t, "webhook", "deliveries", "--webhook", hitlID); !strings.Contains(out, "No deliveries") {
		t.Errorf("deliveries of the hitl webhook:\n%s", out)
	}

	// An id prefix shared by both webhooks is ambiguous; a longer one is not.
	common := 0
	for common < len(hitlID) && hitlID[common] == saves.ID[common] {
		common++
	}
	if common > 0 {
		if code, _, errOut := e.run(context.Background(), "webhook", "remove", hitlID[:common]); code != cli.ExitUsage || !strings.Contains(errOut, "ambiguous") {
			t.Errorf("remove by a shared prefix: exit %d, stderr %s", code, errOut)
		}
	}
	if out := e.ok(t, "webhook", "remove", hitlID[:common+1]); !strings.Contains(out, "Removed webhook "+hitlID) {
		t.Errorf("webhook remove: %s", out)
	}
	var removed map[string]string
	e.okJSON(t, &removed, "webhook", "remove", saves.ID)
	if removed["removed"] != saves.ID {
		t.Errorf("webhook remove --json = %v", removed)
	}
	if out := e.ok(t, "webhook", "list"); !strings.Contains(out, "No webhooks") {
		t.Errorf("list after removing both:\n%s", out)
	}
}

func TestWebhookCommandErrors(t *testing.T) {
	e := newWebhookEnv(t)
	for _, tc := range []struct {
		name   string
		args   []string
		remote bool
		code   int
		stderr string
	}{
		// With BELAY_URL webhooks are managed through the server.
		{"add with BELAY_URL", []string{"webhook", "add", "https://example.com/x"}, true, cli.ExitError, "cannot reach the belay server"},
		{"list with BELAY_URL", []string{"webhook", "list"}, true, cli.ExitError, "cannot reach the belay server"},
		{"remove with BELAY_URL", []string{"webhook", "remove", "x"}, true, cli.ExitError, "cannot reach the belay server"},
		{"deliveries with BELAY_URL", []string{"webhook", "deliveries"}, true, cli.ExitError, "cannot reach the belay server"},
		{"add without url", []string{"webhook", "add"}, false, cli.ExitUsage, "accepts 1 arg"},
		{"remove without id", []string{"webhook", "remove"}, false, cli.ExitUsage, "accepts 1 arg"},
		{"bad url", []string{"webhook", "add", "ftp://example.com/x"}, false, cli.ExitError, "VALIDATION_ERROR"},
		{"bad port", []string{"webhook", "add", "http://127.0.0.1:99999/x"}, false, cli.ExitError, "port must be 1-65535, got 99999 (VALIDATION_ERROR)"},
		{"empty port", []string{"webhook", "add", "http://127.0.0.1:/hook"}, false, cli.ExitError, "port must be 1-65535, got none after the colon (VALIDATION_ERROR)"},
		{"unknown event", []string{"webhook", "add", "https://example.com/x", "--event", "nope"}, false, cli.ExitError, "VALIDATION_ERROR"},
		{"remove unknown", []string{"webhook", "remove", "0000"}, false, cli.ExitError, "NOT_FOUND"},
		{"remove unknown id", []string{"webhook", "remove", "01890000-0000-7000-8000-00000000abcd"}, false, cli.ExitError, "NOT_FOUND"},
		{"deliveries of unknown", []string{"webhook", "deliveries", "--webhook", "zzz"}, false, cli.ExitError, "NOT_FOUND"},
		{"limit too large", []string{"webhook", "deliveries", "--limit", "5000"}, false, cli.ExitUsage, "--limit must be 1-1000, got 5000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			delete(e.env, "BELAY_URL")
			if tc.remote {
				e.env["BELAY_URL"] = "http://127.0.0.1:1"
			}
			code, out, errOut := e.run(context.Background(), tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.stderr) {
				t.Errorf("belay %s: exit %d, want %d with %q\nstdout: %s\nstderr: %s", strings.Join(tc.args, " "), code, tc.code, tc.stderr, out, errOut)
			}
		})
	}
	delete(e.env, "BELAY_URL")
	code, out, errOut := e.run(context.Background(), "--json", "webhook", "add", "notaurl")
	var body struct {
		Error belay.Error `json:"error"`
	}
	if code != cli.ExitError || out != "" || json.Unmarshal([]byte(errOut), &body) != nil || body.Error.Details["field"] != "url" {
		t.Errorf("--json webhook add notaurl: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if out := e.ok(t, "webhook", "list"); !strings.Contains(out, "No webhooks") {
		t.Errorf("failed commands left webhooks:\n%s", out)
	}
}
