package core

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
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
// I/O error), Health tries a write of its own, and reports its error until
// a write succeeds: an instance a load balancer took out of rotation for it
// comes back once the storage does, without waiting for a request.
func (s *Service) Health(ctx context.Context) error {
	if _, err := s.store.LastEventSeq(ctx); err != nil {
		return err
	}
	if p := s.health.fault.Load(); p != nil {
		err := s.store.Update(ctx, func(tx store.Tx) error {
			return tx.PutSetting(ctx, "health.probe", []byte(s.clock.Now().UTC().Format(time.RFC3339Nano)))
		})
		s.health.note(err)
		if err != nil {
			if belay.IsCode(err, belay.CodeStorageUnavailable) {
				return err
			}
			return *p
		}
	}
	return nil
}
