package search

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func TestHashIsDeterministicAndUnit(t *testing.T) {
	h := NewHash(0)
	if h.Dimensions() != DefaultDimensions || h.Model() != HashModel || IsSemantic(h) {
		t.Fatalf("NewHash(0): %d dims, model %q, semantic %v", h.Dimensions(), h.Model(), IsSemantic(h))
	}
	vecs, err := h.Embed(context.Background(), []string{"Implemented JWT auth", "Implemented JWT auth", "the of and", ""})
	if err != nil {
		t.Fatal(err)
	}
	if dot(vecs[0], vecs[1]) < 0.9999 {
		t.Error("the same text gave two vectors")
	}
	if n := norm(vecs[0]); math.Abs(n-1) > 1e-5 {
		t.Errorf("norm = %v, want 1", n)
	}
	for i, v := range vecs[2:] {
		if norm(v) != 0 {
			t.Errorf("text %d without content words: norm %v, want the zero vector", i+2, norm(v))
		}
	}
	if got := len(NewHash(64).Vector("x")); got != 64 {
		t.Errorf("NewHash(64) gave %d dimensions", got)
	}
}

// TestHashIsLexical: near for shared words and word parts, far otherwise —
// and blind to meaning, as documented.
func TestHashIsLexical(t *testing.T) {
	h := NewHash(0)
	sim := func(a, b string) float64 { return dot(h.Vector(a), h.Vector(b)) }
	migrate := sim("migrate the users table", "migration of the users table")
	unrelated := sim("migrate the users table", "render the login page")
	if migrate < 0.5 || unrelated > 0.2 || migrate <= unrelated {
		t.Errorf("similarity: shared word parts %.3f, unrelated %.3f", migrate, unrelated)
	}
	if synonym := sim("database", "PostgreSQL"); synonym > 0.2 {
		t.Errorf("similarity of synonyms %.3f: the hash embedder is not supposed to know meaning", synonym)
	}
}

func TestWords(t *testing.T) {
	got := strings.Join(Words(`Fixed OC-41252: "über" AND (x_y)`), "|")
	if want := "fixed|oc|41252|über|and|x|y"; got != want {
		t.Errorf("Words = %s, want %s", got, want)
	}
}

func TestFuse(t *testing.T) {
	for _, tc := range []struct {
		ranks        []int
		n            int
		fused, score float64
	}{
		{[]int{1, 1}, 2, 2.0 / 21, 1},
		{[]int{1, 0}, 2, 1.0 / 21, 0.5},
		{[]int{0, 1}, 1, 1.0 / 21, 1},
		{[]int{2, 3}, 2, 1.0/22 + 1.0/23, (1.0/22 + 1.0/23) / (2.0 / 21)},
		{[]int{0, 0}, 2, 0, 0},
	} {
		fused, score := Fuse(tc.ranks, tc.n)
		if math.Abs(fused-tc.fused) > 1e-12 || math.Abs(score-tc.score) > 1e-12 {
			t.Errorf("Fuse(%v, %d) = %v, %v; want %v, %v", tc.ranks, tc.n, fused, score, tc.fused, tc.score)
		}
	}
	// Better ranks never score lower.
	prev := 2.0
	for r := 1; r <= 50; r++ {
		_, s := Fuse([]int{r, r}, 2)
		if s >= prev || s <= 0 || s > 1 {
			t.Fatalf("Fuse(%d, %d) = %v after %v", r, r, s, prev)
		}
		prev = s
	}
}

func TestCountTokens(t *testing.T) {
	n, err := CountTokens("hello world", "")
	if err != nil || n != 2 {
		t.Errorf("CountTokens(hello world) = %d, %v; want 2", n, err)
	}
	one, _ := CountTokens("Implemented user authentication")
	two, _ := CountTokens("Implemented user authentication", "Implemented user authentication")
	if one == 0 || two != 2*one {
		t.Errorf("counts %d and %d: two texts count each", one, two)
	}
}

// fakeEndpoint is an OpenAI-compatible embeddings endpoint: each text's
// vector is (its length, 1, 0), unnormalised.
type fakeEndpoint struct {
	t        *testing.T
	requests atomic.Int32
	inputs   atomic.Int32
	// fail answers the first fail requests with status (and Retry-After: 0).
	fail   int32
	status int
	// reverse returns the vectors in reverse order, with their indexes.
	reverse bool
	dims    int
}

func (f *fakeEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := f.requests.Add(1)
	if r.URL.Path != "/v1/embeddings" || r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer sk-test" {
		f.t.Errorf("request %s %s auth %q", r.Method, r.URL.Path, r.Header.Get("Authorization"))
	}
	if n <= f.fail {
		w.Header().Set("Retry-After", "0")
		http.Error(w, `{"error":{"message":"slow down"}}`, f.status)
		return
	}
	var req embeddingRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "text-embedding-3-small" || req.EncodingFormat != "float" {
		f.t.Errorf("request body %+v: %v", req, err)
	}
	f.inputs.Add(int32(len(req.Input)))
	type item struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	var data []item
	for i, in := range req.Input {
		v := []float32{float32(len(in)), 1, 0}
		if f.dims > 0 {
			v = make([]float32, f.dims)
			v[0] = 1
		}
		data = append(data, item{Index: i, Embedding: v})
	}
	if f.reverse {
		for i, j := 0, len(data)-1; i < j; i, j = i+1, j-1 {
			data[i], data[j] = data[j], data[i]
		}
	}
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model})
}

func newOpenAI(t *testing.T, f *fakeEndpoint, opts OpenAIOptions) *OpenAI {
	t.Helper()
	f.t = t
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	opts.URL, opts.Model, opts.APIKey = srv.URL+"/v1", "text-embedding-3-small", "sk-test"
	if opts.Backoff == 0 {
		opts.Backoff = time.Millisecond
	}
	e, err := NewOpenAI(opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestOpenAIBatchesInOrder(t *testing.T) {
	f := &fakeEndpoint{reverse: true}
	e := newOpenAI(t, f, OpenAIOptions{BatchSize: 2})
	if e.Dimensions() != 0 || !IsSemantic(e) {
		t.Errorf("before the first answer: %d dimensions, semantic %v", e.Dimensions(), IsSemantic(e))
	}
	texts := []string{"a", "bb", "ccc", "dddd", "eeeee"}
	vecs, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if f.requests.Load() != 3 || f.inputs.Load() != 5 {
		t.Errorf("%d requests for %d inputs, want 3 for 5", f.requests.Load(), f.inputs.Load())
	}
	for i, v := range vecs {
		want := []float32{float32(len(texts[i])), 1, 0}
		Normalize(want)
		if math.Abs(dot(v, want)-1) > 1e-6 {
			t.Errorf("vector %d = %v, want %v (normalised, in input order)", i, v, want)
		}
	}
	if e.Dimensions() != 3 || e.Model() != "text-embedding-3-small" {
		t.Errorf("after an answer: %d dimensions, model %s", e.Dimensions(), e.Model())
	}
}

func TestOpenAIRetries(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusBadGateway} {
		f := &fakeEndpoint{fail: 2, status: status}
		e := newOpenAI(t, f, OpenAIOptions{})
		if _, err := e.Embed(context.Background(), []string{"x"}); err != nil {
			t.Errorf("status %d twice, then success: %v", status, err)
		}
		if f.requests.Load() != 3 {
			t.Errorf("status %d: %d requests, want 3", status, f.requests.Load())
		}
	}
	f := &fakeEndpoint{fail: 5, status: http.StatusServiceUnavailable}
	e := newOpenAI(t, f, OpenAIOptions{Attempts: 2})
	if _, err := e.Embed(context.Background(), []string{"x"}); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("after the last attempt: %v, want the 503", err)
	}
	if f.requests.Load() != 2 {
		t.Errorf("%d requests, want 2 attempts", f.requests.Load())
	}
	// A refused request is not retried.
	f = &fakeEndpoint{fail: 5, status: http.StatusUnauthorized}
	e = newOpenAI(t, f, OpenAIOptions{})
	if _, err := e.Embed(context.Background(), []string{"x"}); err == nil || f.requests.Load() != 1 {
		t.Errorf("401: %v after %d requests, want an error after 1", err, f.requests.Load())
	}
}

func TestOpenAITimeout(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	e, err := NewOpenAI(OpenAIOptions{URL: srv.URL + "/v1/embeddings", Model: "m", Timeout: 20 * time.Millisecond, Attempts: 2, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := e.Embed(context.Background(), []string{"x"}); err == nil {
		t.Fatal("a hanging endpoint gave vectors")
	}
	if calls.Load() != 2 || time.Since(start) > 5*time.Second {
		t.Errorf("%d calls in %v, want 2 attempts bounded by the timeout", calls.Load(), time.Since(start))
	}
}

func TestOpenAIBadAnswers(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"count": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"data":[{"index":0,"embedding":[1,0]}]}`))
		},
		"index": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"data":[{"index":0,"embedding":[1,0]},{"index":0,"embedding":[0,1]}]}`))
		},
		"lengths": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"data":[{"index":0,"embedding":[1,0]},{"index":1,"embedding":[0,1,0]}]}`))
		},
		"json": func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"data":`)) },
	} {
		srv := httptest.NewServer(h)
		e, err := NewOpenAI(OpenAIOptions{URL: srv.URL, Model: "m", Attempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Embed(context.Background(), []string{"a", "b"}); err == nil {
			t.Errorf("%s: a bad answer gave vectors", name)
		}
		srv.Close()
	}
	// A configured length that the endpoint does not keep is an error.
	f := &fakeEndpoint{dims: 8}
	e := newOpenAI(t, f, OpenAIOptions{Dimensions: 4})
	if _, err := e.Embed(context.Background(), []string{"a"}); err == nil {
		t.Error("vectors of 8 dimensions accepted for 4")
	}
}

func TestNewOpenAIRefusesBadOptions(t *testing.T) {
	for _, o := range []OpenAIOptions{
		{URL: "", Model: "m"},
		{URL: "ftp://x/v1", Model: "m"},
		{URL: "http:///v1", Model: "m"},
		{URL: "http://x/v1"},
		{URL: "http://x/v1", Model: "m", Dimensions: -1},
	} {
		if _, err := NewOpenAI(o); err == nil {
			t.Errorf("NewOpenAI(%+v) accepted", o)
		}
	}
	e, err := NewOpenAI(OpenAIOptions{URL: "https://api.example.com/v1/", Model: "m"})
	if err != nil || e.url != "https://api.example.com/v1/embeddings" {
		t.Errorf("URL %q, %v", e.url, err)
	}
}
