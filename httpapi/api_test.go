package httpapi_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the raw SQL connection that corrupts rows

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/internal/testclock"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/sqlite"
)

// at is second sec of the seeded minute.
// anyToken lets every request in as one user: these tests are about the
// API's shapes, not about who may call it.
func anyToken(context.Context, string) (belay.Actor, error) {
	return belay.Actor{UserID: "anonymous"}, nil
}

func at(sec int) time.Time { return time.Date(2025, 1, 15, 12, 0, sec, 0, time.UTC) }

// apiEnv is a real server on loopback over a fresh SQLite file, seeded with one
// session of three checkpoints in project:
//
//	cp1 at 12:00:01, type phase, tags [a]
//	cp2 at 12:00:02, type auto,  tags [a b]
//	cp3 at 12:00:03, HITL required (type hitl), tags [b]; the session awaits input
//
// vars holds the names scenarios use as {placeholders}: project, other (a
// directory without a session), sid, cp1-cp3 and missing (a UUID nobody has).
type apiEnv struct {
	svc   *core.Service
	db    *sqlite.DB
	srv   *httptest.Server
	clock *testclock.Clock
	vars  map[string]string
}

func newAPI(t *testing.T) *apiEnv {
	t.Helper()
	ctx := localCtx
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	clock := testclock.New(time.Time{}, 0)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The projects are under the workspace roots, where belay checks that a
	// project path is a directory even for a caller who is no admin.
	svc := core.New(core.Options{Store: db, Clock: clock, Logger: log, WorkspaceRoots: []string{os.TempDir()}})
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Service: svc, Logger: log, Version: "test", Authenticate: anyToken}).Handler())
	t.Cleanup(srv.Close)
	e := &apiEnv{svc: svc, db: db, srv: srv, clock: clock, vars: map[string]string{
		"project": t.TempDir(), "other": t.TempDir(), "missing": "01890000-0000-7000-8000-00000000abcd",
	}}
	seed := []belay.CreateCheckpointInput{
		{Type: belay.TypePhase, Tags: []string{"a"}},
		{Type: belay.TypeAuto, Tags: []string{"a", "b"}},
		{Tags: []string{"b"}, HITL: &belay.HITLInput{Required: true}},
	}
	for i, in := range seed {
		clock.Set(at(i + 1))
		in.ProjectPath, in.Summary = e.vars["project"], fmt.Sprintf("seed %d", i+1)
		cp, err := svc.CreateCheckpoint(ctx, in)
		if err != nil {
			t.Fatalf("seed: %v", err)
		}
		e.vars[fmt.Sprintf("cp%d", i+1)] = cp.ID
		e.vars["sid"] = cp.SessionID
	}
	return e
}

// expand replaces {name} with e.vars[name].
func (e *apiEnv) expand(s string) string {
	var pairs []string
	for k, v := range e.vars {
		pairs = append(pairs, "{"+k+"}", v)
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

// do sends one request; contentType "" means application/json when there is a body.
func (e *apiEnv) do(t *testing.T, method, path, contentType, body string) (*http.Response, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if contentType == "" && body != "" {
		contentType = "application/json"
	}
	if contentType != "" && contentType != "-" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp, b
}

// snapshot is what a refused request must leave unchanged.
type snapshot struct {
	lastEvent, checkpoints, sessions int64
}

func (e *apiEnv) snapshot(t *testing.T) snapshot {
	t.Helper()
	ctx := localCtx
	var s snapshot
	var err error
	if s.lastEvent, err = e.db.LastEventSeq(ctx); err != nil {
		t.Fatal(err)
	}
	// The store, not the service: a corrupted row must still count.
	if _, s.checkpoints, _, err = e.db.ListCheckpoints(ctx, store.CheckpointQuery{Scope: store.Everything, Limit: 1}); err != nil {
		t.Fatal(err)
	}
	if _, s.sessions, _, err = e.db.ListSessions(ctx, store.SessionQuery{Scope: store.Everything, Limit: 1}); err != nil {
		t.Fatal(err)
	}
	return s
}

func (e *apiEnv) events(t *testing.T, after int64) []belay.Event {
	t.Helper()
	evs, err := e.db.ListEvents(localCtx, store.EventQuery{Scope: store.Everything, After: after, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// corrupt changes a stored checkpoint's summary behind the store's back.
func (e *apiEnv) corrupt(t *testing.T, id string) {
	t.Helper()
	raw, err := sql.Open("sqlite", e.db.Path()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	res, err := raw.Exec(`UPDATE checkpoints SET summary = 'x' WHERE id = ?`, id)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("corrupted %d rows, want 1", n)
	}
}

// errorBody is the only shape an error response may have.
type errorBody struct {
	Error struct {
		Code    belay.Code     `json:"code"`
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	} `json:"error"`
}

func decodeStrict[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, clip(b), err)
	}
	return v
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, clip(b), err)
	}
	return v
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

type scenario struct {
	name   string
	method string
	path   string
	// contentType defaults to application/json when body is not empty; "-" sends none.
	contentType string
	body        string
	setup       func(t *testing.T, e *apiEnv)
	wantStatus  int
	wantCode    belay.Code
	wantField   string
	check       func(t *testing.T, e *apiEnv, body []byte)
}

func run(t *testing.T, scenarios []scenario) {
	t.Helper()
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			e := newAPI(t)
			if sc.setup != nil {
				sc.setup(t, e)
			}
			before := e.snapshot(t)
			resp, body := e.do(t, sc.method, e.expand(sc.path), sc.contentType, e.expand(sc.body))
			if resp.StatusCode != sc.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, sc.wantStatus, clip(body))
			}
			if sc.wantStatus != http.StatusNoContent && sc.path != "/metrics" {
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type = %q, want application/json", ct)
				}
			}
			if sc.wantCode != "" {
				eb := decodeStrict[errorBody](t, body)
				if eb.Error.Code != sc.wantCode {
					t.Errorf("code = %s, want %s; body %s", eb.Error.Code, sc.wantCode, clip(body))
				}
				if eb.Error.Message == "" {
					t.Error("error has no message")
				}
				if sc.wantField != "" && eb.Error.Details["field"] != sc.wantField {
					t.Errorf("details.field = %v, want %q; body %s", eb.Error.Details["field"], sc.wantField, clip(body))
				}
			}
			if sc.wantStatus >= 400 || sc.method == http.MethodGet {
				if after := e.snapshot(t); after != before {
					t.Errorf("request changed the database: %+v -> %+v", before, after)
				}
			}
			if sc.check != nil {
				sc.check(t, e, body)
			}
		})
	}
}

// wantItems checks a list body holds exactly the named checkpoints, in order.
func wantItems(names ...string) func(t *testing.T, e *apiEnv, body []byte) {
	return func(t *testing.T, e *apiEnv, body []byte) {
		t.Helper()
		list := decodeStrict[belay.CheckpointList](t, body)
		var got, want []string
		for _, cp := range list.Items {
			got = append(got, cp.ID)
		}
		for _, n := range names {
			want = append(want, e.vars[n])
		}
		if !slices.Equal(got, want) {
			t.Errorf("items = %v, want %v (%v)", got, want, names)
		}
		if list.TotalCount != int64(len(names)) || list.HasMore || list.NextCursor != "" {
			t.Errorf("totalCount %d hasMore %v nextCursor %q, want %d, false, none", list.TotalCount, list.HasMore, list.NextCursor, len(names))
		}
		if !bytes.Contains(body, []byte(`"items":[`)) {
			t.Errorf("items is not an array: %s", clip(body))
		}
	}
}

// wantFieldPrefix checks details.field starts with prefix (nested JSON paths).
func wantFieldSuffix(suffix string) func(t *testing.T, e *apiEnv, body []byte) {
	return func(t *testing.T, _ *apiEnv, body []byte) {
		t.Helper()
		f, _ := decodeStrict[errorBody](t, body).Error.Details["field"].(string)
		if !strings.HasSuffix(f, suffix) {
			t.Errorf("details.field = %q, want one ending in %q", f, suffix)
		}
	}
}

func TestHealthAndMetrics(t *testing.T) {
	run(t, []scenario{
		{name: "healthz", method: "GET", path: "/healthz", wantStatus: 200,
			check: func(t *testing.T, _ *apiEnv, body []byte) {
				h := decode[map[string]any](t, body)
				if h["status"] != "ok" || h["version"] != "test" {
					t.Errorf("health = %v", h)
				}
			}},
		{name: "metrics count requests", method: "GET", path: "/metrics", wantStatus: 200,
			check: func(t *testing.T, e *apiEnv, _ []byte) {
				e.do(t, "GET", "/v1/nope", "", "")
				resp, body := e.do(t, "GET", "/metrics", "", "")
				if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
					t.Errorf("metrics Content-Type = %q", resp.Header.Get("Content-Type"))
				}
				for _, want := range []string{
					`belay_http_requests_total{method="GET",route="GET /metrics",status="200"} 1`,
					`belay_http_requests_total{method="GET",route="/",status="404"} 1`,
					`belay_http_request_duration_seconds_bucket`,
				} {
					if !strings.Contains(string(body), want) {
						t.Errorf("metrics lack %s", want)
					}
				}
			}},
	})
}

func TestUnknownRoutes(t *testing.T) {
	run(t, []scenario{
		{name: "unknown path", method: "GET", path: "/v1/nope", wantStatus: 404, wantCode: belay.CodeNotFound},
		{name: "root", method: "GET", path: "/", wantStatus: 404, wantCode: belay.CodeNotFound},
		{name: "no version", method: "GET", path: "/checkpoints", wantStatus: 404, wantCode: belay.CodeNotFound},
		{name: "deeper than any route", method: "GET", path: "/v1/checkpoints/{cp1}/more", wantStatus: 404, wantCode: belay.CodeNotFound},
		{name: "method without a route", method: "PUT", path: "/v1/checkpoints/{cp1}", body: `{}`, wantStatus: 405, wantCode: belay.CodeMethodNotAllowed},
	})
}

func TestSessionsAPI(t *testing.T) {
	run(t, []scenario{
		{name: "create", method: "POST", path: "/v1/sessions",
			body:       `{"projectPath":"{other}","title":"refactor","phase":"plan","metadata":{"k": [1, 2]}}`,
			wantStatus: 201, check: func(t *testing.T, e *apiEnv, body []byte) {
				s := decodeStrict[belay.Session](t, body)
				if !belay.IsUUID(s.ID) || s.ProjectPath != e.vars["other"] || s.Title != "refactor" || s.Phase != "plan" ||
					s.Status != belay.SessionRunning || s.Owner != "anonymous" || string(s.Metadata) != `{"k":[1,2]}` ||
					!s.CreatedAt.Equal(at(3)) {
					t.Errorf("session = %+v", s)
				}
				evs := e.events(t, 0)
				if last := evs[len(evs)-1]; last.Type != belay.EventSessionCreated || last.SessionID != s.ID {
					t.Errorf("last event = %+v, want session.created", last)
				}
				resp, b := e.do(t, "GET", "/v1/sessions/active?projectPath="+e.vars["other"], "", "")
				if resp.StatusCode != 200 || decode[belay.Session](t, b).ID != s.ID {
					t.Errorf("active session of the new project: %d %s", resp.StatusCode, clip(b))
				}
			}},
		{name: "create without project", method: "POST", path: "/v1/sessions", body: `{}`, wantStatus: 201},
		{name: "create with charset", method: "POST", path: "/v1/sessions", contentType: "application/json; charset=utf-8",
			body: `{"title":"t"}`, wantStatus: 201},
		{name: "create relative project", method: "POST", path: "/v1/sessions", body: `{"projectPath":"rel/dir"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "create missing project", method: "POST", path: "/v1/sessions", body: `{"projectPath":"{project}/gone"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "create metadata array", method: "POST", path: "/v1/sessions", body: `{"metadata":[1]}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "metadata"},
		{name: "create wrong type", method: "POST", path: "/v1/sessions", body: `{"title":5}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "title"},
		{name: "create unknown field", method: "POST", path: "/v1/sessions", body: `{"titel":"x"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "titel"},
		{name: "create malformed", method: "POST", path: "/v1/sessions", body: `{"title":`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "body"},
		{name: "create syntax error", method: "POST", path: "/v1/sessions", body: `{"title" "x"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "body"},
		{name: "create trailing object", method: "POST", path: "/v1/sessions", body: `{}{}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "body"},
		{name: "create form body", method: "POST", path: "/v1/sessions", contentType: "application/x-www-form-urlencoded", body: `title=x`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "body"},
		{name: "create empty body", method: "POST", path: "/v1/sessions",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "body"},

		{name: "list", method: "GET", path: "/v1/sessions", wantStatus: 200,
			check: func(t *testing.T, e *apiEnv, body []byte) {
				list := decodeStrict[belay.SessionList](t, body)
				if len(list.Items) != 1 || list.Items[0].ID != e.vars["sid"] || list.TotalCount != 1 || list.HasMore {
					t.Errorf("list = %+v", list)
				}
			}},
		{name: "list filtered", method: "GET", path: "/v1/sessions?projectPath={project}&status=awaiting_input&limit=1", wantStatus: 200,
			check: func(t *testing.T, e *apiEnv, body []byte) {
				if list := decodeStrict[belay.SessionList](t, body); len(list.Items) != 1 {
					t.Errorf("list = %+v", list)
				}
			}},
		{name: "list empty", method: "GET", path: "/v1/sessions?status=completed", wantStatus: 200,
			check: func(t *testing.T, e *apiEnv, body []byte) {
				if !bytes.Contains(body, []byte(`"items":[]`)) {
					t.Errorf("empty list = %s, want items []", body)
				}
			}},
		{name: "list pages", method: "GET", path: "/v1/sessions?limit=1", wantStatus: 200,
			setup: func(t *testing.T, e *apiEnv) {
				if _, err := e.svc.CreateSession(localCtx, belay.CreateSessionInput{Title: "second"}); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, e *apiEnv, body []byte) {
				first := decodeStrict[belay.SessionList](t, body)
				if !first.HasMore || first.NextCursor == "" || first.TotalCount != 2 || first.Items[0].Title != "second" {
					t.Fatalf("first page = %+v", first)
				}
				_, b := e.do(t, "GET", "/v1/sessions?limit=1&cursor="+first.NextCursor, "", "")
				second := decodeStrict[belay.SessionList](t, b)
				if second.HasMore || len(second.Items) != 1 || second.Items[0].ID != e.vars["sid"] {
					t.Errorf("second page = %+v", second)
				}
			}},
		{name: "list limit over 100", method: "GET", path: "/v1/sessions?limit=101",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "limit"},
		{name: "list limit zero", method: "GET", path: "/v1/sessions?limit=0",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "limit"},
		{name: "list limit negative", method: "GET", path: "/v1/sessions?limit=-1",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "limit"},
		{name: "list limit not a number", method: "GET", path: "/v1/sessions?limit=ten",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "limit"},
		{name: "list bad status", method: "GET", path: "/v1/sessions?status=asleep",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "status"},
		{name: "list relative project", method: "GET", path: "/v1/sessions?projectPath=rel",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "list bad cursor", method: "GET", path: "/v1/sessions?cursor=zzz",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "cursor"},
		{name: "list unknown parameter", method: "GET", path: "/v1/sessions?sort=asc",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "sort"},

		{name: "get", method: "GET", path: "/v1/sessions/{sid}", wantStatus: 200,
			check: func(t *testing.T, e *apiEnv, body []byte) {
				s := decodeStrict[belay.Session](t, body)
				if s.ID != e.vars["sid"] || s.LastSeq != 3 || s.CheckpointCount != 3 || s.HeadCheckpointID != e.vars["cp3"] ||
					s.Status != belay.SessionAwaitingInput || s.ProjectPath != e.vars["project"] {
					t.Errorf("session = %+v", s)
				}
				for _, key := range []string{`"headCheckpointId"`, `"lastSeq"`, `"checkpointCount"`, `"projectPath"`, `"createdAt"`, `"updatedAt"`} {
					if !bytes.Contains(body, []byte(key)) {
						t.Errorf("session JSON lacks %s: %s", key, body)
					}
				}
			}},
		{name: "get bad id", method: "GET", path: "/v1/sessions/not-a-uuid",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "id"},
		{name: "get unknown", method: "GET", path: "/v1/sessions/{missing}",
			wantStatus: 404, wantCode: belay.CodeSessionNotFound},

		{name: "active", method: "GET", path: "/v1/sessions/active?projectPath={project}", wantStatus: 200,
			check: func(t *testing.T, e *apiEnv, body []byte) {
				if s := decodeStrict[belay.Session](t, body); s.ID != e.vars["sid"] {
					t.Errorf("active = %s, want %s", s.ID, e.vars["sid"])
				}
			}},
		{name: "active with trailing slash", method: "GET", path: "/v1/sessions/active?projectPath={project}/", wantStatus: 200},
		{name: "active without project", method: "GET", path: "/v1/sessions/active",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "active empty project", method: "GET", path: "/v1/sessions/active?projectPath=",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "active relative project", method: "GET", path: "/v1/sessions/active?projectPath=rel/dir",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "resume relative project", method: "POST", path: "/v1/sessions/resume", body: `{"projectPath":".","holder":"agent"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "active project twice", method: "GET", path: "/v1/sessions/active?projectPath={project}&projectPath={other}",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "active unknown parameter", method: "GET", path: "/v1/sessions/active?projectPath={project}&verbose=1",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "verbose"},
		{name: "active none", method: "GET", path: "/v1/sessions/active?projectPath={other}",
			wantStatus: 404, wantCode: belay.CodeSessionNotFound},

		{name: "resolve prefix", method: "GET", path: "/v1/sessions/resolve?ref={sidprefix}", wantStatus: 200,
			setup: func(t *testing.T, e *apiEnv) { e.vars["sidprefix"] = e.vars["sid"][:13] },
			check: func(t *testing.T, e *apiEnv, body []byte) {
				if s := decodeStrict[belay.Session](t, body); s.ID != e.vars["sid"] {
					t.Errorf("resolved %s, want %s", s.ID, e.vars["sid"])
				}
			}},
		{name: "resolve ambiguous", method: "GET", path: "/v1/sessions/resolve?ref={sidprefix}",
			setup: func(t *testing.T, e *apiEnv) {
				if _, err := e.svc.CreateSession(localCtx, belay.CreateSessionInput{}); err != nil {
					t.Fatal(err)
				}
				e.vars["sidprefix"] = e.vars["sid"][:4]
			},
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "ref"},
		{name: "resolve too short", method: "GET", path: "/v1/sessions/resolve?ref=01",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "ref"},
		{name: "resolve unknown", method: "GET", path: "/v1/sessions/resolve?ref=ffffffff",
			wantStatus: 404, wantCode: belay.CodeSessionNotFound},

		{name: "set title", method: "PATCH", path: "/v1/sessions/{sid}", body: `{"title":"refactor billing"}`, wantStatus: 200,
			check: func(t *testing.T, e *apiEnv, body []byte) {
				if s := decodeStrict[belay.Session](t, body); s.ID != e.vars["sid"] || s.Title != "refactor billing" || s.LastSeq != 3 {
					t.Errorf("session = %+v", s)
				}
				if evs := e.events(t, 0); evs[len(evs)-1].Type != belay.EventSessionUpdated {
					t.Errorf("last event = %+v, want session.updated", evs[len(evs)-1])
				}
			}},
		{name: "set title empty body", method: "PATCH", path: "/v1/sessions/{sid}", body: `{}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "title"},
		{name: "set title unknown field", method: "PATCH", path: "/v1/sessions/{sid}", body: `{"status":"completed"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "status"},
		{name: "set title unknown session", method: "PATCH", path: "/v1/sessions/{missing}", body: `{"title":"x"}`,
			wantStatus: 404, wantCode: belay.CodeSessionNotFound},

		{name: "checkpoint by seq", method: "GET", path: "/v1/sessions/{sid}/checkpoints/2", wantStatus: 200,
			check: func(t *testing.T, e *apiEnv, body []byte) {
				if cp := decodeStrict[belay.Checkpoint](t, body); cp.ID != e.vars["cp2"] || cp.Seq != 2 {
					t.Errorf("checkpoint = %s #%d, want %s #2", cp.ID, cp.Seq, e.vars["cp2"])
				}
			}},
		{name: "checkpoint by seq zero", method: "GET", path: "/v1/sessions/{sid}/checkpoints/0",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "seq"},
		{name: "checkpoint by seq negative", method: "GET", path: "/v1/sessions/{sid}/checkpoints/-1",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "seq"},
		{name: "checkpoint by seq not a number", method: "GET", path: "/v1/sessions/{sid}/checkpoints/two",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "seq"},
		{name: "checkpoint by seq too big", method: "GET", path: "/v1/sessions/{sid}/checkpoints/99999999999999999999",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "seq"},
		{name: "checkpoint by seq unknown", method: "GET", path: "/v1/sessions/{sid}/checkpoints/99",
			wantStatus: 404, wantCode: belay.CodeCheckpointNotFound},
		{name: "checkpoint by seq of bad session", method: "GET", path: "/v1/sessions/nope/checkpoints/1",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "sessionId"},
		{name: "checkpoint by seq of unknown session", method: "GET", path: "/v1/sessions/{missing}/checkpoints/1",
			wantStatus: 404, wantCode: belay.CodeCheckpointNotFound},
	})
}

func TestCreateCheckpointAPI(t *testing.T) {
	const valid = `"projectPath":"{project}","summary":"s"`
	run(t, []scenario{
		{name: "into the project's active session", method: "POST", path: "/v1/checkpoints",
			body: `{"projectPath":"{project}","summary":"fourth"}`, wantStatus: 201,
			check: func(t *testing.T, e *apiEnv, body []byte) {
				cp := decodeStrict[belay.Checkpoint](t, body)
				if cp.SessionID != e.vars["sid"] || cp.Seq != 4 || cp.ParentID != e.vars["cp3"] || cp.Type != belay.TypeManual ||
					cp.Trigger != belay.TriggerUserRequest || !cp.CreatedAt.Equal(at(3)) {
					t.Errorf("checkpoint = %+v", cp)
				}
				evs := e.events(t, 0)
				if last := evs[len(evs)-1]; last.Type != belay.EventCheckpointCreated || last.CheckpointID != cp.ID {
					t.Errorf("last event = %+v, want checkpoint.created", last)
				}
			}},
		{name: "into a named session with every field", method: "POST", path: "/v1/checkpoints", wantStatus: 201,
			body: `{"sessionId":"{sid}","name":"arch","type":"phase","trigger":"phase_change","summary":"plan done",
				"description":"long","workspaceRef":"4b825dc6","agentState":{"todo": [1, 2]},"outputs":["x"],"metadata":{"m":true},
				"context":{"k":"v"},"tags":["t1","t1","t2"],"phase":"build","step":7,"expiresAt":"2030-01-01T00:00:00Z"}`,
			check: func(t *testing.T, e *apiEnv, body []byte) {
				cp := decodeStrict[belay.Checkpoint](t, body)
				if cp.SessionID != e.vars["sid"] || cp.Seq != 4 || cp.Name != "arch" || cp.Type != belay.TypePhase ||
					cp.Trigger != belay.TriggerPhaseChange || cp.Description != "long" || cp.WorkspaceRef != "4b825dc6" ||
					string(cp.AgentState) != `{"todo":[1,2]}` || string(cp.Outputs) != `["x"]` || string(cp.Metadata) != `{"m":true}` ||
					cp.Context["k"] != "v" || !slices.Equal(cp.Tags, []string{"t1", "t2"}) || cp.Phase != "build" || cp.Step != 7 ||
					cp.ExpiresAt == nil || !cp.ExpiresAt.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) ||
					cp.ProjectPath != e.vars["project"] || cp.Checksum == "" {
					t.Errorf("checkpoint = %+v", cp)
				}
				for _, key := range []string{`"sessionId"`, `"agentState"`, `"parentId"`, `"hitlRequired"`, `"createdAt"`, `"workspaceRef"`, `"expiresAt"`} {
					if !bytes.Contains(body, []byte(key)) {
						t.Errorf("checkpoint JSON lacks %s", key)
					}
				}
				_, b := e.do(t, "GET", "/v1/sessions/"+e.vars["sid"], "", "")
				if s := decode[belay.Session](t, b); s.Phase != "build" || s.CurrentStep != 7 || string(s.State) != `{"todo":[1,2]}` {
					t.Errorf("session after checkpoint = %+v", s)
				}
			}},
		{name: "starts a session on demand", method: "POST", path: "/v1/checkpoints",
			body: `{"projectPath":"{other}","summary":"first"}`, wantStatus: 201,
			check: func(t *testing.T, e *apiEnv, body []byte) {
				cp := decodeStrict[belay.Checkpoint](t, body)
				if cp.SessionID == e.vars["sid"] || cp.Seq != 1 || cp.ParentID != "" || bytes.Contains(body, []byte(`"parentId"`)) {
					t.Errorf("checkpoint = %+v", cp)
				}
				evs := e.events(t, 0)
				got := []string{evs[len(evs)-2].Type, evs[len(evs)-1].Type}
				if !slices.Equal(got, []string{belay.EventSessionCreated, belay.EventCheckpointCreated}) {
					t.Errorf("events = %v, want session.created, checkpoint.created", got)
				}
				_, b := e.do(t, "GET", "/v1/sessions/active?projectPath="+e.vars["other"], "", "")
				if s := decode[belay.Session](t, b); s.ID != cp.SessionID || s.Owner != "anonymous" {
					t.Errorf("active session = %+v, want %s", s, cp.SessionID)
				}
			}},
		{name: "with a HITL request", method: "POST", path: "/v1/checkpoints", wantStatus: 201,
			body: `{` + valid + `,"hitl":{"required":true,"message":"ok?","timeout":{"duration":60,"defaultAction":"reject"}}}`,
			check: func(t *testing.T, e *apiEnv, body []byte) {
				cp := decodeStrict[belay.Checkpoint](t, body)
				if !cp.HITLRequired || cp.Type != belay.TypeHITL || cp.HITL == nil || len(cp.HITL.Options) != 2 ||
					cp.HITL.Timeout == nil || !cp.HITL.Timeout.ExpiresAt.Equal(at(3).Add(time.Minute)) {
					t.Errorf("checkpoint = %+v hitl %+v", cp, cp.HITL)
				}
				if !bytes.Contains(body, []byte(`"hitlConfig"`)) {
					t.Errorf("no hitlConfig in %s", clip(body))
				}
			}},

		{name: "no session and no project", method: "POST", path: "/v1/checkpoints", body: `{"summary":"x"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "relative project", method: "POST", path: "/v1/checkpoints", body: `{"projectPath":"rel","summary":"x"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "tag with a terminal escape", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"tags":["ok","x\u001b[2J"]}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "tags[1]"},
		{name: "option label with a terminal escape", method: "POST", path: "/v1/checkpoints",
			body:       `{` + valid + `,"hitl":{"required":true,"options":[{"id":"y","label":"L\u001b[5mabel","action":"approve"}]}}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "hitl.options[0].label"},
		{name: "workspace ref not a commit id", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"workspaceRef":"--output=/tmp/x"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "workspaceRef"},
		{name: "project is a file", method: "POST", path: "/v1/checkpoints", body: `{"projectPath":"{project}/../file","summary":"x"}`,
			setup: func(t *testing.T, e *apiEnv) {
				if err := os.WriteFile(filepath.Join(filepath.Dir(e.vars["project"]), "file"), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			},
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		// The caller is no admin: a project path outside the workspace roots
		// is a name to it, which belay does not look at (that would tell it
		// what exists on the server).
		{name: "project outside the roots is only a name", method: "POST", path: "/v1/checkpoints", body: `{"projectPath":"/dev/null","summary":"x"}`,
			wantStatus: 201},
		{name: "bad session id", method: "POST", path: "/v1/checkpoints", body: `{"sessionId":"nope","summary":"x"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "sessionId"},
		{name: "unknown session", method: "POST", path: "/v1/checkpoints", body: `{"sessionId":"{missing}","summary":"x"}`,
			wantStatus: 404, wantCode: belay.CodeSessionNotFound},
		{name: "no summary", method: "POST", path: "/v1/checkpoints", body: `{"projectPath":"{project}"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "summary"},
		{name: "summary too long", method: "POST", path: "/v1/checkpoints", body: `{"projectPath":"{project}","summary":"` + strings.Repeat("s", 501) + `"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "summary"},
		{name: "bad type", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"type":"big"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "type"},
		{name: "bad trigger", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"trigger":"whim"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "trigger"},
		{name: "step is a string", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"step":"3"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "step"},
		{name: "step is a fraction", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"step":1.5}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "step"},
		{name: "step is negative", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"step":-1}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "step"},
		{name: "tags is a string", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"tags":"a"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "tags"},
		{name: "tag is a number", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"tags":[1]}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "tags"},
		{name: "empty tag", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"tags":["a",""]}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "tags[1]"},
		{name: "too many tags", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"tags":["` + strings.Repeat(`t","`, 20) + `t"]}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "tags"},
		{name: "context value is a number", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"context":{"k":1}}`,
			wantStatus: 400, wantCode: belay.CodeValidation, check: func(t *testing.T, _ *apiEnv, body []byte) {
				f, _ := decodeStrict[errorBody](t, body).Error.Details["field"].(string)
				if !strings.HasPrefix(f, "context") {
					t.Errorf("details.field = %q, want context…", f)
				}
			}},
		{name: "metadata is an array", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"metadata":[1]}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "metadata"},
		{name: "expiry in the past", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"expiresAt":"2000-01-01T00:00:00Z"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "expiresAt"},
		// Instants are stored as nanoseconds since 1970: past 2261 they would wrap around.
		{name: "expiry past what is stored", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"expiresAt":"2300-01-01T00:00:00Z"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "expiresAt"},
		{name: "expiry in year 9999", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"expiresAt":"9999-12-31T23:59:59Z"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "expiresAt"},
		{name: "expiry not a time", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"expiresAt":"tomorrow"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "expiresAt"},
		{name: "expiry a number", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"expiresAt":1700000000}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "expiresAt"},
		// The expiry rejects a request no one decided: it must offer a reject option.
		{name: "expiring request without a reject option", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"expiresAt":"2030-01-01T00:00:00Z",
			"hitl":{"required":true,"options":[{"id":"ok","label":"OK","action":"approve"}]}}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "expiresAt"},
		{name: "hitl required not a boolean", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"hitl":{"required":"yes"}}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "hitl.required"},
		{name: "hitl timeout too short", method: "POST", path: "/v1/checkpoints",
			body:       `{` + valid + `,"hitl":{"required":true,"timeout":{"duration":5,"defaultAction":"approve"}}}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "hitl.timeout.duration"},
		{name: "hitl unknown field", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"hitl":{"required":true,"bogus":1}}`,
			wantStatus: 400, wantCode: belay.CodeValidation, check: wantFieldSuffix("bogus")},
		{name: "unknown field", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `,"summry":"x"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "summry"},
		{name: "array body", method: "POST", path: "/v1/checkpoints", body: `[]`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "body"},
		{name: "string body", method: "POST", path: "/v1/checkpoints", body: `"x"`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "body"},
		{name: "truncated", method: "POST", path: "/v1/checkpoints", body: `{` + valid,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "body"},
		{name: "trailing garbage", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `} xyz`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "body"},
		{name: "two objects", method: "POST", path: "/v1/checkpoints", body: `{` + valid + `}{` + valid + `}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "body"},
		{name: "trailing whitespace is fine", method: "POST", path: "/v1/checkpoints", body: `{` + valid + "}\n\t ", wantStatus: 201},
		// Any Content-Type is read as JSON, so a plain `curl -d` works; the body must still be JSON.
		{name: "JSON under another content type", method: "POST", path: "/v1/checkpoints", contentType: "application/x-www-form-urlencoded",
			body: `{` + valid + `}`, wantStatus: 201},
		{name: "form body", method: "POST", path: "/v1/checkpoints", contentType: "application/x-www-form-urlencoded",
			body: `summary=x&projectPath=/tmp`, wantStatus: 400, wantCode: belay.CodeValidation, wantField: "body"},
		{name: "no content type", method: "POST", path: "/v1/checkpoints", contentType: "-", body: `{` + valid + `}`, wantStatus: 201},
		{name: "empty body", method: "POST", path: "/v1/checkpoints",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "body"},
		{name: "state over its limit", method: "POST", path: "/v1/checkpoints",
			body:       `{` + valid + `,"agentState":"` + strings.Repeat("a", belay.MaxStateBytes) + `"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "agentState"},
		{name: "body over its limit", method: "POST", path: "/v1/checkpoints",
			body:       `{` + valid + `,"agentState":"` + strings.Repeat("a", belay.MaxBodyBytes) + `"}`,
			wantStatus: 413, wantCode: belay.CodeTooLarge, check: func(t *testing.T, _ *apiEnv, body []byte) {
				if limit := decodeStrict[errorBody](t, body).Error.Details["limit"]; limit != float64(belay.MaxBodyBytes) {
					t.Errorf("details.limit = %v, want %d", limit, belay.MaxBodyBytes)
				}
			}},
	})
}

func TestListCheckpointsAPI(t *testing.T) {
	run(t, []scenario{
		{name: "all, newest first", method: "GET", path: "/v1/checkpoints", wantStatus: 200, check: wantItems("cp3", "cp2", "cp1")},
		{name: "oldest first", method: "GET", path: "/v1/checkpoints?orderDir=asc", wantStatus: 200, check: wantItems("cp1", "cp2", "cp3")},
		{name: "by type", method: "GET", path: "/v1/checkpoints?orderBy=type", wantStatus: 200, check: wantItems("cp1", "cp3", "cp2")},
		{name: "by type ascending", method: "GET", path: "/v1/checkpoints?orderBy=type&orderDir=asc", wantStatus: 200, check: wantItems("cp2", "cp3", "cp1")},
		{name: "by createdAt", method: "GET", path: "/v1/checkpoints?orderBy=createdAt&orderDir=desc", wantStatus: 200, check: wantItems("cp3", "cp2", "cp1")},
		{name: "session", method: "GET", path: "/v1/checkpoints?sessionId={sid}", wantStatus: 200, check: wantItems("cp3", "cp2", "cp1")},
		{name: "unknown session is empty", method: "GET", path: "/v1/checkpoints?sessionId={missing}", wantStatus: 200, check: wantItems()},
		{name: "project", method: "GET", path: "/v1/checkpoints?projectPath={project}", wantStatus: 200, check: wantItems("cp3", "cp2", "cp1")},
		{name: "other project", method: "GET", path: "/v1/checkpoints?projectPath={other}", wantStatus: 200, check: wantItems()},
		{name: "type", method: "GET", path: "/v1/checkpoints?type=phase", wantStatus: 200, check: wantItems("cp1")},
		{name: "hitl required", method: "GET", path: "/v1/checkpoints?hitlRequired=true", wantStatus: 200, check: wantItems("cp3")},
		{name: "hitl not required", method: "GET", path: "/v1/checkpoints?hitlRequired=false", wantStatus: 200, check: wantItems("cp2", "cp1")},
		{name: "hitl undecided", method: "GET", path: "/v1/checkpoints?hitlDecided=false", wantStatus: 200, check: wantItems("cp3")},
		{name: "hitl decided", method: "GET", path: "/v1/checkpoints?hitlDecided=true", wantStatus: 200, check: wantItems()},
		{name: "created window", method: "GET", path: "/v1/checkpoints?createdAfter=2025-01-15T12:00:01Z&createdBefore=2025-01-15T12:00:03Z",
			wantStatus: 200, check: wantItems("cp2")},
		{name: "created window with offset", method: "GET", path: "/v1/checkpoints?createdAfter=2025-01-15T13:00:01%2B01:00",
			wantStatus: 200, check: wantItems("cp3", "cp2")},
		{name: "one tag", method: "GET", path: "/v1/checkpoints?tags=a", wantStatus: 200, check: wantItems("cp2", "cp1")},
		{name: "tags are AND", method: "GET", path: "/v1/checkpoints?tags=a&tags=b", wantStatus: 200, check: wantItems("cp2")},
		{name: "tags comma separated", method: "GET", path: "/v1/checkpoints?tags=a,b", wantStatus: 200, check: wantItems("cp2")},
		{name: "filters are AND", method: "GET", path: "/v1/checkpoints?tags=b&hitlRequired=false&projectPath={project}", wantStatus: 200, check: wantItems("cp2")},
		{name: "pages", method: "GET", path: "/v1/checkpoints?limit=2", wantStatus: 200,
			check: func(t *testing.T, e *apiEnv, body []byte) {
				first := decodeStrict[belay.CheckpointList](t, body)
				if len(first.Items) != 2 || !first.HasMore || first.NextCursor == "" || first.TotalCount != 3 {
					t.Fatalf("first page = %+v", first)
				}
				// Rows inserted between pages sort before the cursor and do not disturb it.
				if _, err := e.svc.CreateCheckpoint(localCtx, belay.CreateCheckpointInput{ProjectPath: e.vars["project"], Summary: "late"}); err != nil {
					t.Fatal(err)
				}
				_, b := e.do(t, "GET", "/v1/checkpoints?limit=2&cursor="+first.NextCursor, "", "")
				second := decodeStrict[belay.CheckpointList](t, b)
				if len(second.Items) != 1 || second.Items[0].ID != e.vars["cp1"] || second.HasMore || second.TotalCount != 4 {
					t.Errorf("second page = %+v", second)
				}
				if bytes.Contains(b, []byte(`"nextCursor"`)) {
					t.Errorf("last page has a nextCursor: %s", clip(b))
				}
				// The cursor is bound to its order.
				resp, b := e.do(t, "GET", "/v1/checkpoints?orderBy=type&cursor="+first.NextCursor, "", "")
				if eb := decode[errorBody](t, b); resp.StatusCode != 400 || eb.Error.Details["field"] != "cursor" {
					t.Errorf("cursor of another order: %d %s", resp.StatusCode, clip(b))
				}
			}},

		{name: "limit zero", method: "GET", path: "/v1/checkpoints?limit=0", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "limit"},
		{name: "limit over 100", method: "GET", path: "/v1/checkpoints?limit=101", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "limit"},
		{name: "limit negative", method: "GET", path: "/v1/checkpoints?limit=-5", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "limit"},
		{name: "limit not a number", method: "GET", path: "/v1/checkpoints?limit=1e2", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "limit"},
		{name: "limit twice", method: "GET", path: "/v1/checkpoints?limit=1&limit=2", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "limit"},
		{name: "bad session", method: "GET", path: "/v1/checkpoints?sessionId=42", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "sessionId"},
		{name: "bad type", method: "GET", path: "/v1/checkpoints?type=big", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "type"},
		{name: "bad hitlRequired", method: "GET", path: "/v1/checkpoints?hitlRequired=maybe", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "hitlRequired"},
		{name: "bad hitlDecided", method: "GET", path: "/v1/checkpoints?hitlDecided=2", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "hitlDecided"},
		{name: "bad createdAfter", method: "GET", path: "/v1/checkpoints?createdAfter=yesterday", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "createdAfter"},
		{name: "createdAfter past what is stored", method: "GET", path: "/v1/checkpoints?createdAfter=2300-01-01T00:00:00Z", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "createdAfter"},
		{name: "createdBefore before what is stored", method: "GET", path: "/v1/checkpoints?createdBefore=1000-01-01T00:00:00Z", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "createdBefore"},
		// Seconds past 100 years would wrap around as nanoseconds: 2^64 ns is 18446744074 s.
		{name: "cleanup older than centuries", method: "POST", path: "/v1/sessions/cleanup", body: `{"olderThanSeconds":18446744074,"statuses":["completed"]}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "olderThanSeconds"},
		{name: "retention of centuries", method: "PUT", path: "/v1/retention", body: `{"projectPath":"{project}","maxAgeSeconds":18446747674}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "maxAgeSeconds"},
		{name: "lease of centuries", method: "POST", path: "/v1/sessions/{sid}/heartbeat", body: `{"holder":"h","leaseSeconds":18446744074}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "leaseSeconds"},
		{name: "new session with a lease of centuries", method: "POST", path: "/v1/sessions", body: `{"projectPath":"{other}","holder":"h","leaseSeconds":18446744074}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "leaseSeconds"},
		{name: "bad createdBefore", method: "GET", path: "/v1/checkpoints?createdBefore=2025-01-15", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "createdBefore"},
		{name: "empty window", method: "GET", path: "/v1/checkpoints?createdAfter=2025-01-15T12:00:02Z&createdBefore=2025-01-15T12:00:02Z",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "createdAfter"},
		{name: "relative project", method: "GET", path: "/v1/checkpoints?projectPath=here", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "too many tags", method: "GET", path: "/v1/checkpoints?tags=" + strings.Repeat("t,", 21), wantStatus: 400, wantCode: belay.CodeValidation, wantField: "tags"},
		{name: "empty tag", method: "GET", path: "/v1/checkpoints?tags=a,", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "tags[1]"},
		{name: "bad orderBy", method: "GET", path: "/v1/checkpoints?orderBy=name", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "orderBy"},
		{name: "bad orderDir", method: "GET", path: "/v1/checkpoints?orderDir=up", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "orderDir"},
		{name: "bad cursor", method: "GET", path: "/v1/checkpoints?cursor=garbage", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "cursor"},
		{name: "unknown parameter", method: "GET", path: "/v1/checkpoints?tag=a", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "tag"},
	})
}

func TestCheckpointAPI(t *testing.T) {
	run(t, []scenario{
		{name: "get", method: "GET", path: "/v1/checkpoints/{cp2}", wantStatus: 200,
			check: func(t *testing.T, e *apiEnv, body []byte) {
				cp := decodeStrict[belay.Checkpoint](t, body)
				if cp.ID != e.vars["cp2"] || cp.SessionID != e.vars["sid"] || cp.Seq != 2 || cp.ParentID != e.vars["cp1"] ||
					cp.Type != belay.TypeAuto || !slices.Equal(cp.Tags, []string{"a", "b"}) || !cp.CreatedAt.Equal(at(2)) {
					t.Errorf("checkpoint = %+v", cp)
				}
				if err := cp.VerifyChecksum(); err != nil {
					t.Errorf("checksum does not survive JSON: %v", err)
				}
			}},
		{name: "get bad id", method: "GET", path: "/v1/checkpoints/nope", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "id"},
		{name: "get unknown", method: "GET", path: "/v1/checkpoints/{missing}", wantStatus: 404, wantCode: belay.CodeCheckpointNotFound},

		{name: "delete the head", method: "DELETE", path: "/v1/checkpoints/{cp3}", wantStatus: 204,
			check: func(t *testing.T, e *apiEnv, body []byte) {
				if len(body) != 0 {
					t.Errorf("204 with a body: %s", body)
				}
				resp, _ := e.do(t, "GET", "/v1/checkpoints/"+e.vars["cp3"], "", "")
				if resp.StatusCode != 404 {
					t.Errorf("deleted checkpoint: status %d, want 404", resp.StatusCode)
				}
				_, b := e.do(t, "GET", "/v1/sessions/"+e.vars["sid"], "", "")
				s := decode[belay.Session](t, b)
				if s.HeadCheckpointID != e.vars["cp2"] || s.CheckpointCount != 2 || s.LastSeq != 3 || s.Status != belay.SessionRunning {
					t.Errorf("session after deleting the head = %+v", s)
				}
				evs := e.events(t, 0)
				if last := evs[len(evs)-1]; last.Type != belay.EventCheckpointDeleted || last.CheckpointID != e.vars["cp3"] {
					t.Errorf("last event = %+v, want checkpoint.deleted", last)
				}
			}},
		{name: "delete a non-head", method: "DELETE", path: "/v1/checkpoints/{cp1}", wantStatus: 204,
			check: func(t *testing.T, e *apiEnv, _ []byte) {
				_, b := e.do(t, "GET", "/v1/sessions/"+e.vars["sid"], "", "")
				if s := decode[belay.Session](t, b); s.HeadCheckpointID != e.vars["cp3"] || s.CheckpointCount != 2 {
					t.Errorf("session = %+v", s)
				}
			}},
		{name: "delete bad id", method: "DELETE", path: "/v1/checkpoints/nope", wantStatus: 400, wantCode: belay.CodeValidation, wantField: "id"},
		{name: "delete unknown", method: "DELETE", path: "/v1/checkpoints/{missing}", wantStatus: 404, wantCode: belay.CodeCheckpointNotFound},
		{name: "delete of another owner's session", method: "DELETE", path: "/v1/checkpoints/{cp9}", wantStatus: 403, wantCode: belay.CodeUnauthorized,
			setup: func(t *testing.T, e *apiEnv) {
				cp, err := e.svc.CreateCheckpoint(belay.WithActor(context.Background(), belay.Actor{UserID: "ada"}),
					belay.CreateCheckpointInput{ProjectPath: e.vars["other"], Summary: "ada's"})
				if err != nil {
					t.Fatal(err)
				}
				// The caller may read ada's session, not delete from it.
				if _, err := e.svc.CreateToken(localCtx, belay.CreateTokenInput{User: "anonymous"}); err != nil {
					t.Fatal(err)
				}
				if _, err := e.svc.GrantSession(localCtx, belay.GrantInput{SessionID: cp.SessionID, User: "anonymous", Role: belay.RoleRead}); err != nil {
					t.Fatal(err)
				}
				e.vars["cp9"] = cp.ID
			}},

		{name: "corrupt by id", method: "GET", path: "/v1/checkpoints/{cp2}", wantStatus: 422, wantCode: belay.CodeCheckpointCorrupt,
			setup: func(t *testing.T, e *apiEnv) { e.corrupt(t, e.vars["cp2"]) },
			check: func(t *testing.T, e *apiEnv, body []byte) {
				if id := decodeStrict[errorBody](t, body).Error.Details["id"]; id != e.vars["cp2"] {
					t.Errorf("details.id = %v, want %s", id, e.vars["cp2"])
				}
			}},
		{name: "corrupt by seq", method: "GET", path: "/v1/sessions/{sid}/checkpoints/2", wantStatus: 422, wantCode: belay.CodeCheckpointCorrupt,
			setup: func(t *testing.T, e *apiEnv) { e.corrupt(t, e.vars["cp2"]) }},
		{name: "corrupt in a list: left out and named, the others listed", method: "GET", path: "/v1/checkpoints", wantStatus: 200,
			setup: func(t *testing.T, e *apiEnv) { e.corrupt(t, e.vars["cp2"]) },
			check: func(t *testing.T, e *apiEnv, body []byte) {
				var list belay.CheckpointList
				if err := json.Unmarshal(body, &list); err != nil {
					t.Fatal(err)
				}
				if len(list.Items) == 0 || len(list.Corrupted) != 1 || list.Corrupted[0].Code != belay.CodeCheckpointCorrupt ||
					list.Corrupted[0].Details["id"] != e.vars["cp2"] {
					t.Errorf("list = %d items, corrupted %+v; want cp2 named there", len(list.Items), list.Corrupted)
				}
				for _, cp := range list.Items {
					if cp.ID == e.vars["cp2"] {
						t.Error("the corrupted checkpoint is listed")
					}
				}
			}},
		{name: "intact beside a corrupt one", method: "GET", path: "/v1/checkpoints/{cp1}", wantStatus: 200,
			setup: func(t *testing.T, e *apiEnv) { e.corrupt(t, e.vars["cp2"]) }},
	})
}

// localCtx acts on the service directly as its administrator, as the local CLI does.
var localCtx = belay.WithActor(context.Background(), belay.Actor{UserID: "anonymous", Admin: true})
