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
	want := map[string]fs.FileMode{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		want[e.Name()] = e.Type()
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	got := map[string]fs.FileMode{}
	if err := readDirents(fd, func(name []byte, typ uint8) bool {
		got[string(name)] = typeBits(typ)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("readDirents = %v, want %v", got, want)
	}
}

// typeBits is the fs.FileMode type of a DT_* directory entry type.
func typeBits(typ uint8) fs.FileMode {
	switch typ {
	case unix.DT_REG:
		return 0
	case unix.DT_DIR:
		return fs.ModeDir
	case unix.DT_LNK:
		return fs.ModeSymlink
	case unix.DT_FIFO:
		return fs.ModeNamedPipe
	}
	return fs.ModeIrregular
}
