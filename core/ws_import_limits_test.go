package core_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testtree"
	"github.com/belayhq/belay/internal/testutil"
)

// asIs is an entry of a real archive, unchanged.
func asIs(e tarEntry) testutil.TarEntry {
	return testutil.TarEntry{Header: testutil.RegularFile(e.hdr.Name, int64(len(e.data))), Head: e.data}
}

// manyEntries is an archive of n tiny checkpoint files and nothing else.
func manyEntries(tb testing.TB, n int) []byte {
	tb.Helper()
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	for i := range n {
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("cp-%06d.json", i), Mode: 0o644, Size: 2, Typeflag: tar.TypeReg}); err != nil {
			tb.Fatal(err)
		}
		tw.Write([]byte("{}"))
	}
	tw.Close()
	gz.Close()
	return b.Bytes()
}

// usage samples the bytes under dir and the Go heap while running fn.
type usage struct {
	peakTemp, peakHeap uint64
	allocated          uint64
}

func measure(dir string, fn func()) usage {
	var u usage
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	startAlloc, startHeap := ms.TotalAlloc, ms.HeapInuse
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > startHeap {
				u.peakHeap = max(u.peakHeap, ms.HeapInuse-startHeap)
			}
			u.peakTemp = max(u.peakTemp, dirBytes(dir))
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	fn()
	close(done)
	wg.Wait()
	runtime.ReadMemStats(&ms)
	u.allocated = ms.TotalAlloc - startAlloc
	return u
}

func dirBytes(dir string) uint64 {
	var n uint64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += uint64(fi.Size())
			}
		}
		return nil
	})
	return n
}

// TestImportRefusesAmplifyingArchives feeds the import archives that unpack
// to far more than they weigh and checks each is refused with a code, while
// the temporary directory and the heap stay small, and nothing is written.
func TestImportRefusesAmplifyingArchives(t *testing.T) {
	src := newWSEnv(t)
	testtree.Write(t, src.project, map[string]string{"a.txt": "a"})
	one := src.save(t, "one")
	src.save(t, "two")
	good := wsUntar(t, src.export(t, one.SessionID))
	var records []testutil.TarEntry
	var bundle testutil.TarEntry
	for _, e := range good {
		if e.hdr.Name == "workspace.bundle" {
			bundle = asIs(e)
		} else {
			records = append(records, asIs(e))
		}
	}
	const gib = 1 << 30
	// A bundle header naming the session's refs as they are, so only the
	// size of what follows is wrong.
	bundleHead := fmt.Sprintf("# v2 git bundle\n%s refs/belay/%s/1\n\n", one.WorkspaceRef, one.SessionID)
	padded := func(name string, size int64) testutil.TarEntry {
		for _, e := range good {
			if e.hdr.Name == name {
				return testutil.TarEntry{Header: testutil.RegularFile(name, size), Head: e.data[:1], Tail: e.data[1:], Fill: ' '}
			}
		}
		t.Fatalf("no %s", name)
		return testutil.TarEntry{}
	}

	cases := []struct {
		name    string
		archive []byte
		code    belay.Code
		// maxTemp and maxHeap bound the temporary files and the heap growth
		// while the archive is read.
		maxTemp, maxHeap uint64
	}{
		{"bundle of zeros", testutil.StreamTar(t, append(slices.Clone(records),
			testutil.TarEntry{Header: testutil.RegularFile("workspace.bundle", 4*gib-(1<<20))})...), belay.CodeValidation, 0, 64 << 20},
		{"bundle header then zeros", testutil.StreamTar(t, append(slices.Clone(records),
			testutil.TarEntry{Header: testutil.RegularFile("workspace.bundle", 4*gib-(1<<20)), Head: []byte(bundleHead)})...), belay.CodeTooLarge, 64 << 20, 64 << 20},
		{"sparse bundle", testutil.SparseTar(t, "workspace.bundle", 4*gib-(1<<20)), belay.CodeValidation, 0, 64 << 20},
		{"JSON padding", testutil.StreamTar(t, func() []testutil.TarEntry {
			var es []testutil.TarEntry
			for i := range 8 {
				es = append(es, testutil.TarEntry{Header: testutil.RegularFile(fmt.Sprintf("cp-%d.json", 11+i), 64<<20), Head: []byte("{"), Tail: []byte("}"), Fill: ' '})
			}
			return append(es, records...)
		}()...), belay.CodeTooLarge, 0, 128 << 20},
		{"padded valid records", testutil.StreamTar(t, padded("manifest.json", 60<<20), padded("cp-01.json", 60<<20),
			padded("cp-02.json", 60<<20), padded("rollback-history.json", 60<<20), bundle), belay.CodeTooLarge, 0, 128 << 20},
		{"huge declared record", testutil.StreamTar(t, testutil.TarEntry{Header: testutil.RegularFile("manifest.json", 65<<20), Head: []byte("{")}), belay.CodeTooLarge, 0, 64 << 20},
		{"huge declared bundle", testutil.StreamTar(t, testutil.TarEntry{Header: testutil.RegularFile("workspace.bundle", 5*gib), Head: []byte(bundleHead)}), belay.CodeTooLarge, 0, 64 << 20},
		{"many entries", manyEntries(t, 100001), belay.CodeValidation, 0, 128 << 20},
	}
	dst := newWSEnv(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			u := measure(tmp, func() {
				_, err = dst.svc.ImportSession(admin, belay.ImportInput{ProjectPath: dst.project}, bytes.NewReader(c.archive))
			})
			t.Logf("archive %d bytes: peak temp %d bytes, peak heap +%d bytes, allocated %d bytes; %v",
				len(c.archive), u.peakTemp, u.peakHeap, u.allocated, err)
			testutil.WantCode(t, err, c.code)
			if u.peakTemp > c.maxTemp {
				t.Errorf("the import wrote %d bytes of temporary files, want at most %d", u.peakTemp, c.maxTemp)
			}
			if u.peakHeap > c.maxHeap {
				t.Errorf("the heap grew by %d bytes, want at most %d", u.peakHeap, c.maxHeap)
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("temporary files left behind: %v", left)
			}
		})
	}
	if list, _ := dst.svc.ListSessions(admin, belay.ListSessionsInput{}); list.TotalCount != 0 {
		t.Errorf("sessions after hostile imports: %d", list.TotalCount)
	}
	if refs, err := dst.ws.Refs(localCtx, dst.project, "refs/"); err != nil || len(refs) != 0 {
		t.Errorf("refs after hostile imports: %v, %v", refs, err)
	}
	if _, err := dst.svc.ImportSession(admin, belay.ImportInput{ProjectPath: dst.project}, bytes.NewReader(wsRetar(t, good))); err != nil {
		t.Errorf("the untouched archive does not import: %v", err)
	}
}

// TestImportsAtOnceAreBounded holds the import slots with archives that do
// not arrive and checks one more import is told to come back later.
func TestImportsAtOnceAreBounded(t *testing.T) {
	e := newWSEnv(t)
	testtree.Write(t, e.project, map[string]string{"a.txt": "a"})
	one := e.save(t, "one")
	archive := e.export(t, one.SessionID)
	dst := newWSEnv(t)

	var held []*io.PipeWriter
	errs := make(chan error)
	busy := func() error {
		_, err := dst.svc.ImportSession(admin, belay.ImportInput{ProjectPath: dst.project}, strings.NewReader("x"))
		if belay.IsCode(err, belay.CodeRateLimited) {
			return err
		}
		return nil
	}
	// Fill the slots one by one until a further import is refused.
	var refused error
	for range 64 {
		if refused = busy(); refused != nil {
			break
		}
		pr, pw := io.Pipe()
		held = append(held, pw)
		go func() {
			_, err := dst.svc.ImportSession(admin, belay.ImportInput{ProjectPath: dst.project}, pr)
			errs <- err
		}()
		// The import has taken its slot once it waits for the archive.
		if _, err := pw.Write([]byte{0x1f}); err != nil {
			t.Fatal(err)
		}
	}
	be := testutil.WantCode(t, refused, belay.CodeRateLimited)
	if len(held) < 1 || len(held) > 8 {
		t.Errorf("%d imports ran at once, want a small bound", len(held))
	}
	if !strings.Contains(be.Message, "import") || be.Details["retryAfter"] == nil {
		t.Errorf("busy error = %v %v", be, be.Details)
	}
	for _, pw := range held {
		pw.Close()
	}
	for range held {
		testutil.WantCode(t, <-errs, belay.CodeValidation)
	}
	if _, err := dst.svc.ImportSession(admin, belay.ImportInput{ProjectPath: dst.project}, bytes.NewReader(archive)); err != nil {
		t.Errorf("import after the others ended: %v", err)
	}
}
