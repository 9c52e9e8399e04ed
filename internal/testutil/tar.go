package testutil

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"testing"
)

// TarEntry is one file of a test archive: Head, then Fill repeated, then
// Tail, Header.Size bytes in all.
type TarEntry struct {
	Header     tar.Header
	Head, Tail []byte
	Fill       byte
}

// StreamTar returns a gzipped tar of entries that costs kilobytes to build
// however many gigabytes they hold: each mebibyte of fill is one gzip member,
// compressed once and repeated (a gzip stream may hold many members).
func StreamTar(tb testing.TB, entries ...TarEntry) []byte {
	tb.Helper()
	var out bytes.Buffer
	member := func(p []byte) {
		gz := gzip.NewWriter(&out)
		if _, err := gz.Write(p); err != nil {
			tb.Fatal(err)
		}
		if err := gz.Close(); err != nil {
			tb.Fatal(err)
		}
	}
	const chunk = 1 << 20
	fills := map[byte][]byte{}
	for _, e := range entries {
		var hdr bytes.Buffer
		if err := tar.NewWriter(&hdr).WriteHeader(&e.Header); err != nil {
			tb.Fatal(err)
		}
		member(append(hdr.Bytes(), e.Head...))
		n := max(e.Header.Size-int64(len(e.Head))-int64(len(e.Tail)), 0)
		if n >= chunk && fills[e.Fill] == nil {
			var b bytes.Buffer
			gz, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
			gz.Write(bytes.Repeat([]byte{e.Fill}, chunk))
			gz.Close()
			fills[e.Fill] = b.Bytes()
		}
		for ; n >= chunk; n -= chunk {
			out.Write(fills[e.Fill])
		}
		rest := append(bytes.Repeat([]byte{e.Fill}, int(n)), e.Tail...)
		if pad := (int64(len(e.Head)) + n + int64(len(e.Tail))) % 512; pad != 0 {
			rest = append(rest, make([]byte, 512-pad)...)
		}
		member(rest)
	}
	member(make([]byte, 1024))
	return out.Bytes()
}

// RegularFile is the tar header of a regular file.
func RegularFile(name string, size int64) tar.Header {
	return tar.Header{Name: name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg}
}

// SparseTar returns a gzipped tar of one file, name, stored as a GNU sparse
// file (PAX 1.0) of size bytes that are all a hole: a reader honouring
// sparse maps makes them up from nothing. tar.Writer refuses GNU.sparse
// records, so a look-alike key of the same length is written and renamed in
// the bytes.
func SparseTar(tb testing.TB, name string, size int64) []byte {
	tb.Helper()
	hdr := RegularFile("GNUSparseFile.0/"+name, 512)
	hdr.Format = tar.FormatPAX
	hdr.PAXRecords = map[string]string{"XXX.sparse.major": "1", "XXX.sparse.minor": "0",
		"XXX.sparse.name": name, "XXX.sparse.realsize": fmt.Sprint(size)}
	var raw bytes.Buffer
	if err := tar.NewWriter(&raw).WriteHeader(&hdr); err != nil {
		tb.Fatal(err)
	}
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	gz.Write(bytes.ReplaceAll(raw.Bytes(), []byte("XXX.sparse."), []byte("GNU.sparse.")))
	sparseMap := []byte("1\n0\n0\n")
	gz.Write(append(sparseMap, make([]byte, 512-len(sparseMap)+1024)...))
	gz.Close()
	return b.Bytes()
}
