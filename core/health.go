package core

import (
	"context"
	"sync/atomic"

	"github.com/belayhq/belay"
)

// writeHealth remembers whether the last write failed on storage.
type writeHealth struct {
	fault atomic.Pointer[error]
}

// note records a write's outcome: a STORAGE_UNAVAILABLE error is remembered,
// a success forgets it, any other error (a rule, a missing record, a
// cancelled request) says nothing about the storage.
func (h *writeHealth) note(err error) {
	switch {
	case err == nil:
		if h.fault.Load() != nil {
			h.fault.Store(nil)
		}
	case belay.IsCode(err, belay.CodeStorageUnavailable):
		h.fault.Store(&err)
	}
}

// Health reports whether the service can do its work: nil when the store
// answers a read and the last write did not fail on storage. After a write
// failed with STORAGE_UNAVAILABLE (a full disk, a read-only file system, an
// I/O error), Health returns that error until a write succeeds.
func (s *Service) Health(ctx context.Context) error {
	if _, err := s.store.LastEventSeq(ctx); err != nil {
		return err
	}
	if p := s.health.fault.Load(); p != nil {
		return *p
	}
	return nil
}
