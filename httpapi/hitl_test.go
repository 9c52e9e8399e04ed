package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/internal/testclock"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/sqlite"
)

// hitlServer is a real server on loopback that authenticates with tokens of
// the core service, plus a token for each of the test's people: admin,
// alice (owns the sessions), bob (a listed approver), agent (asks) and
// mallory (nobody).
type hitlServer struct {
	url    string
	srv    *httptest.Server
	svc    *core.Service
	db     *sqlite.DB
	clock  *testclock.Clock
	tokens map[string]string

	mu       sync.Mutex
	arrivals map[string]chan struct{} // path → closed when a request for it reaches the server
	closings map[string]chan struct{} // client address → closed when the server closes its connection
}

// connClosed returns a channel closed once the server closes the connection
// from the client address addr.
func (s *hitlServer) connClosed(addr string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	s.closings[addr] = ch
	return ch
}

// arrived returns a channel closed once a request for path reaches the
// server's handler.
func (s *hitlServer) arrived(path string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	s.arrivals[path] = ch
	return ch
}

// newHITLServer starts a server; tweak may adjust its options.
func newHITLServer(t *testing.T, tweak func(*httpapi.Options)) *hitlServer {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	clock := testclock.New(time.Date(2025, 1, 15, 11, 0, 0, 0, time.UTC), 0)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := core.New(core.Options{Store: db, Clock: clock, Logger: logger})
	opts := httpapi.Options{Service: svc, Logger: logger, Authenticate: svc.Authenticate}
	if tweak != nil {
		tweak(&opts)
	}
	s := &hitlServer{svc: svc, db: db, clock: clock, tokens: map[string]string{},
		arrivals: map[string]chan struct{}{}, closings: map[string]chan struct{}{}}
	h := httpapi.New(opts).Handler()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if ch, ok := s.arrivals[r.URL.Path]; ok {
			close(ch)
			delete(s.arrivals, r.URL.Path)
		}
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	srv.Config.ConnState = func(c net.Conn, state http.ConnState) {
		if state != http.StateClosed {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if ch, ok := s.closings[c.RemoteAddr().String()]; ok {
			close(ch)
			delete(s.closings, c.RemoteAddr().String())
		}
	}
	srv.Start()
	s.url, s.srv = srv.URL, srv
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		db.Close()
	})
	ctx := context.Background()
	admin, err := svc.Bootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.tokens["admin"] = admin
	adminCtx := belay.WithActor(ctx, belay.Actor{UserID: core.BootstrapUser, Admin: true})
	for _, name := range []string{"alice", "bob", "carol", "agent", "mallory"} {
		tk, err := svc.CreateToken(adminCtx, belay.CreateTokenInput{User: name})
		if err != nil {
			t.Fatal(err)
		}
		s.tokens[name] = tk.Secret
	}
	return s
}

// as is a context acting as user in direct service calls.
func (s *hitlServer) as(user string) context.Context {
	return belay.WithActor(context.Background(), belay.Actor{UserID: user, Admin: user == "admin"})
}

var hitlHTTPOptions = []belay.HITLOption{
	{ID: "ok", Label: "Approve", Action: belay.ActionApprove, IsDefault: true},
	{ID: "change", Label: "Change", Action: belay.ActionModify},
	{ID: "no", Label: "Reject", Action: belay.ActionReject},
	{ID: "again", Label: "Retry", Action: belay.ActionRetry},
	{ID: "pass", Label: "Skip", Action: belay.ActionSkip},
	{ID: "up", Label: "Escalate", Action: belay.ActionEscalate},
}

// session creates a session owned by alice, in which her agent may write.
func (s *hitlServer) session(t *testing.T) *belay.Session {
	t.Helper()
	sess, err := s.svc.CreateSession(s.as("alice"), belay.CreateSessionInput{Title: "alice's run"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.svc.GrantSession(s.as("alice"), belay.GrantInput{SessionID: sess.ID, User: "agent", Role: belay.RoleWrite}); err != nil {
		t.Fatal(err)
	}
	return sess
}

// request has agent ask for a decision in sessionID.
func (s *hitlServer) request(t *testing.T, sessionID string, h belay.HITLInput) *belay.Checkpoint {
	t.Helper()
	h.Required = true
	if h.Options == nil {
		h.Options = hitlHTTPOptions
	}
	cp, err := s.svc.CreateCheckpoint(s.as("agent"), belay.CreateCheckpointInput{SessionID: sessionID, Summary: "may I?", HITL: &h})
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// call sends a request as user ("" sends no Authorization) and returns the
// status and body.
func (s *hitlServer) call(t *testing.T, method, path, user string, body any, hdr map[string]string) (int, []byte) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, s.url+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+s.tokens[user])
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func (s *hitlServer) decide(t *testing.T, user, id string, in belay.DecideInput, hdr map[string]string) (int, []byte) {
	t.Helper()
	return s.call(t, http.MethodPost, "/v1/checkpoints/"+id+"/decide", user, in, hdr)
}

// hitlErrorCode returns the error code of an error body, "" when there is none.
func hitlErrorCode(t *testing.T, b []byte) belay.Code {
	t.Helper()
	var body struct {
		Error *belay.Error `json:"error"`
	}
	if err := json.Unmarshal(b, &body); err != nil || body.Error == nil {
		return ""
	}
	return body.Error.Code
}

func hitlJSON[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, b, err)
	}
	return v
}

func TestHITLHTTPDecideErrors(t *testing.T) {
	s := newHITLServer(t, nil)
	sess := s.session(t)
	approve := belay.DecideInput{Action: belay.ActionApprove, SelectedOption: "ok"}
	cases := []struct {
		name       string
		id         func(t *testing.T) string
		user       string
		in         belay.DecideInput
		wantStatus int
		wantCode   belay.Code
	}{
		{"unknown checkpoint", func(*testing.T) string { return "01940000-0000-7000-8000-000000000000" }, "alice", approve,
			http.StatusNotFound, belay.CodeCheckpointNotFound},
		{"deleted checkpoint", func(t *testing.T) string {
			cp := s.request(t, sess.ID, belay.HITLInput{})
			if st, b := s.call(t, http.MethodDelete, "/v1/checkpoints/"+cp.ID, "alice", nil, nil); st != http.StatusNoContent {
				t.Fatalf("delete: %d %s", st, b)
			}
			return cp.ID
		}, "alice", approve, http.StatusNotFound, belay.CodeCheckpointNotFound},
		{"past the checkpoint's expiresAt", func(t *testing.T) string {
			exp := s.clock.Now().Add(time.Minute)
			cp, err := s.svc.CreateCheckpoint(s.as("agent"), belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "brief",
				ExpiresAt: &exp, HITL: &belay.HITLInput{Required: true, Options: hitlHTTPOptions, OnReject: belay.OnRejectContinue}})
			if err != nil {
				t.Fatal(err)
			}
			s.clock.Advance(2 * time.Minute)
			// A read settles the request at its expiry.
			if got, err := s.svc.GetCheckpoint(s.as("alice"), cp.ID); err != nil || got.Decision == nil || !got.Decision.AutoTriggered {
				t.Fatalf("the expired request = %+v, %v; want it decided by its expiry", got, err)
			}
			return cp.ID
		}, "alice", approve, http.StatusGone, belay.CodeCheckpointExpired},
		{"no decision asked", func(t *testing.T) string {
			cp, err := s.svc.CreateCheckpoint(s.as("agent"), belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "plain"})
			if err != nil {
				t.Fatal(err)
			}
			return cp.ID
		}, "alice", approve, http.StatusBadRequest, belay.CodeHITLNotRequired},
		{"already decided", func(t *testing.T) string {
			cp := s.request(t, sess.ID, belay.HITLInput{})
			if st, b := s.decide(t, "alice", cp.ID, belay.DecideInput{Action: belay.ActionSkip, SelectedOption: "pass"}, nil); st != http.StatusOK {
				t.Fatalf("first decide: %d %s", st, b)
			}
			return cp.ID
		}, "alice", approve, http.StatusConflict, belay.CodeHITLAlreadyDecided},
		{"unknown option", func(t *testing.T) string { return s.request(t, sess.ID, belay.HITLInput{}).ID }, "alice",
			belay.DecideInput{Action: belay.ActionApprove, SelectedOption: "maybe"}, http.StatusBadRequest, belay.CodeInvalidOption},
		{"action is not the option's", func(t *testing.T) string { return s.request(t, sess.ID, belay.HITLInput{}).ID }, "alice",
			belay.DecideInput{Action: belay.ActionReject, SelectedOption: "ok"}, http.StatusBadRequest, belay.CodeInvalidOption},
		{"stranger", func(t *testing.T) string { return s.request(t, sess.ID, belay.HITLInput{}).ID }, "mallory", approve,
			http.StatusNotFound, belay.CodeCheckpointNotFound},
		{"modifications on approve", func(t *testing.T) string { return s.request(t, sess.ID, belay.HITLInput{}).ID }, "alice",
			belay.DecideInput{Action: belay.ActionApprove, SelectedOption: "ok", Modifications: json.RawMessage(`{"a":1}`)},
			http.StatusBadRequest, belay.CodeValidation},
		{"unknown action", func(t *testing.T) string { return s.request(t, sess.ID, belay.HITLInput{}).ID }, "alice",
			belay.DecideInput{Action: "pause", SelectedOption: "ok"}, http.StatusBadRequest, belay.CodeValidation},
		{"no token", func(t *testing.T) string { return s.request(t, sess.ID, belay.HITLInput{}).ID }, "", approve,
			http.StatusUnauthorized, belay.CodeUnauthenticated},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.id(t)
			before, _ := s.db.GetCheckpoint(context.Background(), id)
			st, b := s.decide(t, tc.user, id, tc.in, nil)
			if st != tc.wantStatus || hitlErrorCode(t, b) != tc.wantCode {
				t.Fatalf("got %d %s, want %d %s", st, b, tc.wantStatus, tc.wantCode)
			}
			if after, err := s.db.GetCheckpoint(context.Background(), id); err == nil && before != nil &&
				(before.Decision == nil) != (after.Decision == nil) {
				t.Errorf("a failed decide changed the decision: %+v", after.Decision)
			}
		})
	}

	t.Run("checkpointId in body differs from path", func(t *testing.T) {
		cp := s.request(t, sess.ID, belay.HITLInput{})
		other := s.request(t, sess.ID, belay.HITLInput{})
		st, b := s.decide(t, "alice", cp.ID, belay.DecideInput{CheckpointID: other.ID, Action: belay.ActionApprove, SelectedOption: "ok"}, nil)
		if st != http.StatusBadRequest || hitlErrorCode(t, b) != belay.CodeValidation {
			t.Fatalf("got %d %s", st, b)
		}
	})
	t.Run("unknown body field", func(t *testing.T) {
		cp := s.request(t, sess.ID, belay.HITLInput{})
		st, b := s.call(t, http.MethodPost, "/v1/checkpoints/"+cp.ID+"/decide", "alice",
			`{"action":"approve","selectedOption":"ok","userId":"admin"}`, nil)
		if st != http.StatusBadRequest || hitlErrorCode(t, b) != belay.CodeValidation {
			t.Fatalf("got %d %s", st, b)
		}
	})
}

func TestHITLHTTPDecideResponse(t *testing.T) {
	s := newHITLServer(t, nil)
	sess := s.session(t)
	cp := s.request(t, sess.ID, belay.HITLInput{})
	s.clock.Advance(42 * time.Second)
	st, b := s.decide(t, "alice", cp.ID, belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionModify, SelectedOption: "change",
		Feedback: "smaller steps", Modifications: json.RawMessage(`{"steps": 3}`)}, nil)
	if st != http.StatusOK {
		t.Fatalf("decide: %d %s", st, b)
	}
	raw := hitlJSON[map[string]json.RawMessage](t, b)
	for _, k := range []string{"checkpoint", "session", "decision"} {
		if _, ok := raw[k]; !ok || len(raw) != 3 {
			t.Fatalf("response keys = %v, want checkpoint, session, decision", b)
		}
	}
	dec := hitlJSON[map[string]any](t, raw["decision"])
	want := map[string]any{"userId": "alice", "action": "modify", "selectedOption": "change", "feedback": "smaller steps",
		"modifications": map[string]any{"steps": float64(3)}, "decidedAt": "2025-01-15T11:00:42Z", "responseTime": float64(42000),
		"autoTriggered": false}
	for k, v := range want {
		if fmt.Sprint(dec[k]) != fmt.Sprint(v) {
			t.Errorf("decision.%s = %v, want %v", k, dec[k], v)
		}
	}
	if id, _ := dec["id"].(string); !belay.IsUUID(id) {
		t.Errorf("decision.id = %v", dec["id"])
	}
	res := hitlJSON[belay.DecideResult](t, b)
	if res.Session.Status != belay.SessionRunning || res.Checkpoint.Decision == nil || res.Checkpoint.Decision.ID != res.Decision.ID {
		t.Errorf("session %s, checkpoint decision %+v", res.Session.Status, res.Checkpoint.Decision)
	}
	// The checkpoint as read afterwards carries the same decision.
	st, b = s.call(t, http.MethodGet, "/v1/checkpoints/"+cp.ID, "alice", nil, nil)
	if got := hitlJSON[belay.Checkpoint](t, b); st != http.StatusOK || got.Decision == nil || got.Decision.ID != res.Decision.ID {
		t.Errorf("GET checkpoint: %d %s", st, b)
	}
}

func TestHITLHTTPIdempotencyKey(t *testing.T) {
	s := newHITLServer(t, nil)
	cp := s.request(t, s.session(t).ID, belay.HITLInput{})
	in := belay.DecideInput{Action: belay.ActionApprove, SelectedOption: "ok"}
	key := map[string]string{"Idempotency-Key": "retry-7"}
	st, first := s.decide(t, "alice", cp.ID, in, key)
	if st != http.StatusOK {
		t.Fatalf("decide: %d %s", st, first)
	}
	st, again := s.decide(t, "alice", cp.ID, in, key)
	if st != http.StatusOK {
		t.Fatalf("retry with the same key: %d %s, want 200", st, again)
	}
	d1, d2 := hitlJSON[belay.DecideResult](t, first).Decision, hitlJSON[belay.DecideResult](t, again).Decision
	if d1.ID != d2.ID || !d1.DecidedAt.Equal(d2.DecidedAt) {
		t.Errorf("retry returned %+v, want %+v", d2, d1)
	}
	for name, hdr := range map[string]map[string]string{
		"other key": {"Idempotency-Key": "retry-8"},
		"no key":    nil,
	} {
		if st, b := s.decide(t, "alice", cp.ID, in, hdr); st != http.StatusConflict || hitlErrorCode(t, b) != belay.CodeHITLAlreadyDecided {
			t.Errorf("%s: %d %s, want 409 HITL_ALREADY_DECIDED", name, st, b)
		}
	}
	if st, b := s.decide(t, "admin", cp.ID, in, key); st != http.StatusConflict {
		t.Errorf("same key from another user: %d %s, want 409", st, b)
	}
}

func TestHITLHTTPEveryRouteButHealthNeedsToken(t *testing.T) {
	s := newHITLServer(t, nil)
	sess := s.session(t)
	cp := s.request(t, sess.ID, belay.HITLInput{})
	routes := []struct{ method, path, body string }{
		{"GET", "/metrics", ""},
		{"POST", "/v1/sessions", `{}`},
		{"GET", "/v1/sessions", ""},
		{"GET", "/v1/sessions/active?projectPath=/tmp", ""},
		{"GET", "/v1/sessions/" + sess.ID, ""},
		{"GET", "/v1/sessions/" + sess.ID + "/checkpoints/1", ""},
		{"POST", "/v1/checkpoints", `{"sessionId":"` + sess.ID + `","summary":"x"}`},
		{"GET", "/v1/checkpoints", ""},
		{"GET", "/v1/checkpoints/" + cp.ID, ""},
		{"DELETE", "/v1/checkpoints/" + cp.ID, ""},
		{"POST", "/v1/checkpoints/" + cp.ID + "/decide", `{"action":"approve","selectedOption":"ok"}`},
		{"GET", "/v1/checkpoints/" + cp.ID + "/decision?wait=1s", ""},
		{"GET", "/v1/hitl/pending", ""},
		{"GET", "/v1/events?after=0", ""},
		{"GET", "/v1/ws?after=0", ""},
	}
	authorizations := map[string]string{
		"none":          "",
		"empty bearer":  "Bearer ",
		"basic":         "Basic YWxpY2U6c2VjcmV0",
		"unknown token": "Bearer belay_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"not a token":   "Bearer hunter2",
	}
	for _, r := range routes {
		for name, auth := range authorizations {
			var body io.Reader
			if r.body != "" {
				body = strings.NewReader(r.body)
			}
			req, _ := http.NewRequest(r.method, s.url+r.path, body)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || hitlErrorCode(t, b) != belay.CodeUnauthenticated {
				t.Errorf("%s %s with %s: %d %s, want 401 UNAUTHENTICATED", r.method, r.path, name, resp.StatusCode, b)
			}
		}
	}
	if got, err := s.db.GetCheckpoint(context.Background(), cp.ID); err != nil || got.Decision != nil {
		t.Errorf("unauthenticated calls changed the request: %+v, %v", got, err)
	}
	if st, b := s.call(t, "GET", "/healthz", "", nil, nil); st != http.StatusOK {
		t.Errorf("/healthz without a token: %d %s, want 200", st, b)
	}
	if st, b := s.call(t, "GET", "/v1/hitl/pending", "alice", nil, nil); st != http.StatusOK {
		t.Errorf("with alice's token: %d %s", st, b)
	}
}

func TestHITLHTTPWhoMayDecide(t *testing.T) {
	s := newHITLServer(t, nil)
	sess := s.session(t)
	cases := []struct {
		name  string
		user  string
		asker string
		hitl  belay.HITLInput
		want  int
	}{
		{"session owner", "alice", "agent", belay.HITLInput{}, http.StatusOK},
		{"admin", "admin", "agent", belay.HITLInput{}, http.StatusOK},
		{"listed approver", "bob", "agent", belay.HITLInput{Approvers: []string{"bob"}}, http.StatusOK},
		// Who may not read a request is told it does not exist.
		{"approver of another request", "bob", "agent", belay.HITLInput{Approvers: []string{"carol"}}, http.StatusNotFound},
		{"stranger", "mallory", "agent", belay.HITLInput{}, http.StatusNotFound},
		{"the requester itself", "agent", "agent", belay.HITLInput{}, http.StatusForbidden},
		{"requester listed as approver, self-approval forbidden", "agent", "agent",
			belay.HITLInput{Approvers: []string{"agent"}, ForbidSelfApproval: true}, http.StatusForbidden},
		{"requester listed as approver, self-approval allowed", "agent", "agent",
			belay.HITLInput{Approvers: []string{"agent"}}, http.StatusOK},
		{"owner asking, self-approval forbidden", "alice", "alice", belay.HITLInput{ForbidSelfApproval: true}, http.StatusForbidden},
		{"admin asking, self-approval forbidden", "admin", "admin", belay.HITLInput{ForbidSelfApproval: true}, http.StatusForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.hitl
			h.Required, h.Options = true, hitlHTTPOptions
			cp, err := s.svc.CreateCheckpoint(s.as(tc.asker), belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "may I?", HITL: &h})
			if err != nil {
				t.Fatal(err)
			}
			st, b := s.decide(t, tc.user, cp.ID, belay.DecideInput{Action: belay.ActionApprove, SelectedOption: "ok"}, nil)
			if st != tc.want {
				t.Fatalf("%s deciding: %d %s, want %d", tc.user, st, b, tc.want)
			}
			if st == http.StatusForbidden && hitlErrorCode(t, b) != belay.CodeUnauthorized {
				t.Errorf("403 with code %s, want UNAUTHORIZED", hitlErrorCode(t, b))
			}
		})
	}
}

func TestHITLHTTPPending(t *testing.T) {
	s := newHITLServer(t, nil)
	sess := s.session(t)
	other := s.session(t)
	timed := s.request(t, sess.ID, belay.HITLInput{Timeout: &belay.TimeoutInput{Duration: 3600, DefaultAction: belay.ActionReject},
		Approvers: []string{"bob"}})
	open := s.request(t, other.ID, belay.HITLInput{})
	s.clock.Advance(10 * time.Minute)

	type page struct {
		Items []belay.PendingHITL `json:"items"`
	}
	get := func(user, query string) page {
		t.Helper()
		st, b := s.call(t, "GET", "/v1/hitl/pending"+query, user, nil, nil)
		if st != http.StatusOK {
			t.Fatalf("pending%s as %s: %d %s", query, user, st, b)
		}
		return hitlJSON[page](t, b)
	}
	all := get("alice", "")
	if len(all.Items) != 2 || all.Items[0].Checkpoint.ID != timed.ID || all.Items[1].Checkpoint.ID != open.ID {
		t.Fatalf("alice's pending = %+v", all.Items)
	}
	p := all.Items[0]
	if p.TimeRemaining == nil || *p.TimeRemaining != 3000 {
		t.Errorf("timeRemaining = %v, want 3000", p.TimeRemaining)
	}
	if d := p.Deadline; d == nil || !d.At.Equal(timed.HITL.Timeout.ExpiresAt) || d.Reason != belay.DeadlineTimeout || d.Action != belay.ActionReject {
		t.Errorf("deadline = %+v, want the timeout's rejection", p.Deadline)
	}
	if p.Session != (belay.PendingSession{ID: sess.ID, Title: "alice's run", Status: belay.SessionAwaitingInput, Readable: true}) {
		t.Errorf("session summary = %+v", p.Session)
	}
	if p.Checkpoint.HITL == nil || len(p.Checkpoint.HITL.Options) != len(hitlHTTPOptions) {
		t.Errorf("checkpoint in pending lacks its request: %+v", p.Checkpoint)
	}
	if all.Items[1].TimeRemaining != nil || all.Items[1].Deadline != nil {
		t.Errorf("request without deadline has timeRemaining %v, deadline %+v", all.Items[1].TimeRemaining, all.Items[1].Deadline)
	}
	if one := get("alice", "?session="+other.ID); len(one.Items) != 1 || one.Items[0].Checkpoint.ID != open.ID {
		t.Errorf("?session= filter: %+v", one.Items)
	}
	if bob := get("bob", ""); len(bob.Items) != 1 || bob.Items[0].Checkpoint.ID != timed.ID {
		t.Errorf("bob (approver of one) sees %+v", bob.Items)
	} else if bob.Items[0].Session.Readable {
		t.Errorf("bob may only decide, but his pending says he may read the session: %+v", bob.Items[0].Session)
	}
	if m := get("mallory", ""); len(m.Items) != 0 {
		t.Errorf("mallory sees %+v", m.Items)
	}
	if raw := hitlJSON[map[string]json.RawMessage](t, func() []byte { _, b := s.call(t, "GET", "/v1/hitl/pending", "mallory", nil, nil); return b }()); string(raw["items"]) != "[]" {
		t.Errorf("empty pending list is %s, want []", raw["items"])
	}
	for _, q := range []string{"?session=nope", "?sessionId=" + sess.ID} {
		if st, b := s.call(t, "GET", "/v1/hitl/pending"+q, "alice", nil, nil); st != http.StatusBadRequest || hitlErrorCode(t, b) != belay.CodeValidation {
			t.Errorf("pending%s: %d %s, want 400", q, st, b)
		}
	}
	// Past its expiry, the timed request is settled by the read itself.
	s.clock.Advance(time.Hour)
	if left := get("alice", ""); len(left.Items) != 1 || left.Items[0].Checkpoint.ID != open.ID {
		t.Errorf("after the timeout: %+v", left.Items)
	}
}

// TestHITLHTTPConcurrentDecides: 50 people decide one request at once through
// real HTTP; exactly one wins.
func TestHITLHTTPConcurrentDecides(t *testing.T) {
	s := newHITLServer(t, nil)
	for round := range 3 {
		cp := s.request(t, s.session(t).ID, belay.HITLInput{})
		statuses := make([]int, 50)
		bodies := make([][]byte, 50)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range statuses {
			wg.Go(func() {
				opt := hitlHTTPOptions[i%len(hitlHTTPOptions)]
				b, _ := json.Marshal(belay.DecideInput{Action: opt.Action, SelectedOption: opt.ID, Feedback: fmt.Sprint("decider ", i)})
				req, _ := http.NewRequest(http.MethodPost, s.url+"/v1/checkpoints/"+cp.ID+"/decide", bytes.NewReader(b))
				req.Header.Set("Authorization", "Bearer "+s.tokens[[]string{"alice", "admin"}[i%2]])
				<-start
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				statuses[i] = resp.StatusCode
				bodies[i], _ = io.ReadAll(resp.Body)
			})
		}
		close(start)
		wg.Wait()
		winner, conflicts := -1, 0
		for i, st := range statuses {
			switch {
			case st == http.StatusOK:
				if winner >= 0 {
					t.Fatalf("round %d: deciders %d and %d both got 200", round, winner, i)
				}
				winner = i
			case st == http.StatusConflict && hitlErrorCode(t, bodies[i]) == belay.CodeHITLAlreadyDecided:
				conflicts++
			default:
				t.Fatalf("round %d: decider %d got %d %s", round, i, st, bodies[i])
			}
		}
		if winner < 0 || conflicts != 49 {
			t.Fatalf("round %d: winner %d, %d conflicts; want one 200 and 49 × 409", round, winner, conflicts)
		}
		won := hitlJSON[belay.DecideResult](t, bodies[winner]).Decision
		stored, err := s.db.GetCheckpoint(context.Background(), cp.ID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Decision.ID != won.ID || stored.Decision.Feedback != fmt.Sprint("decider ", winner) {
			t.Errorf("round %d: stored %+v, winner's %+v", round, stored.Decision, won)
		}
		evs, err := s.db.ListEvents(context.Background(), store.EventQuery{Scope: store.Everything, Types: []string{belay.EventHITLDecided}, SessionID: cp.SessionID, Limit: 100})
		if err != nil || len(evs) != 1 {
			t.Errorf("round %d: %d hitl.decided events, %v; want 1", round, len(evs), err)
		}
		// Every loser is told who won.
		for i, b := range bodies {
			if i == winner {
				continue
			}
			var body struct {
				Error struct {
					Details struct {
						Decision belay.Decision `json:"decision"`
					} `json:"details"`
				} `json:"error"`
			}
			if json.Unmarshal(b, &body) == nil && body.Error.Details.Decision.ID != "" && body.Error.Details.Decision.ID != won.ID {
				t.Errorf("round %d: loser %d told decision %s, winner is %s", round, i, body.Error.Details.Decision.ID, won.ID)
			}
		}
	}
}

func TestHITLHTTPSessionFlow(t *testing.T) {
	s := newHITLServer(t, nil)
	for _, tc := range []struct {
		option   string
		onReject string
		want     belay.SessionStatus
	}{
		{"ok", "", belay.SessionRunning},
		{"change", "", belay.SessionRunning},
		{"again", "", belay.SessionRunning},
		{"pass", "", belay.SessionRunning},
		{"no", "", belay.SessionFailed},
		{"no", belay.OnRejectContinue, belay.SessionRunning},
		{"up", "", belay.SessionAwaitingInput},
	} {
		sess := s.session(t)
		cp := s.request(t, sess.ID, belay.HITLInput{OnReject: tc.onReject})
		st, b := s.call(t, "GET", "/v1/sessions/"+sess.ID, "alice", nil, nil)
		if got := hitlJSON[belay.Session](t, b); st != http.StatusOK || got.Status != belay.SessionAwaitingInput {
			t.Fatalf("session after the request: %d %s", st, b)
		}
		opt, _ := (&belay.HITLRequest{Options: hitlHTTPOptions}).Option(tc.option)
		st, b = s.decide(t, "alice", cp.ID, belay.DecideInput{Action: opt.Action, SelectedOption: opt.ID}, nil)
		if st != http.StatusOK {
			t.Fatalf("decide %s: %d %s", tc.option, st, b)
		}
		if got := hitlJSON[belay.DecideResult](t, b).Session.Status; got != tc.want {
			t.Errorf("%s (onReject %q): session %s, want %s", opt.Action, tc.onReject, got, tc.want)
		}
	}

	t.Run("pause timeout, then a human", func(t *testing.T) {
		sess := s.session(t)
		cp := s.request(t, sess.ID, belay.HITLInput{Timeout: &belay.TimeoutInput{Duration: 60, DefaultAction: belay.ActionPause}})
		s.clock.Advance(time.Minute)
		st, b := s.call(t, "GET", "/v1/checkpoints/"+cp.ID, "alice", nil, nil)
		if got := hitlJSON[belay.Checkpoint](t, b); st != http.StatusOK || !got.TimeoutFired || got.Decision != nil {
			t.Fatalf("after the pause: %d %s", st, b)
		}
		if _, b := s.call(t, "GET", "/v1/sessions/"+sess.ID, "alice", nil, nil); hitlJSON[belay.Session](t, b).Status != belay.SessionPaused {
			t.Fatalf("session after the pause: %s", b)
		}
		st, b = s.decide(t, "alice", cp.ID, belay.DecideInput{Action: belay.ActionApprove, SelectedOption: "ok"}, nil)
		if st != http.StatusOK || hitlJSON[belay.DecideResult](t, b).Session.Status != belay.SessionRunning {
			t.Fatalf("deciding the paused request: %d %s", st, b)
		}
	})
}

func TestHITLHTTPWaitDecision(t *testing.T) {
	s := newHITLServer(t, nil)
	sess := s.session(t)
	// wait long-polls in a goroutine and hands back its answer once the
	// request has reached the server.
	wait := func(id, query string) <-chan belay.WaitResult {
		out := make(chan belay.WaitResult, 1)
		in := s.arrived("/v1/checkpoints/" + id + "/decision")
		defer func() { <-in }()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/v1/checkpoints/"+id+"/decision"+query, nil)
			req.Header.Set("Authorization", "Bearer "+s.tokens["agent"])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				close(out)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("wait: %d %s", resp.StatusCode, b)
				close(out)
				return
			}
			var res belay.WaitResult
			if err := json.Unmarshal(b, &res); err != nil {
				t.Error(err)
			}
			out <- res
		}()
		return out
	}

	t.Run("decided while waiting", func(t *testing.T) {
		cp := s.request(t, s.session(t).ID, belay.HITLInput{}) // rejected: its session fails
		got := wait(cp.ID, "?wait=5m")
		if st, b := s.decide(t, "alice", cp.ID, belay.DecideInput{Action: belay.ActionReject, SelectedOption: "no", Feedback: "too risky"}, nil); st != http.StatusOK {
			t.Fatalf("decide: %d %s", st, b)
		}
		res := <-got
		if !res.Decided || res.Decision == nil || res.Decision.Action != belay.ActionReject || res.Decision.Feedback != "too risky" ||
			res.Session == nil || res.Session.Status != belay.SessionFailed {
			t.Fatalf("wait result = %+v", res)
		}
	})
	t.Run("decided before the wait", func(t *testing.T) {
		cp := s.request(t, sess.ID, belay.HITLInput{})
		if st, b := s.decide(t, "alice", cp.ID, belay.DecideInput{Action: belay.ActionRetry, SelectedOption: "again"}, nil); st != http.StatusOK {
			t.Fatalf("decide: %d %s", st, b)
		}
		res := <-wait(cp.ID, "?wait=5m")
		if !res.Decided || res.Decision.Action != belay.ActionRetry {
			t.Fatalf("wait result = %+v", res)
		}
	})
	t.Run("nobody decides", func(t *testing.T) {
		cp := s.request(t, sess.ID, belay.HITLInput{})
		for _, q := range []string{"?wait=150ms", "?wait=0s", ""} {
			res := <-wait(cp.ID, q)
			if res.Decided || res.Decision != nil || res.Checkpoint == nil || res.Checkpoint.ID != cp.ID {
				t.Fatalf("wait%s = %+v, want decided false", q, res)
			}
		}
	})
	t.Run("timeout default while waiting", func(t *testing.T) {
		cp := s.request(t, sess.ID, belay.HITLInput{Timeout: &belay.TimeoutInput{Duration: 60, DefaultAction: belay.ActionApprove}})
		got := wait(cp.ID, "?wait=5m")
		s.clock.Advance(time.Minute)
		res := <-got
		if !res.Decided || !res.Decision.AutoTriggered || res.Decision.UserID != core.SystemUser || res.Decision.Action != belay.ActionApprove {
			t.Fatalf("wait result = %+v", res)
		}
	})
	t.Run("bad requests", func(t *testing.T) {
		cp := s.request(t, sess.ID, belay.HITLInput{})
		plain, err := s.svc.CreateCheckpoint(s.as("agent"), belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "plain"})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			path string
			want int
			code belay.Code
		}{
			{"/v1/checkpoints/" + cp.ID + "/decision?wait=forever", 400, belay.CodeValidation},
			{"/v1/checkpoints/" + cp.ID + "/decision?wait=-1s", 400, belay.CodeValidation},
			{"/v1/checkpoints/" + cp.ID + "/decision?wait=6m", 400, belay.CodeValidation},
			{"/v1/checkpoints/" + cp.ID + "/decision?timeout=1s", 400, belay.CodeValidation},
			{"/v1/checkpoints/01940000-0000-7000-8000-000000000000/decision?wait=1s", 404, belay.CodeCheckpointNotFound},
			{"/v1/checkpoints/" + plain.ID + "/decision?wait=1s", 400, belay.CodeHITLNotRequired},
		} {
			if st, b := s.call(t, "GET", tc.path, "agent", nil, nil); st != tc.want || hitlErrorCode(t, b) != tc.code {
				t.Errorf("GET %s: %d %s, want %d %s", tc.path, st, b, tc.want, tc.code)
			}
		}
	})
}
