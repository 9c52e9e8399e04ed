package trpc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store/sqlite"
	"github.com/belayhq/belay/trpc"
)

// admin is who every request of these tests is: they are about tRPC's
// wire, not about who may call what.
var admin = belay.Actor{UserID: "local", Admin: true}

func anyToken(context.Context, string) (belay.Actor, error) { return admin, nil }

// env is /trpc and /trpc-superjson over a fresh SQLite file, with one
// session (sid) to make checkpoints in.
type env struct {
	svc *core.Service
	srv *httptest.Server
	sid string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := belay.WithActor(context.Background(), admin)
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := core.New(core.Options{Store: db, Logger: log})
	t.Cleanup(func() {
		svc.Close()
		db.Close()
	})
	mux := http.NewServeMux()
	for root, sj := range map[string]bool{"/trpc": false, "/trpc-superjson": true} {
		h := trpc.New(root+"/", trpc.Options{Service: svc, Authenticate: anyToken, SuperJSON: sj, Logger: log})
		mux.Handle(root, h)
		mux.Handle(root+"/", h)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	sess, err := svc.CreateSession(ctx, belay.CreateSessionInput{Title: "trpc"})
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	return &env{svc: svc, srv: srv, sid: sess.ID}
}

// do sends a tRPC request: a GET when body is "", else a POST of body.
func (e *env) do(t *testing.T, path, body string) (int, []byte) {
	t.Helper()
	method, r := http.MethodGet, io.Reader(nil)
	if body != "" {
		method, r = http.MethodPost, strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer any")
	resp, err := e.srv.Client().Do(req)
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

// create makes a checkpoint of type typ through POST
// /trpc/checkpoints.create, with fields (JSON object members) beside the
// required ones.
func (e *env) create(t *testing.T, typ, fields string) string {
	t.Helper()
	in := fmt.Sprintf(`{"taskId":%q,"type":%q,"trigger":"user_request","description":"d","workspaceRef":""%s}`, e.sid, typ, fields)
	status, body := e.do(t, "/trpc/checkpoints.create", in)
	var out struct {
		Result struct {
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		} `json:"result"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &out) != nil {
		t.Fatalf("checkpoints.create: %d %s", status, clip(body))
	}
	return out.Result.Data.ID
}

func clip(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "…"
	}
	return string(b)
}

// batchURL is a GET of path n times in one batch, each with input (none
// when nil).
func batchURL(root, path string, n int, input any) string {
	u := root + "/" + strings.Repeat(path+",", n-1) + path + "?batch=1"
	if input == nil {
		return u
	}
	inputs := map[string]any{}
	for i := range n {
		inputs[fmt.Sprint(i)] = input
	}
	b, _ := json.Marshal(inputs)
	return u + "&input=" + url.QueryEscape(string(b))
}

// tRPCError is an error envelope's error, plain JSON.
type tRPCError struct {
	Message string `json:"message"`
	Code    int    `json:"code"`
	Data    struct {
		Code       string         `json:"code"`
		HTTPStatus int            `json:"httpStatus"`
		Path       string         `json:"path"`
		AppCode    string         `json:"appCode"`
		Details    map[string]any `json:"details"`
	} `json:"data"`
}

// TestBatchOverMaxBatchCallsIsRefusedWhole: a batch of more calls than
// tRPC's maxBatchSize is answered as tRPC answers it — one 400 envelope,
// "Batch call exceeds maximum size" — over HTTP (queries and mutations) and
// WebSocket, and none of its calls runs; a batch of MaxBatchCalls runs.
func TestBatchOverMaxBatchCallsIsRefusedWhole(t *testing.T) {
	e := newEnv(t)
	ctx := belay.WithActor(context.Background(), admin)
	create := fmt.Sprintf(`{"taskId":%q,"type":"manual","trigger":"user_request","description":"batched","workspaceRef":""}`, e.sid)
	refused := func(t *testing.T, status int, body []byte) {
		t.Helper()
		var out struct {
			Error tRPCError `json:"error"`
		}
		if err := json.Unmarshal(body, &out); status != http.StatusBadRequest || err != nil {
			t.Fatalf("got %d %s, want 400 and one error envelope (%v)", status, clip(body), err)
		}
		if out.Error.Message != "Batch call exceeds maximum size" || out.Error.Data.Code != "BAD_REQUEST" ||
			out.Error.Data.Details["max"] != float64(trpc.MaxBatchCalls) {
			t.Fatalf("error = %+v", out.Error)
		}
	}
	checkpoints := func(t *testing.T) int64 {
		t.Helper()
		list, err := e.svc.ListCheckpoints(ctx, belay.ListCheckpointsInput{SessionID: e.sid, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		return list.TotalCount
	}
	t.Run("queries", func(t *testing.T) {
		for _, n := range []int{trpc.MaxBatchCalls + 1, 30000} {
			status, body := e.do(t, batchURL("/trpc", "checkpoints.list", n, nil), "")
			refused(t, status, body)
		}
		status, body := e.do(t, batchURL("/trpc", "checkpoints.list", trpc.MaxBatchCalls, map[string]any{}), "")
		var out []json.RawMessage
		if err := json.Unmarshal(body, &out); status != http.StatusOK || err != nil || len(out) != trpc.MaxBatchCalls {
			t.Fatalf("a batch of %d: %d, %d answers (%v)", trpc.MaxBatchCalls, status, len(out), err)
		}
	})
	t.Run("mutations", func(t *testing.T) {
		n := trpc.MaxBatchCalls + 1
		inputs := map[string]json.RawMessage{}
		for i := range n {
			inputs[fmt.Sprint(i)] = json.RawMessage(create)
		}
		b, _ := json.Marshal(inputs)
		status, body := e.do(t, "/trpc/"+strings.Repeat("checkpoints.create,", n-1)+"checkpoints.create?batch=1", string(b))
		refused(t, status, body)
		if got := checkpoints(t); got != 0 {
			t.Fatalf("the refused batch made %d checkpoints", got)
		}
	})
	t.Run("WebSocket", func(t *testing.T) {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		conn, _, err := websocket.Dial(dctx, "ws"+strings.TrimPrefix(e.srv.URL, "http")+"/trpc",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer any"}}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseNow()
		conn.SetReadLimit(-1)
		n := trpc.MaxBatchCalls + 1
		var msgs []string
		for i := range n {
			msgs = append(msgs, fmt.Sprintf(`{"id":%d,"method":"mutation","params":{"path":"checkpoints.create","input":%s}}`, i, create))
		}
		if err := conn.Write(dctx, websocket.MessageText, []byte("["+strings.Join(msgs, ",")+"]")); err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for range n {
			_, data, err := conn.Read(dctx)
			if err != nil {
				t.Fatalf("after %d answers: %v", len(seen), err)
			}
			var m struct {
				ID    int       `json:"id"`
				Error tRPCError `json:"error"`
			}
			if err := json.Unmarshal(data, &m); err != nil || m.Error.Message != "Batch call exceeds maximum size" {
				t.Fatalf("answer %s (%v)", data, err)
			}
			seen[m.ID] = true
		}
		if len(seen) != n {
			t.Fatalf("answered %d ids of %d", len(seen), n)
		}
		if got := checkpoints(t); got != 0 {
			t.Fatalf("the refused batch made %d checkpoints", got)
		}
	})
}

// gatedService answers GetCheckpoint once the gate opens, counting the
// calls under way; nothing else of it is called.
type gatedService struct {
	belay.Service
	gate    chan struct{}
	mu      sync.Mutex
	running int
}

func (s *gatedService) GetCheckpoint(ctx context.Context, id string) (*belay.Checkpoint, error) {
	s.mu.Lock()
	s.running++
	s.mu.Unlock()
	<-s.gate
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
	return &belay.Checkpoint{ID: id}, nil
}

// TestBatchRunsAFewCallsAtOnce: a batch's calls run BatchConcurrency at a
// time, not one goroutine each.
func TestBatchRunsAFewCallsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := &gatedService{gate: make(chan struct{})}
		h := trpc.New("/trpc/", trpc.Options{Service: svc, Authenticate: anyToken,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		id := "01890000-0000-7000-8000-000000000000"
		req := httptest.NewRequest(http.MethodGet, batchURL("/trpc", "checkpoints.get", trpc.MaxBatchCalls, id), nil)
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			h.ServeHTTP(rec, req)
			close(done)
		}()
		synctest.Wait()
		svc.mu.Lock()
		running := svc.running
		svc.mu.Unlock()
		close(svc.gate)
		<-done
		if running != trpc.BatchConcurrency {
			t.Fatalf("%d calls of a batch of %d ran at once, want %d", running, trpc.MaxBatchCalls, trpc.BatchConcurrency)
		}
		var out []json.RawMessage
		if err := json.Unmarshal(rec.Body.Bytes(), &out); rec.Code != http.StatusOK || err != nil || len(out) != trpc.MaxBatchCalls {
			t.Fatalf("got %d, %d answers (%v)", rec.Code, len(out), err)
		}
	})
}

// TestBatchResultsStopAtBatchBytes: once a batch's results pass
// BatchBytes, its remaining calls are answered PAYLOAD_TOO_LARGE (413 in
// their slots of a 207) instead of running, so a batch of reads of a large
// checkpoint cannot grow its answer without bound.
func TestBatchResultsStopAtBatchBytes(t *testing.T) {
	e := newEnv(t)
	const stateBytes = 3 << 20
	id := e.create(t, "manual", fmt.Sprintf(`,"agentState":{"blob":%q}`, strings.Repeat("x", stateBytes)))
	const n = 12
	for _, root := range []string{"/trpc", "/trpc-superjson"} {
		t.Run(root, func(t *testing.T) {
			var input any = id
			if root == "/trpc-superjson" {
				input = map[string]any{"json": id}
			}
			status, body := e.do(t, batchURL(root, "checkpoints.get", n, input), "")
			var out []struct {
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(body, &out); status != http.StatusMultiStatus || err != nil || len(out) != n {
				t.Fatalf("got %d, %d answers (%v): %s", status, len(out), err, clip(body))
			}
			ok := 0
			for ok < n && out[ok].Result != nil {
				ok++
			}
			// Calls start in order, BatchConcurrency at a time: each that
			// started before the results reached BatchBytes ran.
			least := (trpc.BatchBytes + stateBytes - 1) / stateBytes
			if ok < least || ok > least+trpc.BatchConcurrency-1 {
				t.Fatalf("%d calls ran, want %d to %d", ok, least, least+trpc.BatchConcurrency-1)
			}
			if len(body) > trpc.BatchBytes+trpc.BatchConcurrency*(stateBytes+4096) {
				t.Fatalf("the answer is %d bytes", len(body))
			}
			for i, o := range out[ok:] {
				var shape tRPCError
				raw := o.Error
				if root == "/trpc-superjson" {
					var sj struct {
						JSON json.RawMessage `json:"json"`
					}
					if err := json.Unmarshal(raw, &sj); err != nil {
						t.Fatal(err)
					}
					raw = sj.JSON
				}
				if err := json.Unmarshal(raw, &shape); err != nil || shape.Data.Code != "PAYLOAD_TOO_LARGE" || shape.Data.HTTPStatus != 413 ||
					shape.Data.AppCode != string(belay.CodeTooLarge) || shape.Data.Path != "checkpoints.get" || !strings.Contains(shape.Message, "smaller batch") {
					t.Fatalf("answer %d: %s (%v)", ok+i, o.Error, err)
				}
			}
		})
	}
}

// TestBodiesAsLargeAsEverywhere: a body may be as large as on /v1 (an agent
// state of belay.MaxStateBytes and the rest); one larger is
// PAYLOAD_TOO_LARGE.
func TestBodiesAsLargeAsEverywhere(t *testing.T) {
	e := newEnv(t)
	state := `"` + strings.Repeat("s", belay.MaxStateBytes-100) + `"`
	id := e.create(t, "manual", `,"agentState":`+state)
	cp, err := e.svc.GetCheckpoint(belay.WithActor(context.Background(), admin), id)
	if err != nil || len(cp.AgentState) != len(state) {
		t.Fatalf("the saved state: %v", err)
	}
	status, body := e.do(t, "/trpc/checkpoints.create", `{"taskId":"`+e.sid+`","description":"`+strings.Repeat("d", belay.MaxBodyBytes)+`"}`)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "PAYLOAD_TOO_LARGE") {
		t.Errorf("a body over belay.MaxBodyBytes: %d %s", status, clip(body))
	}
}

// wsConn is a raw tRPC WebSocket connection to srv's /trpc.
type wsConn struct {
	t    *testing.T
	ctx  context.Context
	conn *websocket.Conn
}

func dialWS(t *testing.T, srv *httptest.Server) *wsConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/trpc/",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer any"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.CloseNow() })
	return &wsConn{t: t, ctx: ctx, conn: conn}
}

func (w *wsConn) write(msg string) {
	w.t.Helper()
	if err := w.conn.Write(w.ctx, websocket.MessageText, []byte(msg)); err != nil {
		w.t.Fatal(err)
	}
}

// answer reads the next answer: its id and its error's code, else its
// result's type.
func (w *wsConn) answer() (int, string) {
	w.t.Helper()
	_, data, err := w.conn.Read(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	var m struct {
		ID     int `json:"id"`
		Result struct {
			Type string `json:"type"`
		} `json:"result"`
		Error *struct {
			Data struct {
				Code string `json:"code"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		w.t.Fatalf("answer %s: %v", data, err)
	}
	if m.Error != nil {
		return m.ID, m.Error.Data.Code
	}
	return m.ID, m.Result.Type
}

// TestWebSocketBoundsItsCalls: a WebSocket client that sends calls faster
// than they are answered gets TOO_MANY_REQUESTS past WSCallsInFlight, and
// the calls under way are still answered.
func TestWebSocketBoundsItsCalls(t *testing.T) {
	svc := &gatedService{gate: make(chan struct{})}
	srv := httptest.NewServer(trpc.New("/trpc/", trpc.Options{Service: svc, Authenticate: anyToken, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	w := dialWS(t, srv)
	n := trpc.WSCallsInFlight + 4
	for i := range n {
		w.write(fmt.Sprintf(`{"id":%d,"method":"query","params":{"path":"checkpoints.get","input":"01890000-0000-7000-8000-000000000000"}}`, i))
	}
	for range n - trpc.WSCallsInFlight {
		if id, code := w.answer(); code != "TOO_MANY_REQUESTS" || id < trpc.WSCallsInFlight {
			t.Fatalf("call %d answered %s while %d ran, want TOO_MANY_REQUESTS for the calls past them", id, code, trpc.WSCallsInFlight)
		}
	}
	close(svc.gate)
	for range trpc.WSCallsInFlight {
		if id, got := w.answer(); got != "data" {
			t.Fatalf("call %d answered %s, want its data", id, got)
		}
	}
}

// TestWebSocketBoundsItsSubscriptions: one connection holds at most
// WSSubscriptions subscriptions; one more is TOO_MANY_REQUESTS until one
// stops.
func TestWebSocketBoundsItsSubscriptions(t *testing.T) {
	w := dialWS(t, newEnv(t).srv)
	subscribe := func(id int) {
		w.write(fmt.Sprintf(`{"id":%d,"method":"subscription","params":{"path":"stream.events","input":{}}}`, id))
	}
	for i := range trpc.WSSubscriptions {
		subscribe(i)
	}
	for range trpc.WSSubscriptions {
		if id, got := w.answer(); got != "started" {
			t.Fatalf("subscription %d: %s, want started", id, got)
		}
	}
	subscribe(trpc.WSSubscriptions)
	if id, got := w.answer(); id != trpc.WSSubscriptions || got != "TOO_MANY_REQUESTS" {
		t.Fatalf("subscription %d: %s, want TOO_MANY_REQUESTS", id, got)
	}
	w.write(`{"id":0,"method":"subscription.stop"}`)
	if id, got := w.answer(); id != 0 || got != "stopped" {
		t.Fatalf("stopping subscription 0: %d %s", id, got)
	}
	subscribe(trpc.WSSubscriptions + 1)
	if id, got := w.answer(); id != trpc.WSSubscriptions+1 || got != "started" {
		t.Fatalf("a subscription after one stopped: %d %s, want started", id, got)
	}
}

// TestWebSocketStopsBeforeAnIDIsReused: a subscription that reuses a
// stopped one's id right away is never started before the old one's
// stopped is sent (the client would take the live one for ended); until
// then the id is a duplicate (BAD_REQUEST).
func TestWebSocketStopsBeforeAnIDIsReused(t *testing.T) {
	w := dialWS(t, newEnv(t).srv)
	const sub = `{"id":0,"method":"subscription","params":{"path":"stream.events","input":{}}}`
	w.write(sub)
	if _, got := w.answer(); got != "started" {
		t.Fatalf("the first subscription: %s", got)
	}
	for i := range 200 {
		w.write(`{"id":0,"method":"subscription.stop"}`)
		time.Sleep(time.Duration(i%40) * 5 * time.Microsecond)
		w.write(sub)
		_, a := w.answer()
		_, b := w.answer()
		switch {
		case a == "started" && b == "stopped":
			t.Fatalf("iteration %d: the new subscription started before the old one stopped", i)
		case a == "stopped" && b == "BAD_REQUEST", a == "BAD_REQUEST" && b == "stopped":
			w.write(sub) // the id was still held: subscribe again
			if _, got := w.answer(); got != "started" {
				t.Fatalf("iteration %d: subscribing again: %s", i, got)
			}
		case a != "stopped" || b != "started":
			t.Fatalf("iteration %d: %s then %s", i, a, b)
		}
	}
}

// TestWebSocketChecksTheTokenForEveryCall: a token revoked while its
// connection is open can make no more calls on it.
func TestWebSocketChecksTheTokenForEveryCall(t *testing.T) {
	e := newEnv(t)
	var revoked atomic.Bool
	auth := func(ctx context.Context, token string) (belay.Actor, error) {
		if revoked.Load() {
			return belay.Actor{}, belay.Errorf(belay.CodeUnauthenticated, "the token was revoked")
		}
		return anyToken(ctx, token)
	}
	srv := httptest.NewServer(trpc.New("/trpc/", trpc.Options{Service: e.svc, Authenticate: auth}))
	t.Cleanup(srv.Close)
	ws := dialWS(t, srv)
	get := fmt.Sprintf(`{"id":%%d,"method":"query","params":{"path":"sessions.get","input":%q}}`, e.sid)
	ws.write(fmt.Sprintf(get, 1))
	if id, typ := ws.answer(); id != 1 || typ != "data" {
		t.Fatalf("before the revocation: %d %s", id, typ)
	}
	revoked.Store(true)
	ws.write(fmt.Sprintf(get, 2))
	if id, code := ws.answer(); id != 2 || code != "UNAUTHORIZED" {
		t.Errorf("after the revocation: %d %s, want UNAUTHORIZED", id, code)
	}
	ws.write(`{"id":3,"method":"subscription","params":{"path":"stream.events","input":{}}}`)
	if id, code := ws.answer(); id != 3 || code != "UNAUTHORIZED" {
		t.Errorf("a subscription after the revocation: %d %s, want UNAUTHORIZED", id, code)
	}
}

// TestRelativeProjectPathIsRefused: the procedures taking a projectPath
// refuse a relative one as every transport does: VALIDATION_ERROR naming
// projectPath and saying an absolute path is needed.
func TestRelativeProjectPathIsRefused(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ path, body string }{
		{"/trpc/sessions.create", `{"projectPath":"."}`},
		{"/trpc/sessions.list?input=" + url.QueryEscape(`{"projectPath":"."}`), ""},
	} {
		path := c.path
		status, b := e.do(t, path, c.body)
		var out struct {
			Error tRPCError `json:"error"`
		}
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s: %v in %s", path, err, b)
		}
		d := out.Error.Data
		if status != http.StatusBadRequest || d.AppCode != string(belay.CodeValidation) || d.Details["field"] != "projectPath" ||
			!strings.HasPrefix(out.Error.Message, "projectPath must be an absolute path") {
			t.Errorf("%s: %d %s, want VALIDATION_ERROR on projectPath saying it must be absolute", path, status, b)
		}
	}
}

// TestInvalidUTF8IsRefused: text that is not UTF-8 is refused, naming its
// field, not read as U+FFFD and stored, in plain JSON and in superjson.
func TestInvalidUTF8IsRefused(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ path, body, prefix, suffix string }{
		{"/trpc/sessions.create", `{"title":"bad ` + "\xff" + ` utf"}`, `{"error":`, `}`},
		{"/trpc-superjson/sessions.create", `{"json":{"title":"bad ` + "\xff" + ` utf"}}`, `{"error":{"json":`, `}}`},
	} {
		status, b := e.do(t, c.path, c.body)
		var out tRPCError
		inner := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(string(b)), c.prefix), c.suffix)
		if err := json.Unmarshal([]byte(inner), &out); err != nil {
			t.Fatalf("%s: %v in %s", c.path, err, b)
		}
		if d := out.Data; status != http.StatusBadRequest || d.AppCode != string(belay.CodeValidation) || d.Details["field"] != "title" {
			t.Errorf("%s: %d %s, want VALIDATION_ERROR on title", c.path, status, b)
		}
	}
}

// TestSlowBodyIsRequestTimeout: mounted on belay's server, a call whose body
// arrives slower than the server's minimum rate is answered 408 with
// REQUEST_TIMEOUT, not taken for a body too large.
func TestSlowBodyIsRequestTimeout(t *testing.T) {
	e := newEnv(t)
	api := httpapi.New(httpapi.Options{Service: e.svc, Authenticate: anyToken, BodyGrace: 300 * time.Millisecond, MinBodyRate: 50})
	api.HandlePublic("/trpc/", trpc.New("/trpc/", trpc.Options{Service: e.svc, Authenticate: anyToken}))
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	body := `{"title":"` + strings.Repeat("t", 100) + `"}`
	head := fmt.Sprintf("POST /trpc/sessions.create HTTP/1.1\r\nHost: belay\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	status, b, _ := testutil.RawRequest(t, srv.Listener.Addr().String(), head, "", body, 100*time.Millisecond) // 10 bytes a second
	if status != http.StatusRequestTimeout || !strings.Contains(b, `"appCode":"REQUEST_TIMEOUT"`) {
		t.Errorf("a trickled body: %d %s; want 408 with REQUEST_TIMEOUT", status, b)
	}
}

// TestSessionsListOwn: sessions.list takes own, as GET /v1/sessions does:
// only the sessions a save naming only its project may continue, never a
// session of another user who is no admin, though the caller may read it.
func TestSessionsListOwn(t *testing.T) {
	e := newEnv(t)
	project := t.TempDir()
	alice := belay.WithActor(context.Background(), belay.Actor{UserID: "alice"})
	bob := belay.Actor{UserID: "bob"}
	for _, user := range []string{"alice", "bob"} {
		if _, err := e.svc.CreateToken(belay.WithActor(context.Background(), admin), belay.CreateTokenInput{User: user}); err != nil {
			t.Fatal(err)
		}
	}
	theirs, err := e.svc.CreateSession(alice, belay.CreateSessionInput{ProjectPath: project, Title: "alice's"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.GrantSession(alice, belay.GrantInput{SessionID: theirs.ID, User: "bob", Role: belay.RoleRead}); err != nil {
		t.Fatal(err)
	}
	ours, err := e.svc.CreateSession(belay.WithActor(context.Background(), bob), belay.CreateSessionInput{ProjectPath: project, Title: "bob's"})
	if err != nil {
		t.Fatal(err)
	}
	asBob := func(context.Context, string) (belay.Actor, error) { return bob, nil }
	srv := httptest.NewServer(trpc.New("/trpc/", trpc.Options{Service: e.svc, Authenticate: asBob, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	bobs := &env{svc: e.svc, srv: srv}
	for _, c := range []struct {
		input string
		want  []string
	}{
		{`{"projectPath":` + strconv.Quote(project) + `}`, []string{ours.ID, theirs.ID}},
		{`{"projectPath":` + strconv.Quote(project) + `,"own":true}`, []string{ours.ID}},
	} {
		status, b := bobs.do(t, "/trpc/sessions.list?input="+url.QueryEscape(c.input), "")
		var out struct {
			Result struct {
				Data struct {
					Items []belay.Session `json:"items"`
				} `json:"data"`
			} `json:"result"`
		}
		if err := json.Unmarshal(b, &out); status != http.StatusOK || err != nil {
			t.Fatalf("%s: %d %s", c.input, status, b)
		}
		var got []string
		for _, s := range out.Result.Data.Items {
			got = append(got, s.ID)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("sessions.list %s = %v; want %v", c.input, got, c.want)
		}
	}
}
