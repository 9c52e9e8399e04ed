package workspace

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadBundleHeaderOfARealBundle(t *testing.T) {
	m := newManager(t)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a\n"})
	s1 := snapshot(t, m, root, "refs/belay/s/1", "")
	writeFiles(t, root, map[string]string{"b.txt": "b\n"})
	s2 := snapshot(t, m, root, "refs/belay/s/2", s1.Commit)
	path := filepath.Join(t.TempDir(), "session.bundle")
	if err := m.WriteBundle(context.Background(), root, []string{"refs/belay/s/1", "refs/belay/s/2"}, path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// One byte at a time, so the header is read across many reads.
	refs, whole, err := ReadBundleHeader(iotest.OneByteReader(bytes.NewReader(data)))
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 2 || refs["refs/belay/s/1"] != s1.Commit || refs["refs/belay/s/2"] != s2.Commit {
		t.Errorf("refs = %v", refs)
	}
	if got, err := io.ReadAll(whole); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the bundle read back differs (%d bytes of %d): %v", len(got), len(data), err)
	}
}

func TestReadBundleHeaderRefuses(t *testing.T) {
	oid := strings.Repeat("a", 40)
	cases := []struct {
		name, header string
	}{
		{"not a bundle", "PK\x03\x04"},
		{"empty", ""},
		{"no end", "# v2 git bundle\n" + oid + " refs/belay/s/1\n"},
		{"prerequisite", "# v2 git bundle\n-" + oid + "\n" + oid + " refs/belay/s/1\n\n"},
		{"SHA-256", "# v3 git bundle\n@object-format=sha256\n\n"},
		{"capability in v2", "# v2 git bundle\n@object-format=sha1\n\n"},
		{"short object id", "# v2 git bundle\nabc refs/belay/s/1\n\n"},
		{"no ref", "# v2 git bundle\n" + oid + "\n\n"},
		{"ref twice", "# v2 git bundle\n" + oid + " refs/x\n" + oid + " refs/x\n\n"},
		{"endless line", "# v2 git bundle\n" + strings.Repeat("a", maxBundleLine+1)},
		{"header too large", "# v2 git bundle\n" + strings.Repeat(oid+" refs/belay/"+strings.Repeat("r", 100)+"\n", MaxBundleHeader/150+1) + "\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := ReadBundleHeader(strings.NewReader(c.header + "PACK"))
			wantCode(t, err, InvalidBundle)
		})
	}
	// A v3 bundle of SHA-1 objects is fine.
	refs, _, err := ReadBundleHeader(strings.NewReader("# v3 git bundle\n@object-format=sha1\n" + oid + " refs/x\n\nPACK"))
	if err != nil || refs["refs/x"] != oid {
		t.Errorf("v3 bundle: %v, %v", refs, err)
	}
	// The stream's own failure is returned, not taken for a damaged header.
	broken := errors.New("connection lost")
	_, _, err = ReadBundleHeader(io.MultiReader(strings.NewReader("# v2 git bundle\n"), iotest.ErrReader(broken)))
	if !errors.Is(err, broken) {
		t.Errorf("error = %v, want the reader's", err)
	}
}
