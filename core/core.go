// Package core is the one implementation of belay's service: validation,
// authorization, HITL rules, timeouts, events and rollback orchestration.
// Every transport (HTTP, MCP, CLI) calls it; a store only persists for it.
package core

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/google/uuid"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/search"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/workspace"
)

// Options configure a Service.
type Options struct {
	Store store.Store
	// Clock defaults to the wall clock.
	Clock belay.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Workspaces takes and restores workspace snapshots. Without it (no git
	// on this machine) checkpoints cannot snapshot their workspace.
	Workspaces *workspace.Manager
	// WorkspaceRoots are the directories under which users other than
	// admins may snapshot, restore and diff workspaces.
	WorkspaceRoots []string
	// SavesPerMinute limits checkpoint saves per project (bursts of twice
	// as many); 0 means no limit.
	SavesPerMinute int
	// Embedder turns checkpoints and queries into vectors for search; the
	// built-in search.Hash when nil.
	Embedder search.Embedder
}

// Service implements belay.Service on a store.
type Service struct {
	store store.Store
	clock belay.Clock
	log   *slog.Logger
	ws    *workspace.Manager

	mu      sync.Mutex
	waiters map[chan struct{}]struct{}
	hub     *eventHub
	roots   []string
	saves   *saveLimiter
	embed   search.Embedder
	imports chan struct{} // one value per import running (importSlot)

	// health is the outcome of the last write, for Health.
	health writeHealth
}

var _ belay.Service = (*Service)(nil)

// New returns a Service. The caller keeps ownership of the store.
func New(opts Options) *Service {
	s := &Service{store: opts.Store, clock: opts.Clock, log: opts.Logger, ws: opts.Workspaces, waiters: map[chan struct{}]struct{}{}}
	s.hub = newEventHub(s)
	s.saves = newSaveLimiter(opts.SavesPerMinute)
	s.embed = opts.Embedder
	if s.embed == nil {
		s.embed = search.NewHash(0)
	}
	s.imports = make(chan struct{}, MaxImports)
	for _, r := range opts.WorkspaceRoots {
		s.roots = append(s.roots, filepath.Clean(r))
	}
	if s.clock == nil {
		s.clock = belay.SystemClock{}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

// Close stops the service's own background reader of the event log and
// waits for it, so the store can be closed next; event streams and waits
// still running end with an error. It leaves the store open. The sweeper and
// the webhook dispatcher stop with their own contexts.
func (s *Service) Close() {
	s.hub.stop()
}

// newID returns a time-ordered UUID (v7).
func newID() string {
	return uuid.Must(uuid.NewV7()).String()
}

// Wake returns a channel that receives a value after the next committed change
// made through this Service. It is a wake-up only: readers then read the event
// log, which stays the source of truth. Call the returned cancel when done.
func (s *Service) Wake() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.waiters[ch] = struct{}{}
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		delete(s.waiters, ch)
		s.mu.Unlock()
	}
}

func (s *Service) notify() {
	s.mu.Lock()
	for ch := range s.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
}

// remoteWake is the wake-up from other processes' commits when the store
// offers one; nil (never ready) when it does not.
func (s *Service) remoteWake() (<-chan struct{}, func()) {
	if n, ok := s.store.(store.Notifier); ok {
		return n.Listen()
	}
	return nil, func() {}
}

// update runs fn in a write transaction and wakes event readers after it
// commits. Its outcome feeds Health.
func (s *Service) update(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.write(ctx, s.store.Update, fn)
}

// batch is update for a fn that may run more than once (see store.Batcher).
func (s *Service) batch(ctx context.Context, fn func(tx store.Tx) error) error {
	if b, ok := s.store.(store.Batcher); ok {
		return s.write(ctx, b.Batch, fn)
	}
	return s.update(ctx, fn)
}

func (s *Service) write(ctx context.Context, run func(context.Context, func(store.Tx) error) error, fn func(tx store.Tx) error) error {
	err := run(ctx, fn)
	s.health.note(err)
	if err != nil {
		return err
	}
	s.notify()
	return nil
}

// appendEvent appends an event with a JSON payload.
func (s *Service) appendEvent(ctx context.Context, tx store.Tx, typ, sessionID, checkpointID string, data any) error {
	e := belay.Event{Type: typ, SessionID: sessionID, CheckpointID: checkpointID, CreatedAt: s.clock.Now()}
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			return fmt.Errorf("encode event %s: %w", typ, err)
		}
		e.Data = b
	}
	return tx.AppendEvent(ctx, &e)
}

// setStatus moves a session to a new status and records the change.
func (s *Service) setStatus(ctx context.Context, tx store.Tx, sess *belay.Session, to belay.SessionStatus, reason string) error {
	if sess.Status == to {
		return nil
	}
	from := sess.Status
	sess.Status = to
	return s.appendEvent(ctx, tx, belay.EventSessionStatusChanged, sess.ID, "",
		map[string]any{"from": from, "to": to, "reason": reason})
}
