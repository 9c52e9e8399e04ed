//go:build !linux

package sqlite

import "os"

// syncData flushes f to disk (F_FULLFSYNC on macOS).
func syncData(f *os.File) error { return f.Sync() }
