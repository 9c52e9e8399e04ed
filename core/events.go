package core

import (
	"context"
	"errors"
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
}

type subscriber struct {
	q       store.EventQuery
	ch      chan belay.Event
	dropped bool // guarded by eventHub.mu; ch is closed
}

func (sub *subscriber) matches(e *belay.Event) bool {
	return (sub.q.SessionID == "" || sub.q.SessionID == e.SessionID) &&
		(len(sub.q.Types) == 0 || slices.Contains(sub.q.Types, e.Type))
}

// add registers a live subscriber, starting the tailer when it is not running.
func (h *eventHub) add(ctx context.Context, q store.EventQuery) (*subscriber, error) {
	last, err := h.svc.store.LastEventSeq(ctx)
	if err != nil {
		return nil, err
	}
	sub := &subscriber{q: q, ch: make(chan belay.Event, subscriberBuffer)}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs[sub] = struct{}{}
	if !h.on {
		// Events up to last are the subscriber's to read from the log.
		h.on, h.head = true, last
		go h.tail()
	}
	return sub, nil
}

func (h *eventHub) remove(sub *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !sub.dropped {
		delete(h.subs, sub)
	}
}

// tail reads new events and hands them to the subscribers until none is left.
func (h *eventHub) tail() {
	wake, cancel := h.svc.Wake()
	defer cancel()
	poll := time.NewTicker(eventPoll)
	defer poll.Stop()
	ctx := context.Background()
	for {
		h.mu.Lock()
		head := h.head
		h.mu.Unlock()
		evs, err := h.svc.store.ListEvents(ctx, store.EventQuery{After: head, Limit: MaxEventPage})
		if err != nil {
			h.svc.log.Error("event tailer", "error", err)
		}
		h.mu.Lock()
		if len(h.subs) == 0 {
			h.on = false
			h.mu.Unlock()
			return
		}
		for i := range evs {
			e := &evs[i]
			for sub := range h.subs {
				if !sub.matches(e) {
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
		}
		h.mu.Unlock()
		if len(evs) == MaxEventPage {
			continue
		}
		select {
		case <-wake:
		case <-poll.C:
		}
	}
}

// Follow streams the event log matching q from q.After on: every event once,
// in order, in batches handed to emit, until ctx ends (nil) or emit or ping
// fails (that error). ping is called after beat without events, to keep
// proxies from closing an idle stream.
func (s *Service) Follow(ctx context.Context, q store.EventQuery, beat time.Duration, emit func([]belay.Event) error, ping func() error) error {
	if q.SessionID != "" {
		if err := belay.ValidateID("session", q.SessionID); err != nil {
			return err
		}
	}
	q.Limit = MaxEventPage
	heartbeat := time.NewTicker(beat)
	defer heartbeat.Stop()
	for {
		// Register first, then read the log: whatever the tailer has not read
		// yet reaches the subscription, the rest comes from the log, and the
		// overlap is skipped by sequence number.
		sub, err := s.hub.add(ctx, q)
		if err != nil {
			return err
		}
		err = s.followLive(ctx, &q, sub, heartbeat, beat, emit, ping)
		s.hub.remove(sub)
		if err != errLagged {
			return err
		}
	}
}

var errLagged = errors.New("subscriber fell behind")

// followLive catches up from the log, then streams the subscription until it
// is dropped for falling behind (errLagged) or the stream ends.
func (s *Service) followLive(ctx context.Context, q *store.EventQuery, sub *subscriber, heartbeat *time.Ticker, beat time.Duration, emit func([]belay.Event) error, ping func() error) error {
	for {
		evs, err := s.store.ListEvents(ctx, *q)
		if err != nil {
			return err
		}
		if len(evs) > 0 {
			if err := emit(evs); err != nil {
				return err
			}
			q.After = evs[len(evs)-1].Seq
			heartbeat.Reset(beat)
		}
		if len(evs) < q.Limit {
			break
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-heartbeat.C:
			if err := ping(); err != nil {
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
			if err := emit(batch); err != nil {
				return err
			}
			q.After = batch[len(batch)-1].Seq
			heartbeat.Reset(beat)
		}
	}
}
