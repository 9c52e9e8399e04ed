//go:build !linux

package workspace

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// readDirents calls fn with the name and type (DT_*) of each entry of the
// open directory fd but . and .., until fn returns false. Elsewhere than on
// Linux it reads through the os package, on a duplicate of fd.
func readDirents(fd int, fn func(name []byte, typ uint8) bool) error {
	dup, err := unix.Dup(fd)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(dup), "")
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !fn([]byte(e.Name()), direntType(e.Type())) {
			return nil
		}
	}
	return nil
}

// direntType is the DT_* type of a directory entry of type t.
func direntType(t fs.FileMode) uint8 {
	switch {
	case t.IsRegular():
		return unix.DT_REG
	case t.IsDir():
		return unix.DT_DIR
	case t&fs.ModeSymlink != 0:
		return unix.DT_LNK
	case t&fs.ModeNamedPipe != 0:
		return unix.DT_FIFO
	case t&fs.ModeSocket != 0:
		return unix.DT_SOCK
	case t&fs.ModeCharDevice != 0:
		return unix.DT_CHR
	case t&fs.ModeDevice != 0:
		return unix.DT_BLK
	}
	return unix.DT_UNKNOWN
}

// touchNow stamps the file at name with the file system's current time: a
// write of data does, where UTIME_NOW is not at hand.
func touchNow(name string) error {
	return os.WriteFile(name, []byte{'0'}, 0o600)
}
