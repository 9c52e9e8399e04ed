package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/store"
)

// hitlFrame is one Server-Sent Events frame: an event, or only comments.
type hitlFrame struct {
	ID       int64
	Event    string
	Data     string
	Comments []string
}

// hitlStream is one SSE connection whose TCP connection a test can cut.
type hitlStream struct {
	conn net.Conn
	resp *http.Response
	br   *bufio.Reader
}

// openSSE connects to /v1/events?query as user, sending Last-Event-ID when
// lastID is not empty. It fails the test unless the server answers 200.
func (s *hitlServer) openSSE(t *testing.T, query, lastID, user string) *hitlStream {
	t.Helper()
	st, err := s.dialSSE(query, lastID, user)
	if err != nil {
		t.Fatal(err)
	}
	if st.resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(st.resp.Body)
		st.close()
		t.Fatalf("GET /v1/events%s: %d %s", query, st.resp.StatusCode, b)
	}
	t.Cleanup(st.close)
	return st
}

func (s *hitlServer) dialSSE(query, lastID, user string) (*hitlStream, error) {
	st := &hitlStream{}
	var dialer net.Dialer
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		st.conn = c
		return c, err
	}}
	req, err := http.NewRequest(http.MethodGet, s.url+"/v1/events"+query, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+s.tokens[user])
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, err
	}
	st.resp, st.br = resp, bufio.NewReader(resp.Body)
	return st, nil
}

// cut drops the TCP connection under the stream, as a network failure would.
func (st *hitlStream) cut() { st.conn.Close() }

func (st *hitlStream) close() {
	st.resp.Body.Close()
	st.conn.Close()
}

// next reads one frame; it gives up after 10 s so a test cannot hang.
func (st *hitlStream) next() (hitlFrame, error) {
	var f hitlFrame
	if err := st.conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return f, err
	}
	started := false
	for {
		line, err := st.br.ReadString('\n')
		if err != nil {
			return f, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if started {
				return f, nil
			}
		case strings.HasPrefix(line, ":"):
			f.Comments = append(f.Comments, strings.TrimSpace(line[1:]))
		case strings.HasPrefix(line, "id: "):
			if f.ID, err = strconv.ParseInt(line[4:], 10, 64); err != nil {
				return f, fmt.Errorf("bad id line %q", line)
			}
		case strings.HasPrefix(line, "event: "):
			f.Event = line[7:]
		case strings.HasPrefix(line, "data: "):
			f.Data += line[6:]
		case strings.HasPrefix(line, "retry: "):
		default:
			return f, fmt.Errorf("unexpected SSE line %q", line)
		}
		started = true
	}
}

// event reads frames until the next event, skipping comment-only frames.
func (st *hitlStream) event(t *testing.T) belay.Event {
	t.Helper()
	for {
		f, err := st.next()
		if err != nil {
			t.Fatalf("reading the event stream: %v", err)
		}
		if f.Data == "" {
			continue
		}
		var e belay.Event
		if err := json.Unmarshal([]byte(f.Data), &e); err != nil {
			t.Fatalf("event data %q: %v", f.Data, err)
		}
		if f.ID != e.Seq || f.Event != e.Type {
			t.Fatalf("frame id %d event %q for event seq %d type %q", f.ID, f.Event, e.Seq, e.Type)
		}
		return e
	}
}

// events reads n events.
func (st *hitlStream) events(t *testing.T, n int) []belay.Event {
	t.Helper()
	out := make([]belay.Event, 0, n)
	for range n {
		out = append(out, st.event(t))
	}
	return out
}

func hitlSeqs(evs []belay.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

// hitlLog returns the stored event log matching q (q.Limit is set).
func (s *hitlServer) hitlLog(t *testing.T, q store.EventQuery) []belay.Event {
	t.Helper()
	q.Limit = 100000
	evs, err := s.db.ListEvents(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// activity makes one of each HITL event in a fresh session and returns it.
func (s *hitlServer) activity(t *testing.T) *belay.Session {
	t.Helper()
	sess := s.session(t)
	decided := s.request(t, sess.ID, belay.HITLInput{})
	if _, err := s.svc.Decide(s.as("alice"), belay.DecideInput{CheckpointID: decided.ID, Action: belay.ActionApprove, SelectedOption: "ok"}); err != nil {
		t.Fatal(err)
	}
	s.request(t, sess.ID, belay.HITLInput{OnReject: belay.OnRejectContinue, // the session goes on
		Timeout: &belay.TimeoutInput{Duration: 60, DefaultAction: belay.ActionReject}})
	s.clock.Advance(time.Minute)
	if n, err := s.svc.Sweep(context.Background()); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v", n, err)
	}
	return sess
}

func TestHITLSSEReplaysFiltersAndResumes(t *testing.T) {
	s := newHITLServer(t, nil)
	a := s.activity(t)
	b := s.activity(t)
	all := s.hitlLog(t, store.EventQuery{Scope: store.Everything})

	t.Run("every event type, ids are seqs", func(t *testing.T) {
		got := s.openSSE(t, "?after=0", "", "admin").events(t, len(all))
		if !slices.Equal(hitlSeqs(got), hitlSeqs(all)) {
			t.Fatalf("seqs %v, want %v", hitlSeqs(got), hitlSeqs(all))
		}
		for i := range got {
			if got[i].Type != all[i].Type || got[i].SessionID != all[i].SessionID || got[i].CheckpointID != all[i].CheckpointID ||
				string(got[i].Data) != string(all[i].Data) || !got[i].CreatedAt.Equal(all[i].CreatedAt) {
				t.Errorf("event %d = %+v, want %+v", i, got[i], all[i])
			}
		}
		types := map[string]bool{}
		for _, e := range got {
			types[e.Type] = true
		}
		for _, typ := range []string{belay.EventSessionCreated, belay.EventSessionStatusChanged, belay.EventCheckpointCreated,
			belay.EventHITLRequired, belay.EventHITLDecided, belay.EventHITLTimedOut} {
			if !types[typ] {
				t.Errorf("no %s event on the stream", typ)
			}
		}
	})

	filters := []struct {
		query string
		q     store.EventQuery
	}{
		{"?after=0&session=" + b.ID, store.EventQuery{Scope: store.Everything, SessionID: b.ID}},
		{"?after=0&type=hitl.decided", store.EventQuery{Scope: store.Everything, Types: []string{belay.EventHITLDecided}}},
		{"?after=0&type=hitl.required,hitl.timed_out", store.EventQuery{Scope: store.Everything, Types: []string{belay.EventHITLRequired, belay.EventHITLTimedOut}}},
		{"?after=0&type=hitl.required&type=hitl.timed_out&session=" + a.ID,
			store.EventQuery{Scope: store.Everything, SessionID: a.ID, Types: []string{belay.EventHITLRequired, belay.EventHITLTimedOut}}},
	}
	for _, f := range filters {
		t.Run(f.query, func(t *testing.T) {
			want := s.hitlLog(t, f.q)
			if len(want) == 0 {
				t.Fatal("filter matches nothing; the test proves nothing")
			}
			st := s.openSSE(t, f.query, "", "alice")
			got := st.events(t, len(want))
			if !slices.Equal(hitlSeqs(got), hitlSeqs(want)) {
				t.Fatalf("seqs %v, want %v", hitlSeqs(got), hitlSeqs(want))
			}
			// A matching event made now arrives next; non-matching ones made before it do not.
			s.activity(t)
			s.activity(t)
			tail := s.hitlLog(t, store.EventQuery{Scope: store.Everything, SessionID: f.q.SessionID, Types: f.q.Types, After: want[len(want)-1].Seq})
			if len(tail) > 0 {
				if e := st.event(t); e.Seq != tail[0].Seq {
					t.Errorf("live event %d, want %d", e.Seq, tail[0].Seq)
				}
			}
		})
	}

	t.Run("resume with after or Last-Event-ID", func(t *testing.T) {
		all := s.hitlLog(t, store.EventQuery{Scope: store.Everything})
		k := all[len(all)/2].Seq
		rest := hitlSeqs(all[len(all)/2+1:])
		for name, st := range map[string]*hitlStream{
			"after":                  s.openSSE(t, "?after="+strconv.FormatInt(k, 10), "", "alice"),
			"Last-Event-ID":          s.openSSE(t, "", strconv.FormatInt(k, 10), "alice"),
			"Last-Event-ID wins":     s.openSSE(t, "?after=1", strconv.FormatInt(k, 10), "alice"),
			"Last-Event-ID + filter": s.openSSE(t, "?type=checkpoint.created", strconv.FormatInt(k, 10), "alice"),
		} {
			want := rest
			if name == "Last-Event-ID + filter" {
				want = hitlSeqs(s.hitlLog(t, store.EventQuery{Scope: store.Everything, After: k, Types: []string{belay.EventCheckpointCreated}}))
			}
			if got := hitlSeqs(st.events(t, len(want))); !slices.Equal(got, want) {
				t.Errorf("%s: seqs %v, want %v", name, got, want)
			}
		}
	})

	t.Run("without after, from now on", func(t *testing.T) {
		st := s.openSSE(t, "", "", "alice")
		if f, err := st.next(); err != nil || !slices.Contains(f.Comments, "connected") {
			t.Fatalf("first frame = %+v, %v; want the connected comment", f, err)
		}
		before := s.hitlLog(t, store.EventQuery{Scope: store.Everything})
		s.session(t)
		if e := st.event(t); e.Seq != before[len(before)-1].Seq+1 || e.Type != belay.EventSessionCreated {
			t.Errorf("first event = %d %s, want %d session.created", e.Seq, e.Type, before[len(before)-1].Seq+1)
		}
	})

	t.Run("bad requests", func(t *testing.T) {
		for _, tc := range []struct{ query, lastID string }{
			{"?after=x", ""}, {"?after=-1", ""}, {"?session=nope", ""}, {"?since=3", ""}, {"", "abc"},
		} {
			st, err := s.dialSSE(tc.query, tc.lastID, "alice")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(st.resp.Body)
			st.close()
			if st.resp.StatusCode != http.StatusBadRequest || hitlErrorCode(t, body) != belay.CodeValidation {
				t.Errorf("%s (Last-Event-ID %q): %d %s, want 400", tc.query, tc.lastID, st.resp.StatusCode, body)
			}
		}
	})
}

// TestHITLSSEResumeAfterDroppedConnections cuts the TCP connection under a
// reader again and again, from both ends, while events keep coming; resuming
// with Last-Event-ID must deliver every event exactly once, in order.
func TestHITLSSEResumeAfterDroppedConnections(t *testing.T) {
	// Pings let the reader notice the end of the run without waiting for an event.
	s := newHITLServer(t, func(o *httpapi.Options) { o.Heartbeat = 20 * time.Millisecond })
	sess := s.session(t)
	const checkpoints = 400
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range checkpoints {
			in := belay.CreateCheckpointInput{SessionID: sess.ID, Summary: fmt.Sprint("step ", i)}
			if i%25 == 0 {
				in.HITL = &belay.HITLInput{Required: true}
			}
			if _, err := s.svc.CreateCheckpoint(s.as("agent"), in); err != nil {
				t.Error(err)
				return
			}
			if i%60 == 30 {
				s.srv.CloseClientConnections() // the server end drops too
			}
		}
	}()

	var got []int64
	final := int64(-1)
	// finished reports whether the producer is done and every event it
	// made has been received.
	finished := func() bool {
		if final < 0 {
			select {
			case <-done:
			default:
				return false
			}
			var err error
			if final, err = s.db.LastEventSeq(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		return len(got) > 0 && got[len(got)-1] >= final
	}
	conns := 0
	for !finished() {
		if conns++; conns > 10*checkpoints {
			t.Fatal("too many reconnects")
		}
		last := ""
		if len(got) > 0 {
			last = strconv.FormatInt(got[len(got)-1], 10)
		}
		query := ""
		if last == "" {
			query = "?after=0"
		}
		st, err := s.dialSSE(query, last, "alice")
		if err != nil {
			continue // cut while connecting
		}
		if st.resp.StatusCode != http.StatusOK {
			t.Fatalf("reconnect: status %d", st.resp.StatusCode)
		}
		for n := 0; n < 37 && !finished(); {
			f, err := st.next()
			if err != nil {
				break // dropped by the server: resume
			}
			if f.Data != "" {
				got = append(got, f.ID)
				n++
			}
		}
		st.cut()
		st.close()
	}
	want := make([]int64, final)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("over %d connections got %d events %v…, want exactly 1..%d once each", conns, len(got), got[:min(len(got), 20)], final)
	}
	t.Logf("%d events over %d connections", len(got), conns)
}

func TestHITLSSEHeartbeat(t *testing.T) {
	s := newHITLServer(t, func(o *httpapi.Options) { o.Heartbeat = 50 * time.Millisecond })
	st := s.openSSE(t, "", "", "alice")
	pings := 0
	for pings < 3 {
		f, err := st.next()
		if err != nil {
			t.Fatalf("after %d pings: %v", pings, err)
		}
		if f.Data != "" {
			t.Fatalf("unexpected event %+v", f)
		}
		if slices.Contains(f.Comments, "ping") {
			pings++
		}
	}
	// Pings do not disturb events: the next change arrives as an event.
	s.session(t)
	if e := st.event(t); e.Type != belay.EventSessionCreated {
		t.Errorf("event after pings = %s", e.Type)
	}
}

// TestWebSocketRouteWithoutUpgrade: /v1/ws asked for as a plain request is
// refused with the API's error body, not a text page.
func TestWebSocketRouteWithoutUpgrade(t *testing.T) {
	s := newHITLServer(t, nil)
	s.activity(t)
	status, body := s.call(t, http.MethodGet, "/v1/ws", "admin", nil, nil)
	var e struct{ Error *belay.Error }
	if status != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Error == nil || e.Error.Code != belay.CodeValidation {
		t.Errorf("GET /v1/ws without an upgrade: %d %s; want 400 VALIDATION_ERROR", status, body)
	}
}

func TestHITLWebSocketStream(t *testing.T) {
	s := newHITLServer(t, nil)
	s.activity(t)
	sess := s.activity(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	dial := func(t *testing.T, query, user string) *websocket.Conn {
		t.Helper()
		hdr := http.Header{}
		if user != "" {
			hdr.Set("Authorization", "Bearer "+s.tokens[user])
		}
		c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.url, "http")+"/v1/ws"+query, &websocket.DialOptions{HTTPHeader: hdr})
		if err != nil {
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			t.Fatalf("dial %s: %v (status %d)", query, err, status)
		}
		t.Cleanup(func() { c.CloseNow() })
		return c
	}
	read := func(t *testing.T, c *websocket.Conn, n int) []belay.Event {
		t.Helper()
		var out []belay.Event
		for range n {
			typ, b, err := c.Read(ctx)
			if err != nil {
				t.Fatalf("read after %d: %v", len(out), err)
			}
			var e belay.Event
			if typ != websocket.MessageText || json.Unmarshal(b, &e) != nil {
				t.Fatalf("message %v %s is not an event", typ, b)
			}
			out = append(out, e)
		}
		return out
	}

	t.Run("same stream as SSE", func(t *testing.T) {
		want := s.hitlLog(t, store.EventQuery{Scope: store.Everything})
		got := read(t, dial(t, "?after=0", "admin"), len(want))
		for i := range want {
			if got[i].Seq != want[i].Seq || got[i].Type != want[i].Type || string(got[i].Data) != string(want[i].Data) {
				t.Fatalf("event %d = %+v, want %+v", i, got[i], want[i])
			}
		}
	})
	t.Run("filters, resume and live events", func(t *testing.T) {
		q := store.EventQuery{Scope: store.Everything, SessionID: sess.ID, Types: []string{belay.EventHITLDecided, belay.EventHITLTimedOut}}
		want := s.hitlLog(t, q)
		c := dial(t, "?after=0&session="+sess.ID+"&type=hitl.decided,hitl.timed_out", "alice")
		got := read(t, c, len(want))
		if !slices.Equal(hitlSeqs(got), hitlSeqs(want)) {
			t.Fatalf("seqs %v, want %v", hitlSeqs(got), hitlSeqs(want))
		}
		// Resume after the first one.
		again := read(t, dial(t, "?after="+strconv.FormatInt(want[0].Seq, 10)+"&session="+sess.ID+"&type=hitl.decided,hitl.timed_out", "alice"), len(want)-1)
		if !slices.Equal(hitlSeqs(again), hitlSeqs(want[1:])) {
			t.Errorf("resumed seqs %v, want %v", hitlSeqs(again), hitlSeqs(want[1:]))
		}
		// Live: a decision in this session arrives; other sessions' do not.
		s.activity(t)
		cp := s.request(t, sess.ID, belay.HITLInput{})
		if _, err := s.svc.Decide(s.as("alice"), belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionSkip, SelectedOption: "pass"}); err != nil {
			t.Fatal(err)
		}
		if e := read(t, c, 1)[0]; e.Type != belay.EventHITLDecided || e.CheckpointID != cp.ID {
			t.Errorf("live event = %+v", e)
		}
	})
	t.Run("needs a token", func(t *testing.T) {
		_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.url, "http")+"/v1/ws?after=0", nil)
		if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("dial without a token: %v, %v; want 401", err, resp)
		}
	})
}

// TestHITLSSESlowClientIsDisconnected: a subscriber that stops reading does
// not hold up anyone else, and once the server's socket buffers are full it
// is disconnected after the write timeout (10 s), instead of the server
// queueing events for it; it then resumes with Last-Event-ID and loses
// nothing. The server holds at most one page of events per stream in memory:
// it reads the log page by page and writes each page before reading the next.
func TestHITLSSESlowClientIsDisconnected(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the 10 s write timeout")
	}
	s := newHITLServer(t, nil)

	// A client with a tiny receive window that sends its request and never reads.
	dialer := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	u, _ := url.Parse(s.url)
	slow, err := dialer.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	disconnected := s.connClosed(slow.LocalAddr().String())
	req, _ := http.NewRequest(http.MethodGet, s.url+"/v1/events?after=0", nil)
	req.Header.Set("Authorization", "Bearer "+s.tokens["alice"])
	if err := req.Write(slow); err != nil {
		t.Fatal(err)
	}
	fast := s.openSSE(t, "?after=0", "", "admin")
	// The fast reader drains its stream while the events are made, as a live
	// client does: left unread, it would fill its own buffers too, and be cut
	// off as well when making the events outlasts the server's write timeout
	// (on a busy machine).
	fastSeqs, fastErr := make(chan int64, 1<<16), make(chan error, 1)
	go func() {
		for {
			f, err := fast.next()
			if err != nil {
				fastErr <- err
				return
			}
			if f.Data != "" {
				fastSeqs <- f.ID
			}
		}
	}()

	// About 10 MB of events, far more than the socket buffers hold.
	sess := s.session(t)
	long := strings.Repeat("m", belay.MaxHITLMessage)
	opts := make([]belay.HITLOption, belay.MaxHITLOptions)
	for i := range opts {
		opts[i] = belay.HITLOption{ID: fmt.Sprint("o", i), Label: strings.Repeat("l", 50), Description: strings.Repeat("d", 200), Action: belay.ActionApprove}
	}
	for range 2000 {
		if _, err := s.svc.CreateCheckpoint(s.as("agent"), belay.CreateCheckpointInput{SessionID: sess.ID, Summary: strings.Repeat("s", 500),
			HITL: &belay.HITLInput{Required: true, Title: strings.Repeat("t", 200), Message: long, Options: opts}}); err != nil {
			t.Fatal(err)
		}
	}
	final, err := s.db.LastEventSeq(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The fast reader gets everything, once and in order, while the slow one
	// is stuck.
	for want := int64(1); want <= final; want++ {
		select {
		case seq := <-fastSeqs:
			if seq != want {
				t.Fatalf("the fast reader got event %d, want %d", seq, want)
			}
		case err := <-fastErr:
			t.Fatalf("the fast reader's stream ended before event %d of %d: %v", want, final, err)
		}
	}

	select {
	case <-disconnected:
	case <-time.After(30 * time.Second):
		t.Fatal("the server never disconnected the client that does not read")
	}

	// What the slow client did get ends early; resuming delivers the rest once.
	resp, err := http.ReadResponse(bufio.NewReader(slow), req)
	if err != nil {
		t.Fatal(err)
	}
	st := &hitlStream{conn: slow, resp: resp, br: bufio.NewReader(resp.Body)}
	var got []int64
	for {
		f, err := st.next()
		if err != nil {
			break
		}
		if f.Data != "" {
			got = append(got, f.ID)
		}
	}
	if len(got) == 0 || got[len(got)-1] >= final {
		t.Fatalf("the stuck client received %d events up to the end; the test did not fill the buffers", len(got))
	}
	rest := s.openSSE(t, "", strconv.FormatInt(got[len(got)-1], 10), "alice").events(t, int(final)-len(got))
	got = append(got, hitlSeqs(rest)...)
	for i, seq := range got {
		if seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: not exactly 1..%d once each", i, seq, final)
		}
	}
	t.Logf("the stuck client got %d of %d events before it was disconnected", len(got)-len(rest), final)
}
