package chunkstore

import (
	"bytes"
	"compress/flate"
	"io"
	"sync"
)

// A chunk is stored as a byte that says how, then its bytes: as they are,
// or compressed with DEFLATE when that saves at least an eighth. Agent
// states are mostly text, which a chunk's own Huffman codes shrink by a
// third or more. The id is always the hash of the bytes themselves.
const (
	storedRaw   = 0
	storedFlate = 1
)

var writers = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(io.Discard, flate.BestSpeed) // BestSpeed is a valid level
	return w
}}

var readers = sync.Pool{New: func() any { return flate.NewReader(bytes.NewReader(nil)) }}

// encode returns the stored form of a chunk's bytes.
func encode(data []byte) []byte {
	if b, ok := compress([]byte{storedFlate}, data); ok {
		return b
	}
	return append([]byte{storedRaw}, data...)
}

// compress returns head followed by data compressed with DEFLATE, and
// whether that, head included, saves at least an eighth of data's length.
func compress(head, data []byte) ([]byte, bool) {
	buf := bytes.NewBuffer(make([]byte, 0, len(head)+len(data)))
	buf.Write(head)
	w := writers.Get().(*flate.Writer)
	defer writers.Put(w)
	w.Reset(buf)
	// Writes to a bytes.Buffer do not fail.
	_, _ = w.Write(data)
	_ = w.Close()
	return buf.Bytes(), buf.Len() <= len(data)-len(data)/8
}

// decompress reads the DEFLATE stream src into a buffer of capacity size,
// at most limit+1 bytes of it (one more than its caller takes), and returns
// them with how many bytes of src follow the stream's end.
func decompress(src []byte, size, limit int) (out []byte, rest int, err error) {
	r := readers.Get().(io.ReadCloser)
	defer readers.Put(r)
	// flate reads a bytes.Reader a byte at a time: what it leaves after the
	// stream's end is not part of it.
	stream := bytes.NewReader(src)
	if err := r.(flate.Resetter).Reset(stream, nil); err != nil {
		return nil, 0, err
	}
	out, err = readAll(make([]byte, 0, size), io.LimitReader(r, int64(limit)+1))
	return out, stream.Len(), err
}

// decode returns a chunk's bytes from its stored form, at most maxSize of
// them; false when the stored form is damaged.
func decode(stored []byte) ([]byte, bool) {
	if len(stored) == 0 {
		return nil, false
	}
	switch stored[0] {
	case storedRaw:
		return stored[1:], true
	case storedFlate:
		out, _, err := decompress(stored[1:], 2*len(stored), maxSize)
		if err != nil || len(out) > maxSize {
			return nil, false
		}
		return out, true
	}
	return nil, false
}

// readAll is io.ReadAll into buf's capacity.
func readAll(buf []byte, r io.Reader) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
