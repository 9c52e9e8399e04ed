package belay

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Scope is one right a token carries. A caller may do what both its user's
// role and its token's scopes allow.
type Scope string

// Token scopes.
const (
	// ScopeRead reads sessions, checkpoints, diffs, decisions and events.
	ScopeRead Scope = "read"
	// ScopeWrite saves checkpoints, rolls back and deletes (implies read).
	ScopeWrite Scope = "write"
	// ScopeDecide decides HITL requests (implies read).
	ScopeDecide Scope = "decide"
	// ScopeAdmin manages tokens, webhooks and everyone's data; it takes effect
	// only for a user who is an admin.
	ScopeAdmin Scope = "admin"
)

// AllScopes lists every scope, weakest first.
var AllScopes = []Scope{ScopeRead, ScopeWrite, ScopeDecide, ScopeAdmin}

// Valid reports whether s is a known scope.
func (s Scope) Valid() bool { return slices.Contains(AllScopes, s) }

// Actor is who is calling: set by the transport after authentication, or by
// the local CLI as the database's administrator.
type Actor struct {
	UserID string `json:"userId"`
	// Admin is true for an admin user whose token has the admin scope.
	Admin bool `json:"admin"`
	// Scopes limits what the caller may do; empty means every scope the user has.
	Scopes []Scope `json:"scopes,omitempty"`
	// Projects limits the caller to sessions of these project paths (and
	// paths below them); empty means no limit.
	Projects []string `json:"projects,omitempty"`
	// TokenID is the token the caller authenticated with, if any.
	TokenID string `json:"tokenId,omitempty"`
}

// Has reports whether the caller's token allows scope s. Write and decide
// imply read.
func (a Actor) Has(s Scope) bool {
	if len(a.Scopes) == 0 {
		return s != ScopeAdmin || a.Admin
	}
	if slices.Contains(a.Scopes, s) {
		return true
	}
	return s == ScopeRead && (slices.Contains(a.Scopes, ScopeWrite) || slices.Contains(a.Scopes, ScopeDecide))
}

// InProjects reports whether projectPath is one the caller may touch.
func (a Actor) InProjects(projectPath string) bool {
	if len(a.Projects) == 0 {
		return true
	}
	for _, p := range a.Projects {
		if PathWithin(p, projectPath) {
			return true
		}
	}
	return false
}

// PathWithin reports whether path is root or below it (both clean and absolute).
func PathWithin(root, path string) bool {
	root, path = filepath.Clean(root), filepath.Clean(path)
	return path == root || strings.HasPrefix(path, strings.TrimSuffix(root, string(filepath.Separator))+string(filepath.Separator))
}

type actorKey struct{}

// WithActor returns a context that carries the calling identity.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the identity in ctx, if any.
func ActorFrom(ctx context.Context) (Actor, bool) {
	a, ok := ctx.Value(actorKey{}).(Actor)
	return a, ok
}

// CreateTokenInput asks for a new API token.
type CreateTokenInput struct {
	// User is created when new; Admin makes a new user an admin.
	User  string `json:"user"`
	Admin bool   `json:"admin,omitempty"`
	// Scopes limits the token; empty means read, write and decide (plus admin
	// for an admin user).
	Scopes []Scope `json:"scopes,omitempty"`
	// Projects limits the token to these absolute project paths.
	Projects []string `json:"projects,omitempty"`
	// Name describes the token, e.g. "ci agent".
	Name string `json:"name,omitempty"`
}

// Token describes an API token; its secret is never stored or shown again.
type Token struct {
	ID         string     `json:"id"`
	User       string     `json:"user"`
	Name       string     `json:"name,omitempty"`
	Admin      bool       `json:"admin"`
	Scopes     []Scope    `json:"scopes"`
	Projects   []string   `json:"projects,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
	LastUsedAt *time.Time `json:"lastUsedAt,omitempty"`
	RevokedAt  *time.Time `json:"revokedAt,omitempty"`
}

// NewToken is a token just created: Secret is shown this once.
type NewToken struct {
	Token
	Secret string `json:"token"`
}

// Role is what a grant lets a principal do in a session.
type Role string

// Session roles a grant gives. Write and decide include read.
const (
	RoleRead   Role = "read"
	RoleWrite  Role = "write"
	RoleDecide Role = "decide"
)

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == RoleRead || r == RoleWrite || r == RoleDecide }

// Grant gives a user a role in a session that someone else owns.
type Grant struct {
	SessionID string    `json:"sessionId"`
	User      string    `json:"user"`
	Role      Role      `json:"role"`
	GrantedBy string    `json:"grantedBy"`
	CreatedAt time.Time `json:"createdAt"`
}
