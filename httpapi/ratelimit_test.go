package httpapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/store/sqlite"
)

func TestSaveRateLimitAnswers429WithRetryAfter(t *testing.T) {
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Service: core.New(core.Options{Store: db, SavesPerMinute: 1}),
		Authenticate: anyToken}).Handler())
	t.Cleanup(srv.Close)
	body := `{"projectPath":"` + t.TempDir() + `","summary":"s"}`
	var last *http.Response
	for range 3 {
		resp, err := http.Post(srv.URL+"/v1/checkpoints", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		last = resp
	}
	if last.StatusCode != http.StatusTooManyRequests || last.Header.Get("Retry-After") != "60" {
		t.Fatalf("third save: %d, Retry-After %q; want 429 and 60", last.StatusCode, last.Header.Get("Retry-After"))
	}
	// /metrics counts the refusal.
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(metrics), `belay_http_requests_total{method="POST",route="POST /v1/checkpoints",status="429"} 1`) {
		t.Errorf("/metrics does not count the refusal:\n%s", metrics)
	}
}
