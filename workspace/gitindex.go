package workspace

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The private index is read and written here, in git's own format (see
// git's Documentation/gitformat-index.txt), by snapshots that build their
// tree without git (native.go); every other command still reads and writes
// it through git. Only what a snapshot's index can hold is supported: stage
// 0 entries of regular files and symlinks without flags, and the cache tree
// (TREE) extension. Anything else (a split or sparse index, conflicts,
// assume-unchanged, skip-worktree or intent-to-add entries, submodules) is
// errUnsupportedIndex, and the snapshot goes to git instead.

// errUnsupportedIndex says the index holds something only git handles.
var errUnsupportedIndex = errors.New("index needs git")

// statData is the stat information an index entry keeps to tell, without
// reading the file, that it did not change. Fields are truncated to 32 bits
// as git truncates them.
type statData struct {
	ctimeSec, ctimeNsec uint32
	mtimeSec, mtimeNsec uint32
	dev, ino            uint32
	uid, gid            uint32
	size                uint32
}

// indexEntry is one stage-0 entry of the index.
type indexEntry struct {
	path string
	mode uint32 // 0o100644, 0o100755 or 0o120000
	oid  [20]byte
	stat statData
}

// cacheTree is one directory of the TREE extension: the tree object of the
// directory when valid, the number of index entries below it, and its
// subdirectories by name.
type cacheTree struct {
	valid   bool
	oid     [20]byte
	entries int
	subs    map[string]*cacheTree
}

// gitIndex is a parsed index.
type gitIndex struct {
	entries []indexEntry // in index order (bytewise by path)
	tree    *cacheTree   // nil without a TREE extension
}

const (
	indexSignature  = "DIRC"
	entryFixedSize  = 62 // stat data, mode, id and flags before the path
	flagAssumeValid = 0x8000
	flagExtended    = 0x4000
	flagStageMask   = 0x3000
	flagNameMask    = 0x0fff
)

// parseIndex reads an index of version 2, 3 or 4. It checks the trailing
// checksum (the file may be half written by a crash).
func parseIndex(data []byte) (*gitIndex, error) {
	if len(data) < 12+sha1.Size || string(data[:4]) != indexSignature {
		return nil, errors.New("not an index file")
	}
	body, sum := data[:len(data)-sha1.Size], data[len(data)-sha1.Size:]
	if got := sha1.Sum(body); !bytes.Equal(got[:], sum) {
		return nil, errors.New("index checksum mismatch")
	}
	version := binary.BigEndian.Uint32(body[4:])
	if version < 2 || version > 4 {
		return nil, fmt.Errorf("index version %d: %w", version, errUnsupportedIndex)
	}
	count := binary.BigEndian.Uint32(body[8:])
	if uint64(count) > uint64(len(body))/entryFixedSize {
		return nil, errors.New("index entry count is larger than the file")
	}
	ix := &gitIndex{entries: make([]indexEntry, 0, count)}
	pos := 12
	var prev []byte
	for range count {
		if pos+entryFixedSize > len(body) {
			return nil, errors.New("index entry is truncated")
		}
		b := body[pos:]
		e := indexEntry{stat: statData{
			ctimeSec: be32(b[0:]), ctimeNsec: be32(b[4:]),
			mtimeSec: be32(b[8:]), mtimeNsec: be32(b[12:]),
			dev: be32(b[16:]), ino: be32(b[20:]),
			uid: be32(b[28:]), gid: be32(b[32:]), size: be32(b[36:]),
		}, mode: be32(b[24:])}
		copy(e.oid[:], b[40:60])
		flags := binary.BigEndian.Uint16(b[60:])
		if flags&(flagAssumeValid|flagExtended|flagStageMask) != 0 {
			return nil, fmt.Errorf("index entry flags %#x: %w", flags, errUnsupportedIndex)
		}
		switch e.mode {
		case 0o100644, 0o100755, 0o120000:
		default:
			return nil, fmt.Errorf("index entry mode %o: %w", e.mode, errUnsupportedIndex)
		}
		off := pos + entryFixedSize
		var name []byte
		if version == 4 {
			strip, n := decodeOffsetVarint(body[off:])
			if n == 0 || strip > uint64(len(prev)) {
				return nil, errors.New("index path prefix is damaged")
			}
			off += n
			end := bytes.IndexByte(body[off:], 0)
			if end < 0 {
				return nil, errors.New("index path is not terminated")
			}
			name = append(prev[:len(prev)-int(strip):len(prev)-int(strip)], body[off:off+end]...)
			pos = off + end + 1
		} else {
			end := bytes.IndexByte(body[off:], 0)
			if end < 0 {
				return nil, errors.New("index path is not terminated")
			}
			name = body[off : off+end]
			pos += (entryFixedSize + end + 8) &^ 7
		}
		if len(name) == 0 || len(ix.entries) > 0 && bytes.Compare(name, prev) <= 0 {
			return nil, errors.New("index entries are out of order")
		}
		e.path = string(name)
		prev = []byte(e.path)
		ix.entries = append(ix.entries, e)
	}
	for pos+8 <= len(body) {
		sig := string(body[pos : pos+4])
		size := int(be32(body[pos+4:]))
		pos += 8
		if size > len(body)-pos {
			return nil, errors.New("index extension is truncated")
		}
		ext := body[pos : pos+size]
		pos += size
		switch {
		case sig == "TREE":
			t, rest, err := parseCacheTree(ext)
			if err != nil || len(rest) != 0 {
				// A damaged cache only costs its trees being rebuilt.
				continue
			}
			ix.tree = t
		case sig[0] >= 'A' && sig[0] <= 'Z':
			// Optional extensions (untracked cache, resolve undo, offsets,
			// fsmonitor) are dropped: the index is valid without them.
		default:
			// A required extension (link: split index; sdir: sparse).
			return nil, fmt.Errorf("index extension %q: %w", sig, errUnsupportedIndex)
		}
	}
	if pos != len(body) {
		return nil, errors.New("index has trailing bytes")
	}
	return ix, nil
}

func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }

// decodeOffsetVarint reads git's offset varint (index v4 path prefixes);
// n is 0 when b ends first or the value overflows.
func decodeOffsetVarint(b []byte) (v uint64, n int) {
	if len(b) == 0 {
		return 0, 0
	}
	c := b[0]
	v = uint64(c & 127)
	n = 1
	for c&128 != 0 {
		if n >= len(b) || v > 1<<50 {
			return 0, 0
		}
		c = b[n]
		n++
		v = (v+1)<<7 | uint64(c&127)
	}
	return v, n
}

// parseCacheTree reads one directory of the TREE extension and, recursively,
// its subdirectories.
func parseCacheTree(b []byte) (*cacheTree, []byte, error) {
	nul := bytes.IndexByte(b, 0)
	if nul < 0 {
		return nil, nil, errors.New("cache tree: no name")
	}
	b = b[nul+1:]
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		return nil, nil, errors.New("cache tree: no counts")
	}
	countText, subText, ok := bytes.Cut(b[:nl], []byte(" "))
	if !ok {
		return nil, nil, errors.New("cache tree: bad counts")
	}
	entries, err1 := strconv.Atoi(string(countText))
	subs, err2 := strconv.Atoi(string(subText))
	if err1 != nil || err2 != nil || entries < -1 || subs < 0 || subs > len(b) {
		return nil, nil, errors.New("cache tree: bad counts")
	}
	b = b[nl+1:]
	t := &cacheTree{entries: entries, subs: make(map[string]*cacheTree, subs)}
	if entries >= 0 {
		if len(b) < sha1.Size {
			return nil, nil, errors.New("cache tree: truncated id")
		}
		t.valid = true
		copy(t.oid[:], b[:sha1.Size])
		b = b[sha1.Size:]
	}
	for range subs {
		end := bytes.IndexByte(b, 0)
		if end < 0 {
			return nil, nil, errors.New("cache tree: no name")
		}
		name := string(b[:end])
		sub, rest, err := parseCacheTree(b)
		if err != nil {
			return nil, nil, err
		}
		t.subs[name] = sub
		b = rest
	}
	return t, b, nil
}

// encodeIndex writes entries (in index order) and tree as a version 2 index
// with its checksum.
func encodeIndex(entries []indexEntry, tree *cacheTree) []byte {
	enc := newIndexEncoder(len(entries))
	for i := range entries {
		e := &entries[i]
		enc.add([]byte(e.path), e.mode, &e.oid, &e.stat)
	}
	return enc.finish(tree)
}

// indexEncoder writes a version 2 index entry by entry.
type indexEncoder struct {
	buf   []byte
	count uint32
}

func newIndexEncoder(entries int) *indexEncoder {
	buf := make([]byte, 12, 12+entries*(entryFixedSize+40)+64*1024)
	copy(buf, indexSignature)
	binary.BigEndian.PutUint32(buf[4:], 2)
	return &indexEncoder{buf: buf}
}

// add appends an entry; entries must come in index order.
func (e *indexEncoder) add(path []byte, mode uint32, oid *[20]byte, st *statData) {
	buf := e.buf
	for _, v := range [...]uint32{st.ctimeSec, st.ctimeNsec, st.mtimeSec, st.mtimeNsec, st.dev, st.ino, mode, st.uid, st.gid, st.size} {
		buf = binary.BigEndian.AppendUint32(buf, v)
	}
	buf = append(buf, oid[:]...)
	buf = binary.BigEndian.AppendUint16(buf, uint16(min(len(path), flagNameMask)))
	buf = append(buf, path...)
	pad := (entryFixedSize+len(path)+8)&^7 - entryFixedSize - len(path)
	buf = append(buf, make([]byte, pad)...)
	e.buf = buf
	e.count++
}

// finish appends the TREE extension (when tree is set) and the checksum.
func (e *indexEncoder) finish(tree *cacheTree) []byte {
	buf := e.buf
	binary.BigEndian.PutUint32(buf[8:], e.count)
	if tree != nil {
		start := len(buf)
		buf = append(buf, "TREE\x00\x00\x00\x00"...)
		buf = appendCacheTree(buf, "", tree)
		binary.BigEndian.PutUint32(buf[start+4:], uint32(len(buf)-start-8))
	}
	sum := sha1.Sum(buf)
	return append(buf, sum[:]...)
}

// appendCacheTree writes t and its subdirectories in the order git keeps
// them (shorter names first, then bytewise).
func appendCacheTree(buf []byte, name string, t *cacheTree) []byte {
	buf = append(buf, name...)
	buf = append(buf, 0)
	entries := t.entries
	if !t.valid {
		entries = -1
	}
	buf = strconv.AppendInt(buf, int64(entries), 10)
	buf = append(buf, ' ')
	buf = strconv.AppendInt(buf, int64(len(t.subs)), 10)
	buf = append(buf, '\n')
	if t.valid {
		buf = append(buf, t.oid[:]...)
	}
	names := make([]string, 0, len(t.subs))
	for n := range t.subs {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	for _, n := range names {
		buf = appendCacheTree(buf, n, t.subs[n])
	}
	return buf
}
