package workspace

import (
	"bytes"
	"cmp"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// objectWriter writes the files of one snapshot built without git: its new
// objects, then the index. Objects go in one pack file (with its .idx),
// kept in memory until finish, unless the snapshot stores too much for
// that: then each is a loose object. Every file is written to a temporary
// name and its write-out started at once; finish waits for them all, as
// core.fsyncMethod=writeout-only does, and renames them into place in the
// order that keeps every name valid (pack, then its .idx, then the index).
// Like git's batch mode, they are durable once any later full sync returns
// (the snapshot's commit and ref).
type objectWriter struct {
	repo    string
	packed  bool
	mu      sync.Mutex
	objects []packedObject
	pending []pendingFile
	ids     map[[20]byte]bool // objects written
	// err is the first failure to place objects that were settled early
	// (see settle): the snapshot refers to them, so it fails.
	err error
}

type packedObject struct {
	id   [20]byte
	data []byte // the pack's object header and compressed body
}

type pendingFile struct {
	tmp   *os.File
	final string
	wait  bool // wait for its write-out before the rename
}

// maxPackedBytes and maxPackedObjects bound what a snapshot writes into one
// pack held in memory.
const (
	maxPackedBytes   = 32 << 20
	maxPackedObjects = 4096
)

// renameObject puts a written file in place; a test makes it fail.
var renameObject = os.Rename

// maxOpenObjects bounds the loose objects a snapshot holds open, waiting
// for their write-out.
const maxOpenObjects = 256

// newObjectWriter returns a writer for about files new files of bytes in
// all (besides trees).
func newObjectWriter(repo string, files int, bytes int64) *objectWriter {
	return &objectWriter{repo: repo, ids: map[[20]byte]bool{},
		packed: files <= maxPackedObjects && bytes <= maxPackedBytes}
}

// zlibWriters are reused: a new one allocates its tables.
var zlibWriters = sync.Pool{New: func() any {
	zw, _ := zlib.NewWriterLevel(nil, zlib.BestSpeed) // git's core.looseCompression
	return zw
}}

// compress appends body compressed to buf.
func compress(buf *bytes.Buffer, parts ...[]byte) error {
	zw := zlibWriters.Get().(*zlib.Writer)
	defer zlibWriters.Put(zw)
	zw.Reset(buf)
	for _, p := range parts {
		zw.Write(p)
	}
	return zw.Close()
}

// objectTypes are the pack's codes of object kinds.
var objectTypes = map[string]byte{"commit": 1, "tree": 2, "blob": 3}

// store writes an object and returns its id.
func (w *objectWriter) store(kind string, body []byte) ([20]byte, error) {
	header := objectHeader(kind, int64(len(body)))
	h := sha1.New()
	h.Write(header)
	h.Write(body)
	var id [20]byte
	h.Sum(id[:0])
	w.mu.Lock()
	done := w.ids[id]
	w.ids[id] = true
	w.mu.Unlock()
	if done {
		return id, nil
	}
	var buf bytes.Buffer
	buf.Grow(len(body)/2 + 64)
	if w.packed {
		// The pack's object header: type and size, 4 bits then 7 at a time.
		size := uint64(len(body))
		c := objectTypes[kind]<<4 | byte(size&15)
		for size >>= 4; size > 0; size >>= 7 {
			buf.WriteByte(c | 0x80)
			c = byte(size & 0x7f)
		}
		buf.WriteByte(c)
		if err := compress(&buf, body); err != nil {
			return id, fmt.Errorf("write object %x: %w", id, err)
		}
		w.mu.Lock()
		w.objects = append(w.objects, packedObject{id: id, data: buf.Bytes()})
		w.mu.Unlock()
		return id, nil
	}
	name := fmt.Sprintf("%x", id)
	dir := filepath.Join(w.repo, "objects", name[:2])
	final := filepath.Join(dir, name[2:])
	if _, err := os.Stat(final); err == nil {
		return id, nil
	}
	if err := compress(&buf, header, body); err != nil {
		return id, fmt.Errorf("write object %s: %w", name, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return id, fmt.Errorf("write object %s: %w", name, err)
	}
	tmp, err := os.CreateTemp(dir, "tmp_obj_")
	if err != nil {
		return id, fmt.Errorf("write object %s: %w", name, err)
	}
	if err := w.add(tmp, final, buf.Bytes(), 0o444); err != nil {
		return id, err
	}
	w.settle()
	return id, nil
}

// settle renames the loose objects waiting into place once maxOpenObjects
// of them are open, so a snapshot holds few files open however many it
// writes. A loose object may take its name at any time: nothing refers to it
// until the snapshot's commit has a ref. Only loose objects are pending
// before finish. A failure to place them fails the snapshot, in finish.
func (w *objectWriter) settle() {
	w.mu.Lock()
	if len(w.pending) < maxOpenObjects {
		w.mu.Unlock()
		return
	}
	batch := w.pending
	w.pending = nil
	w.mu.Unlock()
	if err := place(batch); err != nil {
		// Other files' objects were in the batch, and their ids are in
		// the tree already: not this file's failure, the snapshot's.
		w.mu.Lock()
		w.err = cmp.Or(w.err, err)
		w.mu.Unlock()
	}
}

// writePack writes the pack and its index (version 2) and queues them
// before the other pending files.
func (w *objectWriter) writePack() error {
	objs := w.objects
	w.objects = nil
	if len(objs) == 0 {
		return nil
	}
	var pack bytes.Buffer
	pack.WriteString("PACK")
	pack.Write(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 2), uint32(len(objs))))
	offsets := make(map[[20]byte]uint64, len(objs))
	crcs := make(map[[20]byte]uint32, len(objs))
	for _, o := range objs {
		offsets[o.id] = uint64(pack.Len())
		crcs[o.id] = crc32.ChecksumIEEE(o.data)
		pack.Write(o.data)
	}
	packSum := sha1.Sum(pack.Bytes())
	pack.Write(packSum[:])
	slices.SortFunc(objs, func(a, b packedObject) int { return bytes.Compare(a.id[:], b.id[:]) })
	var idx bytes.Buffer
	idx.Write([]byte{0xff, 't', 'O', 'c', 0, 0, 0, 2})
	var fanout [256]uint32
	for _, o := range objs {
		fanout[o.id[0]]++
	}
	var total uint32
	for i := range fanout {
		total += fanout[i]
		idx.Write(binary.BigEndian.AppendUint32(nil, total))
	}
	for _, o := range objs {
		idx.Write(o.id[:])
	}
	for _, o := range objs {
		idx.Write(binary.BigEndian.AppendUint32(nil, crcs[o.id]))
	}
	var large []uint64
	for _, o := range objs {
		off := offsets[o.id]
		if off >= 1<<31 {
			idx.Write(binary.BigEndian.AppendUint32(nil, 1<<31|uint32(len(large))))
			large = append(large, off)
			continue
		}
		idx.Write(binary.BigEndian.AppendUint32(nil, uint32(off)))
	}
	for _, off := range large {
		idx.Write(binary.BigEndian.AppendUint64(nil, off))
	}
	idx.Write(packSum[:])
	idxSum := sha1.Sum(idx.Bytes())
	idx.Write(idxSum[:])

	dir := filepath.Join(w.repo, "objects", "pack")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write pack: %w", err)
	}
	base := filepath.Join(dir, fmt.Sprintf("pack-%x", packSum))
	files := w.pending
	w.pending = nil
	for _, f := range []struct {
		ext  string
		data []byte
	}{{".pack", pack.Bytes()}, {".idx", idx.Bytes()}} {
		tmp, err := os.CreateTemp(dir, "tmp_pack_")
		if err != nil {
			w.pending = append(w.pending, files...)
			return fmt.Errorf("write pack: %w", err)
		}
		if err := w.add(tmp, base+f.ext, f.data, 0o444); err != nil {
			w.pending = append(w.pending, files...)
			return err
		}
	}
	w.pending = append(w.pending, files...)
	return nil
}

// add writes data to tmp, starts its write-out and queues its rename to
// final.
func (w *objectWriter) add(tmp *os.File, final string, data []byte, perm os.FileMode) error {
	return w.addFile(tmp, final, data, perm, true)
}

// addFile is add; without wait the rename does not wait for the write-out
// (a file whose damage is detected, and which is rebuilt then: the index).
func (w *objectWriter) addFile(tmp *os.File, final string, data []byte, perm os.FileMode, wait bool) error {
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
	w.pending = append(w.pending, pendingFile{tmp: tmp, final: final, wait: wait})
	w.mu.Unlock()
	return nil
}

// finish writes the pack, waits for every write-out and renames the files
// into place.
func (w *objectWriter) finish() error {
	if w.err != nil {
		return w.err
	}
	if err := w.writePack(); err != nil {
		return err
	}
	pending := w.pending
	w.pending = nil
	return place(pending)
}

// place waits for the write-out of each pending file and renames it into
// place, in order; after a failure it removes the rest.
func place(pending []pendingFile) error {
	var err error
	for i, p := range pending {
		if err == nil && p.wait {
			err = writeout(p.tmp)
		}
		if cerr := p.tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = renameObject(p.tmp.Name(), p.final)
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
