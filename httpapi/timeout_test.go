package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/sqlite"
)

// TestHandlerTimeout: a request that outlives the handler deadline answers
// 504 TIMEOUT_ERROR with the deadline in the details, for reads and writes.
func TestHandlerTimeout(t *testing.T) {
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	api := httpapi.New(httpapi.Options{Service: core.New(core.Options{Store: db}), Timeout: time.Nanosecond, Authenticate: anyToken})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/checkpoints", ""},
		{"GET", "/v1/sessions", ""},
		{"POST", "/v1/sessions", `{"title":"late"}`},
	} {
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Error belay.Error }
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusGatewayTimeout || body.Error.Code != belay.CodeTimeout || body.Error.Details["timeout"] != "1ns" {
			t.Errorf("%s %s: status %d, body %+v, decode error %v; want 504 TIMEOUT_ERROR with timeout 1ns", tc.method, tc.path, resp.StatusCode, body.Error, err)
		}
	}
	list, _, _, err := db.ListSessions(context.Background(), store.SessionQuery{Scope: store.Everything, Limit: 10})
	if err != nil || len(list) != 0 {
		t.Errorf("sessions after timed-out requests: %d, %v; want none written", len(list), err)
	}
}
