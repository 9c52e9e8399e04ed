package core

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// tokenPrefix marks belay API tokens so they are recognisable in logs and
// secret scanners.
const tokenPrefix = "belay_"

// BootstrapUser is the admin created on a server's first start.
const BootstrapUser = "admin"

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// CreateToken creates user name (when new) and returns a new API token for
// it. Only an admin may. The token is shown once: only its hash is stored.
func (s *Service) CreateToken(ctx context.Context, name string, admin bool) (string, error) {
	if a := actor(ctx); !a.Admin {
		return "", belay.Errorf(belay.CodeUnauthorized, "only an admin may create tokens")
	}
	if err := validUserName(name); err != nil {
		return "", err
	}
	token := newToken()
	err := s.update(ctx, func(tx store.Tx) error {
		return s.putToken(ctx, tx, name, admin, token)
	})
	if err != nil {
		return "", err
	}
	return token, nil
}

func (s *Service) putToken(ctx context.Context, tx store.Tx, name string, admin bool, token string) error {
	now := s.clock.Now()
	if err := tx.PutUser(ctx, &belay.User{Name: name, Admin: admin, CreatedAt: now}); err != nil {
		return err
	}
	return tx.InsertToken(ctx, hashToken(token), name, now)
}

func validUserName(name string) error {
	if name == "" || len(name) > 100 || strings.ContainsAny(name, " \t\r\n") || name == SystemUser {
		return belay.Invalid("user", "user name must be 1-100 characters without spaces and not %q", SystemUser)
	}
	return nil
}

// Bootstrap creates the first admin and a token for it when the database has
// no users yet, and returns that token (shown once); "" when users exist.
func (s *Service) Bootstrap(ctx context.Context) (string, error) {
	token := ""
	err := s.update(ctx, func(tx store.Tx) error {
		n, err := tx.CountUsers(ctx)
		if err != nil || n > 0 {
			return err
		}
		token = newToken()
		return s.putToken(ctx, tx, BootstrapUser, true, token)
	})
	return token, err
}

// Authenticate returns the identity a bearer token stands for, or
// UNAUTHENTICATED.
func (s *Service) Authenticate(ctx context.Context, token string) (belay.Actor, error) {
	if !strings.HasPrefix(token, tokenPrefix) {
		return belay.Actor{}, belay.Errorf(belay.CodeUnauthenticated, "a valid API token is required: send Authorization: Bearer belay_…")
	}
	u, err := s.store.UserByToken(ctx, hashToken(token))
	if belay.IsCode(err, belay.CodeNotFound) {
		return belay.Actor{}, belay.Errorf(belay.CodeUnauthenticated, "the API token is not valid")
	}
	if err != nil {
		return belay.Actor{}, err
	}
	return belay.Actor{UserID: u.Name, Admin: u.Admin}, nil
}
