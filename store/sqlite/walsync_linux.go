package sqlite

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncData flushes f's data, and the metadata needed to read it back, to
// disk.
func syncData(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}
