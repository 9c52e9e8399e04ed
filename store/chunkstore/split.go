// Package chunkstore stores large agent states as content-addressed chunks,
// so that many checkpoints of a big state that changes a little cost about
// the change, not a copy each. It holds the format (content-defined
// chunking, the tree of chunk ids, its root) and the logic every driver
// shares; a driver only offers the table of chunks (Store).
//
// A state of at most InlineMax bytes is stored as it is. A larger one is cut
// where its content says (a gear hash, as in FastCDC), so an edit moves only
// the boundaries around it and every other chunk is stored already. Each
// chunk is keyed by its SHA-256. The list of a state's chunk ids is itself
// cut the same way into index chunks, level above level, until it is short;
// that last list is the root, which the driver keeps where the state would
// have been. A root begins with a zero byte, which no JSON document does.
package chunkstore

import (
	"crypto/sha256"
	"encoding/binary"
)

// InlineMax is the largest state stored as it is, in its row.
const InlineMax = 64 << 10

// Chunk sizes. Between minSize and normalSize a boundary is harder to find
// than after it (FastCDC's normalised chunking), so most chunks are close to
// the average, about 700 bytes: small enough that an edit of 1 KiB rewrites
// about 3 KiB, and that a database page holds several with little left
// over; large enough that a chunk's key costs little beside it.
const (
	minSize    = 256
	normalSize = 512
	maxSize    = 4 << 10
	// The masks test the top bits of the hash, which depend on the last 64
	// bytes read (each byte shifts the hash by one bit).
	maskHard = uint64(0x3FF) << 54 // 10 bits: one position in 1024
	maskEasy = uint64(0xFF) << 56  // 8 bits: one position in 256
)

// An index chunk is a run of ids, cut after an id whose first bits are zero
// (ids are hashes: content-defined for free), at least minIndexIDs and at
// most maxIndexIDs long: about 10 ids, 320 bytes, so one changed id
// rewrites little of the index. Whole ids, so an index chunk read alone is
// a list of ids.
const (
	minIndexIDs = 2
	maxIndexIDs = 64
	indexMask   = 0x7 // one id in 8 ends a chunk
)

// maxRootIDs is how many ids a root lists at most; a longer list gets
// another index level above it.
const maxRootIDs = 16

// ID is the SHA-256 of a chunk's bytes.
type ID [sha256.Size]byte

// Chunk is a piece of a state or of its index, stored under its ID.
type Chunk struct {
	ID   ID
	Data []byte
}

// gear maps each byte to a random 64-bit value. It is part of the format:
// another table cuts other boundaries, and a state saved with it shares no
// chunks with the same state saved before.
var gear = func() (t [256]uint64) {
	x := uint64(0x62656c6179636463) // "belaycdc"
	for i := range t {
		// splitmix64
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		t[i] = z ^ (z >> 31)
	}
	return t
}()

// cut returns the length of the first chunk of data.
func cut(data []byte) int {
	n := len(data)
	if n <= minSize {
		return n
	}
	n = min(n, maxSize)
	normal := min(n, normalSize)
	var h uint64
	i := minSize
	for ; i < normal; i++ {
		h = h<<1 + gear[data[i]]
		if h&maskHard == 0 {
			return i + 1
		}
	}
	for ; i < n; i++ {
		h = h<<1 + gear[data[i]]
		if h&maskEasy == 0 {
			return i + 1
		}
	}
	return n
}

// splitData cuts data into chunks and returns their ids in order, adding
// each chunk not seen before to *chunks. The chunks share data's memory.
func splitData(data []byte, seen map[ID]bool, chunks *[]Chunk) []ID {
	var ids []ID
	for len(data) > 0 {
		n := cut(data)
		c := Chunk{ID: sha256.Sum256(data[:n]), Data: data[:n:n]}
		ids = append(ids, c.ID)
		if !seen[c.ID] {
			seen[c.ID] = true
			*chunks = append(*chunks, c)
		}
		data = data[n:]
	}
	return ids
}

// splitIndex cuts a list of ids into index chunks and returns their ids,
// adding each chunk not seen before to *chunks.
func splitIndex(ids []ID, seen map[ID]bool, chunks *[]Chunk) []ID {
	var up []ID
	for len(ids) > 0 {
		n := min(len(ids), minIndexIDs)
		for n < len(ids) && n < maxIndexIDs && ids[n-1][0]&indexMask != 0 {
			n++
		}
		data := joinIDs(ids[:n])
		c := Chunk{ID: sha256.Sum256(data), Data: data}
		up = append(up, c.ID)
		if !seen[c.ID] {
			seen[c.ID] = true
			*chunks = append(*chunks, c)
		}
		ids = ids[n:]
	}
	return up
}

// Split cuts state into chunks and returns its root and every distinct
// chunk the root refers to, directly or through index chunks. The chunks
// share state's memory.
func Split(state []byte) (root []byte, chunks []Chunk) {
	seen := map[ID]bool{}
	ids := splitData(state, seen, &chunks)
	depth := 0
	for len(ids) > maxRootIDs {
		ids = splitIndex(ids, seen, &chunks)
		depth++
	}
	root = make([]byte, 0, 2+binary.MaxVarintLen64+len(ids)*len(ID{}))
	root = append(root, rootMarker, byte(depth))
	root = binary.AppendUvarint(root, uint64(len(state)))
	return append(root, joinIDs(ids)...), chunks
}

// rootMarker begins every root: JSON never begins with a zero byte.
const rootMarker = 0

// IsRoot reports whether stored is a root rather than a state stored as it is.
func IsRoot(stored []byte) bool { return len(stored) > 0 && stored[0] == rootMarker }

func joinIDs(ids []ID) []byte {
	b := make([]byte, 0, len(ids)*len(ID{}))
	for _, id := range ids {
		b = append(b, id[:]...)
	}
	return b
}
