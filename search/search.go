// Package search turns text into vectors and rankings into one score: the
// Embedder interface with a built-in offline embedder (Hash) and one for any
// OpenAI-compatible endpoint (OpenAI), reciprocal rank fusion of a full-text
// ranking and a vector ranking (Fuse), and token counts (CountTokens).
// Storage and scope belong to the store; the rules to core.
package search

import (
	"context"
	"math"
)

// Embedder turns texts into vectors. Vectors of one Model and Dimensions
// share one space; vectors of different models are never compared.
type Embedder interface {
	// Embed returns one L2-normalised vector per text, in order.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Dimensions is the length of every vector; 0 when the endpoint decides
	// and none has been seen yet.
	Dimensions() int
	// Model names the vector space: a different name means vectors that
	// must not be mixed with these.
	Model() string
}

// Semantic is implemented by embedders that say whether their vectors carry
// meaning (a language model) or only spelling (Hash).
type Semantic interface {
	Semantic() bool
}

// IsSemantic reports whether e's vectors carry meaning: true unless e says
// otherwise.
func IsSemantic(e Embedder) bool {
	s, ok := e.(Semantic)
	return !ok || s.Semantic()
}

// RRFK is the constant k of reciprocal rank fusion: a candidate ranked r-th
// in a ranking gets 1/(k+r) from it. Larger k flattens the difference
// between the first ranks.
const RRFK = 20

// Fuse returns the reciprocal-rank-fusion score of a candidate from its
// 1-based ranks in n rankings (0 where the candidate is not ranked), and the
// same scaled to [0,1], where 1 is first in all n rankings.
func Fuse(ranks []int, n int) (fused, score float64) {
	for _, r := range ranks {
		if r > 0 {
			fused += 1 / float64(RRFK+r)
		}
	}
	if n <= 0 {
		return fused, 0
	}
	return fused, min(1, fused/(float64(n)/float64(RRFK+1)))
}

// Normalize scales v to unit length in place; a zero vector stays zero.
func Normalize(v []float32) {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(sum))
	for i := range v {
		v[i] *= inv
	}
}
