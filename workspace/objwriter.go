package workspace

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// objectWriter writes the files of one snapshot built without git (its new
// objects, then the index) so that their disk writes overlap: each file is
// written to a temporary name and its write-out started at once; finish
// waits for them all, as core.fsyncMethod=writeout-only does, and renames
// them into place in the order they were added (objects before the index
// that names them). Like git's batch mode, they are durable once any later
// full sync returns (the snapshot's commit and ref).
type objectWriter struct {
	repo    string
	mu      sync.Mutex
	pending []pendingFile
	ids     map[[20]byte]bool // objects pending
}

type pendingFile struct {
	tmp   *os.File
	final string
}

func newObjectWriter(repo string) *objectWriter {
	return &objectWriter{repo: repo, ids: map[[20]byte]bool{}}
}

// zlibWriters are reused: a new one allocates its tables.
var zlibWriters = sync.Pool{New: func() any {
	zw, _ := zlib.NewWriterLevel(nil, zlib.BestSpeed) // git's core.looseCompression
	return zw
}}

// store writes an object unless the repository has it loose already, and
// returns its id.
func (w *objectWriter) store(kind string, body []byte) ([20]byte, error) {
	header := kind + " " + strconv.Itoa(len(body)) + "\x00"
	h := sha1.New()
	h.Write([]byte(header))
	h.Write(body)
	var id [20]byte
	h.Sum(id[:0])
	name := fmt.Sprintf("%x", id)
	dir := filepath.Join(w.repo, "objects", name[:2])
	final := filepath.Join(dir, name[2:])
	w.mu.Lock()
	pending := w.ids[id]
	w.ids[id] = true
	w.mu.Unlock()
	if pending {
		return id, nil
	}
	if _, err := os.Stat(final); err == nil {
		return id, nil
	}
	var buf bytes.Buffer
	buf.Grow(len(body)/2 + 64)
	zw := zlibWriters.Get().(*zlib.Writer)
	zw.Reset(&buf)
	zw.Write([]byte(header))
	zw.Write(body)
	err := zw.Close()
	zlibWriters.Put(zw)
	if err != nil {
		return id, fmt.Errorf("write object %s: %w", name, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return id, fmt.Errorf("write object %s: %w", name, err)
	}
	tmp, err := os.CreateTemp(dir, "tmp_obj_")
	if err != nil {
		return id, fmt.Errorf("write object %s: %w", name, err)
	}
	return id, w.add(tmp, final, buf.Bytes(), 0o444)
}

// add writes data to tmp, starts its write-out and queues its rename to
// final.
func (w *objectWriter) add(tmp *os.File, final string, data []byte, perm os.FileMode) error {
	_, err := tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = startWriteout(tmp)
	}
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", final, err)
	}
	w.mu.Lock()
	w.pending = append(w.pending, pendingFile{tmp: tmp, final: final})
	w.mu.Unlock()
	return nil
}

// finish waits for every write-out and renames the files into place.
func (w *objectWriter) finish() error {
	pending := w.pending
	w.pending = nil
	var err error
	for i, p := range pending {
		if err == nil {
			err = writeout(p.tmp)
		}
		if cerr := p.tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(p.tmp.Name(), p.final)
		}
		if err != nil {
			os.Remove(p.tmp.Name())
			for _, q := range pending[i+1:] {
				q.tmp.Close()
				os.Remove(q.tmp.Name())
			}
			return fmt.Errorf("write %s: %w", p.final, err)
		}
	}
	return nil
}

// abort removes whatever was not renamed into place.
func (w *objectWriter) abort() {
	for _, p := range w.pending {
		p.tmp.Close()
		os.Remove(p.tmp.Name())
	}
	w.pending = nil
}
