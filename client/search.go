package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/belayhq/belay"
)

// SearchCheckpoints returns the checkpoints best matching in.Query, best
// first (GET /v1/search).
func (c *Client) SearchCheckpoints(ctx context.Context, in belay.SearchInput) (*belay.SearchResult, error) {
	// Tags travel comma-separated-or-repeated in the query string: check
	// them here, as the server would, so a comma is not split.
	if err := belay.ValidateTags("tags", in.Tags); err != nil {
		return nil, err
	}
	q := url.Values{"q": {in.Query}}
	set(q, "projectPath", in.ProjectPath)
	for _, t := range in.Tags {
		q.Add("tag", t)
	}
	setInt(q, "topK", in.TopK)
	if in.Explain {
		q.Set("explain", "true")
	}
	return call[belay.SearchResult](ctx, c, http.MethodGet, "/v1/search", q, nil)
}

// Reindex makes the server's index its embedding model's and queues
// checkpoints to be embedded by the server (admins).
func (c *Client) Reindex(ctx context.Context, in belay.ReindexInput) (*belay.IndexStatus, error) {
	return call[belay.IndexStatus](ctx, c, http.MethodPost, "/v1/search/reindex", nil, in)
}

// IndexStatus reports the server's search index (admins).
func (c *Client) IndexStatus(ctx context.Context) (*belay.IndexStatus, error) {
	return call[belay.IndexStatus](ctx, c, http.MethodGet, "/v1/search/index", nil, nil)
}
