package workspace

import (
	"os"

	"golang.org/x/sys/unix"
)

// writeout writes f's data out to the disk and waits for it, without
// flushing the disk's cache or the file's metadata (git's
// core.fsyncMethod=writeout-only): a later full sync of any file then makes
// it durable.
func writeout(f *os.File) error {
	return unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
}

// startWriteout starts writing f's data out without waiting; writeout
// waits for it.
func startWriteout(f *os.File) error {
	return unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
}
