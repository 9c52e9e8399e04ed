package workspace

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReadDirents: readDirents lists a directory's entries with their types
// as the os package sees them (Linux reads them with getdents, elsewhere it
// goes through the os package).
func TestReadDirents(t *testing.T) {
	dir := t.TempDir()
	for name, create := range map[string]func(string) error{
		"file":    func(p string) error { return os.WriteFile(p, []byte("x"), 0o644) },
		"dir":     func(p string) error { return os.Mkdir(p, 0o755) },
		"link":    func(p string) error { return os.Symlink("file", p) },
		"fifo":    func(p string) error { return unix.Mkfifo(p, 0o644) },
		"ünicode": func(p string) error { return os.WriteFile(p, nil, 0o644) },
	} {
		if err := create(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]uint8{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		want[e.Name()] = dtypeOf(e.Type())
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	got := map[string]uint8{}
	if err := readDirents(fd, func(name []byte, typ uint8) bool {
		got[string(name)] = typ
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("readDirents = %v, want %v", got, want)
	}
}

// dtypeOf is the DT_* type of an entry the os package reports as t.
func dtypeOf(t fs.FileMode) uint8 {
	switch {
	case t.IsRegular():
		return unix.DT_REG
	case t.IsDir():
		return unix.DT_DIR
	case t&fs.ModeSymlink != 0:
		return unix.DT_LNK
	case t&fs.ModeNamedPipe != 0:
		return unix.DT_FIFO
	}
	return unix.DT_UNKNOWN
}
