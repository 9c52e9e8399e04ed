package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/coder/websocket"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/store"
)

// writeTimeout is how long a stream waits for a slow client to take one
// batch of events before disconnecting it; the client resumes from the last
// id it saw, so nothing is lost and the server never buffers without bound.
const writeTimeout = 10 * time.Second

// streamQuery parses the filters shared by SSE and WebSocket streams.
func (s *Server) streamQuery(r *http.Request) (store.EventQuery, error) {
	q := newQuery(r)
	eq := store.EventQuery{SessionID: q.str("session"), Types: q.list("type"), Limit: 500}
	if len(eq.Types) > len(core.EventTypes) {
		q.fail(belay.Invalid("type", "at most %d event types may be given", len(core.EventTypes)))
	}
	for _, t := range eq.Types {
		if !slices.Contains(core.EventTypes, t) {
			q.fail(belay.Invalid("type", "unknown event type %q; one of %v", t, core.EventTypes))
		}
	}
	after := q.str("after")
	if err := q.done(); err != nil {
		return eq, err
	}
	if eq.SessionID != "" {
		if err := belay.ValidateID("session", eq.SessionID); err != nil {
			return eq, err
		}
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		after = id
	}
	if after == "" {
		last, err := s.svc.Store().LastEventSeq(r.Context())
		if err != nil {
			return eq, err
		}
		eq.After = last
		return eq, nil
	}
	n, err := strconv.ParseInt(after, 10, 64)
	if err != nil || n < 0 {
		return eq, belay.Invalid("after", "after (or Last-Event-ID) must be an event sequence number, got %q", after)
	}
	eq.After = n
	return eq, nil
}

// follow streams the event log from q.After on to emit (see core.Service.Follow).
func (s *Server) follow(ctx context.Context, q store.EventQuery, emit func([]belay.Event) error, ping func() error) error {
	return s.svc.Follow(ctx, q, s.beat, emit, ping)
}

// sse serves the event log as Server-Sent Events; each event's id is its
// sequence number, so a reconnect with Last-Event-ID resumes with no gap.
func (s *Server) sse(w http.ResponseWriter, r *http.Request) error {
	q, err := s.streamQuery(r)
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(f func() error) error {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if err := f(); err != nil {
			return err
		}
		return rc.Flush()
	}
	// The opening frame carries the starting position as its id, so a client
	// that drops before the first event resumes from here, not from "now".
	if err := write(func() error {
		_, err := fmt.Fprintf(w, "retry: 1000\nid: %d\n: connected\n\n", q.After)
		return err
	}); err != nil {
		return nil
	}
	emit := func(evs []belay.Event) error {
		return write(func() error {
			for _, e := range evs {
				b, err := json.Marshal(e)
				if err != nil {
					return err
				}
				if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Type, b); err != nil {
					return err
				}
			}
			return nil
		})
	}
	ping := func() error {
		return write(func() error { _, err := fmt.Fprint(w, ": ping\n\n"); return err })
	}
	// Once the stream has started, errors can only end it: the client reconnects.
	if err := s.follow(r.Context(), q, emit, ping); err != nil && r.Context().Err() == nil {
		s.log.Debug("event stream ended", "error", err)
	}
	return nil
}

// websocket serves the same stream as JSON messages over a WebSocket; resume
// with ?after=SEQ.
func (s *Server) websocket(w http.ResponseWriter, r *http.Request) error {
	q, err := s.streamQuery(r)
	if err != nil {
		return err
	}
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil // Accept has answered the client already.
	}
	defer conn.CloseNow()
	ctx := conn.CloseRead(r.Context())
	emit := func(evs []belay.Event) error {
		for _, e := range evs {
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			wctx, cancel := context.WithTimeout(ctx, writeTimeout)
			err = conn.Write(wctx, websocket.MessageText, b)
			cancel()
			if err != nil {
				return err
			}
		}
		return nil
	}
	ping := func() error {
		pctx, cancel := context.WithTimeout(ctx, writeTimeout)
		defer cancel()
		return conn.Ping(pctx)
	}
	if err := s.follow(ctx, q, emit, ping); err != nil {
		conn.Close(websocket.StatusInternalError, "stream failed; reconnect with ?after=<last seq>")
		return nil
	}
	conn.Close(websocket.StatusNormalClosure, "")
	return nil
}
