package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/store/sqlite"
)

// wantResults checks a search body holds exactly the named checkpoints, in order.
func wantResults(names ...string) func(t *testing.T, e *apiEnv, body []byte) {
	return func(t *testing.T, e *apiEnv, body []byte) {
		t.Helper()
		res := decodeStrict[belay.SearchResult](t, body)
		var got, want []string
		for i, h := range res.Results {
			got = append(got, h.Checkpoint.ID)
			if h.Score < 0 || h.Score > 1 || (i > 0 && h.Score > res.Results[i-1].Score) || h.Distance < 0 || h.Distance > 1 {
				t.Errorf("result %d: score %v distance %v (scores in [0,1], highest first)", i, h.Score, h.Distance)
			}
		}
		for _, n := range names {
			want = append(want, e.vars[n])
		}
		if !slices.Equal(got, want) {
			t.Errorf("results = %v, want %v (%v)", got, want, names)
		}
		if !strings.Contains(string(body), `"results":[`) {
			t.Errorf("results is not an array: %s", clip(body))
		}
	}
}

func TestSearchAPI(t *testing.T) {
	run(t, []scenario{
		{name: "words", method: "GET", path: "/v1/search?q=seed+2", wantStatus: 200,
			check: func(t *testing.T, e *apiEnv, body []byte) {
				res := decodeStrict[belay.SearchResult](t, body)
				if len(res.Results) != 3 || res.Results[0].Checkpoint.ID != e.vars["cp2"] || res.Query != "seed 2" || res.TopK != 5 {
					t.Errorf("search seed 2 = %s", clip(body))
				}
			}},
		{name: "tags are AND", method: "GET", path: "/v1/search?q=seed&tag=a&tag=b", wantStatus: 200, check: wantResults("cp2")},
		{name: "tags comma separated", method: "GET", path: "/v1/search?q=seed&tag=a,b", wantStatus: 200, check: wantResults("cp2")},
		{name: "project", method: "GET", path: "/v1/search?q=seed+3&projectPath={project}&tag=b", wantStatus: 200, check: wantResults("cp3", "cp2")},
		{name: "other project is empty", method: "GET", path: "/v1/search?q=seed&projectPath={other}", wantStatus: 200, check: wantResults()},
		{name: "nothing matches", method: "GET", path: "/v1/search?q=zebra", wantStatus: 200, check: wantResults()},
		{name: "topK", method: "GET", path: "/v1/search?q=seed+1&topK=1", wantStatus: 200, check: wantResults("cp1")},
		{name: "ticket id", method: "GET", path: "/v1/search?q=OC-41252", wantStatus: 200, check: wantResults()},
		{name: "a lone quote", method: "GET", path: "/v1/search?q=" + url.QueryEscape(`"`), wantStatus: 200, check: wantResults()},
		{name: "an operator and a bracket", method: "GET", path: "/v1/search?q=" + url.QueryEscape(`AND (`), wantStatus: 200, check: wantResults()},
		{name: "explain", method: "GET", path: "/v1/search?q=seed&explain=true&topK=1", wantStatus: 200,
			check: func(t *testing.T, e *apiEnv, body []byte) {
				res := decodeStrict[belay.SearchResult](t, body)
				if res.Explain == nil || res.Explain.Semantic || len(res.Results) != 1 || res.Results[0].Explain == nil ||
					res.Results[0].Explain.BM25Rank != 1 {
					t.Errorf("explain = %s", clip(body))
				}
			}},
		{name: "no query", method: "GET", path: "/v1/search", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "query"},
		{name: "blank query", method: "GET", path: "/v1/search?q=+++", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "query"},
		{name: "query twice", method: "GET", path: "/v1/search?q=a&q=b", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "q"},
		{name: "topK 0", method: "GET", path: "/v1/search?q=a&topK=0", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "topK"},
		{name: "topK 101", method: "GET", path: "/v1/search?q=a&topK=101", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "topK"},
		{name: "topK not a number", method: "GET", path: "/v1/search?q=a&topK=ten", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "topK"},
		{name: "explain not a bool", method: "GET", path: "/v1/search?q=a&explain=maybe", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "explain"},
		{name: "relative project", method: "GET", path: "/v1/search?q=a&projectPath=rel", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "empty tag", method: "GET", path: "/v1/search?q=a&tag=", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "tags[0]"},
		{name: "unknown parameter", method: "GET", path: "/v1/search?q=a&limit=3", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "limit"},
		{name: "POST", method: "POST", path: "/v1/search", body: `{}`, wantStatus: 405, wantCode: belay.CodeMethodNotAllowed},
		{name: "reindex is for admins", method: "POST", path: "/v1/search/reindex", wantStatus: 403, wantCode: belay.CodeUnauthorized},
		{name: "index status is for admins", method: "GET", path: "/v1/search/index", wantStatus: 403, wantCode: belay.CodeUnauthorized},
	})
}

// TestSearchAPIScope: over HTTP too, a caller finds only what it may read,
// and reindexing is for admins.
func TestSearchAPIScope(t *testing.T) {
	db, err := sqlite.Open(localCtx, filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := core.New(core.Options{Store: db, Logger: log})
	// The bearer token is the user's name; "root" is an admin.
	auth := func(_ context.Context, token string) (belay.Actor, error) {
		return belay.Actor{UserID: token, Admin: token == "root"}, nil
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Service: svc, Logger: log, Authenticate: auth}).Handler())
	defer srv.Close()
	alice := belay.WithActor(context.Background(), belay.Actor{UserID: "alice"})
	if _, err := svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{ProjectPath: t.TempDir(), Summary: "alice's secret plan"}); err != nil {
		t.Fatal(err)
	}
	get := func(method, path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("GET", "/v1/search?q=secret+plan", "alice"); code != 200 || !strings.Contains(body, "alice's secret plan") {
		t.Errorf("alice: %d %s", code, body)
	}
	if code, body := get("GET", "/v1/search?q=secret+plan", "mallory"); code != 200 || !strings.Contains(body, `"results":[]`) {
		t.Errorf("a stranger: %d %s, want no results", code, body)
	}
	if code, body := get("POST", "/v1/search/reindex", "alice"); code != 403 {
		t.Errorf("reindex by alice: %d %s", code, body)
	}
	if code, body := get("POST", "/v1/search/reindex", "root"); code != 202 || !strings.Contains(body, `"queued":1`) {
		t.Errorf("reindex by an admin: %d %s", code, body)
	}
	if code, body := get("GET", "/v1/search/index", "root"); code != 200 || !strings.Contains(body, `"embedder":"belay-hash-v1"`) {
		t.Errorf("index status: %d %s", code, body)
	}
}
