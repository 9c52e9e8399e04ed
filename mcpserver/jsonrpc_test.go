package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/mcpserver"
)

// POST /mcp with a body that is not a JSON-RPC message answers a JSON-RPC
// error, as a client's JSON-RPC library expects, not a line of plain text.
func TestHTTPAnswersMalformedBodiesWithJSONRPCErrors(t *testing.T) {
	e := newEnv(t)
	token, err := e.svc.Bootstrap(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(httpapi.Options{Service: e.svc, Authenticate: e.svc.Authenticate})
	api.Handle("/mcp", mcpserver.HTTPHandler(mcpserver.New(mcpserver.Options{Service: e.svc})))
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)

	post := func(contentType, body string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, b
	}
	for _, tc := range []struct {
		body string
		code int
		id   string
	}{
		{`{bad json`, -32700, "null"},
		{``, -32700, "null"},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"} trailing`, -32700, "null"},
		{`"a string"`, -32600, "null"},
		{`[]`, -32600, "null"},
		{`{}`, -32600, "null"},
		{`{"jsonrpc":"1.0","id":3,"method":"ping"}`, -32600, "3"},
		{`{"jsonrpc":"2.0","id":"x","method":5}`, -32600, `"x"`},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600, "null"},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, -32600, "null"},
	} {
		res, b := post("application/json", tc.body)
		var r testutil.RPCReply
		if res.StatusCode != http.StatusBadRequest || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") ||
			json.Unmarshal(b, &r) != nil || r.JSONRPC != "2.0" || r.Error == nil || r.Error.Code != tc.code || string(r.ID) != tc.id || r.Error.Message == "" {
			t.Errorf("body %q: %s %s\n%s\nwant 400 and a JSON-RPC error %d with id %s", tc.body, res.Status, res.Header.Get("Content-Type"), b, tc.code, tc.id)
		}
	}

	// A good message is served; a wrong content type is still the SDK's 415.
	res, b := post("application/json", `{"jsonrpc":"2.0","id":9,"method":"ping"}`)
	var r testutil.RPCReply
	if res.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil || string(r.ID) != "9" || r.Error != nil {
		t.Errorf("ping: %s\n%s", res.Status, b)
	}
	// A wrong content type or method is a JSON-RPC error too, not the SDK's
	// line of plain text: 415, and 405 naming POST in Allow.
	res, b = post("text/plain", `{bad json`)
	r = testutil.RPCReply{}
	if res.StatusCode != http.StatusUnsupportedMediaType || json.Unmarshal(b, &r) != nil || r.Error == nil || r.Error.Code != -32600 {
		t.Errorf("text/plain: %s\n%s", res.Status, b)
	}
	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		req, _ := http.NewRequest(method, srv.URL+"/mcp", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		r = testutil.RPCReply{}
		if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "POST" || json.Unmarshal(b, &r) != nil ||
			r.Error == nil || r.Error.Code != -32600 || !strings.Contains(r.Error.Message, method) {
			t.Errorf("%s /mcp: %s (Allow %q)\n%s\nwant 405, Allow: POST and a JSON-RPC error naming the method", method, res.Status, res.Header.Get("Allow"), b)
		}
	}
	// A body may be as large as on /v1; one larger is a JSON-RPC error too.
	big := `{"jsonrpc":"2.0","id":10,"method":"ping","params":{"_meta":{"pad":"` + strings.Repeat("p", belay.MaxStateBytes) + `"}}}`
	r = testutil.RPCReply{}
	if res, b := post("application/json", big); res.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil || string(r.ID) != "10" || r.Error != nil {
		t.Errorf("a body of %d bytes: %s\n%.200s", len(big), res.Status, b)
	}
	res, b = post("application/json", `{"jsonrpc":"2.0","id":11,"method":"ping","params":{"_meta":{"pad":"`+strings.Repeat("p", belay.MaxBodyBytes)+`"}}}`)
	r = testutil.RPCReply{}
	if res.StatusCode != http.StatusRequestEntityTooLarge || json.Unmarshal(b, &r) != nil || r.Error == nil || r.Error.Code != -32600 {
		t.Errorf("a body over belay.MaxBodyBytes: %s\n%.200s", res.Status, b)
	}
}

// Over stdio, a line that is not a JSON-RPC message is answered with a
// JSON-RPC error and the session goes on, even for a line too long to hold.
func TestStdioAnswersMalformedLinesAndKeepsServing(t *testing.T) {
	e := newEnv(t)
	srv := mcpserver.New(mcpserver.Options{Service: e.svc, Version: "test"})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	in, out := mcpserver.Stdio(inR, outW)
	ctx, cancel := context.WithCancel(admin)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, &mcp.IOTransport{Reader: in, Writer: out}) }()
	lines := make(chan []byte, 4)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- bytes.Clone(sc.Bytes())
		}
		close(lines)
	}()
	exchange := func(line string) testutil.RPCReply {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatalf("write: %v", err)
		}
		select {
		case b, ok := <-lines:
			var r testutil.RPCReply
			if !ok || json.Unmarshal(b, &r) != nil || r.JSONRPC != "2.0" {
				t.Fatalf("reply to %.40q: %q", line, b)
			}
			return r
		case err := <-done:
			t.Fatalf("the server ended after %.40q: %v", line, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("no reply to %.40q", line)
		}
		return testutil.RPCReply{}
	}
	if r := exchange(`{bad json`); r.Error == nil || r.Error.Code != -32700 || string(r.ID) != "null" {
		t.Fatalf("bad JSON: %+v", r)
	}
	if r := exchange(strings.Repeat("x", mcp.DefaultMaxLineLength+10)); r.Error == nil || r.Error.Code != -32600 || string(r.ID) != "null" {
		t.Fatalf("a line too long: %+v", r)
	}
	// The longest message the SDK takes is served; one byte more is not.
	longest := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}`
	pad := mcp.DefaultMaxLineLength - 1 - len(longest) - 1
	if r := exchange(longest + strings.Repeat(" ", pad+1) + "}"); r.Error == nil || r.Error.Code != -32600 || string(r.ID) != "null" {
		t.Fatalf("a line a byte too long: %+v", r)
	}
	if r := exchange(longest + strings.Repeat(" ", pad) + "}"); string(r.ID) != "1" || r.Error != nil {
		t.Fatalf("initialize as long as a line may be: %+v", r)
	}
	if r := exchange(`{"jsonrpc":"2.0","id":2,"method":"ping"}`); string(r.ID) != "2" || r.Error != nil {
		t.Fatalf("ping: %+v", r)
	}
	// 2025-06-18 has no batches: the SDK would end the session on one; each
	// request in it is answered with an error instead, and it goes on.
	if _, err := io.WriteString(inW, `[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"x","method":"ping"}]`+"\n"); err != nil {
		t.Fatal(err)
	}
	var batch []testutil.RPCReply
	if b := <-lines; json.Unmarshal(b, &batch) != nil || len(batch) != 2 || string(batch[0].ID) != "3" || string(batch[1].ID) != `"x"` ||
		batch[0].Error == nil || batch[0].Error.Code != -32600 || !strings.Contains(batch[0].Error.Message, "batches") {
		t.Fatalf("a batch under 2025-06-18: %s", b)
	}
	if r := exchange(`{"jsonrpc":"2.0","id":4,"method":"ping"}`); string(r.ID) != "4" || r.Error != nil {
		t.Fatalf("ping after a batch: %+v", r)
	}
	// Text that is not UTF-8 is refused, naming its field, not read as
	// U+FFFD and saved.
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	save := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"checkpoint_save","arguments":{"summary":"bad ` + "\xff" + ` utf","project_path":` + strconv.Quote(e.project) + `}}}`
	if r := exchange(save); string(r.ID) != "5" || r.Error != nil || !strings.Contains(string(r.Result), `"isError":true`) ||
		!strings.Contains(string(r.Result), `VALIDATION_ERROR`) || !strings.Contains(string(r.Result), `\"field\":\"summary\"`) {
		t.Fatalf("a save with invalid UTF-8: %+v %s", r, r.Result)
	}
	inW.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not end with its input")
	}
}

// Over stdio, input that ends right after its requests still gets every
// reply before the server ends, as `printf … | belay mcp` expects: MCP's
// stdio shutdown closes the server's input and then waits for it to exit.
func TestStdioRepliesToEveryRequestBeforeEOF(t *testing.T) {
	e := newEnv(t)
	srv := mcpserver.New(mcpserver.Options{Service: e.svc, Version: "test"})
	var input strings.Builder
	input.WriteString(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}` + "\n")
	input.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	const calls = 20
	for i := range calls {
		fmt.Fprintf(&input, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"checkpoint_save","arguments":{"project_path":%q,"summary":"step %d"}}}`+"\n", i, e.project, i)
	}
	outR, outW := io.Pipe()
	in, out := mcpserver.Stdio(io.NopCloser(strings.NewReader(input.String())), outW)
	done := make(chan error, 1)
	go func() {
		done <- srv.Run(admin, &mcp.IOTransport{Reader: in, Writer: out})
		outW.Close()
	}()
	replies := map[string]bool{}
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r testutil.RPCReply
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("reply %q: %v", sc.Bytes(), err)
		}
		if r.Error != nil {
			t.Errorf("reply %s: %+v", r.ID, r.Error)
		}
		replies[string(r.ID)] = true
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not end with its input")
	}
	if len(replies) != calls+1 {
		t.Errorf("%d replies, want %d (initialize and every call): %v", len(replies), calls+1, replies)
	}
}

// A request the client cancels is not waited for when the input ends: the
// server answers cancelled requests no more.
func TestStdioEndsWithoutWaitingForACancelledRequest(t *testing.T) {
	e := newEnv(t)
	srv := mcpserver.New(mcpserver.Options{Service: e.svc, Version: "test"})
	input := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		fmt.Sprintf(`{"jsonrpc":"2.0","id":"ask","method":"tools/call","params":{"name":"ask_human","arguments":{"project_path":%q,"question":"Deploy?","wait_seconds":25}}}`, e.project) + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"ask","reason":"changed my mind"}}` + "\n"
	in, out := mcpserver.Stdio(io.NopCloser(strings.NewReader(input)), nopWriteCloser{io.Discard})
	done := make(chan error, 1)
	go func() { done <- srv.Run(admin, &mcp.IOTransport{Reader: in, Writer: out}) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the server waited for the reply to a cancelled request")
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// TestHTTPSlowBodyIsRequestTimeout: a message whose body arrives slower than
// the server's minimum rate is answered 408 with a JSON-RPC error.
func TestHTTPSlowBodyIsRequestTimeout(t *testing.T) {
	e := newEnv(t)
	token, err := e.svc.Bootstrap(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(httpapi.Options{Service: e.svc, Authenticate: e.svc.Authenticate, BodyGrace: 300 * time.Millisecond, MinBodyRate: 50})
	api.Handle("/mcp", mcpserver.HTTPHandler(mcpserver.New(mcpserver.Options{Service: e.svc})))
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	body := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("p", 100) + `"}}`
	head := fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: belay\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n", token, len(body))
	status, b, _ := testutil.RawRequest(t, srv.Listener.Addr().String(), head, "", body, 100*time.Millisecond) // 10 bytes a second
	var r testutil.RPCReply
	if status != http.StatusRequestTimeout || json.Unmarshal([]byte(b), &r) != nil || r.Error == nil || !strings.Contains(r.Error.Message, "too slowly") {
		t.Errorf("a trickled body: %d %s; want 408 with a JSON-RPC error", status, b)
	}
}
