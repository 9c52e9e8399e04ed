package core

import (
	"context"
	"crypto/rand"
	"time"

	"github.com/belayhq/belay/store"
)

// KeySize is the length of a key Key returns.
const KeySize = 32

// Key returns the deployment's secret key called name: KeySize random bytes
// made by the first instance that asks and the same for every instance on
// the database, for what every instance must seal and open alike (dashboard
// sign-in cookies). It is not part of belay.Service: no client reads it.
func (s *Service) Key(ctx context.Context, name string) ([]byte, error) {
	fresh := make([]byte, KeySize)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	var key []byte
	err := s.store.Update(ctx, func(tx store.Tx) (err error) {
		key, err = tx.InitSetting(ctx, "key."+name, fresh)
		return err
	})
	return key, err
}

// SignOut records that dashboard sign-in id, which would have ended at
// until, was signed out: every instance refuses its cookie from now on.
func (s *Service) SignOut(ctx context.Context, id string, until time.Time) error {
	return s.store.Update(ctx, func(tx store.Tx) error { return tx.AddSignout(ctx, id, until, s.clock.Now()) })
}

// SignedOut reports whether dashboard sign-in id was signed out.
func (s *Service) SignedOut(ctx context.Context, id string) (bool, error) {
	return s.store.SignedOut(ctx, id)
}
