package mcpserver

import (
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestReplyID(t *testing.T) {
	for _, tc := range []struct {
		msg   string
		id    any
		reply bool
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{"big":"…"}}`, int64(7), true},
		{`{"jsonrpc":"2.0","result":{},"id":"a"}`, "a", true},
		{`{"error":{"code":-1,"message":"x"},"jsonrpc":"2.0","id":3}`, int64(3), true},
		{`{"jsonrpc":"2.0","id":7,"method":"roots/list"}`, nil, false},
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`, nil, false},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`, nil, false},
		{`{"jsonrpc":"2.0","id":[1],"result":{}}`, nil, false},
		{`[1]`, nil, false},
		{`{"result":{},"id":`, nil, false},
	} {
		id, reply := replyID([]byte(tc.msg))
		if id != tc.id || reply != tc.reply {
			t.Errorf("replyID(%s) = %v, %v; want %v, %v", tc.msg, id, reply, tc.id, tc.reply)
		}
	}
}

// drainDone reports whether p.drain returns within a second.
func drainDone(p *pending) bool {
	done := make(chan struct{})
	go func() { p.drain(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(time.Second):
		return false
	}
}

func TestPendingRequests(t *testing.T) {
	decode := func(s string) []jsonrpc.Message {
		msgs, e := decodePayload([]byte(s))
		if e != nil {
			t.Fatalf("decodePayload(%s): %+v", s, e.Error)
		}
		return msgs
	}
	p := newPending()
	p.given(decode(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":"two","method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`))
	p.given(decode(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}}`))
	p.answered([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	p.answered([]byte(`[{"jsonrpc":"2.0","id":"two","result":{}}]`))
	if drainDone(p) {
		t.Fatal("drain returned with request 3 unanswered")
	}
	// A cancelled request is answered no more; its id came as a number.
	p.given(decode(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`))
	if !drainDone(p) {
		t.Fatal("drain waits for a cancelled request")
	}
	p.given(decode(`{"jsonrpc":"2.0","id":4,"method":"ping"}`))
	p.stop()
	if !drainDone(p) {
		t.Fatal("drain waits after stop")
	}
}
