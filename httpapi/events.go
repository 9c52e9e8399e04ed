package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/belayhq/belay"
)

// writeTimeout is how long a stream waits for a slow client to take one
// batch of events before disconnecting it; the client resumes from the last
// id it saw, so nothing is lost and the server never buffers without bound.
const writeTimeout = 10 * time.Second

// streamParams are the query parameters of the event streams (streamFilter).
var streamParams = []string{"session", "type", "after"}

// streamFilter parses the filters shared by SSE and WebSocket streams;
// without after (or Last-Event-ID) a stream starts at the newest event.
func streamFilter(r *http.Request) (belay.EventFilter, error) {
	q := newQuery(r)
	f := belay.EventFilter{SessionID: q.str("session"), Types: q.list("type"), After: belay.FromNow}
	after := q.str("after")
	if err := q.done(); err != nil {
		return f, err
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		after = id
	}
	if after == "" {
		return f, nil
	}
	n, err := strconv.ParseInt(after, 10, 64)
	if err != nil || n < 0 {
		return f, belay.Invalid("after", "after (or Last-Event-ID) must be an event sequence number, got %q", after)
	}
	f.After = n
	return f, nil
}

// startStream runs Follow until its opening call, so that a refused stream
// (bad filter, unknown session, no permission) is answered as an error
// before anything is written, then hands the rest of the stream to the
// transport's emit on the same goroutine.
func (s *Server) startStream(ctx context.Context, f belay.EventFilter, open func(after int64) error,
	emit func(after int64, batch []belay.Event) error) error {
	opened := false
	return s.svc.Follow(ctx, f, s.beat, func(after int64, batch []belay.Event) error {
		if !opened {
			opened = true
			return open(after)
		}
		return emit(after, batch)
	})
}

// sse serves the event log as Server-Sent Events; each event's id is its
// sequence number, so a reconnect with Last-Event-ID resumes with no gap.
func (s *Server) sse(w http.ResponseWriter, r *http.Request) error {
	f, err := streamFilter(r)
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	write := func(f func() error) error {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if err := f(); err != nil {
			return err
		}
		return rc.Flush()
	}
	started := false
	// The opening frame carries the starting position as its id, so a client
	// that drops before the first event resumes from here, not from "now".
	open := func(after int64) error {
		started = true
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
		return write(func() error {
			_, err := fmt.Fprintf(w, "retry: 1000\nid: %d\n: connected\n\n", after)
			return err
		})
	}
	emit := func(_ int64, evs []belay.Event) error {
		if len(evs) == 0 {
			return write(func() error { _, err := fmt.Fprint(w, ": ping\n\n"); return err })
		}
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
	err = s.startStream(r.Context(), f, open, emit)
	if !started {
		return err
	}
	// Once the stream has started, errors can only end it: the client reconnects.
	if err != nil && r.Context().Err() == nil {
		s.log.Debug("event stream ended", "error", err)
	}
	return nil
}

// websocket serves the same stream as JSON messages over a WebSocket; resume
// with ?after=SEQ.
func (s *Server) websocket(w http.ResponseWriter, r *http.Request) error {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return belay.Invalid("Upgrade", "GET /v1/ws is a WebSocket: connect with a WebSocket client (Upgrade: websocket), or read the same events as Server-Sent Events from GET /v1/events")
	}
	f, err := streamFilter(r)
	if err != nil {
		return err
	}
	var conn *websocket.Conn
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	open := func(int64) error {
		var err error
		if conn, err = websocket.Accept(w, r, nil); err != nil {
			return errAccepted // Accept has answered the client already.
		}
		// The stream ends when the client closes the connection.
		closed := conn.CloseRead(ctx)
		go func() {
			<-closed.Done()
			cancel()
		}()
		return nil
	}
	ping := func() error {
		pctx, cancel := context.WithTimeout(ctx, writeTimeout)
		defer cancel()
		return conn.Ping(pctx)
	}
	emit := func(_ int64, evs []belay.Event) error {
		if len(evs) == 0 {
			return ping()
		}
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
	err = s.startStream(ctx, f, open, emit)
	switch {
	case conn == nil && err == errAccepted:
		return nil
	case conn == nil:
		return err
	case err != nil:
		conn.Close(websocket.StatusInternalError, "stream failed; reconnect with ?after=<last seq>")
	default:
		conn.Close(websocket.StatusNormalClosure, "")
	}
	conn.CloseNow()
	return nil
}

var errAccepted = errors.New("websocket accept answered")

// appendEvents is POST /v1/sessions/{id}/events: {"events": [...]} in,
// {"items": [...]} (the events numbered) out.
func (s *Server) appendEvents(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	var in struct {
		Events []belay.EventRecord `json:"events"`
	}
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	evs, err := s.svc.AppendEvents(r.Context(), belay.AppendEventsInput{SessionID: id, Events: in.Events})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": evs})
	return nil
}
