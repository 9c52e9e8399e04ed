package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay/cli"
	"github.com/belayhq/belay/cmd/belay/wire"
	"github.com/belayhq/belay/internal/testutil"
)

// mcpStdio is `belay mcp` running in-process with its standard input and
// output on pipes, as a coding agent drives it.
type mcpStdio struct {
	in     *io.PipeWriter
	lines  chan []byte
	exited chan int
	stderr *lockedBuffer
}

func startMCPStdio(t *testing.T) *mcpStdio {
	t.Helper()
	h := newHarness(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	m := &mcpStdio{in: inW, lines: make(chan []byte, 16), exited: make(chan int, 1), stderr: &lockedBuffer{}}
	go func() {
		code := cli.Run(context.Background(), []string{"mcp"}, cli.Env{Backend: wire.Backend(),
			Stdin: inR, Stdout: outW, Stderr: m.stderr,
			Getenv: func(k string) string { return h.env[k] },
			Getwd:  func() (string, error) { return h.project, nil },
		})
		outW.Close()
		m.exited <- code
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			m.lines <- bytes.Clone(sc.Bytes())
		}
		close(m.lines)
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-m.exited:
		case <-time.After(10 * time.Second):
			t.Error("belay mcp did not exit after its input ended")
		}
	})
	return m
}

func (m *mcpStdio) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(m.in, line+"\n"); err != nil {
		t.Fatalf("write %q: %v (stderr: %s)", line, err, m.stderr.String())
	}
}

// reply reads the next line belay mcp writes.
func (m *mcpStdio) reply(t *testing.T) testutil.RPCReply {
	t.Helper()
	select {
	case line, ok := <-m.lines:
		if !ok {
			t.Fatalf("belay mcp closed its output (stderr: %s)", m.stderr.String())
		}
		var r testutil.RPCReply
		if err := json.Unmarshal(line, &r); err != nil || r.JSONRPC != "2.0" {
			t.Fatalf("not a JSON-RPC response: %s (%v)", line, err)
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("no reply from belay mcp (stderr: %s)", m.stderr.String())
	}
	return testutil.RPCReply{}
}

const (
	mcpInitialize  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`
	mcpInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

// A line that is not a JSON-RPC message is answered with a JSON-RPC error
// and the session goes on: one bad line must not end an agent's tools.
func TestMCPStdioAnswersMalformedLinesAndKeepsServing(t *testing.T) {
	m := startMCPStdio(t)
	wantError := func(line string, code int, id string) {
		t.Helper()
		m.send(t, line)
		r := m.reply(t)
		if r.Error == nil || r.Error.Code != code || string(r.ID) != id || r.Result != nil {
			t.Fatalf("%q: got id %s error %+v result %s, want error %d with id %s", line, r.ID, r.Error, r.Result, code, id)
		}
	}
	// Garbage before the handshake loses nothing.
	wantError(`{bad json`, -32700, "null")

	m.send(t, mcpInitialize)
	if r := m.reply(t); string(r.ID) != "1" || r.Error != nil {
		t.Fatalf("initialize: %+v", r)
	}
	m.send(t, mcpInitialized)

	wantError(`{bad json`, -32700, "null")
	wantError(`{"jsonrpc":"2.0","id":7,"method":"ping"} trailing`, -32700, "null")
	wantError(`{"jsonrpc":"2.0","id":8,"method":"ping"`, -32700, "null")
	wantError("\x00\x01", -32700, "null")
	wantError(`"a string"`, -32600, "null")
	wantError(`42`, -32600, "null")
	wantError(`null`, -32600, "null")
	wantError(`[]`, -32600, "null")
	wantError(`{}`, -32600, "null")
	wantError(`{"jsonrpc":"1.0","id":9,"method":"ping"}`, -32600, "9")
	wantError(`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`, -32600, "null")
	m.send(t, "")
	m.send(t, "   ")

	m.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	r := m.reply(t)
	var list struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if string(r.ID) != "2" || r.Error != nil || json.Unmarshal(r.Result, &list) != nil || len(list.Tools) == 0 {
		t.Fatalf("tools/list after bad lines: id %s error %+v result %s", r.ID, r.Error, r.Result)
	}
	m.send(t, `{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"checkpoint_list","arguments":{}}}`)
	if r := m.reply(t); string(r.ID) != `"three"` || r.Error != nil {
		t.Fatalf("tools/call after bad lines: %+v", r)
	}

	select {
	case code := <-m.exited:
		t.Fatalf("belay mcp exited %d: %s", code, m.stderr.String())
	default:
	}
	m.in.Close()
	select {
	case code := <-m.exited:
		if code != cli.ExitOK {
			t.Fatalf("belay mcp exited %d at the end of its input: %s", code, m.stderr.String())
		}
		m.exited <- code
	case <-time.After(10 * time.Second):
		t.Fatal("belay mcp did not exit at the end of its input")
	}
}

// TestMCPStdioSaysTheServerCannotBeReached: `belay mcp` on a server that
// does not answer tells the agent so, not "internal error".
func TestMCPStdioSaysTheServerCannotBeReached(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	input := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"checkpoint_list","arguments":{}}}` + "\n"
	var out lockedBuffer
	env := map[string]string{"BELAY_URL": url, "BELAY_TOKEN": "belay_x", "HOME": t.TempDir()}
	code := cli.Run(context.Background(), []string{"mcp"}, cli.Env{Backend: wire.Backend(),
		Stdin: strings.NewReader(input), Stdout: &out, Stderr: &lockedBuffer{},
		Getenv: func(k string) string { return env[k] },
		Getwd:  func() (string, error) { return t.TempDir(), nil },
	})
	if code != 0 {
		t.Fatalf("belay mcp exited %d", code)
	}
	got := out.String()
	if !strings.Contains(got, "cannot reach the belay server at "+url) || !strings.Contains(got, "STORAGE_UNAVAILABLE") {
		t.Errorf("the tool's answer does not say the server cannot be reached:\n%s", got)
	}
}
