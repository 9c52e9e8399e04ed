package core

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/workspace"
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

// CreateToken creates user in.User (when new) and returns a new API token for
// it. Only an admin may. The token is shown once: only its hash is stored.
func (s *Service) CreateToken(ctx context.Context, in belay.CreateTokenInput) (*belay.NewToken, error) {
	c, err := authorizeAdmin(ctx, belay.ScopeRead, "create tokens")
	if err != nil {
		return nil, err
	}
	if err := validUserName(in.User); err != nil {
		return nil, err
	}
	if err := validTokenInput(&in); err != nil {
		return nil, err
	}
	if err := c.bounds(in); err != nil {
		return nil, err
	}
	var tk *belay.NewToken
	err = s.update(ctx, func(tx store.Tx) error {
		var err error
		tk, err = s.putToken(ctx, tx, in)
		return err
	})
	return tk, err
}

func validTokenInput(in *belay.CreateTokenInput) error {
	if len(in.Name) > belay.MaxNameLen {
		return belay.Invalid("name", "name must be at most %d characters", belay.MaxNameLen)
	}
	seen := map[belay.Scope]bool{}
	var scopes []belay.Scope
	for _, sc := range in.Scopes {
		if !sc.Valid() {
			return belay.Invalid("scopes", "unknown scope %q; one of %v", belay.Clip(string(sc), 50), belay.AllScopes)
		}
		if !seen[sc] {
			seen[sc] = true
			scopes = append(scopes, sc)
		}
	}
	in.Scopes = scopes
	if len(in.Projects) > 100 {
		return belay.Invalid("projects", "at most 100 projects may be given")
	}
	for i, p := range in.Projects {
		if err := belay.ValidateProjectPath("projects", p); err != nil {
			return err
		}
		in.Projects[i] = filepath.Clean(p)
	}
	in.Projects = limitPaths(in.Projects)
	return nil
}

// limitPaths returns the project paths a new token is limited to, each
// followed by the directory it leads to when a symlink on the way makes that
// another path: belay keeps a project by its directory's path
// (Service.projectPath). They are resolved once, as the admin creates the
// token, and never again: resolved on each use, a limit would follow a link
// its holder swapped in for its project, anywhere.
func limitPaths(projects []string) []string {
	out := projects
	for _, p := range projects {
		if real, err := workspace.RealPath(p); err == nil && real != p && !slices.Contains(out, real) {
			out = append(slices.Clip(out), real)
		}
	}
	return out
}

// putToken creates or updates the user and stores a new token for it.
func (s *Service) putToken(ctx context.Context, tx store.Tx, in belay.CreateTokenInput) (*belay.NewToken, error) {
	now := s.clock.Now()
	u, err := tx.GetUser(ctx, in.User)
	switch {
	case belay.IsCode(err, belay.CodeNotFound):
		u = &belay.User{Name: in.User, Admin: in.Admin, CreatedAt: now}
	case err != nil:
		return nil, err
	default:
		u.Admin = u.Admin || in.Admin
	}
	if !u.Admin && slices.Contains(in.Scopes, belay.ScopeAdmin) {
		return nil, belay.Invalid("scopes", "scope admin is only for admin users, and %s is not one (admin: true, --admin in the CLI, makes the user one)", in.User)
	}
	if err := tx.PutUser(ctx, u); err != nil {
		return nil, err
	}
	secret := newToken()
	tk := belay.Token{ID: newID(), User: in.User, Name: in.Name, Admin: u.Admin, Scopes: in.Scopes, Projects: in.Projects, CreatedAt: now}
	if err := tx.InsertToken(ctx, &tk, hashToken(secret)); err != nil {
		return nil, err
	}
	if len(tk.Scopes) == 0 {
		tk.Scopes = defaultScopes(u.Admin)
	}
	return &belay.NewToken{Token: tk, Secret: secret}, nil
}

// defaultScopes are the scopes of a token created without any.
func defaultScopes(admin bool) []belay.Scope {
	if admin {
		return belay.AllScopes
	}
	return belay.AllScopes[:3]
}

// ListTokens lists every token, newest first, without secrets. Only an admin may.
func (s *Service) ListTokens(ctx context.Context) ([]*belay.Token, error) {
	if _, err := authorizeAdmin(ctx, belay.ScopeRead, "list tokens"); err != nil {
		return nil, err
	}
	list, err := s.store.ListTokens(ctx)
	if err != nil {
		return nil, err
	}
	for _, tk := range list {
		if len(tk.Scopes) == 0 {
			tk.Scopes = defaultScopes(tk.Admin)
		}
	}
	if list == nil {
		list = []*belay.Token{}
	}
	return list, nil
}

// RevokeToken makes token id unusable from the next call on. Only an admin
// may; revoking a revoked token changes nothing.
func (s *Service) RevokeToken(ctx context.Context, id string) error {
	if _, err := authorizeAdmin(ctx, belay.ScopeWrite, "revoke tokens"); err != nil {
		return err
	}
	if err := belay.ValidateID("id", id); err != nil {
		return err
	}
	return s.update(ctx, func(tx store.Tx) error {
		return tx.RevokeToken(ctx, id, s.clock.Now())
	})
}

func validUserName(name string) error {
	if name == "" || len(name) > 100 || strings.ContainsFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) ||
		!utf8.ValidString(name) || name == SystemUser {
		return belay.Invalid("user", "user name must be 1-100 characters of UTF-8 without spaces or control characters, and not %q", SystemUser)
	}
	return nil
}

// Bootstrap creates the first admin and a token for it when the database has
// no users yet, and returns that token (shown once); "" when users exist. It
// is the server's own start-up work and needs no identity.
func (s *Service) Bootstrap(ctx context.Context) (string, error) {
	token := ""
	err := s.update(ctx, func(tx store.Tx) error {
		n, err := tx.CountUsers(ctx)
		if err != nil || n > 0 {
			return err
		}
		tk, err := s.putToken(ctx, tx, belay.CreateTokenInput{User: BootstrapUser, Admin: true, Name: "bootstrap"})
		if err != nil {
			return err
		}
		token = tk.Secret
		return nil
	})
	return token, err
}

// touchEvery is how stale a token's last-used time may get: recording every
// use would make every read a write.
const touchEvery = time.Minute

// Authenticate returns the identity a bearer token stands for, or
// UNAUTHENTICATED for an unknown or revoked token.
func (s *Service) Authenticate(ctx context.Context, token string) (belay.Actor, error) {
	if !strings.HasPrefix(token, tokenPrefix) {
		return belay.Actor{}, belay.Errorf(belay.CodeUnauthenticated, "a valid API token is required: send Authorization: Bearer belay_…")
	}
	tk, u, err := s.store.TokenByHash(ctx, hashToken(token))
	if belay.IsCode(err, belay.CodeNotFound) {
		return belay.Actor{}, belay.Errorf(belay.CodeUnauthenticated, "the API token is not valid")
	}
	if err != nil {
		return belay.Actor{}, err
	}
	if tk.RevokedAt != nil {
		return belay.Actor{}, belay.Errorf(belay.CodeUnauthenticated, "the API token was revoked")
	}
	now := s.clock.Now()
	if tk.LastUsedAt == nil || now.Sub(*tk.LastUsedAt) >= touchEvery {
		err := s.store.Update(ctx, func(tx store.Tx) error { return tx.TouchToken(ctx, tk.ID, now) })
		if err != nil {
			// A failed bookkeeping write must not refuse a valid token.
			s.log.Warn("recording a token's use", "token", tk.ID, "error", err)
		}
	}
	a := belay.Actor{UserID: u.Name, Scopes: tk.Scopes, Projects: tk.Projects, TokenID: tk.ID}
	a.Admin = u.Admin && (len(tk.Scopes) == 0 || slices.Contains(tk.Scopes, belay.ScopeAdmin))
	return a, nil
}
