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

// EventFilter selects events of a stream.
type EventFilter struct {
	SessionID string
	Types     []string
	// After is the sequence number to resume after; -1 means "from now on".
	After int64
}

// Events follows the server's event stream (SSE) and calls fn for every event
// in order until ctx ends or fn returns an error. A dropped connection is
// resumed from the last event seen (Last-Event-ID), so no event is missed or
// repeated.
func (c *Client) Events(ctx context.Context, f EventFilter, fn func(belay.Event) error) error {
	last := f.After
	const firstBackoff = 100 * time.Millisecond
	backoff := firstBackoff
	for {
		before := last
		err := c.streamOnce(ctx, f, &last, fn)
		if last != before {
			// The stream made progress: the next drop is a fresh one.
			backoff = firstBackoff
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var cb errCallback
		if errors.As(err, &cb) {
			return cb.err
		}
		var be *belay.Error
		if errors.As(err, &be) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// errCallback marks an error returned by the caller's fn: it ends Events.
type errCallback struct{ err error }

func (e errCallback) Error() string { return e.err.Error() }

func (c *Client) streamOnce(ctx context.Context, f EventFilter, last *int64, fn func(belay.Event) error) error {
	u := *c.base
	u.Path += "/v1/events"
	q := url.Values{}
	set(q, "session", f.SessionID)
	for _, t := range f.Types {
		q.Add("type", t)
	}
	if *last >= 0 {
		q.Set("after", strconv.FormatInt(*last, 10))
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= http.StatusInternalServerError {
		// A server restarting or a proxy in between: worth another try.
		return fmt.Errorf("event stream: %v", decodeError(resp))
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
			if err := fn(e); err != nil {
				return errCallback{err}
			}
			*last = e.Seq
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
