package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// MaxEventPage bounds one read of the event log.
const MaxEventPage = 500

// eventPoll bounds how long the event tailer sleeps between reads of the log,
// so it notices changes made by other processes on the same database.
const eventPoll = 250 * time.Millisecond

// subscriberBuffer bounds the events held for one subscriber; one that falls
// further behind is dropped from the live feed and catches up from the log.
const subscriberBuffer = 1024

// eventHub reads the event log once per process and fans each new event out to
// every live subscriber, so a thousand streams cost one query per change, not
// a thousand. The log stays the source of truth: a subscriber catches up from
// it on its own, and does again whenever it falls behind.
type eventHub struct {
	svc  *Service
	mu   sync.Mutex
	subs map[*subscriber]struct{}
	head int64 // the newest sequence number the tailer has read
	on   bool  // the tailer is running
	// acls are who may read each session, for the tailer alone; add
	// forgets them before it starts a tailer.
	acls map[string]*sessionACL
	// ctx ends when the hub is closed; tailed is closed when the running
	// tailer returns.
	ctx    context.Context
	close  context.CancelFunc
	tailed chan struct{}
}

func newEventHub(svc *Service) *eventHub {
	h := &eventHub{svc: svc, subs: map[*subscriber]struct{}{}, acls: map[string]*sessionACL{}}
	h.ctx, h.close = context.WithCancel(context.Background())
	return h
}

// errClosed answers a stream or a wait that starts, or is still running,
// after the service was closed.
var errClosed = belay.Errorf(belay.CodeInternal, "belay is shutting down")

type subscriber struct {
	q       store.EventQuery
	ch      chan belay.Event
	dropped bool // guarded by eventHub.mu; ch is closed
}

// matches applies the subscriber's filter and scope: acl describes the
// event's session (nil for no session, or one never seen), approvers are
// those its data names (see store.EventQuery.Approvals).
func (sub *subscriber) matches(e *belay.Event, acl *sessionACL, approvers []string) bool {
	return (sub.q.SessionID == "" || sub.q.SessionID == e.SessionID) &&
		(len(sub.q.Types) == 0 || slices.Contains(sub.q.Types, e.Type)) &&
		(acl.readable(sub.q.Scope) || sub.q.Approvals && acl.approvable(sub.q.Scope, approvers))
}

// eventApprovers are the approvers a HITL event's data names.
func eventApprovers(e *belay.Event) []string {
	if !slices.Contains(store.HITLEventTypes, e.Type) {
		return nil
	}
	var d struct {
		Approvers []string `json:"approvers"`
	}
	_ = json.Unmarshal(e.Data, &d) // an event without approvers names none
	return d.Approvers
}

// sessionACL is who may read a session's events: what the store's scope
// filter checks, kept in memory for the live feed.
type sessionACL struct {
	owner, project string
	users          []string // holders of a grant
}

func (a *sessionACL) readable(sc store.Scope) bool {
	if sc.All && len(sc.Projects) == 0 {
		return true
	}
	if a == nil {
		return false
	}
	if len(sc.Projects) > 0 && !(belay.Actor{Projects: sc.Projects}).InProjects(a.project) {
		return false
	}
	return sc.All || a.owner == sc.User || slices.Contains(a.users, sc.User)
}

// approvable says whether an event of the session, naming approvers, is
// told to sc's user as one of them, within sc's projects.
func (a *sessionACL) approvable(sc store.Scope, approvers []string) bool {
	return a != nil && slices.Contains(approvers, sc.User) &&
		(len(sc.Projects) == 0 || (belay.Actor{Projects: sc.Projects}).InProjects(a.project))
}

// acl returns the access list of an event's session, read once and kept
// until the session's grants change. Only the tailer calls it.
func (h *eventHub) acl(ctx context.Context, e *belay.Event) *sessionACL {
	if e.SessionID == "" {
		return nil
	}
	if e.Type == belay.EventSessionGranted || e.Type == belay.EventSessionRevoked {
		delete(h.acls, e.SessionID)
	}
	if a, ok := h.acls[e.SessionID]; ok {
		return a
	}
	sess, err := h.svc.store.GetSession(ctx, e.SessionID)
	if err != nil {
		return nil // deleted: only those who see everything see its events
	}
	grants, err := h.svc.store.SessionGrants(ctx, e.SessionID)
	if err != nil {
		if ctx.Err() == nil {
			h.svc.log.Error("event tailer: session grants", "error", err)
		}
		return nil
	}
	a := &sessionACL{owner: sess.Owner, project: sess.ProjectPath}
	for _, g := range grants {
		a.users = append(a.users, g.User)
	}
	if len(h.acls) >= maxACLs {
		clear(h.acls)
	}
	h.acls[e.SessionID] = a
	return a
}

// maxACLs bounds the tailer's cache of session access lists.
const maxACLs = 10000

// add registers a live subscriber, starting the tailer when it is not running.
func (h *eventHub) add(ctx context.Context, q store.EventQuery) (*subscriber, error) {
	last, err := h.svc.store.LastEventSeq(ctx)
	if err != nil {
		return nil, err
	}
	sub := &subscriber{q: q, ch: make(chan belay.Event, subscriberBuffer)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx.Err() != nil {
		return nil, errClosed
	}
	h.subs[sub] = struct{}{}
	if !h.on {
		// Events up to last are the subscriber's to read from the log. The
		// grants they changed were never seen: forget the access lists.
		h.on, h.head = true, last
		// Grants may have changed while no one listened.
		clear(h.acls)
		h.tailed = make(chan struct{})
		go h.tail(h.tailed)
	}
	return sub, nil
}

// stop ends the tailer and waits for it to return. Subscribers still
// registered are dropped: their streams and waits end with errClosed.
func (h *eventHub) stop() {
	h.mu.Lock()
	h.close()
	tailed := h.tailed
	h.mu.Unlock()
	if tailed != nil {
		<-tailed
	}
}

func (h *eventHub) remove(sub *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !sub.dropped {
		delete(h.subs, sub)
	}
}

// tail reads new events and hands them to the subscribers until none is
// left or the hub is closed; then it closes tailed.
func (h *eventHub) tail(tailed chan struct{}) {
	defer close(tailed)
	wake, cancel := h.svc.Wake()
	defer cancel()
	remote, stop := h.svc.remoteWake()
	defer stop()
	poll := time.NewTicker(eventPoll)
	defer poll.Stop()
	ctx := h.ctx
	for {
		h.mu.Lock()
		head := h.head
		h.mu.Unlock()
		evs, err := h.svc.store.ListEvents(ctx, store.EventQuery{Scope: store.Everything, After: head, Limit: MaxEventPage})
		if err != nil && ctx.Err() == nil {
			h.svc.log.Error("event tailer", "error", err)
		}
		acls := make([]*sessionACL, len(evs))
		approvers := make([][]string, len(evs))
		for i := range evs {
			acls[i], approvers[i] = h.acl(ctx, &evs[i]), eventApprovers(&evs[i])
		}
		h.mu.Lock()
		if ctx.Err() != nil {
			for sub := range h.subs {
				sub.dropped = true
				close(sub.ch)
				delete(h.subs, sub)
			}
		}
		if len(h.subs) == 0 {
			h.on = false
			h.mu.Unlock()
			return
		}
		for i := range evs {
			e := &evs[i]
			for sub := range h.subs {
				if !sub.matches(e, acls[i], approvers[i]) {
					continue
				}
				select {
				case sub.ch <- *e:
				default:
					sub.dropped = true
					close(sub.ch)
					delete(h.subs, sub)
				}
			}
			h.head = e.Seq
			if e.Type == belay.EventSessionDeleted {
				delete(h.acls, e.SessionID)
			}
		}
		h.mu.Unlock()
		if len(evs) == MaxEventPage {
			continue
		}
		select {
		case <-wake:
		case <-remote:
		case <-poll.C:
		case <-ctx.Done():
		}
	}
}

// Follow streams the event log matching f that the caller may read (see
// belay.EventService). The scope is applied in the store query for the
// catch-up and by the tailer for the live feed.
func (s *Service) Follow(ctx context.Context, f belay.EventFilter, heartbeat time.Duration, emit func(int64, []belay.Event) error) error {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return err
	}
	if err := belay.ValidateEventTypes("type", f.Types); err != nil {
		return err
	}
	if f.SessionID != "" {
		if err := belay.ValidateID("session", f.SessionID); err != nil {
			return err
		}
		if err := s.mayFollow(ctx, c, f.SessionID); err != nil {
			return err
		}
	}
	last, err := s.store.LastEventSeq(ctx)
	if err != nil {
		return err
	}
	switch {
	case f.After == belay.FromNow:
		f.After = last
	case f.After < 0:
		return belay.Invalid("after", "after must be an event sequence number (0 for the whole log), got %d", f.After)
	case f.After > last:
		return belay.Invalid("after", "event %d does not exist: the newest is %d", f.After, last).With("newest", last)
	}
	q := store.EventQuery{Scope: c.scope(), Approvals: c.Has(belay.ScopeDecide), SessionID: f.SessionID, Types: f.Types, After: f.After, Limit: MaxEventPage}
	emit = s.whileValid(ctx, c, emit)
	if err := emit(q.After, nil); err != nil {
		return err
	}
	beat := newBeat(heartbeat)
	defer beat.stop()
	for {
		// Register first, then read the log: whatever the tailer has not read
		// yet reaches the subscription, the rest comes from the log, and the
		// overlap is skipped by sequence number.
		sub, err := s.hub.add(ctx, q)
		if err != nil {
			return err
		}
		err = s.followLive(ctx, &q, sub, beat, emit)
		s.hub.remove(sub)
		if err != errLagged {
			return err
		}
	}
}

// mayFollow says whether the caller may follow the events of session id:
// one who may read it, or an approver of a request in it, whose token may
// decide (it is told of those requests only, see store.EventQuery.Approvals).
func (s *Service) mayFollow(ctx context.Context, c caller, id string) error {
	_, _, err := readSession(ctx, s.store, c, id)
	if !belay.IsCode(err, belay.CodeSessionNotFound) || !c.Has(belay.ScopeDecide) {
		return err
	}
	told, err2 := s.store.ListEvents(ctx, store.EventQuery{Scope: c.scope(), Approvals: true, SessionID: id, Types: store.HITLEventTypes, Limit: 1})
	if err2 != nil {
		return err2
	}
	if len(told) == 0 {
		return err
	}
	return nil
}

// whileValid wraps a stream's emit so that the stream ends, UNAUTHENTICATED,
// once the caller's token is revoked or deleted: the token is looked up
// before each delivery (events or heartbeat), not only when the stream
// opened, so a leaked token that is revoked stops receiving at once.
func (s *Service) whileValid(ctx context.Context, c caller, emit func(int64, []belay.Event) error) func(int64, []belay.Event) error {
	if c.TokenID == "" {
		return emit // a local caller, not a token's
	}
	return func(after int64, batch []belay.Event) error {
		if err := s.stillValid(ctx, c, "the stream ends"); err != nil {
			return err
		}
		return emit(after, batch)
	}
}

// stillValid refuses, UNAUTHENTICATED, a caller whose token was revoked or
// deleted since its call began: a call that lasts (a stream, a long poll)
// answers nothing more then. ending says what ends.
func (s *Service) stillValid(ctx context.Context, c caller, ending string) error {
	if c.TokenID == "" {
		return nil // a local caller, not a token's
	}
	tk, err := s.store.GetToken(ctx, c.TokenID)
	switch {
	case belay.IsCode(err, belay.CodeNotFound), err == nil && tk.RevokedAt != nil:
		return belay.Errorf(belay.CodeUnauthenticated, "the API token was revoked: %s", ending)
	}
	return err
}

// beat ticks after a stream has been idle for its interval; a zero interval
// never ticks.
type beat struct {
	d time.Duration
	t *time.Ticker
}

func newBeat(d time.Duration) *beat {
	if d <= 0 {
		return &beat{}
	}
	return &beat{d: d, t: time.NewTicker(d)}
}

func (b *beat) c() <-chan time.Time {
	if b.t == nil {
		return nil
	}
	return b.t.C
}

func (b *beat) reset() {
	if b.t != nil {
		b.t.Reset(b.d)
	}
}

func (b *beat) stop() {
	if b.t != nil {
		b.t.Stop()
	}
}

var errLagged = errors.New("subscriber fell behind")

// followLive catches up from the log, then streams the subscription until it
// is dropped for falling behind (errLagged) or the stream ends.
func (s *Service) followLive(ctx context.Context, q *store.EventQuery, sub *subscriber, beat *beat, emit func(int64, []belay.Event) error) error {
	for {
		evs, err := s.store.ListEvents(ctx, *q)
		if err != nil {
			return err
		}
		if len(evs) > 0 {
			q.After = evs[len(evs)-1].Seq
			if err := emit(q.After, evs); err != nil {
				return err
			}
			beat.reset()
		}
		if len(evs) < q.Limit {
			break
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-beat.c():
			if err := emit(q.After, nil); err != nil {
				return err
			}
		case e, ok := <-sub.ch:
			if !ok {
				return errLagged
			}
			batch := make([]belay.Event, 0, 16)
			if e.Seq > q.After {
				batch = append(batch, e)
			}
		drain:
			for len(batch) < MaxEventPage {
				select {
				case e, ok := <-sub.ch:
					if !ok {
						break drain
					}
					if e.Seq > q.After {
						batch = append(batch, e)
					}
				default:
					break drain
				}
			}
			if len(batch) == 0 {
				continue
			}
			q.After = batch[len(batch)-1].Seq
			if err := emit(q.After, batch); err != nil {
				return err
			}
			beat.reset()
		}
	}
}

// AppendEvents appends graph events to a session's log (see
// belay.EventService): the caller must be able to write to the session, and
// a checkpoint an event names must be one of the session's. The events are
// numbered in one transaction, so a follower sees them together, in order.
func (s *Service) AppendEvents(ctx context.Context, in belay.AppendEventsInput) ([]belay.Event, error) {
	c, err := authorize(ctx, belay.ScopeWrite)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	var out []belay.Event
	err = s.update(ctx, func(tx store.Tx) error {
		if _, err := writeSession(ctx, tx, c, in.SessionID); err != nil {
			return err
		}
		out, err = s.appendGraphEvents(ctx, tx, in.SessionID, in.Events, "")
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// appendGraphEvents appends graph events (validated by belay.ValidateEvents)
// to the log of session sessionID in tx, for a caller who may write to it: a
// checkpoint an event names must be one of the session's; an event with
// ThisCheckpoint names thisCheckpoint, the checkpoint tx creates.
func (s *Service) appendGraphEvents(ctx context.Context, tx store.Tx, sessionID string, recs []belay.EventRecord, thisCheckpoint string) ([]belay.Event, error) {
	out := make([]belay.Event, len(recs))
	now := s.clock.Now()
	ours := map[string]bool{thisCheckpoint: true} // checkpoints seen to be the session's
	for i, rec := range recs {
		if rec.ThisCheckpoint {
			rec.CheckpointID = thisCheckpoint
		}
		if rec.CheckpointID != "" && !ours[rec.CheckpointID] {
			cp, err := tx.GetCheckpoint(ctx, rec.CheckpointID)
			if err != nil && !belay.IsCode(err, belay.CodeCheckpointNotFound) {
				return nil, err
			}
			if cp == nil || cp.SessionID != sessionID {
				return nil, belay.Invalid(fmt.Sprintf("events[%d].checkpointId", i), "checkpoint %s is not one of session %s", rec.CheckpointID, sessionID)
			}
			ours[rec.CheckpointID] = true
		}
		out[i] = belay.Event{Type: rec.Type, SessionID: sessionID, CheckpointID: rec.CheckpointID, Data: rec.Data, CreatedAt: now}
		if err := tx.AppendEvent(ctx, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}
