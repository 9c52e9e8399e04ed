package cli_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
)

func TestSearchAndReindex(t *testing.T) {
	h := newHarness(t)
	for _, s := range []string{"Implemented JWT authentication", "Fixed OC-41252 in the migration", "Chose PostgreSQL"} {
		h.ok(t, "", "save", "--no-snapshot", "-m", s, "--tag", "work")
	}
	// The local CLI embeds what waits before it searches.
	res := okJSON[belay.SearchResult](t, h, "search", "jwt", "auth", "--explain", "--top-k", "2")
	if len(res.Results) != 2 || res.Results[0].Checkpoint.Summary != "Implemented JWT authentication" ||
		!res.Results[0].Explain.HasVector || res.TopK != 2 {
		t.Errorf("search jwt auth: %+v", res)
	}
	out := h.ok(t, "", "search", "OC-41252", "--project", ".", "--tag", "work", "--explain")
	if !strings.Contains(out, "Fixed OC-41252 in the migration") || !strings.Contains(out, "lexical, not semantic") || !strings.Contains(out, "bm25 #1") {
		t.Errorf("search OC-41252:\n%s", out)
	}
	for _, q := range []string{`"`, `AND (`} {
		if out := h.ok(t, "", "search", q); !strings.Contains(out, "No checkpoint matches.") {
			t.Errorf("search %q:\n%s", q, out)
		}
	}
	if r := h.run(t, "", "search"); r.code != cli.ExitUsage {
		t.Errorf("search without a query: exit %d", r.code)
	}
	// An empty query is core's VALIDATION_ERROR, as over HTTP, not no match.
	for _, q := range []string{"", "  "} {
		if r := h.run(t, "", "search", q); r.code != cli.ExitError || !strings.Contains(r.stderr, "query must not be empty (VALIDATION_ERROR)") || r.stdout != "" {
			t.Errorf("search %q: exit %d, stdout %q, stderr %q", q, r.code, r.stdout, r.stderr)
		}
	}
	if r := h.run(t, "", "search", "x", "--top-k", "500"); r.code != cli.ExitUsage || !strings.Contains(r.stderr, "--top-k must be 1-100") {
		t.Errorf("--top-k 500: exit %d, %s", r.code, r.stderr)
	}

	st := okJSON[belay.IndexStatus](t, h, "reindex", "--all")
	if st.Model != "belay-hash-v1" || st.Embedded != 3 || st.Queued != 0 || st.Checkpoints != 3 {
		t.Errorf("reindex --all: %+v", st)
	}
	if out := h.ok(t, "", "reindex"); !strings.Contains(out, "3 of 3 checkpoints embedded, 0 queued") {
		t.Errorf("reindex:\n%s", out)
	}
}

// TestSearchWithEmbeddingEndpointDown: saves succeed and search ranks by
// text while the configured endpoint fails; reindex says what failed.
func TestSearchWithEmbeddingEndpointDown(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "bad key", http.StatusUnauthorized)
	}))
	defer srv.Close()
	h := newHarness(t)
	h.env["BELAY_EMBEDDING_URL"] = srv.URL + "/v1"
	h.env["BELAY_EMBEDDING_MODEL"] = "text-embedding-3-small"
	h.ok(t, "", "save", "--no-snapshot", "-m", "Implemented JWT authentication")
	r := h.run(t, "", "--json", "search", "jwt")
	if r.code != cli.ExitOK || !strings.Contains(r.stdout, "Implemented JWT authentication") || !strings.Contains(r.stdout, "ranked by text alone") {
		t.Errorf("search with the endpoint down: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := h.run(t, "", "reindex"); r.code != cli.ExitError || !strings.Contains(r.stderr, "bad key") {
		t.Errorf("reindex with the endpoint down: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if calls.Load() == 0 {
		t.Error("the endpoint was never called")
	}
	delete(h.env, "BELAY_EMBEDDING_URL")
	if r := h.run(t, "", "search", "jwt"); r.code != cli.ExitError || !strings.Contains(r.stderr, "BELAY_EMBEDDING_URL") {
		t.Errorf("a model without a URL: exit %d\n%s", r.code, r.stderr)
	}
}

// TestSearchShowsUniqueIDs: search lists each id as its shortest prefix
// unique among the results, as checkpoints does, so `belay show` takes it;
// checkpoints saved within the same minute share their first 8 characters.
func TestSearchShowsUniqueIDs(t *testing.T) {
	h := newHarness(t)
	for _, s := range []string{"billing step one", "billing step two", "billing step three"} {
		h.ok(t, "", "save", "--no-snapshot", "-m", s)
	}
	out := h.ok(t, "", "search", "billing")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "SCORE") {
		t.Fatalf("search billing:\n%s", out)
	}
	seen := map[string]bool{}
	for _, line := range lines[1:] {
		fields := strings.Fields(line)
		id, session := fields[2], fields[3]
		if seen[id] || len(id) < belay.MinIDPrefix {
			t.Errorf("id %q is shown twice or too short:\n%s", id, out)
		}
		seen[id] = true
		if len(session) != shownPrefix {
			t.Errorf("the only session is shown as %q, want %d characters", session, shownPrefix)
		}
		cp := okJSON[belay.Checkpoint](t, h, "show", id)
		if !strings.HasPrefix(cp.ID, id) || !strings.Contains(line, cp.Summary) {
			t.Errorf("show %s = checkpoint %s %q, the row is %q", id, cp.ID, cp.Summary, line)
		}
	}
}
