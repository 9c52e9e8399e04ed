package core_test

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
)

// qualitySet is a labelled set: checkpoints of one project and queries with
// the checkpoints a person would want found.
type qualitySet struct {
	Checkpoints []struct {
		Key         string   `json:"key"`
		Summary     string   `json:"summary"`
		Description string   `json:"description"`
		Tags        []string `json:"tags"`
	} `json:"checkpoints"`
	Queries []struct {
		Query    string   `json:"query"`
		Relevant []string `json:"relevant"`
	} `json:"queries"`
}

// quality is recall@5 and mean reciprocal rank over a query set.
type quality struct{ recall5, mrr float64 }

// measure adds one query's ranking (checkpoint keys, best first).
func (q *quality) measure(ranking, relevant []string) {
	found := 0
	for _, r := range relevant {
		if i := slices.Index(ranking, r); i >= 0 && i < 5 {
			found++
		}
	}
	q.recall5 += float64(found) / float64(len(relevant))
	for i, k := range ranking {
		if slices.Contains(relevant, k) {
			q.mrr += 1 / float64(i+1)
			break
		}
	}
}

// TestSearchQuality measures BM25 alone, the vectors alone and the fused
// ranking on the labelled set and requires the fusion to do no worse than
// either alone.
func TestSearchQuality(t *testing.T) {
	b, err := os.ReadFile("testdata/search_quality.json")
	if err != nil {
		t.Fatal(err)
	}
	var set qualitySet
	if err := json.Unmarshal(b, &set); err != nil {
		t.Fatal(err)
	}
	svc := newService(t, nil)
	project := t.TempDir()
	keyOf := map[string]string{}
	for _, c := range set.Checkpoints {
		cp := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: c.Summary, Description: c.Description, Tags: c.Tags})
		keyOf[cp.ID] = c.Key
	}
	mustIndex(t, svc)
	bm25, vector, hybrid := measureQuality(t, svc, set, keyOf)
	n := float64(len(set.Queries))
	t.Logf("%d checkpoints, %d queries", len(set.Checkpoints), len(set.Queries))
	for _, r := range []struct {
		name string
		q    quality
	}{{"BM25 alone", bm25}, {"vector alone", vector}, {"hybrid (RRF)", hybrid}} {
		t.Logf("%-13s recall@5 %.3f  MRR %.3f", r.name, r.q.recall5/n, r.q.mrr/n)
	}
	if hybrid.recall5 < bm25.recall5 || hybrid.mrr < bm25.mrr {
		t.Errorf("hybrid (recall@5 %.3f, MRR %.3f) does worse than BM25 alone (%.3f, %.3f)", hybrid.recall5/n, hybrid.mrr/n, bm25.recall5/n, bm25.mrr/n)
	}
	if hybrid.recall5 < vector.recall5 || hybrid.mrr < vector.mrr {
		t.Errorf("hybrid (recall@5 %.3f, MRR %.3f) does worse than the vectors alone (%.3f, %.3f)", hybrid.recall5/n, hybrid.mrr/n, vector.recall5/n, vector.mrr/n)
	}
}

// measureQuality runs every query once with explain and reads the two
// rankings and the fused one from the answer: with fewer checkpoints than
// MaxTopK, every candidate of either ranking is in it.
func measureQuality(t *testing.T, svc *core.Service, set qualitySet, keyOf map[string]string) (bm25, vector, hybrid quality) {
	t.Helper()
	for _, q := range set.Queries {
		res := mustSearch(t, localCtx, svc, belay.SearchInput{Query: q.Query, TopK: belay.MaxTopK, Explain: true})
		var fused []string
		text := make([]string, len(res.Results)+1)
		vec := make([]string, len(res.Results)+1)
		for _, h := range res.Results {
			k := keyOf[h.Checkpoint.ID]
			fused = append(fused, k)
			if r := h.Explain.BM25Rank; r > 0 {
				text[r-1] = k
			}
			if r := h.Explain.VectorRank; r > 0 {
				vec[r-1] = k
			}
		}
		text = slices.DeleteFunc(text, func(s string) bool { return s == "" })
		vec = slices.DeleteFunc(vec, func(s string) bool { return s == "" })
		bm25.measure(text, q.Relevant)
		vector.measure(vec, q.Relevant)
		hybrid.measure(fused, q.Relevant)
		if testing.Verbose() && !slices.Contains(fused[:min(5, len(fused))], q.Relevant[0]) {
			t.Logf("%q: fused top 5 %v, want %v", q.Query, fused[:min(5, len(fused))], q.Relevant)
		}
	}
	return bm25, vector, hybrid
}
