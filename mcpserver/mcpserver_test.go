package mcpserver_test

import (
	"context"
	"encoding/json"
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

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/mcpserver"
	"github.com/belayhq/belay/store/sqlite"
	"github.com/belayhq/belay/workspace"
)

// env is a real service (SQLite, git workspaces) and a project directory.
type env struct {
	svc     *core.Service
	project string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ws, err := workspace.New(workspace.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{svc: core.New(core.Options{Store: db, Workspaces: ws, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}),
		project: t.TempDir()}
	if err := os.WriteFile(filepath.Join(e.project, "main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

var admin = belay.WithActor(context.Background(), belay.Actor{UserID: "local", Admin: true})

// stdio connects a client to the server over an in-memory pipe, as a local
// agent would over stdin/stdout.
func (e *env) stdio(t *testing.T) *mcp.ClientSession {
	t.Helper()
	srv := mcpserver.New(mcpserver.Options{Service: e.svc, Version: "test", MaxAskWait: 2 * time.Second})
	st, ct := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(admin)
	t.Cleanup(cancel)
	go func() { _ = srv.Run(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and returns its structured output, or the seed's error
// object for a tool error.
func call(t *testing.T, cs *mcp.ClientSession, name string, args any) (map[string]any, *belay.Error) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if res.IsError {
		var body struct{ Error *belay.Error }
		if err := json.Unmarshal([]byte(text), &body); err != nil || body.Error == nil {
			t.Fatalf("%s: tool error is not the seed's error object: %s", name, text)
		}
		return nil, body.Error
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatalf("%s: %v in %s", name, err, text)
	}
	return out, nil
}

func ok(t *testing.T, cs *mcp.ClientSession, name string, args any) map[string]any {
	t.Helper()
	out, be := call(t, cs, name, args)
	if be != nil {
		t.Fatalf("%s: %+v", name, be)
	}
	return out
}

func TestToolsAndSchemas(t *testing.T) {
	e := newEnv(t)
	cs := e.stdio(t)
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	byName := map[string]*mcp.Tool{}
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
		byName[tl.Name] = tl
		if tl.Description == "" || tl.OutputSchema == nil {
			t.Errorf("tool %s lacks a description or an output schema", tl.Name)
		}
	}
	for _, want := range []string{"checkpoint_save", "checkpoint_search", "checkpoint_list", "checkpoint_get", "checkpoint_diff",
		"checkpoint_rollback", "session_resume", "ask_human", "hitl_wait"} {
		if !slices.Contains(names, want) {
			t.Errorf("no tool %s among %v", want, names)
		}
	}
	schema, _ := json.Marshal(byName["checkpoint_save"].InputSchema)
	for _, want := range []string{`"maxLength":500`, `"maxItems":20`, `"required":["summary","project_path"]`} {
		if !strings.Contains(string(schema), want) {
			t.Errorf("checkpoint_save's schema lacks %s: %s", want, schema)
		}
	}
	schema, _ = json.Marshal(byName["checkpoint_list"].InputSchema)
	if !strings.Contains(string(schema), `"maximum":100`) {
		t.Errorf("checkpoint_list's schema lacks the limit's maximum: %s", schema)
	}
}

func TestSaveListGetDiffRollback(t *testing.T) {
	e := newEnv(t)
	cs := e.stdio(t)
	saved := ok(t, cs, "checkpoint_save", map[string]any{"summary": "first version", "project_path": e.project,
		"description": "the start", "context": map[string]any{"branch": "main", "n": 3}, "tags": []string{"a", "b"}})
	for _, k := range []string{"id", "summary", "description", "project_path", "context", "tags", "token_count", "created_at", "updated_at"} {
		if _, ok := saved[k]; !ok {
			t.Errorf("checkpoint_save's output lacks %s: %v", k, saved)
		}
	}
	if saved["context"].(map[string]any)["n"] != "3" || saved["snapshot"] == "" {
		t.Errorf("saved = %v", saved)
	}
	// o200k_base: "first version" is 2 tokens and "the start" 2.
	if saved["token_count"] != float64(4) || saved["updated_at"] != saved["created_at"] {
		t.Errorf("token_count %v, updated_at %v (created_at %v)", saved["token_count"], saved["updated_at"], saved["created_at"])
	}
	id := saved["id"].(string)
	if err := os.WriteFile(filepath.Join(e.project, "main.go"), []byte("package main\n// broken\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, cs, "checkpoint_save", map[string]any{"summary": "second", "project_path": e.project})

	page := ok(t, cs, "checkpoint_list", map[string]any{"limit": 1, "project_path": e.project})
	if page["has_more"] != true || page["next_offset"] != float64(1) {
		t.Errorf("list page 1 = %v; want has_more and next_offset 1", page)
	}
	page = ok(t, cs, "checkpoint_list", map[string]any{"limit": 1, "offset": 1, "project_path": e.project})
	if page["total"] != float64(2) || page["limit"] != float64(1) || page["offset"] != float64(1) ||
		page["checkpoints"].([]any)[0].(map[string]any)["id"] != id || page["has_more"] != false || page["next_offset"] != nil {
		t.Errorf("list page 2 = %v", page)
	}
	if got := ok(t, cs, "checkpoint_get", map[string]any{"id": id}); got["summary"] != "first version" {
		t.Errorf("get = %v", got)
	}
	// A unique prefix will do, as in the CLI; a shared one is ambiguous.
	second := page["checkpoints"].([]any)[0].(map[string]any)["id"].(string)
	if got := ok(t, cs, "checkpoint_get", map[string]any{"id": strings.ToUpper(id[:18])}); got["id"] != id {
		t.Errorf("get by a prefix = %v", got)
	}
	if _, be := call(t, cs, "checkpoint_get", map[string]any{"id": id[:4]}); id[:4] == second[:4] && (be == nil || be.Code != belay.CodeValidation || be.Details["field"] != "id") {
		t.Errorf("get by an ambiguous prefix: %+v", be)
	}
	diff := ok(t, cs, "checkpoint_diff", map[string]any{"id": id[:18]})
	if !strings.Contains(diff["patch"].(string), "+// broken") {
		t.Errorf("diff = %v", diff)
	}
	dry := ok(t, cs, "checkpoint_rollback", map[string]any{"id": id, "dry_run": true})
	if dry["dry_run"] != true {
		t.Errorf("dry run = %v", dry)
	}
	done := ok(t, cs, "checkpoint_rollback", map[string]any{"id": id, "reason": "broke it"})
	if b, _ := os.ReadFile(filepath.Join(e.project, "main.go")); string(b) != "package main\n" || done["undo_id"] == "" {
		t.Errorf("rollback = %v, file %q", done, b)
	}
}

func TestSeedErrors(t *testing.T) {
	e := newEnv(t)
	cs := e.stdio(t)
	long := strings.Repeat("x", 501)
	for _, tc := range []struct {
		name, tool string
		args       map[string]any
		code       belay.Code
		field      string
	}{
		{"empty summary", "checkpoint_save", map[string]any{"summary": "", "project_path": e.project}, belay.CodeValidation, "summary"},
		{"summary too long", "checkpoint_save", map[string]any{"summary": long, "project_path": e.project}, belay.CodeValidation, "summary"},
		{"missing project_path", "checkpoint_save", map[string]any{"summary": "s"}, belay.CodeValidation, "project_path"},
		{"relative project_path", "checkpoint_save", map[string]any{"summary": "s", "project_path": "rel"}, belay.CodeValidation, "project_path"},
		{"too many tags", "checkpoint_save", map[string]any{"summary": "s", "project_path": e.project, "tags": strings.Split(strings.Repeat("t,", 21), ",")}, belay.CodeValidation, "tags"},
		{"wrong type", "checkpoint_save", map[string]any{"summary": 3, "project_path": e.project}, belay.CodeValidation, "summary"},
		{"unknown field", "checkpoint_save", map[string]any{"summary": "s", "project_path": e.project, "nope": 1}, belay.CodeValidation, "nope"},
		{"limit over 100", "checkpoint_list", map[string]any{"limit": 101}, belay.CodeValidation, "limit"},
		{"negative offset", "checkpoint_list", map[string]any{"offset": -1}, belay.CodeValidation, "offset"},
		{"bad sort", "checkpoint_list", map[string]any{"sort_by": "size"}, belay.CodeValidation, "sort_by"},
		{"unknown id", "checkpoint_get", map[string]any{"id": "01890000-0000-7000-8000-000000000000"}, belay.CodeNotFound, ""},
		{"bad id", "checkpoint_get", map[string]any{"id": "x"}, belay.CodeValidation, "id"},
		{"search without query", "checkpoint_search", map[string]any{}, belay.CodeValidation, "query"},
		{"blank query", "checkpoint_search", map[string]any{"query": "   "}, belay.CodeValidation, "query"},
		{"top_k over 100", "checkpoint_search", map[string]any{"query": "q", "top_k": 101}, belay.CodeValidation, "top_k"},
		{"relative project_path in search", "checkpoint_search", map[string]any{"query": "q", "project_path": "rel"}, belay.CodeValidation, "project_path"},
		{"limit not an integer", "checkpoint_list", map[string]any{"limit": 1e30}, belay.CodeValidation, "limit"},
		{"bad rollback id", "checkpoint_rollback", map[string]any{"id": "zz"}, belay.CodeValidation, "id"},
		{"unknown id prefix", "checkpoint_rollback", map[string]any{"id": "0000"}, belay.CodeNotFound, ""},
		{"bad option action", "ask_human", map[string]any{"project_path": e.project, "question": "q",
			"options": []map[string]any{{"id": "a", "label": "A", "action": "bogus"}}}, belay.CodeValidation, "options[0].action"},
		{"default not an option", "ask_human", map[string]any{"project_path": e.project, "question": "q", "default": "maybe",
			"options": []map[string]any{{"id": "a", "label": "A", "action": "approve"}}}, belay.CodeValidation, "default"},
		{"default not approve or reject", "ask_human", map[string]any{"project_path": e.project, "question": "q", "default": "later"}, belay.CodeValidation, "default"},
		{"timeout with no reject to take", "ask_human", map[string]any{"project_path": e.project, "question": "q", "timeout_seconds": 60,
			"options": []map[string]any{{"id": "a", "label": "A", "action": "approve"}}}, belay.CodeValidation, "default"},
		{"timeout taking a modify", "ask_human", map[string]any{"project_path": e.project, "question": "q", "timeout_seconds": 60, "default": "m",
			"options": []map[string]any{{"id": "m", "label": "M", "action": "modify"}}}, belay.CodeValidation, "default"},
		{"timeout too short", "ask_human", map[string]any{"project_path": e.project, "question": "q", "timeout_seconds": 5}, belay.CodeValidation, "timeout_seconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, be := call(t, cs, tc.tool, tc.args)
			if be == nil || be.Code != tc.code || (tc.field != "" && be.Details["field"] != tc.field) {
				t.Fatalf("got %+v, want %s on %q", be, tc.code, tc.field)
			}
			if tc.code == belay.CodeValidation && be.Details["error"] == nil {
				t.Errorf("details.error missing: %+v", be)
			}
			if strings.Contains(be.Message, "hitl.") || strings.Contains(be.Message, "must be a number") ||
				strings.Contains(be.Message, "projectPath") || strings.Contains(be.Message, "topK") {
				t.Errorf("the message names belay's field, not the argument: %q", be.Message)
			}
			if tc.code == belay.CodeNotFound && be.Details["id"] == nil {
				t.Errorf("details.id missing: %+v", be)
			}
		})
	}
	if list := ok(t, cs, "checkpoint_list", nil); list["total"] != float64(0) {
		t.Errorf("refused saves wrote: %v", list)
	}
}

func TestAskHumanWaitsForTheDecision(t *testing.T) {
	e := newEnv(t)
	cs := e.stdio(t)
	asked := ok(t, cs, "ask_human", map[string]any{"project_path": e.project, "question": "Deploy to prod?",
		"options": []map[string]any{{"id": "yes", "label": "Yes", "action": "approve"}, {"id": "no", "label": "No", "action": "reject"}},
		"default": "no", "timeout_seconds": 600, "wait_seconds": 1})
	if asked["decided"] != false || asked["id"] == "" {
		t.Fatalf("ask = %v", asked)
	}
	id := asked["id"].(string)
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, _ = e.svc.Decide(admin, belay.DecideInput{CheckpointID: id, SelectedOption: "yes", Feedback: "go"})
	}()
	got := ok(t, cs, "hitl_wait", map[string]any{"id": id, "wait_seconds": 5})
	if got["decided"] != true || got["action"] != "approve" || got["feedback"] != "go" {
		t.Errorf("wait = %v", got)
	}
	if _, be := call(t, cs, "ask_human", map[string]any{"project_path": e.project, "question": ""}); be == nil || be.Details["field"] != "question" {
		t.Errorf("empty question: %+v", be)
	}
	// A timeout may pause instead, whatever the options.
	paused := ok(t, cs, "ask_human", map[string]any{"project_path": e.project, "question": "Refactor?", "default": "pause", "timeout_seconds": 60,
		"options": []map[string]any{{"id": "a", "label": "A", "action": "modify"}}, "wait_seconds": 1})
	if cp, err := e.svc.GetCheckpoint(admin, paused["id"].(string)); err != nil || cp.HITL.Timeout == nil || cp.HITL.Timeout.DefaultAction != belay.ActionPause {
		t.Errorf("ask with default pause: %+v, %v", cp, err)
	}
}

// TestHTTPNeedsATokenAndActsAsItsUser: /mcp on the API server, behind its
// bearer tokens; each request acts as its token's user.
func TestHTTPNeedsATokenAndActsAsItsUser(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.svc.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	for _, u := range []string{"alice", "bob"} {
		tk, err := e.svc.CreateToken(admin, belay.CreateTokenInput{User: u})
		if err != nil {
			t.Fatal(err)
		}
		tokens[u] = tk.Secret
	}
	api := httpapi.New(httpapi.Options{Service: e.svc, Authenticate: e.svc.Authenticate})
	api.Handle("/mcp", mcpserver.HTTPHandler(mcpserver.New(mcpserver.Options{Service: e.svc})))
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)

	resp, err := http.Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", resp.StatusCode)
	}
	as := func(user string) *mcp.ClientSession {
		hc := &http.Client{Transport: bearer{tokens[user]}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: user}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: hc}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	alice, bob := as("alice"), as("bob")
	// alice is no admin and the server has no workspace roots: her snapshot
	// is refused, which shows the call ran as alice, not as the server.
	_, be := call(t, alice, "checkpoint_save", map[string]any{"summary": "s", "project_path": e.project})
	if be == nil || be.Code != belay.CodeUnauthorized {
		t.Fatalf("alice's save outside the workspace roots: %+v", be)
	}
	cp, err := e.svc.CreateCheckpoint(belay.WithActor(ctx, belay.Actor{UserID: "alice"}), belay.CreateCheckpointInput{ProjectPath: e.project, Summary: "alice's"})
	if err != nil {
		t.Fatal(err)
	}
	if got := ok(t, alice, "checkpoint_get", map[string]any{"id": cp.ID}); got["id"] != cp.ID {
		t.Errorf("alice reads her own: %v", got)
	}
	if _, be := call(t, bob, "checkpoint_get", map[string]any{"id": cp.ID}); be == nil || be.Code != belay.CodeNotFound {
		t.Errorf("bob reads alice's checkpoint: %+v", be)
	}
	if list := ok(t, bob, "checkpoint_list", nil); list["total"] != float64(0) {
		t.Errorf("bob's list counts alice's: %v", list)
	}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func TestSearchFindsByWordsWithFilters(t *testing.T) {
	e := newEnv(t)
	cs := e.stdio(t)
	auth := ok(t, cs, "checkpoint_save", map[string]any{"summary": "JWT authentication middleware", "project_path": e.project,
		"description": "tokens checked on every request", "tags": []string{"auth", "backend"}})
	ok(t, cs, "checkpoint_save", map[string]any{"summary": "landing page colours", "project_path": e.project, "tags": []string{"ui"}})
	ok(t, cs, "checkpoint_save", map[string]any{"summary": "authentication docs", "project_path": e.project, "tags": []string{"docs"}})

	res := ok(t, cs, "checkpoint_search", map[string]any{"query": "authentication middleware", "top_k": 2})
	results := res["results"].([]any)
	if res["top_k"] != float64(2) || res["query"] != "authentication middleware" || len(results) != 2 {
		t.Fatalf("search = %v", res)
	}
	first := results[0].(map[string]any)
	if first["checkpoint"].(map[string]any)["id"] != auth["id"] {
		t.Errorf("best result = %v, want the middleware checkpoint", first)
	}
	prev := 2.0
	for _, r := range results {
		score := r.(map[string]any)["score"].(float64)
		if score > prev || score < 0 {
			t.Errorf("scores not descending in [0,1]: %v", results)
		}
		prev = score
	}
	tagged := ok(t, cs, "checkpoint_search", map[string]any{"query": "authentication", "tags": []string{"auth", "backend"}})
	if rs := tagged["results"].([]any); len(rs) != 1 || rs[0].(map[string]any)["checkpoint"].(map[string]any)["id"] != auth["id"] {
		t.Errorf("tags filter (AND) = %v", tagged)
	}
	none := ok(t, cs, "checkpoint_search", map[string]any{"query": "kubernetes", "project_path": "/elsewhere"})
	if rs, isList := none["results"].([]any); !isList || len(rs) != 0 {
		t.Errorf("no match must be an empty list: %v", none)
	}
}

func TestListSortsByUpdate(t *testing.T) {
	e := newEnv(t)
	cs := e.stdio(t)
	asked, err := e.svc.CreateCheckpoint(admin, belay.CreateCheckpointInput{ProjectPath: e.project, Summary: "deploy?",
		HITL: &belay.HITLInput{Required: true, Title: "Deploy?", Options: []belay.HITLOption{{ID: "yes", Label: "Yes", Action: belay.ActionApprove}}}})
	if err != nil {
		t.Fatal(err)
	}
	later := ok(t, cs, "checkpoint_save", map[string]any{"summary": "later work", "project_path": e.project})
	time.Sleep(2 * time.Millisecond)
	if _, err := e.svc.Decide(admin, belay.DecideInput{CheckpointID: asked.ID, Action: belay.ActionApprove, SelectedOption: "yes"}); err != nil {
		t.Fatal(err)
	}
	first := func(sort string) any {
		l := ok(t, cs, "checkpoint_list", map[string]any{"sort_by": sort, "project_path": e.project})
		return l["checkpoints"].([]any)[0].(map[string]any)["id"]
	}
	if got := first("created_at"); got != later["id"] {
		t.Errorf("newest created = %v, want %v", got, later["id"])
	}
	if got := first("updated_at"); got != asked.ID {
		t.Errorf("newest updated = %v, want the question decided last (%v)", got, asked.ID)
	}
}

// TestRelativeProjectPathIsRefused: every tool taking project_path refuses
// a relative one (".", as an agent in its project might pass) with a
// VALIDATION_ERROR naming the argument and saying an absolute path is
// needed, before anything else is looked up or written.
func TestRelativeProjectPathIsRefused(t *testing.T) {
	e := newEnv(t)
	cs := e.stdio(t)
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"checkpoint_save", map[string]any{"summary": "s", "project_path": "."}},
		{"checkpoint_search", map[string]any{"query": "q", "project_path": "."}},
		{"checkpoint_list", map[string]any{"project_path": "."}},
		{"session_resume", map[string]any{"project_path": "."}},
		{"ask_human", map[string]any{"project_path": "..", "question": "q"}},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			_, be := call(t, cs, tc.tool, tc.args)
			if be == nil || be.Code != belay.CodeValidation || be.Details["field"] != "project_path" ||
				!strings.HasPrefix(be.Message, "project_path must be an absolute path") {
				t.Errorf("got %+v, want VALIDATION_ERROR on project_path saying it must be absolute", be)
			}
		})
	}
}
