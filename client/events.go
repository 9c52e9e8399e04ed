package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/belayhq/belay"
)

// EventFilter selects events of a stream; After -1 (belay.FromNow) starts
// with the next event.
type EventFilter = belay.EventFilter

// Events follows the server's event stream (SSE) and calls fn for every event
// in order until ctx ends (ctx.Err()) or fn returns an error (that error). See
// Follow.
func (c *Client) Events(ctx context.Context, f EventFilter, fn func(belay.Event) error) error {
	err := c.Follow(ctx, f, 0, func(_ int64, batch []belay.Event) error {
		for _, e := range batch {
			if err := fn(e); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		return ctx.Err()
	}
	return err
}

// Follow follows the server's event stream (SSE) as belay.EventService
// promises. A dropped connection is resumed from the last event seen
// (Last-Event-ID), so no event is missed or repeated; a server that cannot be
// reached at all on the first try is an error at once.
func (c *Client) Follow(ctx context.Context, f belay.EventFilter, heartbeat time.Duration, emit func(int64, []belay.Event) error) error {
	last := f.After
	const firstBackoff = 100 * time.Millisecond
	backoff := firstBackoff
	connected := false
	for {
		before := last
		err := c.streamOnce(ctx, f, &last, heartbeat > 0, &connected, emit)
		if last != before {
			// The stream made progress: the next drop is a fresh one.
			backoff = firstBackoff
		}
		if ctx.Err() != nil {
			return nil
		}
		var cb errCallback
		if errors.As(err, &cb) {
			return cb.err
		}
		var be *belay.Error
		var busy errServerBusy
		if errors.As(err, &be) || (!connected && !errors.As(err, &busy)) {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// errServerBusy is a 5xx answer to the stream: the server is reached, and
// worth another try.
type errServerBusy struct{ err error }

func (e errServerBusy) Error() string { return "event stream: " + e.err.Error() }

// errCallback marks an error returned by the caller's fn: it ends Events.
type errCallback struct{ err error }

func (e errCallback) Error() string { return e.err.Error() }

// streamOnce reads one connection of the stream. The first frame of the
// first connection is the stream's opening: emit hears of it once
// (*connected then turns true).
func (c *Client) streamOnce(ctx context.Context, f belay.EventFilter, last *int64, pings bool, connected *bool,
	emit func(int64, []belay.Event) error) error {
	q := url.Values{}
	set(q, "session", f.SessionID)
	for _, t := range f.Types {
		q.Add("type", t)
	}
	if *last >= 0 {
		q.Set("after", strconv.FormatInt(*last, 10))
	}
	resp, err := c.request(ctx, http.MethodGet, "/v1/events", q, http.Header{"Accept": {"text/event-stream"}}, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= http.StatusInternalServerError {
		// A server restarting or a proxy in between: worth another try.
		return errServerBusy{decodeError(resp)}
	}
	if resp.StatusCode != http.StatusOK {
		return decodeError(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var data strings.Builder
	frameID := int64(-1)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			id := frameID
			frameID = -1
			if data.Len() == 0 {
				// A frame with only an id (the opening one) moves the
				// resume position without an event.
				*last = max(*last, id)
				if !*connected {
					*connected = true
					if err := emit(*last, nil); err != nil {
						return errCallback{err}
					}
				}
				continue
			}
			var e belay.Event
			if err := json.Unmarshal([]byte(data.String()), &e); err != nil {
				return fmt.Errorf("decode event: %w", err)
			}
			data.Reset()
			if e.Seq <= *last {
				continue
			}
			*last = e.Seq
			if err := emit(e.Seq, []belay.Event{e}); err != nil {
				return errCallback{err}
			}
		case line == ": ping" && pings:
			if err := emit(*last, nil); err != nil {
				return errCallback{err}
			}
		case strings.HasPrefix(line, "data: "):
			data.WriteString(strings.TrimPrefix(line, "data: "))
		case strings.HasPrefix(line, "id: "):
			if id, err := strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64); err == nil {
				frameID = id
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return fmt.Errorf("event stream closed")
}

// AppendEvents appends graph events to a session's log.
func (c *Client) AppendEvents(ctx context.Context, in belay.AppendEventsInput) ([]belay.Event, error) {
	p, err := sessionPath(in.SessionID, "/events")
	if err != nil {
		return nil, err
	}
	out, err := call[items[belay.Event]](ctx, c, http.MethodPost, p, nil, appendBody{Events: in.Events})
	if err != nil {
		return nil, err
	}
	return out.Items, nil
}

// appendBody is the body of POST /v1/sessions/{id}/events.
type appendBody struct {
	Events []belay.EventRecord `json:"events"`
}
