package httpapi_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/store/sqlite"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(s.b.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestRequestsAreLogged: every request is logged at info with its method,
// path, status, duration and user; health checks at debug only.
func TestRequestsAreLogged(t *testing.T) {
	db, err := sqlite.Open(localCtx, filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var logs syncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	svc := core.New(core.Options{Store: db, Logger: log})
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Service: svc, Logger: log, Authenticate: anyToken}).Handler())
	defer srv.Close()

	for _, path := range []string{"/v1/sessions", "/v1/sessions/not-an-id", "/healthz"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	srv.Close()
	got := logs.lines(t)
	if len(got) != 2 {
		t.Fatalf("logged %d lines, want 2 (health checks are debug): %v", len(got), got)
	}
	for i, want := range []struct {
		path   string
		status float64
	}{{"/v1/sessions", 200}, {"/v1/sessions/not-an-id", 400}} {
		l := got[i]
		if l["msg"] != "request" || l["level"] != "INFO" || l["method"] != "GET" || l["path"] != want.path ||
			l["status"] != want.status || l["user"] != "anonymous" {
			t.Errorf("log line %d = %v", i, l)
		}
		if d, ok := l["duration"].(float64); !ok || d < 0 {
			t.Errorf("log line %d has no duration: %v", i, l)
		}
	}
}
