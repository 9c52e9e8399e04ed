//go:build !linux

package httpapi_test

import "testing"

// smallDisk skips t: a small file system to fill is mounted on Linux only.
func smallDisk(t *testing.T) string {
	t.Skip("needs a small tmpfs, which the test mounts on Linux only")
	return ""
}
