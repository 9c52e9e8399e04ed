package chunkstore

import (
	"encoding/binary"
	"hash/crc32"
)

// A state of at least CompressMin and at most InlineMax bytes is kept in its
// row compressed, when DEFLATE saves at least an eighth of it: a marker byte
// (compressedMarker, which no JSON document begins with either), the state's
// length as a uvarint, its CRC-32C (little-endian), then the compressed
// bytes. The checksum makes a damaged row CHECKPOINT_CORRUPTED rather than
// another state of the same length. A save writes its state
// twice, in the checkpoint's row and in its session's, and an agent state of
// a few KiB (a message history, mostly text) shrinks to a fraction: fewer
// pages for the commit to write and sync, and a smaller database.
const (
	CompressMin      = 1 << 10
	compressedMarker = 1
)

// Plain reports whether stored is the state itself: neither a root nor a
// compressed state, which Load must first turn back into it.
func Plain(stored []byte) bool { return len(stored) == 0 || stored[0] > compressedMarker }

// inlineForm returns what the row keeps of state, which is stored inline:
// the state compressed when that is worth it, else the state itself.
func inlineForm(state []byte) []byte {
	if len(state) < CompressMin {
		return state
	}
	head := binary.AppendUvarint([]byte{compressedMarker}, uint64(len(state)))
	head = binary.LittleEndian.AppendUint32(head, crc32.Checksum(state, castagnoli))
	b, ok := compress(head, state)
	if !ok {
		return state
	}
	// Kept until the row is written, maybe a while (see Prepare): in no
	// more memory than it takes.
	return append(make([]byte, 0, len(b)), b...)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// compressedLength returns the length a compressed state declares and where
// its checksum begins; false when the header is damaged.
func compressedLength(stored []byte) (length, sum int, ok bool) {
	if len(stored) < 2 || stored[0] != compressedMarker {
		return 0, 0, false
	}
	n, size := binary.Uvarint(stored[1:])
	if size <= 0 || n == 0 || n > InlineMax {
		return 0, 0, false
	}
	return int(n), 1 + size, true
}

// inflate returns the state a compressed state holds, checked against the
// length and checksum it declares.
func inflate(stored []byte) ([]byte, error) {
	length, sum, ok := compressedLength(stored)
	if !ok || len(stored) < sum+4 {
		return nil, corrupt("the state's compressed form has a damaged header")
	}
	// One byte more than the state, for the read that finds the stream's end.
	out, rest, err := decompress(stored[sum+4:], length+1, length)
	if err != nil || rest != 0 {
		return nil, corrupt("the state's compressed form is damaged")
	}
	if len(out) != length {
		return nil, corrupt("the state's compressed form does not hold the length it declares")
	}
	if crc32.Checksum(out, castagnoli) != binary.LittleEndian.Uint32(stored[sum:]) {
		return nil, corrupt("the state's compressed form does not match its checksum")
	}
	return out, nil
}
