package client_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/client"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/store/sqlite"
)

// hitlRemote is a server with token authentication on loopback and a client
// for alice whose TCP connections a test can cut.
type hitlRemote struct {
	svc    *core.Service
	db     *sqlite.DB
	srv    *httptest.Server
	client *client.Client
	alice  context.Context // alice acting on the service directly

	mu    sync.Mutex
	conn  net.Conn // the client's newest connection
	dials int
}

func newHITLRemote(t *testing.T) *hitlRemote {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := core.New(core.Options{Store: db, Logger: log})
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Service: svc, Logger: log, Authenticate: svc.Authenticate,
		Heartbeat: 50 * time.Millisecond}).Handler())
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		db.Close()
	})
	ctx := context.Background()
	if _, err := svc.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	tk, err := svc.CreateToken(belay.WithActor(ctx, belay.Actor{UserID: core.BootstrapUser, Admin: true}), belay.CreateTokenInput{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	token := tk.Secret
	r := &hitlRemote{svc: svc, db: db, srv: srv, alice: belay.WithActor(ctx, belay.Actor{UserID: "alice"})}
	var dialer net.Dialer
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		r.mu.Lock()
		r.conn = c
		r.dials++
		r.mu.Unlock()
		return c, err
	}}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := client.New(srv.URL, token)
	if err != nil {
		t.Fatal(err)
	}
	r.client = c.WithHTTPClient(&http.Client{Transport: tr})
	return r
}

// cut drops the client's newest TCP connection.
func (r *hitlRemote) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn != nil {
		r.conn.Close()
	}
}

// sentinel creates a session with the given title: its session.created event
// tells a reader that everything made before it has been seen.
func (r *hitlRemote) sentinel(t *testing.T, title string) int64 {
	t.Helper()
	if _, err := r.svc.CreateSession(r.alice, belay.CreateSessionInput{Title: title}); err != nil {
		t.Fatal(err)
	}
	seq, err := r.db.LastEventSeq(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

func hitlIsSentinel(e belay.Event, title string) bool {
	var d struct {
		Title string `json:"title"`
	}
	return e.Type == belay.EventSessionCreated && json.Unmarshal(e.Data, &d) == nil && d.Title == title
}

var errHITLStop = errors.New("seen enough")

// TestHITLClientEventsResumesAfterDrops cuts the client's connection, from
// its end and from the server's, while events keep coming: Events must
// reconnect and deliver every event exactly once, in order.
func TestHITLClientEventsResumesAfterDrops(t *testing.T) {
	r := newHITLRemote(t)
	sess, err := r.svc.CreateSession(r.alice, belay.CreateSessionInput{Title: "work"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The producer stays at most 40 events ahead of the reader, so drops
	// happen while events are still being made.
	var got []int64
	var received atomic.Int64
	progress := make(chan struct{}, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- r.client.Events(ctx, client.EventFilter{After: 0}, func(e belay.Event) error {
			got = append(got, e.Seq)
			received.Store(int64(len(got)))
			select {
			case progress <- struct{}{}:
			default:
			}
			switch len(got) {
			case 60, 180:
				r.cut() // the client's end drops
			case 120, 240:
				r.srv.CloseClientConnections() // the server's end drops
			}
			if hitlIsSentinel(e, "the end") {
				return errHITLStop
			}
			return nil
		})
	}()
	for i := range 300 {
		for int64(i)-received.Load() > 40 {
			select {
			case <-progress:
			case err := <-errc:
				t.Fatalf("Events ended early: %v", err)
			}
		}
		in := belay.CreateCheckpointInput{SessionID: sess.ID, Summary: fmt.Sprint("step ", i)}
		if i%30 == 0 {
			in.HITL = &belay.HITLInput{Required: true}
		}
		if _, err := r.svc.CreateCheckpoint(r.alice, in); err != nil {
			t.Fatal(err)
		}
	}
	final := r.sentinel(t, "the end")
	if err := <-errc; !errors.Is(err, errHITLStop) {
		t.Fatalf("Events = %v, want the callback's error", err)
	}
	want := make([]int64, final)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %d events %v…, want exactly 1..%d once each", len(got), got[:min(20, len(got))], final)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dials < 5 {
		t.Errorf("%d connections: the stream was not dropped as planned", r.dials)
	}
	t.Logf("%d events over %d connections", len(got), r.dials)
}

// TestHITLClientEventsFromNowSurvivesEarlyDrop: with After -1 ("from now
// on"), a connection that drops before its first event must not lose the
// events made while reconnecting.
func TestHITLClientEventsFromNowSurvivesEarlyDrop(t *testing.T) {
	r := newHITLRemote(t)
	r.sentinel(t, "before")
	base := r.client
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// The first stream is cut right after the server's opening lines, and an
	// event is made before the client reconnects.
	var mu sync.Mutex
	streams := 0
	connected := make(chan struct{})
	tr := hitlRoundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil || req.URL.Path != "/v1/events" {
			return resp, err
		}
		mu.Lock()
		defer mu.Unlock()
		streams++
		switch streams {
		case 1:
			var opening bytes.Buffer
			br := bufio.NewReader(resp.Body)
			for !bytes.HasSuffix(opening.Bytes(), []byte("\n\n")) {
				line, err := br.ReadBytes('\n')
				if err != nil {
					return nil, err
				}
				opening.Write(line)
			}
			resp.Body.Close()
			resp.Body = io.NopCloser(io.MultiReader(&opening, hitlFailingReader{}))
			if _, err := r.svc.CreateSession(r.alice, belay.CreateSessionInput{Title: "made while reconnecting"}); err != nil {
				return nil, err
			}
		case 2:
			close(connected)
		}
		return resp, nil
	})
	base.WithHTTPClient(&http.Client{Transport: tr})

	var got []belay.Event
	errc := make(chan error, 1)
	go func() {
		errc <- base.Events(ctx, client.EventFilter{After: -1}, func(e belay.Event) error {
			got = append(got, e)
			if hitlIsSentinel(e, "after") {
				return errHITLStop
			}
			return nil
		})
	}()
	select {
	case <-connected:
	case <-ctx.Done():
		t.Fatal("Events did not reconnect")
	}
	r.sentinel(t, "after")
	if err := <-errc; !errors.Is(err, errHITLStop) {
		t.Fatalf("Events = %v", err)
	}
	if !slices.ContainsFunc(got, func(e belay.Event) bool { return hitlIsSentinel(e, "made while reconnecting") }) {
		var seen []string
		for _, e := range got {
			seen = append(seen, fmt.Sprintf("%d %s %s", e.Seq, e.Type, e.Data))
		}
		t.Errorf("the event made between the drop and the reconnect was lost; got only %q", seen)
	}
}

type hitlRoundTripper func(*http.Request) (*http.Response, error)

func (f hitlRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type hitlFailingReader struct{}

func (hitlFailingReader) Read([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

func TestHITLClientEventsFiltersAndEnds(t *testing.T) {
	r := newHITLRemote(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := r.svc.CreateSession(r.alice, belay.CreateSessionInput{Title: "a"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.svc.CreateSession(r.alice, belay.CreateSessionInput{Title: "b"})
	if err != nil {
		t.Fatal(err)
	}
	for _, sess := range []*belay.Session{a, b} {
		cp, err := r.svc.CreateCheckpoint(r.alice, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "ask", HITL: &belay.HITLInput{Required: true}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.svc.Decide(r.alice, belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionApprove, SelectedOption: "approve"}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("session and type", func(t *testing.T) {
		var got []belay.Event
		err := r.client.Events(ctx, client.EventFilter{SessionID: b.ID, Types: []string{belay.EventHITLRequired, belay.EventHITLDecided}, After: 0},
			func(e belay.Event) error {
				got = append(got, e)
				if e.Type == belay.EventHITLDecided {
					return errHITLStop
				}
				return nil
			})
		if !errors.Is(err, errHITLStop) {
			t.Fatalf("Events = %v", err)
		}
		if len(got) != 2 || got[0].Type != belay.EventHITLRequired || got[1].Type != belay.EventHITLDecided ||
			got[0].SessionID != b.ID || got[1].SessionID != b.ID {
			t.Errorf("got %+v", got)
		}
	})
	t.Run("context ends it", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			errc <- r.client.Events(ctx, client.EventFilter{After: -1}, func(belay.Event) error { return nil })
		}()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Events after cancel = %v", err)
		}
	})
	t.Run("bad token ends it", func(t *testing.T) {
		c, err := client.New(r.srv.URL, "belay_nope")
		if err != nil {
			t.Fatal(err)
		}
		err = c.Events(ctx, client.EventFilter{After: 0}, func(belay.Event) error { return nil })
		if belay.ErrorCode(err) != belay.CodeUnauthenticated {
			t.Errorf("Events with a bad token = %v, want UNAUTHENTICATED", err)
		}
	})
	t.Run("bad filter ends it", func(t *testing.T) {
		err := r.client.Events(ctx, client.EventFilter{SessionID: "nope", After: 0}, func(belay.Event) error { return nil })
		if belay.ErrorCode(err) != belay.CodeValidation {
			t.Errorf("Events with a bad session = %v, want VALIDATION_ERROR", err)
		}
	})
}

// TestHITLClientDecideAndWait: a waiting agent and a deciding person, both
// through the client, with errors mapped back to the service's codes.
func TestHITLClientDecideAndWait(t *testing.T) {
	r := newHITLRemote(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sess, err := r.svc.CreateSession(r.alice, belay.CreateSessionInput{Title: "work"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.CreateToken(belay.WithActor(ctx, belay.Actor{UserID: core.BootstrapUser, Admin: true}), belay.CreateTokenInput{User: "agent"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.GrantSession(r.alice, belay.GrantInput{SessionID: sess.ID, User: "agent", Role: belay.RoleWrite}); err != nil {
		t.Fatal(err)
	}
	cp, err := r.svc.CreateCheckpoint(belay.WithActor(ctx, belay.Actor{UserID: "agent"}), belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "ask",
		HITL: &belay.HITLInput{Required: true, Timeout: &belay.TimeoutInput{Duration: 3600, DefaultAction: belay.ActionApprove}}})
	if err != nil {
		t.Fatal(err)
	}

	pending, err := r.client.PendingHITL(ctx, sess.ID)
	if err != nil || len(pending) != 1 || pending[0].Checkpoint.ID != cp.ID || pending[0].TimeRemaining == nil ||
		*pending[0].TimeRemaining < 3500 || pending[0].Session.Status != belay.SessionAwaitingInput {
		t.Fatalf("PendingHITL = %+v, %v", pending, err)
	}

	waited := make(chan *belay.WaitResult, 1)
	go func() {
		res, err := r.client.WaitDecision(ctx, cp.ID, time.Minute)
		if err != nil {
			t.Error(err)
		}
		waited <- res
	}()
	in := belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionReject, SelectedOption: "reject", Feedback: "no", IdempotencyKey: "once"}
	first, err := r.client.Decide(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.client.Decide(ctx, in)
	if err != nil || again.Decision.ID != first.Decision.ID {
		t.Fatalf("retry with the key = %+v, %v; want the first decision", again, err)
	}
	in.IdempotencyKey = ""
	_, err = r.client.Decide(ctx, in)
	var be *belay.Error
	if !errors.As(err, &be) || be.Code != belay.CodeHITLAlreadyDecided {
		t.Fatalf("decide again = %v, want *belay.Error HITL_ALREADY_DECIDED", err)
	}
	res := <-waited
	if res == nil || !res.Decided || res.Decision.ID != first.Decision.ID || res.Session.Status != belay.SessionFailed {
		t.Fatalf("WaitDecision = %+v", res)
	}
	res, err = r.client.WaitDecision(ctx, cp.ID, 0)
	if err != nil || !res.Decided {
		t.Fatalf("WaitDecision on a decided request = %+v, %v", res, err)
	}
}
