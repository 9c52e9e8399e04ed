package workspace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// readDirents calls fn with the name and type (DT_*) of each entry of the
// open directory fd but . and .., until fn returns false.
func readDirents(fd int, fn func(name []byte, typ uint8) bool) error {
	buf := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(buf)
	for {
		n, err := unix.Getdents(fd, *buf)
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		for b := (*buf)[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:]))
			if reclen < 19 || reclen > len(b) {
				return errors.New("damaged directory entry")
			}
			typ, name := b[18], b[19:reclen]
			b = b[reclen:]
			if end := bytes.IndexByte(name, 0); end >= 0 {
				name = name[:end]
			}
			if string(name) == "." || string(name) == ".." {
				continue
			}
			if !fn(name, typ) {
				return nil
			}
		}
	}
}

// direntBufs are the buffers directories are read into.
var direntBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// touchNow stamps the file at name with the file system's current time.
func touchNow(name string) error {
	if err := os.WriteFile(name, nil, 0o600); err != nil {
		return err
	}
	now := []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}}
	return unix.UtimesNanoAt(unix.AT_FDCWD, name, now, 0)
}
