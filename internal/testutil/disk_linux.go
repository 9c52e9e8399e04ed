package testutil

import (
	"syscall"
	"testing"
)

// SmallDisk returns a directory on a 4 MiB tmpfs, unmounted when t ends, or
// skips t when it cannot mount one (it needs root).
func SmallDisk(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}
