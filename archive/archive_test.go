package archive_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/archive"
	"github.com/belayhq/belay/internal/testutil"
)

const sessionID = "01900000-0000-7000-8000-000000000001"

// bundleBytes stands in for a git bundle: Read passes its bytes through.
var bundleBytes = []byte("# v2 git bundle\n" + strings.Repeat("0", 40) + " refs/belay/" + sessionID + "/1\n\npack…")

// contents is a session with two checkpoints, the first with a snapshot,
// and a rollback to the first.
func contents(tb testing.TB) *archive.Contents {
	tb.Helper()
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	cp := func(seq int64, parent, ref string) *belay.Checkpoint {
		c := &belay.Checkpoint{ID: fmt.Sprintf("01900000-0000-7000-8000-00000000010%d", seq), SessionID: sessionID, Seq: seq,
			Name: fmt.Sprintf("Step %d!", seq), Type: belay.TypeAuto, Trigger: belay.TriggerPeriodic, Summary: "step",
			ProjectPath: "/work/project", WorkspaceRef: ref, ParentID: parent, AgentState: json.RawMessage(`{"n":1}`),
			Files: &belay.FileChanges{Created: []string{"a.txt"}}, CreatedAt: at}
		sum, err := c.ComputeChecksum()
		if err != nil {
			tb.Fatal(err)
		}
		c.Checksum = sum
		return c
	}
	one := cp(1, "", strings.Repeat("0", 40))
	two := cp(2, one.ID, "")
	sess := &belay.Session{ID: sessionID, ProjectPath: "/work/project", Title: "demo", Owner: "alice", Status: belay.SessionRunning,
		HeadCheckpointID: one.ID, LastSeq: 2, CheckpointCount: 2, CreatedAt: at, UpdatedAt: at}
	rb := &belay.Rollback{ID: "01900000-0000-7000-8000-000000000201", SessionID: sessionID, TargetID: one.ID, UserID: "alice",
		RestoredFiles: []string{"a.txt"}, CreatedAt: at}
	return &archive.Contents{Session: sess, Checkpoints: []*belay.Checkpoint{one, two}, Rollbacks: []*belay.Rollback{rb}, ExportedAt: at}
}

// write writes c with bundleBytes as its bundle.
func write(tb testing.TB, c *archive.Contents) []byte {
	tb.Helper()
	bundle := filepath.Join(tb.TempDir(), "b")
	if err := os.WriteFile(bundle, bundleBytes, 0o600); err != nil {
		tb.Fatal(err)
	}
	var b bytes.Buffer
	if err := archive.Write(&b, c, bundle); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// read reads an archive with limits (nil for the defaults) and returns the
// bundle's bytes as read.
func read(data []byte, limits *archive.Limits) (*archive.Contents, []byte, error) {
	var bundle []byte
	c, err := archive.Read(bytes.NewReader(data), archive.ReadOptions{Limits: limits, Bundle: func(r io.Reader) error {
		var err error
		bundle, err = io.ReadAll(r)
		return err
	}})
	return c, bundle, err
}

type entry struct {
	hdr  tar.Header
	data []byte
}

func untar(tb testing.TB, data []byte) []entry {
	tb.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		tb.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var out []entry
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			tb.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, entry{hdr: *hdr, data: data})
	}
}

func retar(tb testing.TB, entries []entry) []byte {
	tb.Helper()
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		e.hdr.Size = int64(len(e.data))
		if e.hdr.Typeflag != tar.TypeReg {
			e.hdr.Size = 0
		}
		if err := tw.WriteHeader(&e.hdr); err != nil {
			tb.Fatal(err)
		}
		tw.Write(e.data)
	}
	tw.Close()
	gz.Close()
	return b.Bytes()
}

func reg(name string, data string) entry {
	return entry{hdr: tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg}, data: []byte(data)}
}

func TestWriteThenReadGivesTheContentsBack(t *testing.T) {
	want := contents(t)
	data := write(t, want)
	var names []string
	for _, e := range untar(t, data) {
		names = append(names, e.hdr.Name)
	}
	if wantNames := []string{"manifest.json", "cp-01-step-1.json", "cp-02-step-2.json", "rollback-history.json", "workspace.bundle"}; !slices.Equal(names, wantNames) {
		t.Errorf("archive holds %v, want %v", names, wantNames)
	}
	got, bundle, err := read(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bundle, bundleBytes) {
		t.Errorf("bundle = %q, want %q", bundle, bundleBytes)
	}
	if got.Session.ID != want.Session.ID || !got.ExportedAt.Equal(want.ExportedAt) || len(got.Checkpoints) != 2 || len(got.Rollbacks) != 1 {
		t.Fatalf("read %+v", got)
	}
	for i, cp := range got.Checkpoints {
		if cp.ID != want.Checkpoints[i].ID || cp.Checksum != want.Checkpoints[i].Checksum || cp.Seq != int64(i+1) {
			t.Errorf("checkpoint %d = %+v", i, cp)
		}
	}
	if !reflect.DeepEqual(got.Rollbacks, want.Rollbacks) {
		t.Errorf("rollbacks = %+v, want %+v", got.Rollbacks[0], want.Rollbacks[0])
	}

	// Without snapshots there is no bundle.
	plain := contents(t)
	plain.Checkpoints[0].WorkspaceRef = ""
	plain.Checkpoints[0].Checksum, _ = plain.Checkpoints[0].ComputeChecksum()
	plain.Rollbacks = nil
	var b bytes.Buffer
	if err := archive.Write(&b, plain, ""); err != nil {
		t.Fatal(err)
	}
	if got, bundle, err := read(b.Bytes(), nil); err != nil || bundle != nil || got.Rollbacks == nil || len(got.Rollbacks) != 0 {
		t.Errorf("read without snapshots: %v, bundle %q, rollbacks %v", err, bundle, got.Rollbacks)
	}
}

func TestReadRefusesMalformedArchives(t *testing.T) {
	good := untar(t, write(t, contents(t)))
	with := func(change func([]entry) []entry) []byte { return retar(t, change(slices.Clone(good))) }
	edit := func(name string, f func(string) string) []byte {
		return with(func(es []entry) []entry {
			for i := range es {
				if es[i].hdr.Name == name {
					es[i].data = []byte(f(string(es[i].data)))
				}
			}
			return es
		})
	}
	add := func(e entry) []byte { return with(func(es []entry) []entry { return append(es, e) }) }
	drop := func(name string) []byte {
		return with(func(es []entry) []entry {
			return slices.DeleteFunc(es, func(e entry) bool { return e.hdr.Name == name })
		})
	}
	whole := write(t, contents(t))

	cases := []struct {
		name    string
		archive []byte
		code    belay.Code
		message string
	}{
		{"not gzip", []byte("plain text"), belay.CodeValidation, "not a gzip file"},
		{"cut short", whole[:len(whole)/2], belay.CodeValidation, "not a belay export"},
		{"cut in the gzip header", whole[:5], belay.CodeValidation, "truncated"},
		{"cut after the gzip header", whole[:20], belay.CodeValidation, "truncated"},
		{"cut in the gzip trailer", whole[:len(whole)-4], belay.CodeValidation, "truncated"},
		{"gzip checksum wrong", func() []byte {
			b := slices.Clone(whole)
			b[len(b)-8] ^= 1
			return b
		}(), belay.CodeValidation, "checksum"},
		{"not tar", func() []byte {
			var b bytes.Buffer
			gz := gzip.NewWriter(&b)
			gz.Write(bytes.Repeat([]byte("junk"), 300))
			gz.Close()
			return b.Bytes()
		}(), belay.CodeValidation, "damaged archive"},
		{"truncated entry", func() []byte {
			var b bytes.Buffer
			gz := gzip.NewWriter(&b)
			tw := tar.NewWriter(gz)
			tw.WriteHeader(&tar.Header{Name: "manifest.json", Mode: 0o644, Size: 100, Typeflag: tar.TypeReg})
			tw.Write([]byte(`{"format":`))
			gz.Close()
			return b.Bytes()
		}(), belay.CodeValidation, "truncated"},
		{"directory", add(entry{hdr: tar.Header{Name: "cp-09.json", Typeflag: tar.TypeDir, Mode: 0o755}}), belay.CodeValidation, "not a regular file"},
		{"sparse file", testutil.SparseTar(t, "workspace.bundle", 1<<40), belay.CodeValidation, "not a regular file"},
		{"unexpected name", add(reg("../cp-09.json", "{}")), belay.CodeValidation, "unexpected entry"},
		{"long name", add(reg("cp-09-"+strings.Repeat("a", 100)+".json", "{}")), belay.CodeValidation, "unexpected entry"},
		{"twice", add(reg("rollback-history.json", "[]")), belay.CodeValidation, "appears twice"},
		{"unlisted after the manifest", add(reg("cp-09.json", "{}")), belay.CodeValidation, "not listed"},
		{"unlisted before the manifest", with(func(es []entry) []entry { return append([]entry{reg("cp-09.json", "{}")}, es...) }), belay.CodeValidation, "not listed"},
		{"unknown field", edit("manifest.json", func(s string) string { return strings.Replace(s, "{", `{"extra": 1,`, 1) }), belay.CodeValidation, "unknown field"},
		{"two documents", edit("rollback-history.json", func(s string) string { return s + "[]" }), belay.CodeValidation, "more than one JSON document"},
		{"trailing garbage", edit("manifest.json", func(s string) string { return s + "}" }), belay.CodeValidation, "more than one JSON document"},
		{"other format", edit("manifest.json", func(s string) string { return strings.Replace(s, `"version":1`, `"version":2`, 1) }), belay.CodeValidation, "version 2"},
		{"no manifest", drop("manifest.json"), belay.CodeValidation, "no manifest.json"},
		{"no rollbacks", drop("rollback-history.json"), belay.CodeValidation, "no rollback-history.json"},
		{"missing checkpoint", drop("cp-02-step-2.json"), belay.CodeValidation, "missing"},
		{"no bundle", drop("workspace.bundle"), belay.CodeValidation, "do not match"},
		{"tampered checkpoint", edit("cp-02-step-2.json", func(s string) string { return strings.Replace(s, `"step"`, `"evil"`, 1) }), belay.CodeCheckpointCorrupt, "checksum"},
		{"session state not UTF-8", edit("manifest.json", func(s string) string {
			return strings.Replace(s, `"title":`, `"state": {"k": "`+"\xff"+`"}, "title":`, 1)
		}), belay.CodeValidation, "session state"},
		{"session state NUL escape", edit("manifest.json", func(s string) string {
			return strings.Replace(s, `"title":`, `"state": {"k": "\u0000"}, "title":`, 1)
		}), belay.CodeValidation, `session state holds the escape \u0000`},
		{"session project NUL", edit("manifest.json", func(s string) string {
			return strings.Replace(s, `"projectPath":"/work/project"`, `"projectPath":"/work/project\u0000"`, 1)
		}), belay.CodeValidation, "session project path"},
		{"session end reason NUL", edit("manifest.json", func(s string) string {
			return strings.Replace(s, `"title":`, `"endReason": "r\u0000", "title":`, 1)
		}), belay.CodeValidation, "session end reason"},
		{"session holder NUL", edit("manifest.json", func(s string) string {
			return strings.Replace(s, `"title":`, `"holder": "h\u0000", "title":`, 1)
		}), belay.CodeValidation, "session holder"},
		{"rollback to no id", edit("rollback-history.json", func(s string) string {
			return strings.Replace(s, "01900000-0000-7000-8000-000000000101", "../etc", 1)
		}), belay.CodeValidation, "no id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := read(c.archive, nil)
			be := testutil.WantCode(t, err, c.code)
			if !strings.Contains(be.Message, c.message) {
				t.Errorf("message %q, want it to say %q", be.Message, c.message)
			}
		})
	}
}

// bomb is a gzipped tar of one entry of size bytes: head, then fill.
func bomb(tb testing.TB, name string, size int64, head []byte, fill byte) []byte {
	return testutil.StreamTar(tb, testutil.TarEntry{Header: testutil.RegularFile(name, size), Head: head, Fill: fill})
}

// countingReader counts what is read of an archive.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// TestReadNamesWhatWasDeleted: a rollback or a parent naming a checkpoint
// deleted before the export is read, the id listed in Deleted for the
// importer to check.
func TestReadNamesWhatWasDeleted(t *testing.T) {
	const gone = "01900000-0000-7000-8000-000000000999"
	entries := untar(t, write(t, contents(t)))
	for i, e := range entries {
		if e.hdr.Name == "rollback-history.json" {
			entries[i].data = []byte(strings.Replace(string(e.data), "01900000-0000-7000-8000-000000000101", gone, 1))
		}
	}
	got, _, err := read(retar(t, entries), nil)
	if err != nil || !slices.Equal(got.Deleted, []string{gone}) {
		t.Fatalf("read = %v, %v; want %s deleted", got, err, gone)
	}
	if got, _, err := read(write(t, contents(t)), nil); err != nil || len(got.Deleted) != 0 {
		t.Errorf("a whole session's archive: deleted %v, %v", got.Deleted, err)
	}
}

func TestReadStopsAtItsLimits(t *testing.T) {
	small := &archive.Limits{MaxBytes: 1 << 20, MaxRecordBytes: 4 << 10, MaxRecordsBytes: 6 << 10, MaxEntries: 3,
		Ratio: 10, BundleRatio: 2, Slack: 8 << 10}
	roomy := *small
	roomy.MaxRecordBytes, roomy.MaxRecordsBytes = 1<<20, 1<<20
	records := func(n int, size int) []byte {
		var es []entry
		for i := range n {
			es = append(es, reg(fmt.Sprintf("cp-%02d.json", i), "{"+strings.Repeat(" ", size-2)+"}"))
		}
		return retar(t, es)
	}
	// Empty gzip members whose headers carry 60 KB of extra data each: an
	// archive that goes on without unpacking to anything.
	endless := func() []byte {
		var b bytes.Buffer
		for range 20 {
			gz := gzip.NewWriter(&b)
			gz.Extra = make([]byte, 60<<10)
			gz.Close()
		}
		b.Write(retar(t, nil))
		return b.Bytes()
	}
	cases := []struct {
		name    string
		limits  *archive.Limits
		archive []byte
		code    belay.Code
		message string
	}{
		{"record declared too large", small, records(1, 5<<10), belay.CodeTooLarge, "larger than 4096"},
		{"records too large together", small, records(2, 4<<10), belay.CodeTooLarge, "records are larger than 6144"},
		{"too many entries", small, records(4, 10), belay.CodeValidation, "more than 3 files"},
		{"entry declared too large", small, bomb(t, "workspace.bundle", 2<<20, nil, 0), belay.CodeTooLarge, "larger than 1048576"},
		{"record past the ratio", &roomy, bomb(t, "manifest.json", 1<<20, []byte("{"), ' '), belay.CodeTooLarge, "more than 10 times its size"},
		{"bundle past its ratio", small, bomb(t, "workspace.bundle", 1<<20, bundleBytes, 0), belay.CodeTooLarge, "workspace.bundle unpacks to more than 2 times"},
		{"archive larger than MaxBytes", small, endless(), belay.CodeTooLarge, "larger than 1048576 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := read(c.archive, c.limits)
			be := testutil.WantCode(t, err, c.code)
			if !strings.Contains(be.Message, c.message) {
				t.Errorf("message %q, want it to say %q", be.Message, c.message)
			}
		})
	}

	// The default limits stop a gibibyte of zeros early, reading little of it.
	huge := bomb(t, "workspace.bundle", 1<<30, bundleBytes, 0)
	in := &countingReader{r: bytes.NewReader(huge)}
	var got int64
	_, err := archive.Read(in, archive.ReadOptions{Bundle: func(r io.Reader) error {
		var err error
		got, err = io.Copy(io.Discard, r)
		return err
	}})
	testutil.WantCode(t, err, belay.CodeTooLarge)
	if want := archive.Slack + archive.BundleRatio*in.n; got > want || in.n > int64(len(huge))/4 {
		t.Errorf("read %d of %d archive bytes and handed out %d bundle bytes, want at most %d", in.n, len(huge), got, want)
	}
}

func TestReadReturnsTheBundleCallersError(t *testing.T) {
	full := errors.New("disk full")
	_, err := archive.Read(bytes.NewReader(write(t, contents(t))), archive.ReadOptions{Bundle: func(io.Reader) error { return full }})
	if !errors.Is(err, full) {
		t.Errorf("error = %v, want the bundle's own", err)
	}
	// An error of the archive's own wins over what the caller made of it.
	_, err = archive.Read(bytes.NewReader(bomb(t, "workspace.bundle", 64<<20, bundleBytes, 0)), archive.ReadOptions{Bundle: func(r io.Reader) error {
		_, err := io.Copy(io.Discard, r)
		return fmt.Errorf("copy: %v", err)
	}})
	testutil.WantCode(t, err, belay.CodeTooLarge)
}

// TestDeepStatesStayTheirSize: the archive holds JSON as compact as it was
// stored; indented, a state nested 5,000 deep took 25 MB and more, past
// what an import reads back.
func TestDeepStatesStayTheirSize(t *testing.T) {
	c := contents(t)
	deep := `{"a":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`
	c.Checkpoints[0].AgentState = json.RawMessage(deep)
	c.Checkpoints[0].Checksum, _ = c.Checkpoints[0].ComputeChecksum()
	data := write(t, c)
	for _, e := range untar(t, data) {
		if e.hdr.Name == "cp-01-step-1.json" && len(e.data) > len(deep)+4096 {
			t.Errorf("%s holds %d bytes for a state of %d", e.hdr.Name, len(e.data), len(deep))
		}
	}
	got, _, err := read(data, nil)
	if err != nil || string(got.Checkpoints[0].AgentState) != deep {
		t.Errorf("read back: %v", err)
	}
}

// TestReadAcceptsWhatOlderVersionsStored: a tag with a tab and an option
// label with a newline, which new input may no longer carry but older
// versions stored and exported, are read back as they were.
func TestReadAcceptsWhatOlderVersionsStored(t *testing.T) {
	c := contents(t)
	cp := c.Checkpoints[1]
	cp.Tags = []string{"ci\tnightly"}
	cp.Name = "step\t2"
	cp.Type, cp.HITLRequired = belay.TypeHITL, true
	cp.HITL = &belay.HITLRequest{Title: "Ship?", Options: []belay.HITLOption{
		{ID: "yes", Label: "Ship\nit", Action: belay.ActionApprove},
		{ID: "no", Label: "No", Action: belay.ActionReject}}}
	cp.Checksum, _ = cp.ComputeChecksum()
	got, _, err := read(write(t, c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if read := got.Checkpoints[1]; !slices.Equal(read.Tags, cp.Tags) || read.Name != cp.Name || read.HITL == nil || !reflect.DeepEqual(read.HITL.Options, cp.HITL.Options) {
		t.Errorf("read tags %q and request %+v, want %q and %+v", read.Tags, read.HITL, cp.Tags, cp.HITL)
	}
}
