package archive

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"

	"github.com/belayhq/belay"
)

// The limits Read applies unless given others. An archive is untrusted
// input: these bound the memory, the disk and the time one may cost.
const (
	// MaxBytes bounds an archive, compressed and unpacked: the largest
	// workspace bundle carried.
	MaxBytes = 4 << 30
	// MaxRecordBytes bounds one JSON file, checked before it is decoded: a
	// checkpoint's agent state, outputs and metadata (belay.MaxStateBytes
	// each) pretty-printed, with the file lists of a large snapshot.
	MaxRecordBytes = 64 << 20
	// MaxRecordsBytes bounds the JSON files together, and so the records
	// held in memory at once.
	MaxRecordsBytes = 512 << 20
	// MaxEntries bounds the files of an archive.
	MaxEntries = 100000
	// Ratio bounds what an archive unpacks to by what has been read of it:
	// at any point at most Slack + Ratio × the compressed bytes read so far.
	// Exported records compress about ten times; gzip's ceiling is about a
	// thousand, which only made-up data reaches.
	Ratio = 100
	// BundleRatio bounds the bundle the same way, tighter: its git objects
	// are compressed already, so gzip barely shrinks a real one.
	BundleRatio = 10
	// Slack is what any archive may unpack to beyond the ratios, so that
	// small archives of very regular records pass.
	Slack = 16 << 20
)

// Limits bound what Read accepts. Each field is the constant of the same
// name; tests shrink them.
type Limits struct {
	MaxBytes        int64
	MaxRecordBytes  int64
	MaxRecordsBytes int64
	MaxEntries      int
	Ratio           int64
	BundleRatio     int64
	Slack           int64
}

// DefaultLimits returns the limits Read applies unless given others.
func DefaultLimits() Limits {
	return Limits{MaxBytes: MaxBytes, MaxRecordBytes: MaxRecordBytes, MaxRecordsBytes: MaxRecordsBytes,
		MaxEntries: MaxEntries, Ratio: Ratio, BundleRatio: BundleRatio, Slack: Slack}
}

// ReadOptions configure Read.
type ReadOptions struct {
	// Limits are DefaultLimits() when nil.
	Limits *Limits
	// Bundle is handed the bytes of workspace.bundle as they are read from
	// the archive, at most once; when nil they are read and dropped. Reading
	// r fails with a coded error (PAYLOAD_TOO_LARGE, VALIDATION_ERROR) once
	// a limit is reached or the archive proves damaged, and never yields a
	// byte past a limit. An error Bundle returns ends Read and is returned
	// as is.
	Bundle func(r io.Reader) error
}

var checkpointFile = regexp.MustCompile(`^cp-[0-9]{2,19}(-[a-z0-9]+(-[a-z0-9]+)*)?\.json$`)

// Read reads an archive written by Write from r and checks it: only the
// expected regular files, by name, within the limits; strict JSON records;
// checkpoints that match their checksums and limits, consistent with the
// manifest and with each other; rollbacks of those checkpoints; a bundle
// exactly when a checkpoint has a snapshot. Whether the bundle holds the
// right refs is for the caller to check (see ReadOptions.Bundle).
//
// Size accounting is streaming: the compressed bytes read, the bytes they
// unpack to and the bytes handed out are counted as they pass, so Read stops
// at a limit without unpacking further. It holds in memory at most one
// record's bytes being decoded plus the decoded records.
//
// An archive that is not well formed or cannot be read is a
// VALIDATION_ERROR, one past a limit PAYLOAD_TOO_LARGE, a checkpoint that
// does not match its checksum CHECKPOINT_CORRUPTED.
func Read(r io.Reader, opts ReadOptions) (*Contents, error) {
	c, _, err := read(r, opts)
	return c, err
}

// read is Read, also returning its byte counts.
func read(r io.Reader, opts ReadOptions) (*Contents, *meter, error) {
	lim := DefaultLimits()
	if opts.Limits != nil {
		lim = *opts.Limits
	}
	m := &meter{lim: lim}
	packed := bufio.NewReader(&packedReader{r: r, m: m})
	magic, _ := packed.Peek(len(gzipMagic))
	gz, err := gzip.NewReader(packed)
	if err != nil {
		if len(magic) > 0 && bytes.HasPrefix(gzipMagic, magic) {
			return nil, m, m.failure(err, damaged(err))
		}
		return nil, m, m.failure(err, Invalid("not a gzip file"))
	}
	unpacked := &unpackedReader{r: gz, m: m}
	tr := tar.NewReader(unpacked)
	rd := &reader{m: m, seen: map[string]bool{}, cps: map[string]*belay.Checkpoint{}}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) && m.err == nil {
			break
		}
		if err != nil {
			return nil, m, m.failure(err, damaged(err))
		}
		if err := rd.entry(tr, hdr, opts.Bundle); err != nil {
			return nil, m, err
		}
	}
	// The tar stream ends before the gzip stream does: reading on to its
	// end checks the gzip trailer, the checksum and length of it all.
	if _, err := io.Copy(io.Discard, unpacked); err != nil {
		return nil, m, m.failure(err, damaged(err))
	}
	c, err := rd.check()
	return c, m, err
}

// gzipMagic begins every gzip file.
var gzipMagic = []byte{0x1f, 0x8b}

// damaged is the error of an archive that could not be unpacked: err, or
// truncated when it ends too early.
func damaged(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return Invalid("the archive is truncated (it ends too early) or damaged")
	}
	return Invalid("damaged archive: %v", err)
}

// reader is what Read has found so far.
type reader struct {
	m         *meter
	entries   int
	records   int64
	seen      map[string]bool
	manifest  *Manifest
	listed    map[string]bool // the manifest's checkpoint files
	cps       map[string]*belay.Checkpoint
	rollbacks []*belay.Rollback
	bundle    bool
}

// entry checks one file of the archive by its header, then decodes it or
// hands it to bundle.
func (rd *reader) entry(tr *tar.Reader, hdr *tar.Header, bundle func(io.Reader) error) error {
	lim := rd.m.lim
	if rd.entries++; rd.entries > lim.MaxEntries {
		return Invalid("more than %d files", lim.MaxEntries)
	}
	name := hdr.Name
	if hdr.Typeflag != tar.TypeReg || sparse(hdr) {
		return Invalid("entry %q is not a regular file", belay.Clip(name, 80))
	}
	isCheckpoint := name != ManifestFile && name != RollbacksFile && name != BundleFile
	if isCheckpoint && (len(name) > 80 || !checkpointFile.MatchString(name)) {
		return Invalid("unexpected entry %q", belay.Clip(name, 80))
	}
	if rd.seen[name] {
		return Invalid("entry %q appears twice", name)
	}
	rd.seen[name] = true
	if hdr.Size < 0 || hdr.Size > lim.MaxBytes {
		return belay.Errorf(belay.CodeTooLarge, "entry %q is larger than %d bytes", name, lim.MaxBytes)
	}
	if isCheckpoint && rd.listed != nil && !rd.listed[name] {
		return Invalid("%s is not listed in the manifest", name)
	}
	er := &entryReader{r: tr, m: rd.m, name: name, bundle: name == BundleFile}
	if name == BundleFile {
		rd.bundle = true
		var err error
		if bundle != nil {
			err = bundle(er)
		}
		if err == nil {
			_, err = io.Copy(io.Discard, er)
		}
		if rd.m.err != nil {
			return rd.m.err
		}
		return err
	}
	if hdr.Size > lim.MaxRecordBytes {
		return belay.Errorf(belay.CodeTooLarge, "entry %q is larger than %d bytes", name, lim.MaxRecordBytes)
	}
	if rd.records += hdr.Size; rd.records > lim.MaxRecordsBytes {
		return belay.Errorf(belay.CodeTooLarge, "the archive's records are larger than %d bytes", lim.MaxRecordsBytes)
	}
	switch name {
	case ManifestFile:
		rd.manifest = new(Manifest)
		if err := rd.decode(er, rd.manifest); err != nil {
			return err
		}
		rd.listed = map[string]bool{}
		for _, e := range rd.manifest.Checkpoints {
			rd.listed[e.File] = true
		}
		return nil
	case RollbacksFile:
		if err := rd.decode(er, &rd.rollbacks); err != nil {
			return err
		}
		if rd.rollbacks == nil {
			rd.rollbacks = []*belay.Rollback{}
		}
		return nil
	}
	cp := new(belay.Checkpoint)
	rd.cps[name] = cp
	return rd.decode(er, cp)
}

// sparse reports whether hdr describes a GNU sparse file, whose holes a
// tar reader makes up from nothing.
func sparse(hdr *tar.Header) bool {
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// decode decodes one JSON document that may hold no unknown fields.
func (rd *reader) decode(er *entryReader, v any) error {
	dec := json.NewDecoder(er)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return rd.m.failure(err, Invalid("%s: %v", er.name, err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) || rd.m.err != nil {
		return rd.m.failure(err, Invalid("%s holds more than one JSON document", er.name))
	}
	return nil
}

// meter counts an archive's bytes as they pass and holds the first failure
// reading it.
type meter struct {
	lim Limits
	// packed is what was read of the archive, unpacked what that unpacked
	// to (the tar stream), extracted what entries handed out, of which
	// bundle went to the bundle.
	packed, unpacked, extracted, bundle int64
	err                                 error
}

// room is how many more bytes may come out when used have: the ratio of
// what was read so far, plus the slack, within MaxBytes.
func (m *meter) room(used, ratio int64) int64 {
	return min(m.lim.MaxBytes, m.lim.Slack+ratio*m.packed) - used
}

// fail records err as the failure of reading the archive, unless one is
// recorded already, and returns the recorded one.
func (m *meter) fail(err error) error {
	if m.err == nil {
		m.err = err
	}
	return m.err
}

// failure returns the recorded failure of reading the archive, or else
// coded when err is not coded itself.
func (m *meter) failure(err error, coded error) error {
	var be *belay.Error
	switch {
	case m.err != nil:
		return m.err
	case errors.As(err, &be):
		return err
	}
	return coded
}

func (m *meter) tooLarge() error {
	return m.fail(belay.Errorf(belay.CodeTooLarge,
		"the archive unpacks to more than %d times its size (plus %d bytes) or more than %d bytes; it looks like a decompression bomb",
		m.lim.Ratio, m.lim.Slack, m.lim.MaxBytes))
}

// packedReader counts what is read of the archive, up to MaxBytes.
type packedReader struct {
	r io.Reader
	m *meter
}

func (p *packedReader) Read(b []byte) (int, error) {
	if p.m.err != nil {
		return 0, p.m.err
	}
	if rest := p.m.lim.MaxBytes + 1 - p.m.packed; int64(len(b)) > rest {
		b = b[:rest]
	}
	n, err := p.r.Read(b)
	p.m.packed += int64(n)
	if p.m.packed > p.m.lim.MaxBytes {
		return n, p.m.fail(belay.Errorf(belay.CodeTooLarge, "the archive is larger than %d bytes", p.m.lim.MaxBytes))
	}
	return n, err
}

// unpackedReader counts the tar stream and stops it at the ratio.
type unpackedReader struct {
	r io.Reader
	m *meter
}

func (u *unpackedReader) Read(b []byte) (int, error) {
	if u.m.err != nil {
		return 0, u.m.err
	}
	n, err := readWithin(u.r, b, u.m.room(u.m.unpacked, u.m.lim.Ratio))
	u.m.unpacked += int64(n)
	if errors.Is(err, errNoRoom) {
		return n, u.m.tooLarge()
	}
	return n, err
}

// entryReader hands out one entry's bytes within the ratios, and turns a
// failure to read them into a coded error.
type entryReader struct {
	r      io.Reader
	m      *meter
	name   string
	bundle bool
}

func (e *entryReader) Read(b []byte) (int, error) {
	m := e.m
	if m.err != nil {
		return 0, m.err
	}
	room := m.room(m.extracted, m.lim.Ratio)
	if e.bundle {
		room = min(room, m.room(m.bundle, m.lim.BundleRatio))
	}
	n, err := readWithin(e.r, b, room)
	m.extracted += int64(n)
	if e.bundle {
		m.bundle += int64(n)
	}
	switch {
	case err == nil || errors.Is(err, io.EOF):
		return n, err
	case m.err != nil:
		return n, m.err
	case errors.Is(err, errNoRoom) && e.bundle:
		return n, m.fail(belay.Errorf(belay.CodeTooLarge,
			"%s unpacks to more than %d times the archive's size (plus %d bytes); a git bundle barely compresses, so it looks like a decompression bomb",
			BundleFile, m.lim.BundleRatio, m.lim.Slack))
	case errors.Is(err, errNoRoom):
		return n, m.tooLarge()
	case errors.Is(err, io.ErrUnexpectedEOF):
		return n, m.fail(Invalid("entry %q is truncated", e.name))
	}
	return n, m.fail(Invalid("damaged archive: %v", err))
}

var errNoRoom = errors.New("no room")

// readWithin reads from r into b no more than room bytes. With no room left
// it only looks for the end of r, and fails with errNoRoom if there is more.
func readWithin(r io.Reader, b []byte, room int64) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if room > 0 {
		return r.Read(b[:min(int64(len(b)), room)])
	}
	var one [1]byte
	for {
		n, err := r.Read(one[:])
		switch {
		case n > 0:
			return 0, errNoRoom
		case err != nil:
			return 0, err
		}
	}
}
