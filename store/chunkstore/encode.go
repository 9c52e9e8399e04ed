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
	var buf bytes.Buffer
	buf.Grow(len(data) + 1)
	buf.WriteByte(storedFlate)
	w := writers.Get().(*flate.Writer)
	defer writers.Put(w)
	w.Reset(&buf)
	// Writes to a bytes.Buffer do not fail.
	_, _ = w.Write(data)
	_ = w.Close()
	if buf.Len() > len(data)-len(data)/8 {
		return append([]byte{storedRaw}, data...)
	}
	return buf.Bytes()
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
		r := readers.Get().(io.ReadCloser)
		defer readers.Put(r)
		if err := r.(flate.Resetter).Reset(bytes.NewReader(stored[1:]), nil); err != nil {
			return nil, false
		}
		out := make([]byte, 0, 2*len(stored))
		out, err := readAll(out, io.LimitReader(r, maxSize+1))
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
