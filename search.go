package belay

import (
	"context"
	"strings"
)

// SearchService finds checkpoints by their words and by their vectors, and
// keeps the vectors up to date.
type SearchService interface {
	// SearchCheckpoints returns the checkpoints the caller may read that best
	// match in.Query, best first: a full-text (BM25) ranking and a vector
	// ranking fused by reciprocal rank. There is no minimum score; nothing
	// matching is an empty list. A checkpoint is found by its words as soon
	// as it is saved and by its vector once that is embedded.
	SearchCheckpoints(ctx context.Context, in SearchInput) (*SearchResult, error)
	// Reindex (admins) builds the index in this service's embedding model:
	// it records the model and queues every checkpoint without a vector of
	// it (every checkpoint with in.All) to be embedded in the background.
	Reindex(ctx context.Context, in ReindexInput) (*IndexStatus, error)
	// IndexStatus (admins) reports the index's model and how many
	// checkpoints have vectors or wait for them.
	IndexStatus(ctx context.Context) (*IndexStatus, error)
}

// Search limits.
const (
	DefaultTopK    = 5
	MaxTopK        = 100
	MaxQueryLength = 1000
)

// SearchInput asks for the TopK checkpoints (DefaultTopK when 0, at most
// MaxTopK) best matching Query: of project ProjectPath when set (that path
// exactly, as in ListCheckpointsInput), carrying every one of Tags.
type SearchInput struct {
	Query       string   `json:"query"`
	ProjectPath string   `json:"projectPath,omitempty"`
	Tags        []string `json:"tags,omitempty"`
	TopK        int      `json:"topK,omitempty"`
	// Explain adds how each result was ranked.
	Explain bool `json:"explain,omitempty"`
}

// Validate checks a search request.
func (in *SearchInput) Validate() error {
	if strings.TrimSpace(in.Query) == "" {
		return Invalid("query", "query must not be empty")
	}
	if err := validText("query", in.Query, 1, MaxQueryLength); err != nil {
		return err
	}
	if in.TopK < 0 || in.TopK > MaxTopK {
		return Invalid("topK", "topK must be 1-%d, got %d", MaxTopK, in.TopK)
	}
	if in.ProjectPath != "" {
		if err := ValidateProjectPath("projectPath", in.ProjectPath); err != nil {
			return err
		}
	}
	return ValidateTags("tags", in.Tags)
}

// SearchResult is the answer to a search: Results sorted by Score, highest
// first, never null.
type SearchResult struct {
	Results []SearchHit `json:"results"`
	Query   string      `json:"query"`
	TopK    int         `json:"topK"`
	// Warnings say what the search had to do without, e.g. the vector
	// ranking when the embedding endpoint was down.
	Warnings []string `json:"warnings,omitempty"`
	// Explain describes the ranking, when asked for.
	Explain *SearchExplain `json:"explain,omitempty"`
}

// SearchHit is one checkpoint found.
type SearchHit struct {
	Checkpoint *Checkpoint `json:"checkpoint"`
	// Score is the fused rank in [0,1]: 1 is first in every ranking.
	Score float64 `json:"score"`
	// Distance is 1 − the cosine similarity of the checkpoint's vector and
	// the query's; 1 when the checkpoint has no vector yet.
	Distance float64     `json:"distance"`
	Explain  *HitExplain `json:"explain,omitempty"`
}

// HitExplain says how one result was ranked. A rank is 1-based; 0 means the
// ranking did not place it among its candidates.
type HitExplain struct {
	BM25Rank int `json:"bm25Rank"`
	// BM25Score is the full-text relevance (higher is better); 0 when no
	// word of the query is in the checkpoint.
	BM25Score  float64 `json:"bm25Score"`
	VectorRank int     `json:"vectorRank"`
	// Similarity is the cosine similarity; HasVector is false while the
	// checkpoint waits for its vector.
	Similarity float64 `json:"similarity"`
	HasVector  bool    `json:"hasVector"`
	// Fused is the raw reciprocal-rank-fusion sum that Score scales.
	Fused float64 `json:"fused"`
}

// SearchExplain describes how a search ranked.
type SearchExplain struct {
	// Embedder is the model the query was embedded with; Semantic says
	// whether its vectors carry meaning or only spelling.
	Embedder string `json:"embedder"`
	Semantic bool   `json:"semantic"`
	// Fusion names the method and its constant: "rrf k=20".
	Fusion string `json:"fusion"`
	// Candidates is how many each ranking contributes at most.
	Candidates int `json:"candidates"`
	// Notes say in words what the numbers mean, e.g. that the built-in
	// embedder is lexical.
	Notes []string `json:"notes,omitempty"`
}

// ReindexInput asks for a rebuild of the vectors: All re-embeds every
// checkpoint, else only those without a vector of the current model.
type ReindexInput struct {
	All bool `json:"all,omitempty"`
}

// IndexStatus is the state of the search index.
type IndexStatus struct {
	// Model and Dimensions are the vector space the index is built in; ""
	// before anything was embedded.
	Model      string `json:"model"`
	Dimensions int    `json:"dimensions"`
	// Embedder is the model this service embeds with. When it is not Model,
	// searches here rank by text alone until Reindex.
	Embedder string `json:"embedder"`
	Semantic bool   `json:"semantic"`
	// Checkpoints counts all checkpoints; Embedded those with a vector of
	// Model; Queued those waiting to be embedded, Failing of which failed
	// at least once (LastError says why).
	Checkpoints int64  `json:"checkpoints"`
	Embedded    int64  `json:"embedded"`
	Queued      int64  `json:"queued"`
	Failing     int64  `json:"failing"`
	LastError   string `json:"lastError,omitempty"`
}
