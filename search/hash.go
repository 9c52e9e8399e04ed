package search

import (
	"context"
	"hash/fnv"
	"math"
	"strings"
	"unicode"
)

// DefaultDimensions is the length of Hash's vectors unless told otherwise.
const DefaultDimensions = 256

// HashModel is the model name of Hash's vectors.
const HashModel = "belay-hash-v1"

// Hash is the built-in embedder: offline, deterministic and free. It hashes
// the words of a text, the pairs of adjacent words and the character
// 3- and 4-grams of each word into a signed vector (feature hashing) and
// scales it to unit length.
//
// It is lexical, not semantic: texts are close when they share words or
// parts of words ("migrate", "migration"), never because they mean the same
// ("database" and "PostgreSQL" are strangers to it). Set an OpenAI-compatible
// endpoint for meaning.
type Hash struct {
	dims int
}

// NewHash returns a Hash embedder with vectors of dims (DefaultDimensions
// when 0) dimensions.
func NewHash(dims int) *Hash {
	if dims <= 0 {
		dims = DefaultDimensions
	}
	return &Hash{dims: dims}
}

// Model implements Embedder.
func (h *Hash) Model() string { return HashModel }

// Dimensions implements Embedder.
func (h *Hash) Dimensions() int { return h.dims }

// Semantic reports false: Hash matches spelling, not meaning.
func (h *Hash) Semantic() bool { return false }

// Embed implements Embedder. It never fails.
func (h *Hash) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = h.Vector(t)
	}
	return out, nil
}

// Vector returns the unit vector of one text; a text without words gives
// the zero vector.
func (h *Hash) Vector(text string) []float32 {
	v := make([]float32, h.dims)
	words := Words(text)
	var grams []string
	prev := ""
	for _, w := range words {
		if IsStopword(w) {
			prev = ""
			continue
		}
		h.add(v, 'w', w, 1)
		if prev != "" {
			h.add(v, 'b', prev+" "+w, 0.5)
		}
		prev = w
		grams = charGrams(grams[:0], w)
		// A word's n-grams together weigh as much as the word itself.
		weight := float32(1 / math.Sqrt(float64(len(grams))))
		for _, g := range grams {
			h.add(v, 'g', g, weight)
		}
	}
	Normalize(v)
	return v
}

// add adds weight to the feature's dimension with the feature's sign.
func (h *Hash) add(v []float32, kind byte, feature string, weight float32) {
	f := fnv.New64a()
	f.Write([]byte{kind})
	f.Write([]byte(feature))
	sum := f.Sum64()
	i := int(sum % uint64(h.dims))
	if sum>>63 == 1 {
		weight = -weight
	}
	v[i] += weight
}

// charGrams appends the character 3- and 4-grams of "<w>" to dst.
func charGrams(dst []string, w string) []string {
	r := []rune("<" + w + ">")
	for n := 3; n <= 4; n++ {
		for i := 0; i+n <= len(r); i++ {
			dst = append(dst, string(r[i:i+n]))
		}
	}
	return dst
}

// Words splits text into lower-case words: runs of letters and digits.
// "OC-41252 fixed" is oc, 41252, fixed.
func Words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r)
	})
}

// IsStopword reports whether w, a lower-case word, is an English word too
// common to tell texts apart.
func IsStopword(w string) bool {
	_, ok := stopwords[w]
	return ok
}

var stopwords = func() map[string]struct{} {
	m := map[string]struct{}{}
	for _, w := range strings.Fields(`a an and are as at be been but by can could did do does done for from
		had has have how i if in into is it its of on or our so than that the their them then there these
		they this to was we were what when where which while who why will with would you your`) {
		m[w] = struct{}{}
	}
	return m
}()
