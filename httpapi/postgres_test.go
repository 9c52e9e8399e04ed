package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store/postgres"
)

// TestPostgresRefusesWhatItCannotStore: on PostgreSQL, input its text and
// jsonb cannot hold is a VALIDATION_ERROR naming the field, as on SQLite,
// not a 500 (or a stored request that fails every other user's pending
// list); another user's pending list still answers.
func TestPostgresRefusesWhatItCannotStore(t *testing.T) {
	db, err := postgres.Open(t.Context(), testutil.PostgresSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := core.New(core.Options{Store: db, Logger: log})
	auth := func(_ context.Context, token string) (belay.Actor, error) { return belay.Actor{UserID: token}, nil }
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Service: svc, Logger: log, Authenticate: auth}).Handler())
	t.Cleanup(srv.Close)
	do := func(user, method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+user)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, body := do("alice", "POST", "/v1/checkpoints", `{"projectPath":"/proj/a","summary":"x"}`)
	if status != http.StatusCreated {
		t.Fatalf("save: %d %s", status, body)
	}
	sid := decode[belay.Checkpoint](t, []byte(body)).SessionID
	for _, c := range []struct{ method, path, body, field string }{
		{"POST", "/v1/checkpoints", `{"projectPath":"/proj/a","summary":"x","hitl":{"required":true,"title":"t","context":{"note":"\u0000"}}}`, "hitl.context"},
		{"POST", "/v1/checkpoints", `{"projectPath":"/proj/a","summary":"x","hitl":{"required":true,"title":"t","context":{"note":"\ud800"}}}`, "hitl.context"},
		{"POST", "/v1/checkpoints", `{"projectPath":"/proj/a\u0000b","summary":"x"}`, "projectPath"},
		{"POST", "/v1/sessions", `{"projectPath":"/` + strings.Repeat("p", 20000) + `"}`, "projectPath"},
		{"GET", "/v1/sessions?projectPath=/a%00b", "", "projectPath"},
		{"GET", "/v1/search?q=x&projectPath=/a%00b", "", "projectPath"},
		{"POST", "/v1/sessions/" + sid + "/heartbeat", `{"holder":"h\u0000"}`, "holder"},
		{"POST", "/v1/sessions/" + sid + "/fail", `{"reason":"r\u0000"}`, "reason"},
	} {
		status, body := do("alice", c.method, c.path, c.body)
		if eb := decode[errorBody](t, []byte(body)); status != http.StatusBadRequest || eb.Error.Code != belay.CodeValidation || eb.Error.Details["field"] != c.field {
			t.Errorf("%s %.60s %.80s: %d %.200s; want VALIDATION_ERROR on %s", c.method, c.path, c.body, status, body, c.field)
		}
	}
	if status, body := do("bob", "GET", "/v1/hitl/pending", ""); status != http.StatusOK {
		t.Errorf("bob's pending list: %d %s", status, body)
	}
}
