package core

import (
	"context"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// GrantSession gives in.User in.Role in a session. Its owner or an admin may;
// the user must exist and not be the owner.
func (s *Service) GrantSession(ctx context.Context, in belay.GrantInput) (*belay.Grant, error) {
	c, err := authorize(ctx, belay.ScopeWrite)
	if err != nil {
		return nil, err
	}
	if err := belay.ValidateID("sessionId", in.SessionID); err != nil {
		return nil, err
	}
	if !in.Role.Valid() {
		return nil, belay.Invalid("role", "role must be read, write or decide, got %q", in.Role)
	}
	if err := validUserName(in.User); err != nil {
		return nil, err
	}
	var g *belay.Grant
	err = s.update(ctx, func(tx store.Tx) error {
		sess, rt, err := readSession(ctx, tx, c, in.SessionID)
		if err != nil {
			return err
		}
		if err := rt.mayOwn(c, sess, "grant others access to it"); err != nil {
			return err
		}
		if in.User == sess.Owner {
			return belay.Invalid("user", "%s owns session %s already", in.User, sess.ID)
		}
		if _, err := tx.GetUser(ctx, in.User); belay.IsCode(err, belay.CodeNotFound) {
			return belay.Invalid("user", "%q is not a user", in.User)
		} else if err != nil {
			return err
		}
		g = &belay.Grant{SessionID: sess.ID, User: in.User, Role: in.Role, GrantedBy: c.UserID, CreatedAt: s.clock.Now()}
		if err := tx.PutGrant(ctx, g); err != nil {
			return err
		}
		return s.appendEvent(ctx, tx, belay.EventSessionGranted, sess.ID, "", map[string]any{"user": g.User, "role": g.Role, "by": c.UserID})
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// RevokeGrant takes user's role in a session away (its owner or an admin may).
func (s *Service) RevokeGrant(ctx context.Context, sessionID, user string) error {
	c, err := authorize(ctx, belay.ScopeWrite)
	if err != nil {
		return err
	}
	if err := belay.ValidateID("sessionId", sessionID); err != nil {
		return err
	}
	if err := validUserName(user); err != nil {
		return err
	}
	return s.update(ctx, func(tx store.Tx) error {
		sess, rt, err := readSession(ctx, tx, c, sessionID)
		if err != nil {
			return err
		}
		if err := rt.mayOwn(c, sess, "revoke access to it"); err != nil {
			return err
		}
		if err := tx.DeleteGrant(ctx, sessionID, user); err != nil {
			return err
		}
		return s.appendEvent(ctx, tx, belay.EventSessionRevoked, sessionID, "", map[string]any{"user": user, "by": c.UserID})
	})
}

// ListGrants lists the grants of a session the caller may read.
func (s *Service) ListGrants(ctx context.Context, sessionID string) ([]*belay.Grant, error) {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return nil, err
	}
	if err := belay.ValidateID("sessionId", sessionID); err != nil {
		return nil, err
	}
	if _, _, err := readSession(ctx, s.store, c, sessionID); err != nil {
		return nil, err
	}
	gs, err := s.store.SessionGrants(ctx, sessionID)
	if gs == nil && err == nil {
		gs = []*belay.Grant{}
	}
	return gs, err
}
