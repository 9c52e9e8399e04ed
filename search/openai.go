package search

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// OpenAIOptions configure an embedder for an OpenAI-compatible embeddings
// endpoint (OpenAI, Azure OpenAI, Ollama, vLLM, LiteLLM, …).
type OpenAIOptions struct {
	// URL is the endpoint, e.g. https://api.openai.com/v1/embeddings; a URL
	// not ending in /embeddings (https://api.openai.com/v1) gets it added.
	URL   string
	Model string
	// APIKey is sent as a bearer token when set.
	APIKey string
	// Dimensions, when set, asks the endpoint for vectors of that length
	// (models that can shorten them); else the endpoint decides.
	Dimensions int
	// BatchSize is how many texts go in one request (default 64).
	BatchSize int
	// Timeout bounds one request (default 30 s).
	Timeout time.Duration
	// Attempts is how often a request is tried before Embed fails (default 3).
	Attempts int
	// Backoff is the wait before the first retry, doubled for each next one
	// (default 500 ms); a Retry-After header overrides it.
	Backoff time.Duration
	// HTTPClient defaults to a client without its own timeout.
	HTTPClient *http.Client
}

// OpenAI embeds through an OpenAI-compatible /v1/embeddings endpoint:
// batched, each request bounded in time, and retried with backoff on
// network errors, 429 and 5xx answers.
type OpenAI struct {
	opts OpenAIOptions
	url  string
	dims atomic.Int64
}

// NewOpenAI returns an embedder for the endpoint in opts.
func NewOpenAI(opts OpenAIOptions) (*OpenAI, error) {
	u, err := url.Parse(strings.TrimRight(opts.URL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("embedding URL must look like https://host/v1/embeddings, got %q", opts.URL)
	}
	if !strings.HasSuffix(u.Path, "/embeddings") {
		u.Path += "/embeddings"
	}
	if opts.Model == "" {
		return nil, errors.New("an embedding model is required with an embedding URL")
	}
	if opts.Dimensions < 0 {
		return nil, fmt.Errorf("embedding dimensions must be positive, got %d", opts.Dimensions)
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 64
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 3
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 500 * time.Millisecond
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	e := &OpenAI{opts: opts, url: u.String()}
	e.dims.Store(int64(opts.Dimensions))
	return e, nil
}

// Model implements Embedder.
func (e *OpenAI) Model() string { return e.opts.Model }

// Dimensions implements Embedder: the configured length, else the length of
// the vectors the endpoint returned, 0 before the first.
func (e *OpenAI) Dimensions() int { return int(e.dims.Load()) }

// Embed implements Embedder: texts go in batches of BatchSize.
func (e *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += e.opts.BatchSize {
		batch := texts[start:min(start+e.opts.BatchSize, len(texts))]
		vecs, err := e.embedBatch(ctx, batch)
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
	}
	return out, nil
}

// embedBatch sends one request, retrying what may succeed on another try.
func (e *OpenAI) embedBatch(ctx context.Context, texts []string) ([][]float32, error) {
	body, err := json.Marshal(embeddingRequest{Model: e.opts.Model, Input: texts, Dimensions: e.opts.Dimensions, EncodingFormat: "float"})
	if err != nil {
		return nil, err
	}
	wait := e.opts.Backoff
	for attempt := 1; ; attempt++ {
		vecs, retryAfter, err := e.post(ctx, body, len(texts))
		if err == nil {
			return vecs, nil
		}
		var perm permanentError
		if errors.As(err, &perm) || attempt >= e.opts.Attempts || ctx.Err() != nil {
			return nil, fmt.Errorf("embedding %d texts with %s: %w", len(texts), e.opts.Model, err)
		}
		d := wait + rand.N(wait/2+1)
		if retryAfter > 0 {
			d = retryAfter
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("embedding %d texts with %s: %w (after: %w)", len(texts), e.opts.Model, ctx.Err(), err)
		case <-t.C:
		}
		wait *= 2
	}
}

type embeddingRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	Dimensions     int      `json:"dimensions,omitempty"`
	EncodingFormat string   `json:"encoding_format"`
}

type embeddingResponse struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
}

// permanentError is an answer that another try would get again.
type permanentError struct{ error }

// maxRetryAfter bounds how long a Retry-After header may make a retry wait.
const maxRetryAfter = time.Minute

// post sends one request and decodes its vectors; a failed request also
// returns how long the server asked to wait before the next one.
func (e *OpenAI) post(ctx context.Context, body []byte, n int) ([][]float32, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return nil, 0, permanentError{err}
	}
	req.Header.Set("Content-Type", "application/json")
	if e.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.opts.APIKey)
	}
	resp, err := e.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		err := fmt.Errorf("%s answered %s: %s", e.url, resp.Status, strings.TrimSpace(string(msg)))
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 || resp.StatusCode == http.StatusRequestTimeout {
			return nil, retryAfter(resp.Header.Get("Retry-After")), err
		}
		return nil, 0, permanentError{err}
	}
	var r embeddingResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, 0, fmt.Errorf("decode %s answer: %w", e.url, err)
	}
	return e.vectors(r, n)
}

// vectors checks an answer (one vector per text, all of one length) and
// returns the vectors in input order, normalised.
func (e *OpenAI) vectors(r embeddingResponse, n int) ([][]float32, time.Duration, error) {
	if len(r.Data) != n {
		return nil, 0, permanentError{fmt.Errorf("%s returned %d vectors for %d texts", e.url, len(r.Data), n)}
	}
	out := make([][]float32, n)
	for _, d := range r.Data {
		if d.Index < 0 || d.Index >= n || out[d.Index] != nil {
			return nil, 0, permanentError{fmt.Errorf("%s returned a vector with index %d for %d texts", e.url, d.Index, n)}
		}
		if len(d.Embedding) == 0 {
			return nil, 0, permanentError{fmt.Errorf("%s returned an empty vector", e.url)}
		}
		out[d.Index] = d.Embedding
	}
	dims := len(out[0])
	for _, v := range out {
		if len(v) != dims {
			return nil, 0, permanentError{fmt.Errorf("%s returned vectors of %d and %d dimensions", e.url, dims, len(v))}
		}
		Normalize(v)
	}
	if !e.dims.CompareAndSwap(0, int64(dims)) && e.Dimensions() != dims {
		return nil, 0, permanentError{fmt.Errorf("%s returned vectors of %d dimensions, expected %d", e.url, dims, e.Dimensions())}
	}
	return out, 0, nil
}

// retryAfter reads a Retry-After header given in seconds; 0 when absent or
// in another form.
func retryAfter(h string) time.Duration {
	s, err := strconv.Atoi(strings.TrimSpace(h))
	if err != nil || s < 0 {
		return 0
	}
	return min(time.Duration(s)*time.Second, maxRetryAfter)
}
