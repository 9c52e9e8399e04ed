package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/belayhq/belay"
)

// maxCachedHeads bounds the writer's session-head cache; a full cache is
// emptied and fills again with the sessions being written.
const maxCachedHeads = 1024

// sessionHead is the part of a session's row GetSessionHead reads.
type sessionHead struct {
	projectPath, owner, holder string
	status                     belay.SessionStatus
	phase, headID              string
	step                       int
	lastSeq                    int64
	count                      int64
	lease                      *time.Time
}

func headOf(s *belay.Session) sessionHead {
	h := sessionHead{projectPath: s.ProjectPath, owner: s.Owner, holder: s.Holder, status: s.Status, phase: s.Phase,
		headID: s.HeadCheckpointID, step: s.CurrentStep, lastSeq: s.LastSeq, count: s.CheckpointCount}
	if s.LeaseExpiresAt != nil {
		t := *s.LeaseExpiresAt
		h.lease = &t
	}
	return h
}

func (h sessionHead) session(id string) *belay.Session {
	s := &belay.Session{ID: id, ProjectPath: h.projectPath, Owner: h.owner, Holder: h.holder, Status: h.status,
		Phase: h.phase, HeadCheckpointID: h.headID, CurrentStep: h.step, LastSeq: h.lastSeq, CheckpointCount: h.count}
	if h.lease != nil {
		t := *h.lease
		s.LeaseExpiresAt = &t
	}
	return s
}

// headCache keeps the heads of the sessions the writer connection read or
// advanced, so that a save, which reads its session's head and then advances
// it, reads the row only once per session and not once per save: the read is
// a tenth of the serialised part of a save.
//
// It belongs, like the writer connection, to whoever holds the turn. It holds
// what the connection's transaction sees: every write to the sessions table
// goes through InsertSession, UpdateSession, AdvanceSession or DeleteSession,
// which keep it in step; a rollback, of a transaction or of a savepoint,
// empties it; and a commit by another connection (another process) empties
// it before its first use in the next transaction, found by PRAGMA
// data_version, which changes only then.
type headCache struct {
	heads map[string]sessionHead
	// version is the connection's data_version the heads were read at, and
	// checked tells that it was compared in the current transaction.
	version int64
	checked bool
}

// begin starts a transaction's use of the cache.
func (c *headCache) begin() { c.checked = false }

func (c *headCache) clear() { clear(c.heads) }

// get returns the cached head of session id, first making sure that no other
// connection committed since the heads were read.
func (c *headCache) get(ctx context.Context, q querier, id string) (sessionHead, bool, error) {
	if _, ok := c.heads[id]; !ok {
		return sessionHead{}, false, nil
	}
	if err := c.current(ctx, q); err != nil {
		return sessionHead{}, false, err
	}
	h, ok := c.heads[id]
	return h, ok, nil
}

// current empties the cache when another connection committed since the
// heads were read, comparing the connection's data_version with theirs once
// per transaction.
func (c *headCache) current(ctx context.Context, q querier) error {
	if c.checked {
		return nil
	}
	var v int64
	if err := q.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
		return fmt.Errorf("sqlite: data version: %w", err)
	}
	if v != c.version {
		c.clear()
		c.version = v
	}
	c.checked = true
	return nil
}

// put caches the head of session id as the transaction now sees it.
func (c *headCache) put(ctx context.Context, q querier, id string, h sessionHead) error {
	if err := c.current(ctx, q); err != nil {
		return err
	}
	if len(c.heads) >= maxCachedHeads {
		c.clear()
	}
	c.heads[id] = h
	return nil
}

// advanced records what AdvanceSession wrote of a cached session's head.
func (c *headCache) advanced(s *belay.Session) {
	h, ok := c.heads[s.ID]
	if !ok {
		return
	}
	h.status, h.phase, h.step, h.headID, h.lastSeq, h.count = s.Status, s.Phase, s.CurrentStep, s.HeadCheckpointID, s.LastSeq, s.CheckpointCount
	c.heads[s.ID] = h
}

// forget drops session id, whose row changed otherwise.
func (c *headCache) forget(id string) { delete(c.heads, id) }

// headsOf returns the head cache of q's connection: the writer's, or nil.
func headsOf(q querier) *headCache {
	if w, ok := q.(writerQuerier); ok {
		return &w.db.heads
	}
	return nil
}
