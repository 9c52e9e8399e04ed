package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/workspace"
)

// CreateSession starts a running session owned by the caller, held by
// in.Holder when it names one, with in.Checkpoint as its first checkpoint
// when given.
func (s *Service) CreateSession(ctx context.Context, in belay.CreateSessionInput) (*belay.Session, error) {
	c, err := authorize(ctx, belay.ScopeWrite)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	if in.Holder != "" {
		in.Lease = leaseFor(in.Lease)
	}
	id := newID()
	var first *belay.Checkpoint
	if f := in.Checkpoint; f != nil {
		if f.SessionID != "" || f.ProjectPath != "" || f.Snapshot || f.Holder != "" || f.Release || f.End != "" || len(f.Answers) > 0 {
			return nil, belay.Invalid("checkpoint", "the first checkpoint belongs to the session being created: no sessionId, projectPath, snapshot, holder, release, end or answers")
		}
		in := *f
		in.SessionID = id
		if first, err = s.newCheckpoint(ctx, c, &in); err != nil {
			return nil, err
		}
	}
	in.ProjectPath = s.projectPath(c, in.ProjectPath)
	if err := c.mayCreateIn(in.ProjectPath); err != nil {
		return nil, err
	}
	if err := s.projectDir(c, "projectPath", in.ProjectPath); err != nil {
		return nil, err
	}
	var sess *belay.Session
	err = s.update(ctx, func(tx store.Tx) error {
		var err error
		if sess, err = s.newSession(ctx, tx, c, in, id); err != nil || first == nil {
			return err
		}
		if err := s.insertCheckpoint(ctx, tx, sess, first); err != nil {
			return err
		}
		_, err = s.appendGraphEvents(ctx, tx, sess.ID, in.Checkpoint.Events, first.ID)
		return err
	})
	return sess, err
}

// newSession inserts session id of the caller, as in describes it, in tx.
func (s *Service) newSession(ctx context.Context, tx store.Tx, c caller, in belay.CreateSessionInput, id string) (*belay.Session, error) {
	now := s.clock.Now()
	sess := &belay.Session{
		ID: id, ProjectPath: in.ProjectPath, Title: in.Title, Owner: c.UserID,
		Status: belay.SessionRunning, Phase: in.Phase, Metadata: compactJSON(in.Metadata),
		CreatedAt: now, UpdatedAt: now,
	}
	if in.Holder != "" {
		until := now.Add(in.Lease)
		sess.Holder, sess.LeaseExpiresAt = in.Holder, &until
	}
	if err := tx.InsertSession(ctx, sess); err != nil {
		return nil, err
	}
	err := s.appendEvent(ctx, tx, belay.EventSessionCreated, sess.ID, "",
		map[string]any{"projectPath": sess.ProjectPath, "title": sess.Title, "owner": sess.Owner})
	return sess, err
}

// GetSession returns a session the caller may read (SESSION_NOT_FOUND otherwise).
func (s *Service) GetSession(ctx context.Context, id string) (*belay.Session, error) {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return nil, err
	}
	if err := belay.ValidateID("id", id); err != nil {
		return nil, err
	}
	sess, rt, err := readSession(ctx, s.store, c, id)
	if err != nil {
		return nil, err
	}
	if leaseLapsed(sess, s.clock.Now()) {
		if err := s.settleLease(ctx, id); err != nil {
			return nil, err
		}
		if sess, rt, err = readSession(ctx, s.store, c, id); err != nil {
			return nil, err
		}
	}
	sess.Access = &belay.Access{Write: rt.write, Decide: rt.decide, Own: rt.own,
		Workspace: sess.ProjectPath != "" && s.ws != nil && s.mayUseWorkspace(c, sess.ProjectPath) == nil}
	return sess, nil
}

// UpdateSession sets a session's title; those who may write to the session
// may. It appends session.updated when the title changes.
func (s *Service) UpdateSession(ctx context.Context, id string, in belay.UpdateSessionInput) (*belay.Session, error) {
	c, err := authorize(ctx, belay.ScopeWrite)
	if err != nil {
		return nil, err
	}
	if err := belay.ValidateID("id", id); err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	var sess *belay.Session
	err = s.update(ctx, func(tx store.Tx) error {
		var err error
		if sess, err = writeSession(ctx, tx, c, id); err != nil {
			return err
		}
		if sess.Title == *in.Title {
			return nil
		}
		sess.Title, sess.UpdatedAt = *in.Title, s.clock.Now()
		if err := s.appendEvent(ctx, tx, belay.EventSessionUpdated, sess.ID, "", map[string]any{"title": sess.Title}); err != nil {
			return err
		}
		return tx.UpdateSession(ctx, sess)
	})
	if err != nil {
		return nil, err
	}
	return sess, nil
}

// ActiveSession returns the newest open session of a project path among
// those the caller may continue (see caller.own): the one its saves by project
// path go to.
func (s *Service) ActiveSession(ctx context.Context, projectPath string) (*belay.Session, error) {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return nil, err
	}
	if err := belay.ValidateProjectPath("projectPath", projectPath); err != nil {
		return nil, err
	}
	return s.store.ActiveSession(ctx, s.projectPath(c, projectPath), c.own())
}

// ListSessions returns one page of the sessions the caller may read, newest first.
func (s *Service) ListSessions(ctx context.Context, in belay.ListSessionsInput) (*belay.SessionList, error) {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	in.ProjectPath = s.projectPath(c, in.ProjectPath)
	if _, err := s.sweepLeases(ctx); err != nil {
		return nil, err
	}
	limit := in.Limit
	if limit == 0 {
		limit = belay.DefaultListLimit
	}
	scope := c.scope()
	if in.Own {
		scope = c.own()
	}
	q := store.SessionQuery{Scope: scope, ProjectPath: in.ProjectPath, Status: in.Status, Limit: limit, MaxBytes: store.PageBytes}
	if in.Cursor != "" {
		c, err := decodeCursor(in.Cursor, "s")
		if err != nil {
			return nil, err
		}
		q.After = &store.SessionKey{CreatedAt: time.Unix(0, c.At).UTC(), ID: c.ID}
	}
	var total int64
	items, more, err := refetch(func() (page []*belay.Session, more bool, err error) {
		page, total, more, err = s.store.ListSessions(ctx, q)
		return page, more, err
	})
	if err != nil {
		return nil, err
	}
	out := &belay.SessionList{Items: items, TotalCount: total}
	if more && len(items) > 0 {
		out.HasMore = true
		last := items[len(items)-1]
		out.NextCursor = encodeCursor(cursor{Order: "s", At: last.CreatedAt.UnixNano(), ID: last.ID})
	}
	if out.Items == nil {
		out.Items = []*belay.Session{}
	}
	return out, nil
}

// compactJSON removes insignificant whitespace so stored documents and
// checksums do not depend on how a client formatted them. "null" means absent.
// A document already compact is copied without a second JSON scan.
func compactJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if belay.IsCompactJSON(raw) {
		return bytes.Clone(raw)
	}
	var b bytes.Buffer
	b.Grow(len(raw))
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	if b.String() == "null" {
		return nil
	}
	return json.RawMessage(b.Bytes())
}

// DeleteSession deletes a session with its checkpoints and rollbacks (the
// session owner or an admin may), then deletes its snapshot refs and reclaims
// the space they held. A failure to prune is reported, not returned: the
// session is gone either way.
func (s *Service) DeleteSession(ctx context.Context, id string) (*belay.DeleteSessionResult, error) {
	c, err := authorize(ctx, belay.ScopeWrite)
	if err != nil {
		return nil, err
	}
	if err := belay.ValidateID("id", id); err != nil {
		return nil, err
	}
	var sess *belay.Session
	err = s.update(ctx, func(tx store.Tx) error {
		var err error
		var rt rights
		if sess, rt, err = readSession(ctx, tx, c, id); err != nil {
			return err
		}
		if err := rt.mayOwn(c, sess, "delete it"); err != nil {
			return err
		}
		if err := tx.DeleteSession(ctx, id); err != nil {
			return err
		}
		return s.appendEvent(ctx, tx, belay.EventSessionDeleted, id, "",
			map[string]any{"projectPath": sess.ProjectPath, "checkpoints": sess.CheckpointCount})
	})
	if err != nil {
		return nil, err
	}
	res := &belay.DeleteSessionResult{SessionID: id, Checkpoints: sess.CheckpointCount, SnapshotsPruned: true}
	if sess.ProjectPath == "" || s.ws == nil {
		return res, nil
	}
	if s.mayUseWorkspace(c, sess.ProjectPath) != nil {
		// Another's snapshot store, maybe: pruning it would tell of it.
		res.SnapshotsPruned = false
		res.Warning = "snapshots of a workspace you may not use are left to `belay gc`, which an admin runs"
		return res, nil
	}
	rec, err := s.ws.DeleteRefs(s.confined(ctx, c), sess.ProjectPath, sessionRefs(id))
	var we *workspace.Error
	switch {
	case errors.As(err, &we) && we.Code == workspace.NotFound:
		// never snapshotted
	case err != nil:
		res.SnapshotsPruned = false
		res.Warning = "the session's snapshots could not be dropped (`belay gc` tries again): " + err.Error()
	default:
		res.FreedBytes = max(rec.Before-rec.After, 0)
	}
	return res, nil
}
