package search

import (
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// TokenEncoding is the encoding CountTokens counts in: OpenAI's o200k_base
// (GPT-4o and later).
const TokenEncoding = "o200k_base"

// The encoding's tables take a moment to build: once, on first use.
var o200k = sync.OnceValues(func() (tokenizer.Codec, error) {
	return tokenizer.Get(tokenizer.O200kBase)
})

// CountTokens returns how many o200k_base tokens texts make together, each
// encoded on its own. It works offline.
func CountTokens(texts ...string) (int, error) {
	enc, err := o200k()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, t := range texts {
		c, err := enc.Count(t)
		if err != nil {
			return 0, err
		}
		n += c
	}
	return n, nil
}
