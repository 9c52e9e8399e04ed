package core

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/search"
	"github.com/belayhq/belay/store"
)

// queryEmbedTimeout bounds embedding a query on the request path: past it the
// search ranks by text alone.
const queryEmbedTimeout = 5 * time.Second

// candidates is how many candidates each ranking gives for topK results.
func candidates(topK int) int { return min(max(3*topK, 30), 300) }

// lexicalNote is what --explain says of an embedder that is not semantic.
const lexicalNote = "the embedder is lexical, not semantic: vectors match shared words and parts of words (migrate, migration), never synonyms; an OpenAI-compatible embedding endpoint (BELAY_EMBEDDING_URL) adds meaning"

// SearchCheckpoints ranks the checkpoints the caller may read by BM25 and by
// vector similarity (the store filters by scope, project and tags in its
// query) and fuses the two rankings by reciprocal rank. When the query cannot
// be embedded it ranks by text alone and says so in Warnings.
func (s *Service) SearchCheckpoints(ctx context.Context, in belay.SearchInput) (*belay.SearchResult, error) {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	topK := cmp.Or(in.TopK, belay.DefaultTopK)
	q := store.SearchQuery{Scope: c.scope(), ProjectPath: s.projectPath(c, in.ProjectPath), Tags: in.Tags,
		Text: in.Query, Model: s.embed.Model(), Limit: candidates(topK)}
	out := &belay.SearchResult{Results: []belay.SearchHit{}, Query: in.Query, TopK: topK}
	q.Vector, err = s.embedQuery(ctx, in.Query)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		out.Warnings = append(out.Warnings, "ranked by text alone: the query could not be embedded with "+s.embed.Model())
	}
	hits, err := s.store.SearchCheckpoints(ctx, q)
	if err != nil {
		return nil, err
	}
	rankings := 1
	if q.Vector != nil {
		rankings = 2
	}
	type ranked struct {
		hit          store.SearchHit
		fused, score float64
	}
	all := make([]ranked, len(hits))
	for i, h := range hits {
		all[i].hit = h
		all[i].fused, all[i].score = search.Fuse([]int{h.TextRank, h.VectorRank}, rankings)
	}
	slices.SortFunc(all, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(b.fused, a.fused), cmp.Compare(b.hit.Similarity, a.hit.Similarity),
			cmp.Compare(b.hit.TextScore, a.hit.TextScore), cmp.Compare(a.hit.CheckpointID, b.hit.CheckpointID))
	})
	var weight int64 // of the results so far, as a list page counts it
	for _, r := range all {
		if len(out.Results) == topK {
			break
		}
		if weight >= store.PageBytes {
			out.Warnings = append(out.Warnings, fmt.Sprintf("only the best %d results are shown: their agent states, outputs and metadata reach %d MiB; ask for fewer (topK) or narrow the query",
				len(out.Results), store.PageBytes>>20))
			break
		}
		cp, err := s.store.GetCheckpoint(ctx, r.hit.CheckpointID)
		if belay.IsCode(err, belay.CodeCheckpointNotFound) {
			continue // deleted since the search
		}
		if err != nil {
			return nil, err
		}
		cp, err = s.settle(ctx, cp)
		if damaged := corrupted(err); damaged != nil {
			// One damaged checkpoint fails no search, as it fails no list.
			out.Warnings = append(out.Warnings, fmt.Sprintf("checkpoint %s is left out: %s", r.hit.CheckpointID, damaged.Message))
			continue
		}
		if err != nil {
			return nil, err
		}
		hit := belay.SearchHit{Checkpoint: cp, Score: r.score, Distance: 1}
		if r.hit.HasVector {
			hit.Distance = 1 - r.hit.Similarity
		}
		if in.Explain {
			hit.Explain = &belay.HitExplain{BM25Rank: r.hit.TextRank, BM25Score: r.hit.TextScore, VectorRank: r.hit.VectorRank,
				Similarity: r.hit.Similarity, HasVector: r.hit.HasVector, Fused: r.fused}
		}
		out.Results = append(out.Results, hit)
		weight += store.CheckpointBytes(cp)
	}
	if in.Explain {
		if out.Explain, err = s.explain(ctx, c, q.Limit); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// embedQuery returns the query's vector, or nil when it has none (a query of
// words too common to embed).
func (s *Service) embedQuery(ctx context.Context, query string) ([]float32, error) {
	ctx, cancel := context.WithTimeout(ctx, queryEmbedTimeout)
	defer cancel()
	vecs, err := s.embed.Embed(ctx, []string{query})
	if err != nil {
		return nil, err
	}
	if len(vecs) != 1 || !slices.ContainsFunc(vecs[0], func(x float32) bool { return x != 0 }) {
		return nil, nil
	}
	return vecs[0], nil
}

// explain describes the ranking. Only admins hear about the index, whose
// counts cover what others may not see.
func (s *Service) explain(ctx context.Context, c caller, limit int) (*belay.SearchExplain, error) {
	ex := &belay.SearchExplain{Embedder: s.embed.Model(), Semantic: search.IsSemantic(s.embed),
		Fusion: fmt.Sprintf("rrf k=%d", search.RRFK), Candidates: limit}
	if !ex.Semantic {
		ex.Notes = append(ex.Notes, lexicalNote)
	}
	if !c.Admin {
		return ex, nil
	}
	st, err := s.store.SearchIndex(ctx)
	if err != nil {
		return nil, err
	}
	if st.Model != "" && !sameModel(st.IndexModel, s.indexModel()) {
		ex.Notes = append(ex.Notes, fmt.Sprintf("the index holds vectors of %s and this service embeds with %s: it ranks by text until `belay reindex`",
			st.Model, s.embed.Model()))
	}
	if st.Queued > 0 {
		ex.Notes = append(ex.Notes, fmt.Sprintf("%d checkpoints wait for their vectors and are found by text alone until then", st.Queued))
	}
	return ex, nil
}

// indexModel is the vector space of this service's embedder.
func (s *Service) indexModel() store.IndexModel {
	return store.IndexModel{Model: s.embed.Model(), Dimensions: s.embed.Dimensions()}
}

// sameModel reports whether two vector spaces are one; a length of 0 is
// not known yet and matches any.
func sameModel(a, b store.IndexModel) bool {
	return a.Model == b.Model && (a.Dimensions == 0 || b.Dimensions == 0 || a.Dimensions == b.Dimensions)
}

// Reindex makes the index this service's model's and queues checkpoints to
// be embedded (admins).
func (s *Service) Reindex(ctx context.Context, in belay.ReindexInput) (*belay.IndexStatus, error) {
	if _, err := authorizeAdmin(ctx, belay.ScopeWrite, "rebuild the search index"); err != nil {
		return nil, err
	}
	m := s.indexModel()
	err := s.update(ctx, func(tx store.Tx) error {
		_, err := tx.QueueEmbeddings(ctx, m, in.All, s.clock.Now())
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.indexStatus(ctx)
}

// IndexStatus reports the search index (admins).
func (s *Service) IndexStatus(ctx context.Context) (*belay.IndexStatus, error) {
	if _, err := authorizeAdmin(ctx, belay.ScopeRead, "see the search index"); err != nil {
		return nil, err
	}
	return s.indexStatus(ctx)
}

func (s *Service) indexStatus(ctx context.Context) (*belay.IndexStatus, error) {
	st, err := s.store.SearchIndex(ctx)
	if err != nil {
		return nil, err
	}
	return &belay.IndexStatus{Model: st.Model, Dimensions: st.Dimensions, Embedder: s.embed.Model(), Semantic: search.IsSemantic(s.embed),
		Checkpoints: st.Checkpoints, Embedded: st.Embedded, Queued: st.Queued, Failing: st.Failing, LastError: st.LastError}, nil
}

// embedText is what a checkpoint's vector is made of.
func embedText(cp *belay.Checkpoint) string {
	parts := []string{cp.Name, cp.Summary, cp.Description, strings.Join(cp.Tags, " ")}
	return strings.Join(slices.DeleteFunc(parts, func(p string) bool { return p == "" }), "\n")
}

// derive sets a new checkpoint's derived fields: when it last changed and
// its token count (seed 003's token_count, of summary and description).
func derive(cp *belay.Checkpoint) {
	if cp.UpdatedAt.IsZero() {
		cp.UpdatedAt = cp.CreatedAt
		if cp.Decision != nil {
			cp.UpdatedAt = cp.Decision.DecidedAt
		}
	}
	countTokens(cp)
}

// countTokens sets the token count of cp's text when it has none.
func countTokens(cp *belay.Checkpoint) {
	if cp.TokenEncoding == "" {
		if n, err := search.CountTokens(cp.Summary, cp.Description); err == nil {
			cp.TokenCount, cp.TokenEncoding = n, search.TokenEncoding
		}
	}
}
