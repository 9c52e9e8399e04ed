package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/internal/testtree"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/sqlite"
	"github.com/belayhq/belay/workspace"
)

// TestHandlerTimeout: a request that outlives the handler deadline answers
// 504 TIMEOUT_ERROR with the deadline in the details, for reads and writes.
func TestHandlerTimeout(t *testing.T) {
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	api := httpapi.New(httpapi.Options{Service: core.New(core.Options{Store: db}), Timeout: time.Nanosecond, Authenticate: anyToken})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/checkpoints", ""},
		{"GET", "/v1/sessions", ""},
		{"POST", "/v1/sessions", `{"title":"late"}`},
	} {
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Error belay.Error }
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusGatewayTimeout || body.Error.Code != belay.CodeTimeout || body.Error.Details["timeout"] != "1ns" {
			t.Errorf("%s %s: status %d, body %+v, decode error %v; want 504 TIMEOUT_ERROR with timeout 1ns", tc.method, tc.path, resp.StatusCode, body.Error, err)
		}
	}
	list, _, _, err := db.ListSessions(context.Background(), store.SessionQuery{Scope: store.Everything, Limit: 10})
	if err != nil || len(list) != 0 {
		t.Errorf("sessions after timed-out requests: %d, %v; want none written", len(list), err)
	}
}

// slowServer serves a fresh service on loopback. Only the token "good" is
// let in; a request body must average rate bytes a second after grace.
func slowServer(t *testing.T, grace time.Duration, rate int) string {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	auth := func(ctx context.Context, token string) (belay.Actor, error) {
		if token != "good" {
			return belay.Actor{}, belay.Errorf(belay.CodeUnauthenticated, "a valid API token is required")
		}
		return anyToken(ctx, token)
	}
	api := httpapi.New(httpapi.Options{Service: core.New(core.Options{Store: db}), Authenticate: auth, BodyGrace: grace, MinBodyRate: rate})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// TestUnauthenticatedBodyIsNotWaitedFor: a request without a valid token
// is answered 401 (one for no route 404) once the body it declared stops
// keeping the pace, not when its client likes, and its connection closed.
func TestUnauthenticatedBodyIsNotWaitedFor(t *testing.T) {
	addr := slowServer(t, 300*time.Millisecond, 50)
	for _, path := range []string{"/v1/checkpoints", "/v1/nowhere"} {
		start := time.Now()
		head := "POST " + path + " HTTP/1.1\r\nHost: belay\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
		status, body, closed := testutil.RawRequest(t, addr, head, "{", "", 0)
		want := http.StatusUnauthorized
		if path == "/v1/nowhere" {
			want = http.StatusNotFound
		}
		if status != want || !closed || time.Since(start) > 5*time.Second {
			t.Errorf("%s: %d %q after %s, closed %v; want %d within the pace and the connection closed", path, status, body, time.Since(start), closed, want)
		}
	}
}

// TestEarlyRefusalsReachTheClient: a request refused before its body is
// read (no valid token) gets its coded answer, not a connection reset, at
// any body size: the server reads or lingers over what it did not read, as
// net/http does, rather than closing under the client's writes.
func TestEarlyRefusalsReachTheClient(t *testing.T) {
	addr := slowServer(t, httpapi.DefaultBodyGrace, 16<<10)
	for _, size := range []int{100 << 10, 1 << 20, 7 << 20} {
		body := `{"projectPath":"/p","summary":"s","agentState":{"pad":"` + strings.Repeat("x", size) + `"}}`
		for i := range 20 {
			req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/checkpoints", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer wrong")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("a %d-byte body, try %d: %v; want 401", size, i, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("a %d-byte body, try %d: %s; want 401", size, i, resp.Status)
			}
		}
	}
}

// TestSlowBodyIsRefused: a body arriving slower than the minimum rate once
// the grace is over is answered 408 REQUEST_TIMEOUT, nothing saved, the
// connection closed; one arriving faster is read whole, however long it
// takes.
func TestSlowBodyIsRefused(t *testing.T) {
	addr := slowServer(t, 300*time.Millisecond, 50)
	doc := `{"summary":"slow","projectPath":"/p","metadata":{"pad":"` + strings.Repeat("x", 80) + `"}}`
	head := "POST /v1/checkpoints HTTP/1.1\r\nHost: belay\r\nAuthorization: Bearer good\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(doc)) + "\r\n"

	start := time.Now()
	status, body, closed := testutil.RawRequest(t, addr, head, doc[:1], doc[1:], 100*time.Millisecond) // 10 bytes a second
	if status != http.StatusRequestTimeout || !strings.Contains(body, `"REQUEST_TIMEOUT"`) || !closed || time.Since(start) > 5*time.Second {
		t.Errorf("a trickled body: %d %q after %s, closed %v; want 408 REQUEST_TIMEOUT soon and the connection closed", status, body, time.Since(start), closed)
	}

	// 10 bytes every 100 ms is 100 a second: it takes longer than the grace.
	var chunks []string
	for i := 0; i < len(doc); i += 10 {
		chunks = append(chunks, doc[i:min(i+10, len(doc))])
	}
	start = time.Now()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, head+"\r\n")
	for _, c := range chunks {
		time.Sleep(100 * time.Millisecond)
		io.WriteString(conn, c)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || time.Since(start) < 300*time.Millisecond {
		t.Errorf("a body at twice the rate: %s after %s; want 201", resp.Status, time.Since(start))
	}
}

// TestImportTakesItsTime: an import's archive may be slow to start (piped
// from an export that is still gathering it); its body keeps no pace.
func TestImportTakesItsTime(t *testing.T) {
	data := t.TempDir()
	db, err := sqlite.Open(context.Background(), filepath.Join(data, "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ws, err := workspace.New(workspace.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	svc := core.New(core.Options{Store: db, Workspaces: ws})
	admin := belay.WithActor(context.Background(), belay.Actor{UserID: "root", Admin: true})
	project := t.TempDir()
	testtree.Write(t, project, map[string]string{"a.txt": "a\n"})
	cp, err := svc.CreateCheckpoint(admin, belay.CreateCheckpointInput{ProjectPath: project, Summary: "s", Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if err := svc.ExportSession(admin, cp.SessionID, &archive); err != nil {
		t.Fatal(err)
	}
	// Imported into another database, as from another machine.
	other, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	otherWS, err := workspace.New(workspace.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(httpapi.Options{Service: core.New(core.Options{Store: other, Workspaces: otherWS}), BodyGrace: 300 * time.Millisecond, MinBodyRate: 50,
		Authenticate: func(context.Context, string) (belay.Actor, error) {
			return belay.Actor{UserID: "root", Admin: true}, nil
		}})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	pr, pw := io.Pipe()
	go func() {
		time.Sleep(time.Second) // past the grace, nothing sent yet
		pw.Write(archive.Bytes())
		pw.Close()
	}()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/sessions/import?projectPath="+url.QueryEscape(t.TempDir()), pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer root")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("an import slow to start: %s %s; want 201", resp.Status, body)
	}
}
