//go:build !linux

package testutil

import "testing"

// SmallDisk skips t: a small file system to fill is mounted on Linux only.
func SmallDisk(t *testing.T) string {
	t.Helper()
	t.Skip("needs a small tmpfs, which the test mounts on Linux only")
	return ""
}
