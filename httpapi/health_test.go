package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/sqlite"
)

// fullDisk fails every write as the SQLite driver reports a full disk while
// full is set.
type fullDisk struct {
	store.Store
	full atomic.Bool
}

func (f *fullDisk) Update(ctx context.Context, fn func(store.Tx) error) error {
	if f.full.Load() {
		return belay.Errorf(belay.CodeStorageUnavailable, "the database's disk is full")
	}
	return f.Store.Update(ctx, fn)
}

// TestStorageFaultOverHTTP: a write the storage fails is 503
// STORAGE_UNAVAILABLE with the storage's message, /healthz is 503 with that
// code while writes fail, and 200 once they work again.
func TestStorageFaultOverHTTP(t *testing.T) {
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	disk := &fullDisk{Store: db}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Service: core.New(core.Options{Store: disk, Logger: log}), Logger: log, Authenticate: anyToken}).Handler())
	defer srv.Close()
	project, _ := json.Marshal(t.TempDir())
	body := `{"projectPath":` + string(project) + `}`
	call := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer any")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return resp.StatusCode, out
	}
	errorOf := func(out map[string]any) (code, msg any) {
		e, _ := out["error"].(map[string]any)
		return e["code"], e["message"]
	}

	if st, out := call("GET", "/healthz", ""); st != http.StatusOK {
		t.Fatalf("/healthz before the fault: %d %v", st, out)
	}
	disk.full.Store(true)
	status, out := call("POST", "/v1/sessions", body)
	if code, msg := errorOf(out); status != http.StatusServiceUnavailable || code != "STORAGE_UNAVAILABLE" || msg != "the database's disk is full" {
		t.Errorf("POST /v1/sessions on a full disk: %d %v; want 503 STORAGE_UNAVAILABLE", status, out)
	}
	status, out = call("GET", "/healthz", "")
	if code, _ := errorOf(out); status != http.StatusServiceUnavailable || code != "STORAGE_UNAVAILABLE" || out["status"] != "unavailable" {
		t.Errorf("/healthz while the disk is full: %d %v; want 503 with STORAGE_UNAVAILABLE", status, out)
	}
	// The disk has room again: /healthz's own write shows it, before any
	// request writes (a load balancer sends none to an unhealthy instance).
	disk.full.Store(false)
	if status, out := call("GET", "/healthz", ""); status != http.StatusOK || out["status"] != "ok" {
		t.Errorf("/healthz once the disk has room: %d %v; want 200", status, out)
	}
	if status, out := call("POST", "/v1/sessions", body); status != http.StatusCreated {
		t.Fatalf("POST /v1/sessions once the disk has room: %d %v", status, out)
	}
}
