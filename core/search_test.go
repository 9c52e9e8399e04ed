package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testclock"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/search"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/sqlite"
)

// flakyEmbedder embeds like the hash embedder under its own model name,
// or fails while down.
type flakyEmbedder struct {
	*search.Hash
	model string
	down  atomic.Bool
	calls atomic.Int32
}

func (f *flakyEmbedder) Model() string { return f.model }

func (f *flakyEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	f.calls.Add(1)
	if f.down.Load() {
		return nil, errors.New("embedding endpoint down")
	}
	return f.Hash.Embed(ctx, texts)
}

func newFlaky(model string) *flakyEmbedder {
	return &flakyEmbedder{Hash: search.NewHash(64), model: model}
}

// newSearchService returns a service with embedder e on the database at path.
func newSearchService(tb testing.TB, path string, clock belay.Clock, e search.Embedder) *core.Service {
	tb.Helper()
	db, err := sqlite.Open(localCtx, path)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	return core.New(core.Options{Store: db, Clock: clock, Embedder: e, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func mustSearch(tb testing.TB, ctx context.Context, svc belay.Service, in belay.SearchInput) *belay.SearchResult {
	tb.Helper()
	res, err := svc.SearchCheckpoints(ctx, in)
	if err != nil {
		tb.Fatalf("SearchCheckpoints(%+v): %v", in, err)
	}
	return res
}

func summaries(res *belay.SearchResult) []string {
	out := []string{}
	for _, h := range res.Results {
		out = append(out, h.Checkpoint.Summary)
	}
	return out
}

func mustIndex(tb testing.TB, svc *core.Service) {
	tb.Helper()
	if err := svc.IndexQueued(localCtx, nil); err != nil {
		tb.Fatalf("IndexQueued: %v", err)
	}
}

func TestSearchFindsByTextAtOnceAndByVectorOnceEmbedded(t *testing.T) {
	svc := newService(t, nil)
	project := t.TempDir()
	for _, s := range []string{"Implemented JWT authentication", "Migration of the users table", "Rendered the login page"} {
		mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: s})
	}
	res := mustSearch(t, localCtx, svc, belay.SearchInput{Query: "jwt authentication", Explain: true})
	if len(res.Results) != 1 || res.Results[0].Checkpoint.Summary != "Implemented JWT authentication" {
		t.Fatalf("before embedding: %v, want the JWT checkpoint alone", summaries(res))
	}
	if h := res.Results[0]; h.Explain.HasVector || h.Distance != 1 || h.Explain.BM25Rank != 1 || h.Score != 0.5 {
		t.Errorf("before embedding: %+v %+v, want a text hit without a vector (distance 1, half the score)", h, h.Explain)
	}
	if ex := res.Explain; ex == nil || ex.Semantic || ex.Embedder != search.HashModel || !strings.Contains(strings.Join(ex.Notes, " "), "lexical, not semantic") ||
		!strings.Contains(strings.Join(ex.Notes, " "), "3 checkpoints wait") {
		t.Errorf("explain before embedding: %+v", ex)
	}

	mustIndex(t, svc)
	res = mustSearch(t, localCtx, svc, belay.SearchInput{Query: "jwt authentication", Explain: true})
	top := res.Results[0]
	if top.Checkpoint.Summary != "Implemented JWT authentication" || top.Score != 1 || !top.Explain.HasVector ||
		top.Explain.VectorRank != 1 || top.Distance <= 0 || top.Distance >= 1 || top.Distance != 1-top.Explain.Similarity {
		t.Errorf("after embedding: %+v %+v, want first in both rankings", top, top.Explain)
	}
	// The vector ranking finds word parts the text ranking does not: no
	// minimum score, sorted by score.
	res = mustSearch(t, localCtx, svc, belay.SearchInput{Query: "migrations", TopK: 10, Explain: true})
	if len(res.Results) == 0 || res.Results[0].Checkpoint.Summary != "Migration of the users table" || res.Results[0].Explain.BM25Rank != 0 {
		t.Errorf("migrations found %v, want the migration checkpoint first, by its vector alone", summaries(res))
	}
	for i, h := range res.Results {
		if h.Score < 0 || h.Score > 1 || (i > 0 && h.Score > res.Results[i-1].Score) {
			t.Errorf("result %d: score %v after %v: scores must be in [0,1], highest first", i, h.Score, res.Results[i-1].Score)
		}
	}
}

func TestSearchRules(t *testing.T) {
	svc := newService(t, nil)
	project := t.TempDir()
	for i := range 8 {
		mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "deploy step", Tags: []string{"deploy", []string{"a", "b"}[i%2]}})
	}
	mustIndex(t, svc)
	if got := mustSearch(t, localCtx, svc, belay.SearchInput{Query: "deploy"}); len(got.Results) != belay.DefaultTopK || got.TopK != belay.DefaultTopK {
		t.Errorf("default topK: %d results, topK %d", len(got.Results), got.TopK)
	}
	if got := mustSearch(t, localCtx, svc, belay.SearchInput{Query: "deploy", TopK: 100}); len(got.Results) != 8 {
		t.Errorf("topK 100: %d results, want all 8", len(got.Results))
	}
	if got := mustSearch(t, localCtx, svc, belay.SearchInput{Query: "deploy", TopK: 100, Tags: []string{"deploy", "a"}}); len(got.Results) != 4 {
		t.Errorf("tags deploy AND a: %d results, want 4", len(got.Results))
	}
	if got := mustSearch(t, localCtx, svc, belay.SearchInput{Query: "deploy", ProjectPath: t.TempDir()}); got.Results == nil || len(got.Results) != 0 {
		t.Errorf("another project: %v, want an empty list, not null", got.Results)
	}
	if got := mustSearch(t, localCtx, svc, belay.SearchInput{Query: "deploy", ProjectPath: project + "/"}); len(got.Results) != 5 {
		t.Errorf("project with a trailing slash: %d results", len(got.Results))
	}
	if got := mustSearch(t, localCtx, svc, belay.SearchInput{Query: "zebra"}); got.Results == nil || len(got.Results) != 0 {
		t.Errorf("nothing matching: %v, want an empty list", got.Results)
	}
	for _, tc := range []struct {
		in    belay.SearchInput
		field string
	}{
		{belay.SearchInput{}, "query"},
		{belay.SearchInput{Query: "  \t"}, "query"},
		{belay.SearchInput{Query: strings.Repeat("x", belay.MaxQueryLength+1)}, "query"},
		{belay.SearchInput{Query: "a\x00b"}, "query"},
		{belay.SearchInput{Query: "a", TopK: -1}, "topK"},
		{belay.SearchInput{Query: "a", TopK: belay.MaxTopK + 1}, "topK"},
		{belay.SearchInput{Query: "a", ProjectPath: "relative/path"}, "projectPath"},
		{belay.SearchInput{Query: "a", Tags: []string{""}}, "tags[0]"},
	} {
		_, err := svc.SearchCheckpoints(localCtx, tc.in)
		testutil.WantCode(t, err, belay.CodeValidation, tc.field)
	}
	_, err := svc.SearchCheckpoints(context.Background(), belay.SearchInput{Query: "deploy"})
	testutil.WantCode(t, err, belay.CodeUnauthenticated)
}

func TestSearchHostileQueries(t *testing.T) {
	svc := newService(t, nil)
	project := t.TempDir()
	mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: `Fixed OC-41252 "quoted" AND (grouped)`})
	mustIndex(t, svc)
	for _, q := range []string{`OC-41252`, `"`, `AND (`, `NEAR(a b)`, `*`, `summary:x`, `'; DROP TABLE checkpoints; --`, `(((`, `🚀`} {
		res, err := svc.SearchCheckpoints(localCtx, belay.SearchInput{Query: q})
		if err != nil {
			t.Errorf("query %q: %v", q, err)
			continue
		}
		if res.Results == nil {
			t.Errorf("query %q: results are null", q)
		}
	}
	if got := summaries(mustSearch(t, localCtx, svc, belay.SearchInput{Query: "OC-41252"})); len(got) != 1 {
		t.Errorf("OC-41252 found %v", got)
	}
}

// TestSearchIsScoped: a caller finds only what it may read, by either
// ranking, and a stranger nothing at all.
func TestSearchIsScoped(t *testing.T) {
	svc := newService(t, nil)
	for _, u := range []string{"alice", "bob", "eve"} {
		if _, err := createToken(localCtx, svc, u, false); err != nil {
			t.Fatal(err)
		}
	}
	as := func(u string, projects ...string) context.Context {
		return belay.WithActor(context.Background(), belay.Actor{UserID: u, Projects: projects})
	}
	alicesProject, bobsProject := t.TempDir(), t.TempDir()
	alices := mustCreateAs(t, svc, as("alice"), alicesProject, "secret migration plan")
	mustCreateAs(t, svc, as("bob"), bobsProject, "bob's migration plan")
	mustIndex(t, svc)

	find := func(ctx context.Context, in belay.SearchInput) []string {
		t.Helper()
		in.TopK = 100
		return summaries(mustSearch(t, ctx, svc, in))
	}
	if got := find(as("eve"), belay.SearchInput{Query: "migration plan"}); len(got) != 0 {
		t.Errorf("a stranger found %v", got)
	}
	if got := find(as("eve"), belay.SearchInput{Query: "migration plan", ProjectPath: alicesProject}); len(got) != 0 {
		t.Errorf("a stranger naming the project found %v", got)
	}
	if got := find(as("bob"), belay.SearchInput{Query: "secret migration"}); len(got) != 1 || got[0] != "bob's migration plan" {
		t.Errorf("bob found %v, want his own alone", got)
	}
	if got := find(localCtx, belay.SearchInput{Query: "migration plan"}); len(got) != 2 {
		t.Errorf("an admin found %v, want both", got)
	}
	if _, err := svc.GrantSession(localCtx, belay.GrantInput{SessionID: alices.SessionID, User: "eve", Role: belay.RoleRead}); err != nil {
		t.Fatal(err)
	}
	if got := find(as("eve"), belay.SearchInput{Query: "migration plan"}); len(got) != 1 || got[0] != "secret migration plan" {
		t.Errorf("eve with a grant found %v, want alice's", got)
	}
	if got := find(as("alice", bobsProject), belay.SearchInput{Query: "migration plan"}); len(got) != 0 {
		t.Errorf("alice with a token for bob's project found %v", got)
	}
	// Only admins hear about the index, which counts everyone's checkpoints.
	res := mustSearch(t, as("bob"), svc, belay.SearchInput{Query: "migration", Explain: true})
	if len(res.Explain.Notes) != 1 {
		t.Errorf("bob's explain notes %v, want the lexical note alone", res.Explain.Notes)
	}
	_, err := svc.Reindex(as("bob"), belay.ReindexInput{})
	testutil.WantCode(t, err, belay.CodeUnauthorized)
	_, err = svc.IndexStatus(as("bob"))
	testutil.WantCode(t, err, belay.CodeUnauthorized)
}

func mustCreateAs(tb testing.TB, svc *core.Service, ctx context.Context, project, summary string) *belay.Checkpoint {
	tb.Helper()
	cp, err := svc.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: project, Summary: summary})
	if err != nil {
		tb.Fatalf("CreateCheckpoint as %v: %v", ctx, err)
	}
	return cp
}

// TestEmbedderDownNeverFailsASave: saves and searches go on while the
// embedding endpoint is down; the queue retries with backoff.
func TestEmbedderDownNeverFailsASave(t *testing.T) {
	clock := testclock.New(start, 0)
	e := newFlaky("flaky-model")
	svc := newSearchService(t, filepath.Join(t.TempDir(), "belay.db"), clock, e)
	project := t.TempDir()
	e.down.Store(true)
	cp := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "saved while the embedder is down"})
	if err := svc.IndexQueued(localCtx, nil); err == nil {
		t.Fatal("IndexQueued with the embedder down: no error")
	}
	st, err := svc.IndexStatus(localCtx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Queued != 1 || st.Failing != 1 || !strings.Contains(st.LastError, "embedding endpoint down") || st.Embedded != 0 {
		t.Errorf("status after a failure: %+v", st)
	}
	res := mustSearch(t, localCtx, svc, belay.SearchInput{Query: "embedder down"})
	if len(res.Results) != 1 || res.Results[0].Checkpoint.ID != cp.ID || len(res.Warnings) != 1 {
		t.Errorf("search while down: %v, warnings %v; want the checkpoint by text and a warning", summaries(res), res.Warnings)
	}
	// Back up, the checkpoint is embedded once its backoff is over, not before.
	e.down.Store(false)
	calls := e.calls.Load()
	mustIndex(t, svc)
	if e.calls.Load() != calls {
		t.Error("a failed checkpoint was retried before its backoff ended")
	}
	clock.Advance(time.Minute)
	mustIndex(t, svc)
	if st, _ := svc.IndexStatus(localCtx); st.Embedded != 1 || st.Queued != 0 || st.Failing != 0 {
		t.Errorf("status after the retry: %+v", st)
	}
	res = mustSearch(t, localCtx, svc, belay.SearchInput{Query: "embedder down", Explain: true})
	if !res.Results[0].Explain.HasVector || len(res.Warnings) != 0 {
		t.Errorf("after the retry: %+v, warnings %v", res.Results[0].Explain, res.Warnings)
	}
}

// TestModelChangeReindexes: vectors of two models are never mixed; a
// process embedding with another model ranks by text until the index is
// switched (by Reindex, or by the indexer of belay serve).
func TestModelChangeReindexes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	first := newSearchService(t, path, nil, newFlaky("model-one"))
	project := t.TempDir()
	for _, s := range []string{"alpha release notes", "beta release notes", "gamma rollout"} {
		mustCreate(t, first, belay.CreateCheckpointInput{ProjectPath: project, Summary: s})
	}
	mustIndex(t, first)

	second := newSearchService(t, path, nil, newFlaky("model-two"))
	mustIndex(t, second) // another model's index: it embeds nothing
	st, err := second.IndexStatus(localCtx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Model != "model-one" || st.Embedder != "model-two" || st.Embedded != 3 || st.Queued != 0 {
		t.Errorf("status seen by the second model: %+v", st)
	}
	res := mustSearch(t, localCtx, second, belay.SearchInput{Query: "release", Explain: true})
	for _, h := range res.Results {
		if h.Explain.HasVector || h.Explain.VectorRank != 0 {
			t.Errorf("the second model compared with the first's vectors: %+v", h.Explain)
		}
	}
	if !strings.Contains(strings.Join(res.Explain.Notes, " "), "the index holds vectors of model-one") {
		t.Errorf("explain notes %v: want the model mismatch", res.Explain.Notes)
	}

	// The indexer of a long-running process switches the index to its model.
	ctx, cancel := context.WithCancel(localCtx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		second.RunIndexer(ctx)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err = second.IndexStatus(localCtx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Model == "model-two" && st.Embedded == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the indexer did not re-embed with model-two: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A save is embedded by the running indexer without being asked.
	mustCreate(t, second, belay.CreateCheckpointInput{ProjectPath: project, Summary: "delta release notes"})
	for st.Embedded != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("the indexer did not embed a new save: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
		if st, err = second.IndexStatus(localCtx); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	<-done
	res = mustSearch(t, localCtx, second, belay.SearchInput{Query: "release", Explain: true})
	if !res.Results[0].Explain.HasVector {
		t.Errorf("after the switch: %+v", res.Results[0].Explain)
	}
	// The first model's process now finds by text alone, and Reindex
	// switches back, queueing every checkpoint.
	st, err = first.Reindex(localCtx, belay.ReindexInput{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Model != "model-one" || st.Queued != 4 {
		t.Errorf("after Reindex: %+v, want model-one with all 4 queued", st)
	}
	mustIndex(t, first)
	if st, _ := first.IndexStatus(localCtx); st.Embedded != 4 || st.Queued != 0 {
		t.Errorf("after re-embedding: %+v", st)
	}
	if st, _ := first.Reindex(localCtx, belay.ReindexInput{All: true}); st.Queued != 4 {
		t.Errorf("Reindex(all): %d queued, want 4", st.Queued)
	}
}

func TestTokenCountAndUpdatedAt(t *testing.T) {
	clock := testclock.New(start, 0)
	svc := newService(t, clock)
	project := t.TempDir()
	cp := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "hello world", Description: "hello world",
		HITL: &belay.HITLInput{Required: true}})
	if cp.TokenCount != 4 || cp.TokenEncoding != search.TokenEncoding || !cp.UpdatedAt.Equal(cp.CreatedAt) {
		t.Errorf("new checkpoint: %d tokens of %q, updated %v (created %v)", cp.TokenCount, cp.TokenEncoding, cp.UpdatedAt, cp.CreatedAt)
	}
	clock.Advance(time.Minute)
	res, err := svc.Decide(localCtx, belay.DecideInput{CheckpointID: cp.ID, SelectedOption: "approve"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := svc.GetCheckpoint(localCtx, cp.ID) // verifies the checksum
	if err != nil {
		t.Fatal(err)
	}
	if !got.UpdatedAt.Equal(start.Add(time.Minute)) || !res.Checkpoint.UpdatedAt.Equal(got.UpdatedAt) || got.TokenCount != 4 {
		t.Errorf("after the decision: updated %v (returned %v), %d tokens", got.UpdatedAt, res.Checkpoint.UpdatedAt, got.TokenCount)
	}
}

// TestSearchResultsEndAtTheirBytes: the results stop once their agent
// states reach store.PageBytes, and a warning says so.
func TestSearchResultsEndAtTheirBytes(t *testing.T) {
	svc := newSearchService(t, filepath.Join(t.TempDir(), "belay.db"), testclock.New(start, time.Millisecond), search.NewHash(64))
	big := json.RawMessage(`"` + strings.Repeat("x", belay.MaxStateBytes-100) + `"`)
	fit := int(store.PageBytes/int64(len(big))) + 1
	for range fit + 1 {
		mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: t.TempDir(), Summary: "flamingo migration", AgentState: big})
	}
	if err := svc.IndexQueued(localCtx, nil); err != nil {
		t.Fatal(err)
	}
	res := mustSearch(t, localCtx, svc, belay.SearchInput{Query: "flamingo", TopK: 10})
	if len(res.Results) != fit || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "topK") {
		t.Fatalf("search: %d results, warnings %q; want %d and a warning naming topK", len(res.Results), res.Warnings, fit)
	}
	res = mustSearch(t, localCtx, svc, belay.SearchInput{Query: "flamingo", TopK: fit})
	if len(res.Results) != fit || len(res.Warnings) != 0 {
		t.Errorf("search for as many as fit: %d results, warnings %q; want %d and none", len(res.Results), res.Warnings, fit)
	}
}

// TestSearchLeavesOutACorruptedCheckpoint: one damaged checkpoint fails no
// search, as it fails no list; a warning names it.
func TestSearchLeavesOutACorruptedCheckpoint(t *testing.T) {
	svc := newSearchService(t, filepath.Join(t.TempDir(), "belay.db"), testclock.New(start, time.Millisecond), search.NewHash(64))
	project := t.TempDir()
	bad := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "quokka migration one"})
	good := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: "quokka migration two"})
	if err := svc.IndexQueued(localCtx, nil); err != nil {
		t.Fatal(err)
	}
	corrupt(t, svc, bad.ID)
	res := mustSearch(t, localCtx, svc, belay.SearchInput{Query: "quokka"})
	if len(res.Results) != 1 || res.Results[0].Checkpoint.ID != good.ID {
		t.Fatalf("search: %d results; want only %s", len(res.Results), good.ID)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], bad.ID) || !strings.Contains(res.Warnings[0], "belay validate") {
		t.Errorf("warnings %q; want one naming %s and belay validate", res.Warnings, bad.ID)
	}
}
