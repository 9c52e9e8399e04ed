package archive

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testutil"
)

// fuzzLimits are small, so the fuzzer reaches every limit.
var fuzzLimits = Limits{MaxBytes: 1 << 20, MaxRecordBytes: 32 << 10, MaxRecordsBytes: 128 << 10, MaxEntries: 16,
	Ratio: 20, BundleRatio: 4, Slack: 4 << 10}

// fuzzSeeds are archives for the fuzzer to start from: valid ones and ones
// at or past each limit.
func fuzzSeeds(tb testing.TB) [][]byte {
	const session = "01900000-0000-7000-8000-000000000001"
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	cp := &belay.Checkpoint{ID: "01900000-0000-7000-8000-000000000101", SessionID: session, Seq: 1, Name: "one",
		Type: belay.TypeAuto, Trigger: belay.TriggerPeriodic, Summary: "s", ProjectPath: "/p",
		WorkspaceRef: "0123456789012345678901234567890123456789", Files: &belay.FileChanges{Created: []string{"a.txt"}}, CreatedAt: at}
	cp.Checksum, _ = cp.ComputeChecksum()
	sess := &belay.Session{ID: session, ProjectPath: "/p", Status: belay.SessionRunning, HeadCheckpointID: cp.ID, LastSeq: 1, CreatedAt: at}
	rb := &belay.Rollback{ID: "01900000-0000-7000-8000-000000000201", SessionID: session, TargetID: cp.ID, CreatedAt: at}
	bundle := filepath.Join(tb.TempDir(), "b")
	os.WriteFile(bundle, []byte("# v2 git bundle\n0123456789012345678901234567890123456789 refs/belay/"+session+"/1\n\nPACK"), 0o600)
	var withBundle, plain bytes.Buffer
	if err := Write(&withBundle, &Contents{Session: sess, Checkpoints: []*belay.Checkpoint{cp}, Rollbacks: []*belay.Rollback{rb}, ExportedAt: at}, bundle); err != nil {
		tb.Fatal(err)
	}
	bare := *cp
	bare.WorkspaceRef, bare.Files = "", nil
	bare.Checksum, _ = bare.ComputeChecksum()
	if err := Write(&plain, &Contents{Session: sess, Checkpoints: []*belay.Checkpoint{&bare}, ExportedAt: at}, ""); err != nil {
		tb.Fatal(err)
	}
	entry := func(name string, size int64, head string, fill byte) testutil.TarEntry {
		return testutil.TarEntry{Header: testutil.RegularFile(name, size), Head: []byte(head), Fill: fill}
	}
	var many []testutil.TarEntry
	for i := range 20 {
		many = append(many, entry(fmt.Sprintf("cp-%02d.json", i), 2, "{}", 0))
	}
	valid := withBundle.Bytes()
	return [][]byte{
		valid,
		plain.Bytes(),
		valid[:len(valid)*2/3],
		testutil.StreamTar(tb, entry(BundleFile, 1<<20, "# v2 git bundle\n\n", 0)),
		testutil.StreamTar(tb, entry(ManifestFile, 32<<10, "{", ' ')),
		testutil.StreamTar(tb, entry(ManifestFile, 64<<10, "{", ' ')),
		testutil.StreamTar(tb, many...),
		testutil.SparseTar(tb, BundleFile, 1<<30),
	}
}

// FuzzRead reads arbitrary bytes as an archive and checks what Read
// promises: no panic; never more bytes unpacked, handed out or given to the
// bundle than the ratios of the input's size allow; a coded error, or
// records that survive being written and read again.
func FuzzRead(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := fuzzLimits
		var bundle bytes.Buffer
		c, m, err := read(bytes.NewReader(data), ReadOptions{Limits: &lim, Bundle: func(r io.Reader) error {
			_, err := io.Copy(&bundle, r)
			return err
		}})
		bound := func(ratio int64) int64 { return min(lim.MaxBytes, lim.Slack+ratio*int64(len(data))) }
		switch {
		case m.packed > int64(len(data)):
			t.Errorf("counted %d bytes read of %d", m.packed, len(data))
		case m.unpacked > bound(lim.Ratio) || m.extracted > bound(lim.Ratio):
			t.Errorf("%d input bytes unpacked to %d and handed out %d, over %d", len(data), m.unpacked, m.extracted, bound(lim.Ratio))
		case int64(bundle.Len()) > bound(lim.BundleRatio) || m.bundle > bound(lim.BundleRatio):
			t.Errorf("%d input bytes gave a bundle of %d (counted %d), over %d", len(data), bundle.Len(), m.bundle, bound(lim.BundleRatio))
		case m.extracted > m.unpacked:
			t.Errorf("handed out %d bytes of %d unpacked", m.extracted, m.unpacked)
		}
		if err != nil {
			var be *belay.Error
			if !errors.As(err, &be) || !slices.Contains([]belay.Code{belay.CodeValidation, belay.CodeTooLarge, belay.CodeCheckpointCorrupt}, be.Code) || be.Message == "" {
				t.Fatalf("error %v (%T) is not a coded refusal", err, err)
			}
			if c != nil {
				t.Fatal("contents returned with an error")
			}
			return
		}
		path := ""
		if bundle.Len() > 0 {
			path = filepath.Join(t.TempDir(), BundleFile)
			if err := os.WriteFile(path, bundle.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		var again bytes.Buffer
		if err := Write(&again, c, path); err != nil {
			t.Fatalf("write what was read: %v", err)
		}
		c2, _, err := read(&again, ReadOptions{Limits: &lim})
		if err != nil {
			t.Fatalf("read what was written of what was read: %v", err)
		}
		if c2.Session.ID != c.Session.ID || len(c2.Checkpoints) != len(c.Checkpoints) || len(c2.Rollbacks) != len(c.Rollbacks) {
			t.Fatalf("round trip changed the contents: %+v, then %+v", c, c2)
		}
		for i, cp := range c2.Checkpoints {
			if cp.Checksum != c.Checkpoints[i].Checksum {
				t.Fatalf("round trip changed checkpoint %d", i)
			}
		}
	})
}

// TestFuzzSeedsReachTheirLimits checks the seeds do what they are for, so
// the fuzzer starts at every limit.
func TestFuzzSeedsReachTheirLimits(t *testing.T) {
	want := []belay.Code{"", "", belay.CodeValidation, belay.CodeTooLarge, belay.CodeTooLarge, belay.CodeTooLarge,
		belay.CodeValidation, belay.CodeValidation}
	for i, seed := range fuzzSeeds(t) {
		lim := fuzzLimits
		_, _, err := read(bytes.NewReader(seed), ReadOptions{Limits: &lim})
		if got := belay.ErrorCode(err); got != want[i] {
			t.Errorf("seed %d: %v, want %q", i, err, want[i])
		}
	}
}
