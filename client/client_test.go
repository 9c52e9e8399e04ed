package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/client"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/store/sqlite"
)

// env is one database served on loopback: local is the core service itself,
// remote the Go client talking to it over HTTP.
type env struct {
	local   *core.Service
	remote  *client.Client
	srv     *httptest.Server
	project string
}

func newEnv(t *testing.T, opts ...func(*httpapi.Options)) *env {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := core.New(core.Options{Store: db, Logger: log})
	o := httpapi.Options{Service: svc, Logger: log, Authenticate: func(context.Context, string) (belay.Actor, error) {
		return belay.Actor{UserID: "anonymous"}, nil
	}}
	for _, f := range opts {
		f(&o)
	}
	srv := httptest.NewServer(httpapi.New(o).Handler())
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL+"/", "")
	if err != nil {
		t.Fatal(err)
	}
	return &env{local: svc, remote: c.WithHTTPClient(srv.Client()), srv: srv, project: t.TempDir()}
}

// sameJSON fails unless got and want encode to the same JSON.
func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if string(g) != string(w) {
		t.Errorf("%s differs:\nremote %s\nlocal  %s", what, g, w)
	}
}

func TestRoundTrip(t *testing.T) {
	ctx := anonCtx
	e := newEnv(t)

	sess, err := e.remote.CreateSession(ctx, belay.CreateSessionInput{ProjectPath: e.project, Title: "refactor", Phase: "plan",
		Metadata: json.RawMessage(`{"team": "core"}`)})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	if !belay.IsUUID(sess.ID) || sess.Title != "refactor" || sess.Owner != "anonymous" || string(sess.Metadata) != `{"team":"core"}` {
		t.Errorf("created session = %+v", sess)
	}
	local, err := e.local.GetSession(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "created session", sess, withoutAccess(local))

	got, err := e.remote.GetSession(ctx, sess.ID)
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	sameJSON(t, "GetSession", got, local)
	active, err := e.remote.ActiveSession(ctx, e.project+"/")
	if err != nil {
		t.Fatalf("ActiveSession: %v", err)
	}
	sameJSON(t, "ActiveSession", active, withoutAccess(local))

	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	cp, err := e.remote.CreateCheckpoint(ctx, belay.CreateCheckpointInput{
		SessionID: sess.ID, Name: "arch", Type: belay.TypePhase, Trigger: belay.TriggerPhaseChange, Summary: "plan approved",
		Description: "why", WorkspaceRef: "4b825dc6", AgentState: json.RawMessage(`{"todo": ["a", "b"]}`), Outputs: json.RawMessage(`[1]`),
		Metadata: json.RawMessage(`{"m": 1}`), Context: map[string]string{"k": "v"}, Tags: []string{"x", "y"},
		Phase: "build", Step: 2, ExpiresAt: &expires,
		HITL: &belay.HITLInput{Required: true, Title: "ok?", Timeout: &belay.TimeoutInput{Duration: 3600, DefaultAction: belay.ActionPause}},
	})
	if err != nil {
		t.Fatalf("CreateCheckpoint: %v", err)
	}
	if cp.Seq != 1 || cp.SessionID != sess.ID || string(cp.AgentState) != `{"todo":["a","b"]}` || !cp.ExpiresAt.Equal(expires) ||
		!cp.HITLRequired || cp.HITL.Title != "ok?" {
		t.Errorf("created checkpoint = %+v", cp)
	}
	if err := cp.VerifyChecksum(); err != nil {
		t.Errorf("checksum of the checkpoint as the client sees it: %v", err)
	}
	localCP, err := e.local.GetCheckpoint(ctx, cp.ID)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "created checkpoint", cp, localCP)

	second, err := e.remote.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: e.project, Summary: "next", Tags: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	if second.SessionID != sess.ID || second.Seq != 2 || second.ParentID != cp.ID {
		t.Errorf("second checkpoint = %+v, want #2 of %s after %s", second, sess.ID, cp.ID)
	}

	gotCP, err := e.remote.GetCheckpoint(ctx, cp.ID)
	if err != nil {
		t.Fatalf("GetCheckpoint: %v", err)
	}
	sameJSON(t, "GetCheckpoint", gotCP, localCP)
	bySeq, err := e.remote.GetCheckpointBySeq(ctx, sess.ID, 1)
	if err != nil {
		t.Fatalf("GetCheckpointBySeq: %v", err)
	}
	sameJSON(t, "GetCheckpointBySeq", bySeq, localCP)

	// Sessions page the same way.
	if _, err := e.remote.CreateSession(ctx, belay.CreateSessionInput{Title: "other"}); err != nil {
		t.Fatal(err)
	}
	sessIn := belay.ListSessionsInput{Own: true, Limit: 1}
	for page := 0; ; page++ {
		r, err := e.remote.ListSessions(ctx, sessIn)
		if err != nil {
			t.Fatalf("ListSessions: %v", err)
		}
		l, err := e.local.ListSessions(ctx, sessIn)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, "ListSessions page", r, l)
		if !r.HasMore {
			if page != 1 {
				t.Errorf("sessions took %d pages, want 2", page+1)
			}
			break
		}
		sessIn.Cursor = r.NextCursor
	}
	filtered, err := e.remote.ListSessions(ctx, belay.ListSessionsInput{ProjectPath: e.project, Status: belay.SessionAwaitingInput})
	if err != nil {
		t.Fatal(err)
	}
	if len(filtered.Items) != 1 || filtered.Items[0].ID != sess.ID {
		t.Errorf("filtered sessions = %+v", filtered)
	}

	// Every filter reaches the server and means the same there.
	yes, no := true, false
	past, future := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	for _, in := range []belay.ListCheckpointsInput{
		{},
		{SessionID: sess.ID, Limit: 1},
		{ProjectPath: e.project, OrderDir: belay.OrderAsc},
		{Type: belay.TypePhase},
		{HITLRequired: &yes},
		{HITLRequired: &no, HITLDecided: &no},
		{CreatedAfter: &past, CreatedBefore: &future},
		{CreatedBefore: &past},
		{Tags: []string{"x"}},
		{Tags: []string{"x", "y"}},
		{OrderBy: belay.OrderType, OrderDir: belay.OrderDesc, Limit: 1},
		// A tag may hold a comma: the server must not read it as two tags.
		{Tags: []string{"x,y"}},
		// Older versions stored tags with control characters.
		{Tags: []string{"ci\tnightly"}},
	} {
		r, remoteErr := e.remote.ListCheckpoints(ctx, in)
		l, localErr := e.local.ListCheckpoints(ctx, in)
		if localErr != nil || remoteErr != nil {
			// Refused input must be refused alike.
			sameJSON(t, fmt.Sprintf("ListCheckpoints(%+v) error", in), remoteErr, localErr)
			continue
		}
		sameJSON(t, fmt.Sprintf("ListCheckpoints(%+v)", in), r, l)
		if r.HasMore {
			in.Cursor = r.NextCursor
			r2, err := e.remote.ListCheckpoints(ctx, in)
			if err != nil {
				t.Fatalf("next page: %v", err)
			}
			l2, err := e.local.ListCheckpoints(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, "ListCheckpoints next page", r2, l2)
		}
	}

	// A filter finds any tag that was ever stored, whatever new tags may hold.
	if _, err := e.remote.ListCheckpoints(ctx, belay.ListCheckpointsInput{Tags: []string{"ci\tnightly"}}); err != nil {
		t.Errorf("ListCheckpoints by a tag with a tab: %v", err)
	}
	if _, err := e.remote.SearchCheckpoints(ctx, belay.SearchInput{Query: "x", Tags: []string{"ci\tnightly"}}); err != nil {
		t.Errorf("SearchCheckpoints by a tag with a tab: %v", err)
	}

	if err := e.remote.DeleteCheckpoint(ctx, second.ID); err != nil {
		t.Fatalf("DeleteCheckpoint: %v", err)
	}
	if _, err := e.local.GetCheckpoint(ctx, second.ID); !belay.IsCode(err, belay.CodeCheckpointNotFound) {
		t.Errorf("after remote delete: %v, want CHECKPOINT_NOT_FOUND", err)
	}
	if s, _ := e.local.GetSession(ctx, sess.ID); s.HeadCheckpointID != cp.ID {
		t.Errorf("head after delete = %s, want %s", s.HeadCheckpointID, cp.ID)
	}
}

// coded returns err as a *belay.Error with its details as JSON would carry them.
func coded(t *testing.T, side string, err error) *belay.Error {
	t.Helper()
	var be *belay.Error
	if !errors.As(err, &be) {
		t.Fatalf("%s error = %v (%T), want *belay.Error", side, err, err)
	}
	b, err := json.Marshal(be)
	if err != nil {
		t.Fatal(err)
	}
	var norm belay.Error
	if err := json.Unmarshal(b, &norm); err != nil {
		t.Fatal(err)
	}
	return &norm
}

func TestErrorsMatchLocalService(t *testing.T) {
	ctx := anonCtx
	e := newEnv(t)
	seed, err := e.local.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: e.project, Summary: "seed"})
	if err != nil {
		t.Fatal(err)
	}
	adas, err := e.local.CreateCheckpoint(belay.WithActor(ctx, belay.Actor{UserID: "ada"}),
		belay.CreateCheckpointInput{ProjectPath: t.TempDir(), Summary: "ada's"})
	if err != nil {
		t.Fatal(err)
	}
	// The caller may read ada's session, not change it.
	admin := belay.WithActor(context.Background(), belay.Actor{UserID: "root", Admin: true})
	if _, err := e.local.CreateToken(admin, belay.CreateTokenInput{User: "anonymous"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.local.GrantSession(admin, belay.GrantInput{SessionID: adas.SessionID, User: "anonymous", Role: belay.RoleRead}); err != nil {
		t.Fatal(err)
	}
	page, err := e.local.ListCheckpoints(ctx, belay.ListCheckpointsInput{Limit: 1})
	if err != nil || !page.HasMore {
		t.Fatalf("first page: %+v %v", page, err)
	}
	missing := "01890000-0000-7000-8000-00000000abcd"
	past := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	valid := func(f func(*belay.CreateCheckpointInput)) belay.CreateCheckpointInput {
		in := belay.CreateCheckpointInput{ProjectPath: e.project, Summary: "s"}
		f(&in)
		return in
	}
	createCP := func(in belay.CreateCheckpointInput) func(context.Context, belay.Service) error {
		return func(ctx context.Context, s belay.Service) error { _, err := s.CreateCheckpoint(ctx, in); return err }
	}
	list := func(in belay.ListCheckpointsInput) func(context.Context, belay.Service) error {
		return func(ctx context.Context, s belay.Service) error { _, err := s.ListCheckpoints(ctx, in); return err }
	}
	listSessions := func(in belay.ListSessionsInput) func(context.Context, belay.Service) error {
		return func(ctx context.Context, s belay.Service) error { _, err := s.ListSessions(ctx, in); return err }
	}
	createSession := func(in belay.CreateSessionInput) func(context.Context, belay.Service) error {
		return func(ctx context.Context, s belay.Service) error { _, err := s.CreateSession(ctx, in); return err }
	}
	getSession := func(id string) func(context.Context, belay.Service) error {
		return func(ctx context.Context, s belay.Service) error { _, err := s.GetSession(ctx, id); return err }
	}
	activeSession := func(p string) func(context.Context, belay.Service) error {
		return func(ctx context.Context, s belay.Service) error { _, err := s.ActiveSession(ctx, p); return err }
	}
	getCP := func(id string) func(context.Context, belay.Service) error {
		return func(ctx context.Context, s belay.Service) error { _, err := s.GetCheckpoint(ctx, id); return err }
	}
	bySeq := func(id string, seq int64) func(context.Context, belay.Service) error {
		return func(ctx context.Context, s belay.Service) error {
			_, err := s.GetCheckpointBySeq(ctx, id, seq)
			return err
		}
	}
	del := func(id string) func(context.Context, belay.Service) error {
		return func(ctx context.Context, s belay.Service) error { return s.DeleteCheckpoint(ctx, id) }
	}

	tests := []struct {
		name string
		code belay.Code
		call func(context.Context, belay.Service) error
	}{
		{"create session relative project", belay.CodeValidation, createSession(belay.CreateSessionInput{ProjectPath: "rel"})},
		// encoding/json would send text that is not UTF-8 as U+FFFD.
		{"create session title not UTF-8", belay.CodeValidation, createSession(belay.CreateSessionInput{Title: "bad \xff utf"})},
		{"create session project NUL", belay.CodeValidation, createSession(belay.CreateSessionInput{ProjectPath: e.project + "\x00"})},
		{"create summary not UTF-8", belay.CodeValidation, createCP(valid(func(in *belay.CreateCheckpointInput) { in.Summary = "bad \xff utf" }))},
		{"create tag not UTF-8", belay.CodeValidation, createCP(valid(func(in *belay.CreateCheckpointInput) { in.Tags = []string{"a", "\xff"} }))},
		{"create agent state NUL escape", belay.CodeValidation, createCP(valid(func(in *belay.CreateCheckpointInput) { in.AgentState = json.RawMessage(`{"a":"\u0000"}`) }))},
		{"heartbeat holder not UTF-8", belay.CodeValidation, func(ctx context.Context, s belay.Service) error {
			_, err := s.Heartbeat(ctx, belay.LeaseInput{SessionID: seed.SessionID, Holder: "h\xff"})
			return err
		}},
		{"fail reason not UTF-8", belay.CodeValidation, func(ctx context.Context, s belay.Service) error {
			_, err := s.EndSession(ctx, belay.EndSessionInput{SessionID: seed.SessionID, Status: belay.SessionFailed, Reason: "r\xff"})
			return err
		}},
		{"rename session not UTF-8", belay.CodeValidation, func(ctx context.Context, s belay.Service) error {
			title := "t\xff"
			_, err := s.UpdateSession(ctx, seed.SessionID, belay.UpdateSessionInput{Title: &title})
			return err
		}},
		{"create session metadata array", belay.CodeValidation, createSession(belay.CreateSessionInput{Metadata: json.RawMessage(`[1]`)})},
		{"create session long title", belay.CodeValidation, createSession(belay.CreateSessionInput{Title: strings.Repeat("t", 501)})},
		{"create session lease under a second", belay.CodeValidation, createSession(belay.CreateSessionInput{Holder: "h", Lease: 500 * time.Millisecond})},
		{"create session lease over the most", belay.CodeValidation, createSession(belay.CreateSessionInput{Holder: "h", Lease: belay.MaxLease + time.Millisecond})},
		{"heartbeat negative lease", belay.CodeValidation, func(ctx context.Context, s belay.Service) error {
			_, err := s.Heartbeat(ctx, belay.LeaseInput{SessionID: seed.SessionID, Holder: "h", Lease: -time.Second})
			return err
		}},
		{"resume lease under a second", belay.CodeValidation, func(ctx context.Context, s belay.Service) error {
			_, err := s.ResumeSession(ctx, belay.ResumeInput{SessionID: seed.SessionID, Holder: "h", Lease: 999 * time.Millisecond})
			return err
		}},
		{"get session bad id", belay.CodeValidation, getSession("nope")},
		{"get session empty id", belay.CodeValidation, getSession("")},
		{"get session unknown", belay.CodeSessionNotFound, getSession(missing)},
		{"active session empty path", belay.CodeValidation, activeSession("")},
		{"active session relative path", belay.CodeValidation, activeSession("a/b")},
		{"active session none", belay.CodeSessionNotFound, activeSession(t.TempDir())},
		{"list sessions limit", belay.CodeValidation, listSessions(belay.ListSessionsInput{Limit: 101})},
		{"list sessions negative limit", belay.CodeValidation, listSessions(belay.ListSessionsInput{Limit: -1})},
		{"list sessions status", belay.CodeValidation, listSessions(belay.ListSessionsInput{Status: "asleep"})},
		{"list sessions cursor", belay.CodeValidation, listSessions(belay.ListSessionsInput{Cursor: "zzz"})},
		{"list sessions relative path", belay.CodeValidation, listSessions(belay.ListSessionsInput{ProjectPath: "x"})},

		{"create no project", belay.CodeValidation, createCP(belay.CreateCheckpointInput{Summary: "s"})},
		{"create relative project", belay.CodeValidation, createCP(valid(func(in *belay.CreateCheckpointInput) { in.ProjectPath = "rel" }))},
		{"create bad session", belay.CodeValidation, createCP(valid(func(in *belay.CreateCheckpointInput) { in.SessionID = "x" }))},
		{"create unknown session", belay.CodeSessionNotFound, createCP(belay.CreateCheckpointInput{SessionID: missing, Summary: "s"})},
		{"create no summary", belay.CodeValidation, createCP(valid(func(in *belay.CreateCheckpointInput) { in.Summary = "" }))},
		{"create bad type", belay.CodeValidation, createCP(valid(func(in *belay.CreateCheckpointInput) { in.Type = "big" }))},
		{"create negative step", belay.CodeValidation, createCP(valid(func(in *belay.CreateCheckpointInput) { in.Step = -2 }))},
		{"create empty tag", belay.CodeValidation, createCP(valid(func(in *belay.CreateCheckpointInput) { in.Tags = []string{""} }))},
		{"create past expiry", belay.CodeValidation, createCP(valid(func(in *belay.CreateCheckpointInput) { in.ExpiresAt = &past }))},
		{"create metadata array", belay.CodeValidation, createCP(valid(func(in *belay.CreateCheckpointInput) { in.Metadata = json.RawMessage(`[1]`) }))},
		{"create state not JSON", belay.CodeValidation, createCP(valid(func(in *belay.CreateCheckpointInput) { in.AgentState = json.RawMessage(`{oops`) }))},
		{"create state too big", belay.CodeValidation, createCP(valid(func(in *belay.CreateCheckpointInput) {
			in.AgentState = json.RawMessage(`"` + strings.Repeat("a", belay.MaxStateBytes) + `"`)
		}))},
		{"create hitl timeout", belay.CodeValidation, createCP(valid(func(in *belay.CreateCheckpointInput) {
			in.HITL = &belay.HITLInput{Required: true, Timeout: &belay.TimeoutInput{Duration: 1, DefaultAction: belay.ActionApprove}}
		}))},
		{"create hitl option action", belay.CodeValidation, createCP(valid(func(in *belay.CreateCheckpointInput) {
			in.HITL = &belay.HITLInput{Required: true, Options: []belay.HITLOption{{ID: "a", Label: "A", Action: "dance"}}}
		}))},

		{"get checkpoint bad id", belay.CodeValidation, getCP("nope")},
		{"get checkpoint empty id", belay.CodeValidation, getCP("")},
		{"get checkpoint dot-dot id", belay.CodeValidation, getCP("..")},
		{"get checkpoint slash id", belay.CodeValidation, getCP("a/b")},
		{"get checkpoint unknown", belay.CodeCheckpointNotFound, getCP(missing)},
		{"by seq bad session", belay.CodeValidation, bySeq("nope", 1)},
		{"by seq zero", belay.CodeValidation, bySeq(seed.SessionID, 0)},
		{"by seq negative", belay.CodeValidation, bySeq(seed.SessionID, -1)},
		{"by seq unknown", belay.CodeCheckpointNotFound, bySeq(seed.SessionID, 99)},

		{"list limit", belay.CodeValidation, list(belay.ListCheckpointsInput{Limit: 101})},
		{"list negative limit", belay.CodeValidation, list(belay.ListCheckpointsInput{Limit: -1})},
		{"list bad session", belay.CodeValidation, list(belay.ListCheckpointsInput{SessionID: "x"})},
		{"list bad type", belay.CodeValidation, list(belay.ListCheckpointsInput{Type: "big"})},
		{"list bad order", belay.CodeValidation, list(belay.ListCheckpointsInput{OrderBy: "name"})},
		{"list bad dir", belay.CodeValidation, list(belay.ListCheckpointsInput{OrderDir: "up"})},
		{"list relative path", belay.CodeValidation, list(belay.ListCheckpointsInput{ProjectPath: "x"})},
		{"list empty window", belay.CodeValidation, list(belay.ListCheckpointsInput{CreatedAfter: &past, CreatedBefore: &past})},
		{"list too many tags", belay.CodeValidation, list(belay.ListCheckpointsInput{Tags: strings.Split(strings.Repeat("t,", 20)+"t", ",")})},
		{"list empty tag", belay.CodeValidation, list(belay.ListCheckpointsInput{Tags: []string{"a", ""}})},
		{"list bad cursor", belay.CodeValidation, list(belay.ListCheckpointsInput{Cursor: "zzz"})},
		{"list cursor of another order", belay.CodeValidation, list(belay.ListCheckpointsInput{Cursor: page.NextCursor, OrderBy: belay.OrderType})},

		{"delete bad id", belay.CodeValidation, del("nope")},
		{"delete empty id", belay.CodeValidation, del("")},
		{"delete unknown", belay.CodeCheckpointNotFound, del(missing)},
		{"delete another owner's", belay.CodeUnauthorized, del(adas.ID)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			localErr := tt.call(ctx, e.local)
			remoteErr := tt.call(ctx, e.remote)
			if localErr == nil || remoteErr == nil {
				t.Fatalf("local error %v, remote error %v; want both to fail", localErr, remoteErr)
			}
			l, r := coded(t, "local", localErr), coded(t, "remote", remoteErr)
			if l.Code != tt.code {
				t.Errorf("local code = %s (%v), want %s", l.Code, l, tt.code)
			}
			if !reflect.DeepEqual(l, r) {
				t.Errorf("remote error differs from local:\nremote %s %q %v\nlocal  %s %q %v", r.Code, r.Message, r.Details, l.Code, l.Message, l.Details)
			}
			if !belay.IsCode(remoteErr, tt.code) || client.IsConnectionError(remoteErr) {
				t.Errorf("remote error %v: IsCode %s false or taken for a connection error", remoteErr, tt.code)
			}
		})
	}
	list2, err := e.local.ListCheckpoints(ctx, belay.ListCheckpointsInput{})
	if err != nil {
		t.Fatal(err)
	}
	if list2.TotalCount != 2 {
		t.Errorf("checkpoints = %d after refused calls, want the 2 seeded", list2.TotalCount)
	}
}

func TestTokenIsSent(t *testing.T) {
	ctx := anonCtx
	var e *env
	e = newEnv(t, func(o *httpapi.Options) {
		o.Authenticate = func(ctx context.Context, token string) (belay.Actor, error) { return e.local.Authenticate(ctx, token) }
	})
	token, err := e.local.Bootstrap(ctx)
	if err != nil || token == "" {
		t.Fatalf("Bootstrap: %q %v", token, err)
	}
	anon := e.remote
	_, err = anon.ListSessions(ctx, belay.ListSessionsInput{})
	if !belay.IsCode(err, belay.CodeUnauthenticated) {
		t.Errorf("without a token: %v, want UNAUTHENTICATED", err)
	}
	c, err := client.New(e.srv.URL, token)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := c.CreateSession(ctx, belay.CreateSessionInput{})
	if err != nil {
		t.Fatalf("with a token: %v", err)
	}
	if sess.Owner != core.BootstrapUser {
		t.Errorf("owner = %q, want %q: the token names the caller", sess.Owner, core.BootstrapUser)
	}
	bad, _ := client.New(e.srv.URL, "belay_wrong")
	if _, err := bad.GetSession(ctx, sess.ID); !belay.IsCode(err, belay.CodeUnauthenticated) {
		t.Errorf("with a wrong token: %v, want UNAUTHENTICATED", err)
	}
}

func TestNewRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"", "localhost:7420", "ftp://host", "http://", "::"} {
		if _, err := client.New(u, ""); !belay.IsCode(err, belay.CodeValidation) {
			t.Errorf("New(%q) = %v, want VALIDATION_ERROR", u, err)
		}
	}
}

func TestConnectionErrors(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, err := client.New(url, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetSession(anonCtx, "01890000-0000-7000-8000-00000000abcd")
	if err == nil || !client.IsConnectionError(err) {
		t.Errorf("unreachable server: %v, want a connection error", err)
	}
	var be *belay.Error
	if errors.As(err, &be) {
		t.Errorf("unreachable server gave a coded error %v", be)
	}
	// An error of this process, not of the way to the server, is none.
	if client.IsConnectionError(fmt.Errorf("mcp: %w", errors.New("JSON-RPC batching is not supported"))) {
		t.Error("a local error was taken for a connection error")
	}
	ctx, cancel := context.WithCancel(anonCtx)
	cancel()
	if _, err := c.GetSession(ctx, "01890000-0000-7000-8000-00000000abcd"); err == nil || client.IsConnectionError(err) {
		t.Errorf("a cancelled call: %v, taken for a connection error", err)
	}
}

func TestNonJSONErrorIsInternal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "upstream is down", http.StatusBadGateway)
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ListCheckpoints(anonCtx, belay.ListCheckpointsInput{})
	if !belay.IsCode(err, belay.CodeInternal) || !strings.Contains(err.Error(), "502") || !strings.Contains(err.Error(), "upstream is down") {
		t.Errorf("plain-text 502: %v, want INTERNAL_ERROR naming the status and body", err)
	}
	if client.IsConnectionError(err) {
		t.Error("a server answer was taken for a connection error")
	}
}

// anonCtx acts on the service directly as the user every remote call is.
var anonCtx = belay.WithActor(context.Background(), belay.Actor{UserID: "anonymous"})

// TestSessionRefAndTitle: ResolveSession and UpdateSession answer over HTTP
// as the local service does, errors included.
func TestSessionRefAndTitle(t *testing.T) {
	ctx := anonCtx
	e := newEnv(t)
	sess, err := e.remote.CreateSession(ctx, belay.CreateSessionInput{ProjectPath: e.project})
	if err != nil {
		t.Fatal(err)
	}
	prefix := sess.ID[:13]
	got, err := e.remote.ResolveSession(ctx, prefix)
	if err != nil || got.ID != sess.ID {
		t.Fatalf("ResolveSession(%q) = %+v, %v", prefix, got, err)
	}
	title := "refactor billing"
	updated, err := e.remote.UpdateSession(ctx, sess.ID, belay.UpdateSessionInput{Title: &title})
	if err != nil || updated.Title != title {
		t.Fatalf("UpdateSession = %+v, %v", updated, err)
	}
	local, err := e.local.GetSession(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "UpdateSession", updated, withoutAccess(local))

	for _, ref := range []string{"01", "ffffffff"} {
		_, remoteErr := e.remote.ResolveSession(ctx, ref)
		_, localErr := e.local.ResolveSession(ctx, ref)
		sameJSON(t, "ResolveSession("+ref+") error", coded(t, "remote", remoteErr), coded(t, "local", localErr))
	}
	_, remoteErr := e.remote.UpdateSession(ctx, sess.ID, belay.UpdateSessionInput{})
	_, localErr := e.local.UpdateSession(ctx, sess.ID, belay.UpdateSessionInput{})
	sameJSON(t, "UpdateSession without a field", coded(t, "remote", remoteErr), coded(t, "local", localErr))
}

// withoutAccess is s as answers other than GetSession give it: without the
// caller's access.
func withoutAccess(s *belay.Session) *belay.Session {
	c := *s
	c.Access = nil
	return &c
}

// TestLeaseIsNeverShorterThanAsked: the API takes a lease in whole seconds;
// the client rounds up, so a lease of 1.999 s is 2 s, not 1 s.
func TestLeaseIsNeverShorterThanAsked(t *testing.T) {
	e := newEnv(t)
	const lease = 1999 * time.Millisecond
	check := func(what string, before time.Time, sess *belay.Session, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if sess.LeaseExpiresAt == nil || sess.LeaseExpiresAt.Before(before.Add(lease)) {
			t.Errorf("%s with a lease of %s: it ends at %v, %v after the call began", what, lease, sess.LeaseExpiresAt, sess.LeaseExpiresAt.Sub(before))
		}
	}
	before := time.Now()
	sess, err := e.remote.CreateSession(anonCtx, belay.CreateSessionInput{ProjectPath: e.project, Holder: "a", Lease: lease})
	check("CreateSession", before, sess, err)
	before = time.Now()
	got, err := e.remote.Heartbeat(anonCtx, belay.LeaseInput{SessionID: sess.ID, Holder: "a", Lease: lease})
	check("Heartbeat", before, got, err)
	if _, err := e.remote.Heartbeat(anonCtx, belay.LeaseInput{SessionID: sess.ID, Holder: "a", Release: true}); err != nil {
		t.Fatal(err)
	}
	before = time.Now()
	res, err := e.remote.ResumeSession(anonCtx, belay.ResumeInput{SessionID: sess.ID, Holder: "b", Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	check("ResumeSession", before, res.Session, nil)
}

// TestSetRetentionAnswersThePolicyAsStored: a policy set through a link to
// the project comes back, over HTTP as from core, under the directory the
// link leads to, where it is stored.
func TestSetRetentionAnswersThePolicyAsStored(t *testing.T) {
	e := newEnv(t, func(o *httpapi.Options) {
		o.Authenticate = func(context.Context, string) (belay.Actor, error) {
			return belay.Actor{UserID: "root", Admin: true}, nil
		}
	})
	link := filepath.Join(t.TempDir(), "linkdir")
	if err := os.Symlink(e.project, link); err != nil {
		t.Fatal(err)
	}
	p, err := e.remote.SetRetention(anonCtx, belay.RetentionPolicy{ProjectPath: link, KeepLast: 5, MaxAge: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if *p != (belay.RetentionPolicy{ProjectPath: e.project, KeepLast: 5, MaxAge: 48 * time.Hour}) {
		t.Errorf("SetRetention through a link = %+v, want the policy of %s", p, e.project)
	}
}
