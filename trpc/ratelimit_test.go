package trpc_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/store/sqlite"
	"github.com/belayhq/belay/trpc"
)

// TestRateLimitedCallsSayWhenToRetry: a save refused for its rate answers
// 429 with Retry-After, as /v1 does, alone and when every call of a batch
// was refused; a batch whose calls answered differently (207) has none.
func TestRateLimitedCallsSayWhenToRetry(t *testing.T) {
	ctx := belay.WithActor(context.Background(), admin)
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := core.New(core.Options{Store: db, Logger: log, SavesPerMinute: 1})
	t.Cleanup(func() {
		svc.Close()
		db.Close()
	})
	srv := httptest.NewServer(trpc.New("/trpc/", trpc.Options{Service: svc, Authenticate: anyToken, Logger: log}))
	t.Cleanup(srv.Close)
	sess, err := svc.CreateSession(ctx, belay.CreateSessionInput{Title: "limited"})
	if err != nil {
		t.Fatal(err)
	}
	create := `{"taskId":"` + sess.ID + `","type":"manual","trigger":"user_request","description":"d","workspaceRef":""}`
	post := func(path, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer any")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for range 2 { // the burst
		if resp := post("/trpc/checkpoints.create", create); resp.StatusCode != http.StatusOK {
			t.Fatalf("save within the burst: %d", resp.StatusCode)
		}
	}
	for _, c := range []struct {
		name, path, body string
		status           int
		retryAfter       string
	}{
		{"one call", "/trpc/checkpoints.create", create, http.StatusTooManyRequests, "60"},
		{"a batch refused whole", "/trpc/checkpoints.create,checkpoints.create?batch=1", `{"0":` + create + `,"1":` + create + `}`, http.StatusTooManyRequests, "60"},
		{"a batch answered differently", "/trpc/checkpoints.create,checkpoints.create?batch=1", `{"0":` + create + `,"1":{}}`, http.StatusMultiStatus, ""},
	} {
		resp := post(c.path, c.body)
		if resp.StatusCode != c.status || resp.Header.Get("Retry-After") != c.retryAfter {
			t.Errorf("%s: %d, Retry-After %q; want %d, %q", c.name, resp.StatusCode, resp.Header.Get("Retry-After"), c.status, c.retryAfter)
		}
	}
}
