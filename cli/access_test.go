package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
	"github.com/belayhq/belay/client"
	"github.com/belayhq/belay/cmd/belay/wire"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/store/sqlite"
	"github.com/belayhq/belay/workspace"
)

// The access matrix: every role × every action, over raw HTTP, the Go client
// and (for some actions) the CLI with BELAY_URL, against a real server on
// loopback. The expectations are the table in docs/ACCESS.md.

var updateDocs = flag.Bool("update", false, "rewrite the generated table of docs/ACCESS.md from the access matrix")

// accessRole is a column of the matrix: who calls, and with which token.
type accessRole struct {
	name string
	// user is the user the role's token belongs to; "" for no token.
	user string
	// scopes limit the token; with projects it is limited to another
	// project than the sessions of the matrix.
	scopes   []belay.Scope
	projects bool
}

// accessRoles are the matrix's columns. The session of every cell belongs
// to owner, grants reader, writer and decider their roles, and holds a HITL
// request naming approver.
var accessRoles = []accessRole{
	{name: "owner", user: "owner"},
	{name: "admin", user: core.BootstrapUser},
	{name: "grantee read", user: "reader"},
	{name: "grantee write", user: "writer"},
	{name: "grantee decide", user: "decider"},
	{name: "approver", user: "approver"},
	{name: "stranger", user: "stranger"},
	{name: "owner, read-only token", user: "owner", scopes: []belay.Scope{belay.ScopeRead}},
	{name: "owner, token for another project", user: "owner", projects: true},
	{name: "no token"},
}

// accessWorld is a belay server on loopback (core on SQLite with git
// workspaces, the HTTP API) with a token for every role.
type accessWorld struct {
	svc *core.Service
	db  *sqlite.DB
	srv *httptest.Server
	// root is where non-admins may snapshot and restore: every scene's
	// project is below it. elsewhere is the project of the limited token.
	root, elsewhere string
	tokens          []string // by role
	clients         []*client.Client
	scenes          int
}

func newAccessWorld(t *testing.T) *accessWorld {
	t.Helper()
	ctx := context.Background()
	data := t.TempDir()
	db, err := sqlite.Open(ctx, filepath.Join(data, "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ws, err := workspace.New(workspace.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	w := &accessWorld{db: db, root: t.TempDir()}
	w.elsewhere = filepath.Join(w.root, "elsewhere")
	if err := os.Mkdir(w.elsewhere, 0o755); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	w.svc = core.New(core.Options{Store: db, Workspaces: ws, WorkspaceRoots: []string{w.root}, Logger: log})
	w.srv = httptest.NewServer(httpapi.New(httpapi.Options{Service: w.svc, Authenticate: w.svc.Authenticate, Logger: log}).Handler())
	t.Cleanup(func() {
		w.srv.CloseClientConnections()
		w.srv.Close()
	})
	adminToken, err := w.svc.Bootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range accessRoles {
		var secret string
		switch {
		case r.user == core.BootstrapUser:
			secret = adminToken
		case r.user != "":
			in := belay.CreateTokenInput{User: r.user, Scopes: r.scopes, Name: r.name}
			if r.projects {
				in.Projects = []string{w.elsewhere}
			}
			tk, err := w.svc.CreateToken(w.as(core.BootstrapUser), in)
			if err != nil {
				t.Fatal(err)
			}
			secret = tk.Secret
		}
		c, err := client.New(w.srv.URL, secret)
		if err != nil {
			t.Fatal(err)
		}
		w.tokens = append(w.tokens, secret)
		w.clients = append(w.clients, c)
	}
	return w
}

// as is a context acting in-process as user with every right it has.
func (w *accessWorld) as(user string) context.Context {
	return belay.WithActor(context.Background(), belay.Actor{UserID: user, Admin: user == core.BootstrapUser})
}

// accessScene is the session one cell acts on, made fresh for every cell.
type accessScene struct {
	project, session string
	// plain is a checkpoint without snapshot; request asks for a decision
	// (approvers: approver); snapshot, when asked for, has the project's files.
	plain, request, snapshot string
}

func (w *accessWorld) scene(t *testing.T, snapshot bool) accessScene {
	t.Helper()
	w.scenes++
	sc := accessScene{project: filepath.Join(w.root, fmt.Sprintf("project-%d", w.scenes))}
	if err := os.MkdirAll(sc.project, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sc.project, "main.go"), []byte("package main\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	owner := w.as("owner")
	sess, err := w.svc.CreateSession(owner, belay.CreateSessionInput{ProjectPath: sc.project, Title: "matrix"})
	if err != nil {
		t.Fatal(err)
	}
	sc.session = sess.ID
	save := func(in belay.CreateCheckpointInput) string {
		t.Helper()
		in.SessionID = sess.ID
		cp, err := w.svc.CreateCheckpoint(owner, in)
		if err != nil {
			t.Fatal(err)
		}
		return cp.ID
	}
	sc.plain = save(belay.CreateCheckpointInput{Summary: "plan", AgentState: json.RawMessage(`{"step":1}`)})
	if snapshot {
		sc.snapshot = save(belay.CreateCheckpointInput{Summary: "files", Snapshot: true})
	}
	sc.request = save(belay.CreateCheckpointInput{Summary: "may I go on?", HITL: &belay.HITLInput{Required: true, Approvers: []string{"approver"}}})
	for user, role := range map[string]belay.Role{"reader": belay.RoleRead, "writer": belay.RoleWrite, "decider": belay.RoleDecide} {
		if _, err := w.svc.GrantSession(owner, belay.GrantInput{SessionID: sess.ID, User: user, Role: role}); err != nil {
			t.Fatal(err)
		}
	}
	return sc
}

// state is everything a cell could change, as an admin reads it.
func (w *accessWorld) state(t *testing.T, sc accessScene) string {
	t.Helper()
	ctx := w.as(core.BootstrapUser)
	seq, err := w.db.LastEventSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := w.svc.GetSession(ctx, sc.session)
	if err != nil && !belay.IsCode(err, belay.CodeSessionNotFound) {
		t.Fatal(err)
	}
	cps, err := w.svc.ListCheckpoints(ctx, belay.ListCheckpointsInput{SessionID: sc.session, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	grants, err := w.svc.ListGrants(ctx, sc.session)
	if err != nil && !belay.IsCode(err, belay.CodeSessionNotFound) {
		t.Fatal(err)
	}
	tokens, err := w.svc.ListTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range tokens {
		tk.LastUsedAt = nil // every authenticated call may record it
	}
	b, err := json.Marshal([]any{seq, sess, cps, grants, tokens})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// touch makes an event in the scene's session, as its owner.
func (w *accessWorld) touch(t *testing.T, sc accessScene) {
	t.Helper()
	if _, err := w.svc.CreateCheckpoint(w.as("owner"), belay.CreateCheckpointInput{SessionID: sc.session, Summary: "news"}); err != nil {
		t.Fatal(err)
	}
}

// ask adds a request naming the approver to the scene's session.
func (w *accessWorld) ask(t *testing.T, sc accessScene) {
	t.Helper()
	if _, err := w.svc.CreateCheckpoint(w.as("owner"), belay.CreateCheckpointInput{SessionID: sc.session, Summary: "and now?",
		HITL: &belay.HITLInput{Required: true, Approvers: []string{"approver"}}}); err != nil {
		t.Fatal(err)
	}
}

// accessOutcome is what one cell saw: the HTTP status (or the status of the
// error's code) and, for lists, how many of the scene's things it counted.
type accessOutcome struct {
	status int
	count  int
}

// accessCell runs one action as role r on scene sc over one transport.
type accessCell func(t *testing.T, w *accessWorld, sc accessScene, r int) accessOutcome

// accessAction is a row of the matrix.
type accessAction struct {
	name, route string
	// cli is the CLI command of the row, for the table; "" when the row does
	// not run through the CLI.
	cli string
	// want is the status each role gets, in the order of accessRoles;
	// counts, for lists, what each role counts of the scene ("-" for none).
	want, counts string
	// write marks actions that change something when allowed and must
	// change nothing when refused.
	write bool
	// snapshot gives the scene a checkpoint with a snapshot of its files.
	snapshot bool
	// raw, client and cliCell run the action over raw HTTP, the Go client
	// and the CLI; nil where that transport does not offer it.
	raw, client, cliCell accessCell
}

// accessActions are the matrix's rows.
var accessActions = []accessAction{
	{
		name: "read session", route: "GET /v1/sessions/{id}", cli: "belay session-info ID",
		want: "200 200 200 200 200 404 404 200 404 401",
		raw:  rawCall(http.MethodGet, func(sc accessScene) string { return "/v1/sessions/" + sc.session }, "", nil),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			_, err := c.GetSession(ctx, sc.session)
			return 0, err
		}),
		cliCell: cliCall(func(sc accessScene) []string { return []string{"session-info", sc.session} }, nil),
	},
	{
		name: "list sessions (totalCount)", route: "GET /v1/sessions", cli: "belay sessions",
		want:   "200 200 200 200 200 200 200 200 200 401",
		counts: "1 1 1 1 1 0 0 1 0 -",
		raw: rawCall(http.MethodGet, func(sc accessScene) string { return "/v1/sessions?projectPath=" + sc.project }, "",
			totalCount),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			list, err := c.ListSessions(ctx, belay.ListSessionsInput{ProjectPath: sc.project})
			if err != nil {
				return 0, err
			}
			return int(list.TotalCount), nil
		}),
		cliCell: cliCall(func(sc accessScene) []string { return []string{"sessions", "--project", sc.project} }, totalCount),
	},
	{
		name: "get checkpoint", route: "GET /v1/checkpoints/{id}",
		want: "200 200 200 200 200 404 404 200 404 401",
		raw:  rawCall(http.MethodGet, func(sc accessScene) string { return "/v1/checkpoints/" + sc.plain }, "", nil),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			_, err := c.GetCheckpoint(ctx, sc.plain)
			return 0, err
		}),
	},
	{
		name: "get the HITL request", route: "GET /v1/checkpoints/{id}",
		want: "200 200 200 200 200 200 404 200 404 401",
		raw:  rawCall(http.MethodGet, func(sc accessScene) string { return "/v1/checkpoints/" + sc.request }, "", nil),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			_, err := c.GetCheckpoint(ctx, sc.request)
			return 0, err
		}),
	},
	{
		name: "list checkpoints (totalCount)", route: "GET /v1/checkpoints", cli: "belay checkpoints --session ID",
		want:   "200 200 200 200 200 200 200 200 200 401",
		counts: "2 2 2 2 2 0 0 2 0 -",
		raw: rawCall(http.MethodGet, func(sc accessScene) string { return "/v1/checkpoints?sessionId=" + sc.session }, "",
			totalCount),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			list, err := c.ListCheckpoints(ctx, belay.ListCheckpointsInput{SessionID: sc.session})
			if err != nil {
				return 0, err
			}
			return int(list.TotalCount), nil
		}),
		cliCell: cliCall(func(sc accessScene) []string { return []string{"checkpoints", "--session", sc.session} }, totalCount),
	},
	{
		name: "search checkpoints (found)", route: "GET /v1/search", cli: "belay search QUERY --project P",
		want:   "200 200 200 200 200 200 200 200 200 401",
		counts: "1 1 1 1 1 0 0 1 0 -",
		raw: rawCall(http.MethodGet, func(sc accessScene) string {
			return "/v1/search?q=plan&projectPath=" + url.QueryEscape(sc.project)
		}, "", foundPlain),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			res, err := c.SearchCheckpoints(ctx, belay.SearchInput{Query: "plan", ProjectPath: sc.project})
			if err != nil {
				return 0, err
			}
			b, err := json.Marshal(res)
			if err != nil {
				return 0, err
			}
			return foundPlain(sc, b)
		}),
		cliCell: cliCall(func(sc accessScene) []string { return []string{"search", "plan", "--project", sc.project} }, foundPlain),
	},
	{
		name: "create checkpoint in the session", route: "POST /v1/checkpoints",
		want: "201 201 403 201 403 404 404 403 404 401", write: true,
		raw: rawCall(http.MethodPost, func(accessScene) string { return "/v1/checkpoints" },
			`{"sessionId":"{session}","summary":"more"}`, nil),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			_, err := c.CreateCheckpoint(ctx, belay.CreateCheckpointInput{SessionID: sc.session, Summary: "more"})
			return 0, err
		}),
	},
	{
		name: "create checkpoint answering its request", route: "POST /v1/checkpoints",
		want: "201 201 403 403 403 404 404 403 404 401", write: true,
		raw: rawCall(http.MethodPost, func(accessScene) string { return "/v1/checkpoints" },
			`{"sessionId":"{session}","summary":"more","answers":[{"checkpointId":"{request}","selectedOption":"approve"}]}`, nil),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			_, err := c.CreateCheckpoint(ctx, belay.CreateCheckpointInput{SessionID: sc.session, Summary: "more",
				Answers: []belay.DecideInput{{CheckpointID: sc.request, SelectedOption: "approve"}}})
			return 0, err
		}),
	},
	{
		name: "decide", route: "POST /v1/checkpoints/{id}/decide", cli: "belay decide ID --option approve",
		want: "200 200 403 403 200 200 404 403 404 401", write: true,
		raw: rawCall(http.MethodPost, func(sc accessScene) string { return "/v1/checkpoints/" + sc.request + "/decide" },
			`{"selectedOption":"approve"}`, nil),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			_, err := c.Decide(ctx, belay.DecideInput{CheckpointID: sc.request, SelectedOption: "approve"})
			return 0, err
		}),
		cliCell: cliCall(func(sc accessScene) []string { return []string{"decide", sc.request, "--option", "approve"} }, nil),
	},
	{
		name: "pending requests (count)", route: "GET /v1/hitl/pending",
		want:   "200 200 200 200 200 200 200 200 200 401",
		counts: "1 1 0 0 1 1 0 0 0 -",
		raw: rawCall(http.MethodGet, func(sc accessScene) string { return "/v1/hitl/pending?session=" + sc.session }, "",
			itemCount),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			list, err := c.PendingHITL(ctx, sc.session)
			return len(list), err
		}),
	},
	{
		name: "wait for the decision (long poll)", route: "GET /v1/checkpoints/{id}/decision",
		want:   "200 200 200 200 200 200 404 200 404 401",
		raw:    waitCell(rawWait),
		client: waitCell(clientWait),
	},
	{
		name: "roll back (state only)", route: "POST /v1/checkpoints/{id}/restore",
		want: "200 200 403 200 403 404 404 403 404 401", write: true,
		raw: rawCall(http.MethodPost, func(sc accessScene) string { return "/v1/checkpoints/" + sc.plain + "/restore" }, "", nil),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			_, err := c.RestoreCheckpoint(ctx, belay.RestoreInput{CheckpointID: sc.plain})
			return 0, err
		}),
	},
	{
		name: "append graph events", route: "POST /v1/sessions/{id}/events",
		want: "200 200 403 200 403 404 404 403 404 401", write: true,
		raw: rawCall(http.MethodPost, func(sc accessScene) string { return "/v1/sessions/" + sc.session + "/events" },
			`{"events":[{"type":"graph.custom","data":{"node":"plan","name":"note"}}]}`, nil),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			_, err := c.AppendEvents(ctx, belay.AppendEventsInput{SessionID: sc.session,
				Events: []belay.EventRecord{{Type: belay.EventGraphCustom, Data: json.RawMessage(`{"node":"plan"}`)}}})
			return 0, err
		}),
	},
	{
		name: "diff a snapshot", route: "GET /v1/checkpoints/{id}/diff",
		want: "200 200 200 200 200 404 404 200 404 401", snapshot: true,
		raw: rawCall(http.MethodGet, func(sc accessScene) string { return "/v1/checkpoints/" + sc.snapshot + "/diff" }, "", nil),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			_, err := c.DiffCheckpoint(ctx, belay.DiffInput{CheckpointID: sc.snapshot})
			return 0, err
		}),
	},
	{
		name: "export the session", route: "GET /v1/sessions/{id}/export",
		want: "200 200 403 403 403 404 404 403 404 401",
		raw:  rawCall(http.MethodGet, func(sc accessScene) string { return "/v1/sessions/" + sc.session + "/export" }, "", nil),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			return 0, c.ExportSession(ctx, sc.session, io.Discard)
		}),
	},
	{
		name: "delete checkpoint", route: "DELETE /v1/checkpoints/{id}",
		want: "204 204 403 403 403 404 404 403 404 401", write: true,
		raw: rawCall(http.MethodDelete, func(sc accessScene) string { return "/v1/checkpoints/" + sc.plain }, "", nil),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			return 0, c.DeleteCheckpoint(ctx, sc.plain)
		}),
	},
	{
		name: "delete session", route: "DELETE /v1/sessions/{id}", cli: "belay sessions delete ID --yes",
		want: "200 200 403 403 403 404 404 403 404 401", write: true,
		raw: rawCall(http.MethodDelete, func(sc accessScene) string { return "/v1/sessions/" + sc.session }, "", nil),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			_, err := c.DeleteSession(ctx, sc.session)
			return 0, err
		}),
		cliCell: cliCall(func(sc accessScene) []string { return []string{"sessions", "delete", sc.session, "--yes"} }, nil),
	},
	{
		name: "grant a role", route: "POST /v1/sessions/{id}/grants", cli: "belay session grant ID USER --role ROLE",
		want: "200 200 403 403 403 404 404 403 404 401", write: true,
		raw: rawCall(http.MethodPost, func(sc accessScene) string { return "/v1/sessions/" + sc.session + "/grants" },
			`{"user":"stranger","role":"read"}`, nil),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			_, err := c.GrantSession(ctx, belay.GrantInput{SessionID: sc.session, User: "stranger", Role: belay.RoleRead})
			return 0, err
		}),
		cliCell: cliCall(func(sc accessScene) []string {
			return []string{"session", "grant", sc.session, "stranger", "--role", "read"}
		}, nil),
	},
	{
		name: "list grants", route: "GET /v1/sessions/{id}/grants", cli: "belay session grants ID",
		want: "200 200 200 200 200 404 404 200 404 401",
		raw:  rawCall(http.MethodGet, func(sc accessScene) string { return "/v1/sessions/" + sc.session + "/grants" }, "", nil),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			_, err := c.ListGrants(ctx, sc.session)
			return 0, err
		}),
		cliCell: cliCall(func(sc accessScene) []string { return []string{"session", "grants", sc.session} }, nil),
	},
	{
		name: "revoke a role", route: "DELETE /v1/sessions/{id}/grants/{user}", cli: "belay session revoke ID USER",
		want: "204 204 403 403 403 404 404 403 404 401", write: true,
		raw: rawCall(http.MethodDelete, func(sc accessScene) string { return "/v1/sessions/" + sc.session + "/grants/reader" }, "", nil),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			return 0, c.RevokeGrant(ctx, sc.session, "reader")
		}),
		cliCell: cliCall(func(sc accessScene) []string { return []string{"session", "revoke", sc.session, "reader"} }, nil),
	},
	{
		name: "events via SSE", route: "GET /v1/events?session={id}",
		want:   "200 200 200 200 200 200 404 200 404 401",
		raw:    streamCell(sseStream),
		client: streamCell(clientStream),
	},
	{
		name: "events via WebSocket", route: "GET /v1/ws?session={id}",
		want: "101 101 101 101 101 101 404 101 404 401",
		raw:  streamCell(wsStream),
	},
	{
		name: "validate the session", route: "GET /v1/validate?session={id}",
		want: "200 200 200 200 200 404 404 200 404 401",
		raw:  rawCall(http.MethodGet, func(sc accessScene) string { return "/v1/validate?session=" + sc.session }, "", nil),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			_, err := c.Validate(ctx, belay.ValidateInput{SessionID: sc.session})
			return 0, err
		}),
	},
	{
		name: "repair the session", route: "POST /v1/validate",
		want: "200 200 403 403 403 404 404 403 404 401",
		raw: rawCall(http.MethodPost, func(accessScene) string { return "/v1/validate" },
			`{"sessionId":"{session}","repair":true}`, nil),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			_, err := c.Validate(ctx, belay.ValidateInput{SessionID: sc.session, Repair: true})
			return 0, err
		}),
	},
	{
		name: "disk usage (sessions counted)", route: "GET /v1/usage",
		want:   "200 200 200 200 200 200 200 200 200 401",
		counts: "1 1 1 1 1 0 0 1 0 -",
		raw:    rawCall(http.MethodGet, func(accessScene) string { return "/v1/usage" }, "", usageCount),
		client: clientCall(func(ctx context.Context, c *client.Client, sc accessScene) (int, error) {
			rep, err := c.DiskUsage(ctx)
			if err != nil {
				return 0, err
			}
			b, _ := json.Marshal(rep)
			return usageCount(sc, b)
		}),
	},
	{
		name: "list tokens", route: "GET /v1/tokens", cli: "belay token list",
		want: "403 200 403 403 403 403 403 403 403 401",
		raw:  rawCall(http.MethodGet, func(accessScene) string { return "/v1/tokens" }, "", nil),
		client: clientCall(func(ctx context.Context, c *client.Client, _ accessScene) (int, error) {
			_, err := c.ListTokens(ctx)
			return 0, err
		}),
		cliCell: cliCall(func(accessScene) []string { return []string{"token", "list"} }, nil),
	},
	{
		name: "create a token", route: "POST /v1/tokens", cli: "belay token create --user NAME",
		want: "403 201 403 403 403 403 403 403 403 401", write: true,
		raw: rawCall(http.MethodPost, func(accessScene) string { return "/v1/tokens" }, `{"user":"newcomer"}`, nil),
		client: clientCall(func(ctx context.Context, c *client.Client, _ accessScene) (int, error) {
			_, err := c.CreateToken(ctx, belay.CreateTokenInput{User: "newcomer"})
			return 0, err
		}),
		cliCell: cliCall(func(accessScene) []string { return []string{"token", "create", "--user", "newcomer"} }, nil),
	},
}

// accessCount reads how many of the scene's things a list answer holds.
type accessCount func(sc accessScene, body []byte) (int, error)

func totalCount(_ accessScene, body []byte) (int, error) {
	var v struct {
		TotalCount *int `json:"totalCount"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.TotalCount == nil {
		return 0, fmt.Errorf("no totalCount in %s (%v)", body, err)
	}
	return *v.TotalCount, nil
}

func itemCount(_ accessScene, body []byte) (int, error) {
	var v struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.Items == nil {
		return 0, fmt.Errorf("no items in %s (%v)", body, err)
	}
	return len(v.Items), nil
}

// foundPlain counts the scene's plain checkpoint among a search's results.
func foundPlain(sc accessScene, body []byte) (int, error) {
	var res belay.SearchResult
	if err := json.Unmarshal(body, &res); err != nil || res.Results == nil {
		return 0, fmt.Errorf("no results in %s (%v)", body, err)
	}
	n := 0
	for _, h := range res.Results {
		if h.Checkpoint.ID == sc.plain {
			n++
		}
	}
	return n, nil
}

// usageCount counts the scene's session in a disk usage report.
func usageCount(sc accessScene, body []byte) (int, error) {
	var rep belay.DiskUsageReport
	if err := json.Unmarshal(body, &rep); err != nil {
		return 0, err
	}
	n := 0
	for _, s := range rep.Sessions {
		if s.ID == sc.session {
			n++
		}
	}
	return n, nil
}

// rawCall is a cell that sends one request; {session} in body is the scene's
// session id. count, when not nil, reads a successful answer.
func rawCall(method string, path func(accessScene) string, body string, count accessCount) accessCell {
	return func(t *testing.T, w *accessWorld, sc accessScene, r int) accessOutcome {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(strings.NewReplacer("{session}", sc.session, "{request}", sc.request).Replace(body))
		}
		req, err := http.NewRequest(method, w.srv.URL+path(sc), rd)
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		w.authorize(req.Header, r)
		resp, err := w.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		out := accessOutcome{status: resp.StatusCode}
		if resp.StatusCode >= 300 {
			wantErrorBody(t, b)
		} else if count != nil {
			if out.count, err = count(sc, b); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
}

func (w *accessWorld) authorize(h http.Header, r int) {
	if tok := w.tokens[r]; tok != "" {
		h.Set("Authorization", "Bearer "+tok)
	}
}

// wantErrorBody fails unless b is belay's error body.
func wantErrorBody(t *testing.T, b []byte) *belay.Error {
	t.Helper()
	var body struct {
		Error *belay.Error `json:"error"`
	}
	if err := json.Unmarshal(b, &body); err != nil || body.Error == nil || body.Error.Code == "" {
		t.Fatalf("not an error body: %s", b)
	}
	return body.Error
}

// statusOf is the status an error of the Go client stands for.
func statusOf(t *testing.T, err error) int {
	t.Helper()
	var be *belay.Error
	if !errors.As(err, &be) {
		t.Fatalf("error without code: %v", err)
	}
	return be.Code.HTTPStatus()
}

// clientCall is a cell that calls the Go client; success is the action's
// success status.
func clientCall(fn func(ctx context.Context, c *client.Client, sc accessScene) (int, error)) accessCell {
	return func(t *testing.T, w *accessWorld, sc accessScene, r int) accessOutcome {
		t.Helper()
		n, err := fn(context.Background(), w.clients[r], sc)
		if err != nil {
			return accessOutcome{status: statusOf(t, err)}
		}
		return accessOutcome{status: http.StatusOK, count: n}
	}
}

// run runs belay with BELAY_URL and role r's token as BELAY_TOKEN, in the
// scene's project.
func (w *accessWorld) run(t *testing.T, sc accessScene, r int, args ...string) result {
	t.Helper()
	env := map[string]string{"BELAY_URL": w.srv.URL, "BELAY_TOKEN": w.tokens[r], "HOME": t.TempDir()}
	var stdout, stderr bytes.Buffer
	code := cli.Run(context.Background(), args, cli.Env{
		Backend: wire.Backend(), Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr,
		Getenv: func(k string) string { return env[k] }, Getwd: func() (string, error) { return sc.project, nil },
	})
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// cliCall is a cell that runs belay --json as role r; count reads a
// successful command's output.
func cliCall(argv func(accessScene) []string, count accessCount) accessCell {
	return func(t *testing.T, w *accessWorld, sc accessScene, r int) accessOutcome {
		t.Helper()
		res := w.run(t, sc, r, append([]string{"--json"}, argv(sc)...)...)
		switch res.code {
		case cli.ExitOK:
			out := accessOutcome{status: http.StatusOK}
			if count != nil {
				var err error
				if out.count, err = count(sc, []byte(res.stdout)); err != nil {
					t.Fatal(err)
				}
			}
			return out
		case cli.ExitError:
			return accessOutcome{status: wantErrorBody(t, []byte(res.stderr)).Code.HTTPStatus()}
		}
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
		return accessOutcome{}
	}
}

// A waiter asks for the decision while the owner decides: one allowed to
// wait gets it.
type waiter func(w *accessWorld, sc accessScene, r int) (status int, decided bool, err error)

func waitCell(wait waiter) accessCell {
	return func(t *testing.T, w *accessWorld, sc accessScene, r int) accessOutcome {
		t.Helper()
		type answer struct {
			status  int
			decided bool
			err     error
		}
		done := make(chan answer, 1)
		go func() {
			st, decided, err := wait(w, sc, r)
			done <- answer{st, decided, err}
		}()
		if _, err := w.svc.Decide(w.as("owner"), belay.DecideInput{CheckpointID: sc.request, SelectedOption: "approve"}); err != nil {
			t.Fatal(err)
		}
		a := <-done
		if a.err != nil {
			t.Fatal(a.err)
		}
		if a.status == http.StatusOK && !a.decided {
			t.Errorf("the waiter was answered without the decision")
		}
		return accessOutcome{status: a.status}
	}
}

func rawWait(w *accessWorld, sc accessScene, r int) (int, bool, error) {
	req, err := http.NewRequest(http.MethodGet, w.srv.URL+"/v1/checkpoints/"+sc.request+"/decision?wait=30s", nil)
	if err != nil {
		return 0, false, err
	}
	w.authorize(req.Header, r)
	resp, err := w.srv.Client().Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	var res belay.WaitResult
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
			return 0, false, err
		}
	}
	return resp.StatusCode, res.Decided, nil
}

func clientWait(w *accessWorld, sc accessScene, r int) (int, bool, error) {
	res, err := w.clients[r].WaitDecision(context.Background(), sc.request, 30*time.Second)
	var be *belay.Error
	switch {
	case errors.As(err, &be):
		return be.Code.HTTPStatus(), false, nil
	case err != nil:
		return 0, false, err
	}
	return http.StatusOK, res.Decided, nil
}

// accessStream opens an event stream as role r with query (e.g.
// "?session=ID"): the answer's status and, when it streams, its events and a
// function that closes it.
type accessStream func(t *testing.T, w *accessWorld, r int, query string) (int, <-chan belay.Event, func())

// streamCell opens the scene's session's stream as role r. One who may read
// the session receives its next event; one who may not is refused, and its
// stream of everything it may read skips the session's events.
func streamCell(open accessStream) accessCell {
	return func(t *testing.T, w *accessWorld, sc accessScene, r int) accessOutcome {
		t.Helper()
		status, events, stop := open(t, w, r, "?session="+sc.session)
		if events == nil {
			if status != http.StatusUnauthorized {
				w.seesNone(t, open, sc, r)
			}
			return accessOutcome{status: status}
		}
		defer stop()
		w.touch(t, sc)
		if accessRoles[r].user == "approver" {
			// It is told of its requests in the session, of nothing else there.
			w.ask(t, sc)
			if !watch(events, func(e belay.Event) bool {
				if e.Type != belay.EventHITLRequired {
					t.Errorf("the approver's stream delivered %s", e.Type)
				}
				return e.SessionID == sc.session && e.Type == belay.EventHITLRequired
			}) {
				t.Errorf("the stream ended without the approver's request")
			}
			return accessOutcome{status: status}
		}
		if !watch(events, func(e belay.Event) bool { return e.SessionID == sc.session && e.Type == belay.EventCheckpointCreated }) {
			t.Errorf("the stream ended without the session's event")
		}
		return accessOutcome{status: status}
	}
}

// seesNone checks that role r's stream of everything skips the scene's
// session: it sees a session the role's user then creates, but nothing of
// the scene's before it.
func (w *accessWorld) seesNone(t *testing.T, open accessStream, sc accessScene, r int) {
	t.Helper()
	status, events, stop := open(t, w, r, "")
	if events == nil {
		t.Fatalf("the stream of everything answered %d", status)
	}
	defer stop()
	w.touch(t, sc)
	own, err := w.svc.CreateSession(w.as(accessRoles[r].user), belay.CreateSessionInput{ProjectPath: w.elsewhere})
	if err != nil {
		t.Fatal(err)
	}
	seen := watch(events, func(e belay.Event) bool {
		if e.SessionID == sc.session {
			t.Errorf("the stream delivered %s of a session the caller may not read", e.Type)
		}
		return e.SessionID == own.ID
	})
	if !seen {
		t.Errorf("the stream ended without the caller's own event")
	}
}

// watch hands events to fn until fn returns true (then it reports true), the
// stream ends or 10 s pass.
func watch(events <-chan belay.Event, fn func(belay.Event) bool) bool {
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e, ok := <-events:
			if !ok {
				return false
			}
			if fn(e) {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

func sseStream(t *testing.T, w *accessWorld, r int, query string) (int, <-chan belay.Event, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.srv.URL+"/v1/events"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	w.authorize(req.Header, r)
	resp, err := w.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		wantErrorBody(t, b)
		return resp.StatusCode, nil, nil
	}
	events := make(chan belay.Event)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var e belay.Event
			if json.Unmarshal([]byte(data), &e) != nil {
				return
			}
			select {
			case events <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	return resp.StatusCode, events, func() {
		cancel()
		resp.Body.Close()
	}
}

func wsStream(t *testing.T, w *accessWorld, r int, query string) (int, <-chan belay.Event, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := http.Header{}
	w.authorize(h, r)
	conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(w.srv.URL, "http")+"/v1/ws"+query, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		cancel()
		if resp == nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		wantErrorBody(t, b)
		return resp.StatusCode, nil, nil
	}
	events := make(chan belay.Event)
	go func() {
		defer close(events)
		for {
			_, b, err := conn.Read(ctx)
			if err != nil {
				return
			}
			var e belay.Event
			if json.Unmarshal(b, &e) != nil {
				return
			}
			select {
			case events <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	return resp.StatusCode, events, func() {
		cancel()
		conn.CloseNow()
	}
}

func clientStream(t *testing.T, w *accessWorld, r int, query string) (int, <-chan belay.Event, func()) {
	t.Helper()
	f := belay.EventFilter{SessionID: strings.TrimPrefix(query, "?session="), After: belay.FromNow}
	ctx, cancel := context.WithCancel(context.Background())
	opened := make(chan error, 1)
	events := make(chan belay.Event)
	go func() {
		defer close(events)
		first := true
		err := w.clients[r].Follow(ctx, f, 0, func(_ int64, batch []belay.Event) error {
			if first {
				first = false
				opened <- nil
			}
			for _, e := range batch {
				select {
				case events <- e:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
		if first {
			opened <- err
		}
	}()
	if err := <-opened; err != nil {
		cancel()
		return statusOf(t, err), nil, nil
	}
	return http.StatusOK, events, cancel
}

// parseRow reads one row of statuses or counts, one per role.
func parseRow(t *testing.T, row string) []int {
	t.Helper()
	fields := strings.Fields(row)
	if len(fields) != len(accessRoles) {
		t.Fatalf("row %q has %d cells for %d roles", row, len(fields), len(accessRoles))
	}
	out := make([]int, len(fields))
	for i, f := range fields {
		if f == "-" {
			out[i] = -1
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("row %q: %v", row, err)
		}
		out[i] = n
	}
	return out
}

// TestAccessMatrix runs every action of accessActions as every role of
// accessRoles over raw HTTP, the Go client and, where the row names a
// command, the CLI, each cell on a session of its own. Every cell gets the
// status the table says; a list counts only what the role may read; a
// refused write changes nothing and an allowed one changes something.
func TestAccessMatrix(t *testing.T) {
	w := newAccessWorld(t)
	for _, a := range accessActions {
		t.Run(a.name, func(t *testing.T) {
			if (a.cli == "") != (a.cliCell == nil) {
				t.Fatalf("the row names the command %q but runs %v through the CLI", a.cli, a.cliCell != nil)
			}
			want := parseRow(t, a.want)
			var counts []int
			if a.counts != "" {
				counts = parseRow(t, a.counts)
			}
			transports := []struct {
				name string
				cell accessCell
			}{{"http", a.raw}, {"client", a.client}, {"cli", a.cliCell}}
			for r, role := range accessRoles {
				for _, tr := range transports {
					if tr.cell == nil {
						continue
					}
					t.Run(role.name+"/"+tr.name, func(t *testing.T) {
						sc := w.scene(t, a.snapshot)
						before := w.state(t, sc)
						got := tr.cell(t, w, sc, r)
						wantStatus := want[r]
						if tr.name != "http" && wantStatus < 300 {
							wantStatus = http.StatusOK // the client and the CLI only succeed
						}
						if got.status != wantStatus {
							t.Fatalf("status %d, want %d", got.status, wantStatus)
						}
						if counts != nil && counts[r] >= 0 && got.count != counts[r] {
							t.Errorf("counted %d, want %d", got.count, counts[r])
						}
						if !a.write {
							return
						}
						changed := w.state(t, sc) != before
						if want[r] < 300 && !changed {
							t.Errorf("an allowed write changed nothing")
						}
						if want[r] >= 300 && changed {
							t.Errorf("a refused write changed something")
						}
					})
				}
			}
		})
	}
}

// accessDoc is docs/ACCESS.md, whose table between these markers is written
// from accessActions.
const (
	accessDoc      = "../docs/ACCESS.md"
	accessDocBegin = "<!-- access matrix: generated by TestAccessDoc, do not edit -->\n"
	accessDocEnd   = "<!-- end of access matrix -->\n"
)

// accessTable renders the matrix as a markdown table.
func accessTable(t *testing.T) string {
	var b strings.Builder
	b.WriteString("| action | route | CLI |")
	for _, r := range accessRoles {
		b.WriteString(" " + r.name + " |")
	}
	b.WriteString("\n|---|---|---|" + strings.Repeat("---|", len(accessRoles)) + "\n")
	for _, a := range accessActions {
		fmt.Fprintf(&b, "| %s | `%s` | %s |", a.name, a.route, mdCode(a.cli))
		want := parseRow(t, a.want)
		var counts []int
		if a.counts != "" {
			counts = parseRow(t, a.counts)
		}
		for r := range accessRoles {
			cell := strconv.Itoa(want[r])
			if counts != nil && counts[r] >= 0 {
				cell += fmt.Sprintf(" (%d)", counts[r])
			}
			b.WriteString(" " + cell + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// mdCode formats s as markdown code, "" as nothing.
func mdCode(s string) string {
	if s == "" {
		return ""
	}
	return "`" + s + "`"
}

// TestAccessDoc keeps the table in docs/ACCESS.md the one TestAccessMatrix
// checks; go test ./cli -run TestAccessDoc -update rewrites it.
func TestAccessDoc(t *testing.T) {
	b, err := os.ReadFile(accessDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start, end := strings.Index(doc, accessDocBegin), strings.Index(doc, accessDocEnd)
	if start < 0 || end < start {
		t.Fatalf("%s lacks the markers %q and %q", accessDoc, accessDocBegin, accessDocEnd)
	}
	start += len(accessDocBegin)
	table := accessTable(t)
	if doc[start:end] == table {
		return
	}
	if *updateDocs {
		if err := os.WriteFile(accessDoc, []byte(doc[:start]+table+doc[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is stale: run go test ./cli -run TestAccessDoc -update", accessDoc)
}

// TestNumbersOfAGranteeNameNoneOfOthersSessions: a grantee with no session
// of its own in the project lists the owner's checkpoints there, told that
// numbers name none of them: another user never sets what its
// "rollback 1" restores.
func TestNumbersOfAGranteeNameNoneOfOthersSessions(t *testing.T) {
	w := newAccessWorld(t)
	sc := w.scene(t, false)
	writer := slices.IndexFunc(accessRoles, func(r accessRole) bool { return r.name == "grantee write" })
	res := w.run(t, sc, writer, "checkpoints")
	if res.code != cli.ExitOK || !strings.Contains(res.stdout, "may I go on?") ||
		!strings.Contains(res.stdout, "None of these sessions is yours, so numbers name none of them") {
		t.Errorf("the grantee's list: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res := w.run(t, sc, writer, "show", "1"); res.code != cli.ExitError || !strings.Contains(res.stderr, "no session of yours (or an admin's)") {
		t.Errorf("the grantee's show 1: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	// An admin's session counts, but one the caller may only read receives
	// none of its saves: the list says so.
	admins := accessScene{project: filepath.Join(w.root, "admins")}
	if err := os.MkdirAll(admins.project, 0o755); err != nil {
		t.Fatal(err)
	}
	boss := w.as(core.BootstrapUser)
	cp, err := w.svc.CreateCheckpoint(boss, belay.CreateCheckpointInput{ProjectPath: admins.project, Summary: "the admin's"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.GrantSession(boss, belay.GrantInput{SessionID: cp.SessionID, User: "writer", Role: belay.RoleRead}); err != nil {
		t.Fatal(err)
	}
	if res := w.run(t, admins, writer, "checkpoints"); !strings.Contains(res.stdout, "which you may only read. Your next save here starts a session of your own.") {
		t.Errorf("the reader's list of an admin's session: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}
