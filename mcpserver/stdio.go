package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxLine bounds one message over stdio: the SDK's own bound on a frame,
// less the newline.
const maxLine = mcp.DefaultMaxLineLength - 1

// Stdio wraps a stdio server's input and output, the Reader and Writer of
// its mcp.IOTransport, so that one bad line does not end the session: a line
// that is not a JSON-RPC message (invalid JSON, JSON that is no message, a
// line over 16 MiB) is answered on out with a JSON-RPC error and the next
// line is served. Messages are one a line, as MCP's stdio transport
// requires; blank lines are skipped. Reading stops at the first error of in
// or of writing an answer to out.
//
// When in ends, the server sees the end only once it has answered every
// request it was given (or the request was cancelled, or out failed, or the
// server closed its input): MCP's stdio shutdown closes the server's input
// and then waits for it to exit, and the SDK drops the replies still due
// when its input ends.
func Stdio(in io.ReadCloser, out io.WriteCloser) (io.ReadCloser, io.WriteCloser) {
	p := newPending()
	w := &syncWriter{w: out, pending: p}
	return &lineFilter{in: bufio.NewReader(in), closer: in, out: w, pending: p}, w
}

// noBatches is the first protocol version without JSON-RPC batches: the SDK
// ends a stdio session that sends one once that version is negotiated.
const noBatches = "2025-06-18"

// refuseBatch answers a batch, msgs, under protocol version (see noBatches):
// an error for each request in it, as a batch, or nothing when it holds
// only notifications.
func refuseBatch(msgs []jsonrpc.Message, version string) []byte {
	var answers []*rpcError
	for _, m := range msgs {
		if req, ok := m.(*jsonrpc.Request); ok && req.ID.IsValid() {
			id, _ := json.Marshal(req.ID.Raw()) // an int64 or a string
			answers = append(answers, newRPCError(id, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("Invalid Request: MCP %s (this session's version) and later take no JSON-RPC batches; send the messages one a line", version)))
		}
	}
	if len(answers) == 0 {
		return nil
	}
	b, _ := json.Marshal(answers) // strings and valid ids cannot fail
	return append(b, '\n')
}

// lineFilter passes on the lines of in that are JSON-RPC messages and
// answers the others.
type lineFilter struct {
	in      *bufio.Reader
	closer  io.Closer
	out     *syncWriter
	pending *pending
	line    []byte // the line being read
	next    []byte // what is left to pass on of the current message
	err     error  // in's error, returned once next is passed on
}

func (f *lineFilter) Read(p []byte) (int, error) {
	for len(f.next) == 0 {
		if f.err != nil {
			if errors.Is(f.err, io.EOF) {
				f.pending.drain()
			}
			return 0, f.err
		}
		line, tooLong, err := f.readLine()
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		f.err = err
		line = bytes.Trim(line, " \t\r\n")
		var answer *rpcError
		switch {
		case tooLong || len(line) > maxLine:
			answer = newRPCError(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: a message longer than %d bytes", maxLine))
		case len(line) == 0:
			continue
		default:
			var msgs []jsonrpc.Message
			msgs, answer = decodePayload(line)
			if v := f.out.version(); answer == nil && line[0] == '[' && v >= noBatches {
				if refusal := refuseBatch(msgs, v); refusal != nil {
					if _, err := f.out.Write(refusal); err != nil {
						return 0, fmt.Errorf("answer a batch: %w", err)
					}
				}
				continue
			}
			if answer == nil {
				f.pending.given(msgs)
			}
		}
		if answer != nil {
			if _, err := f.out.Write(answer.marshal()); err != nil {
				return 0, fmt.Errorf("answer a malformed message: %w", err)
			}
			continue
		}
		f.next = append(line, '\n')
	}
	n := copy(p, f.next)
	f.next = f.next[n:]
	return n, nil
}

// readLine reads the next line, or reports that it is longer than maxLine
// and drops it. A last line without a newline comes with io.EOF.
func (f *lineFilter) readLine() (line []byte, tooLong bool, err error) {
	f.line = f.line[:0]
	for {
		chunk, err := f.in.ReadSlice('\n')
		switch {
		case tooLong:
		case len(f.line)+len(chunk) > maxLine+2: // "\r\n" and all
			tooLong, f.line = true, f.line[:0]
		default:
			f.line = append(f.line, chunk...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return f.line, tooLong, err
		}
	}
}

func (f *lineFilter) Close() error {
	f.pending.stop()
	return f.closer.Close()
}

// syncWriter keeps the SDK's messages and the filter's answers whole on the
// shared output: each writes one message a Write. It tells pending of the
// replies it writes, and notes the protocol version the server's answer to
// initialize negotiated.
type syncWriter struct {
	mu         sync.Mutex
	w          io.WriteCloser
	pending    *pending
	negotiated string
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.w.Write(p)
	if err != nil {
		s.pending.stop() // no reply can reach the client now
		return n, err
	}
	s.pending.answered(p)
	if bytes.Contains(p, []byte(`"protocolVersion"`)) {
		var reply struct {
			Result struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"result"`
		}
		if json.Unmarshal(p, &reply) == nil && reply.Result.ProtocolVersion != "" {
			s.negotiated = reply.Result.ProtocolVersion
		}
	}
	return n, nil
}

// version is the protocol version negotiated so far, "" before initialize.
func (s *syncWriter) version() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.negotiated
}

func (s *syncWriter) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Close()
}

// pending is the requests given to the server over stdio that it has not
// answered yet, by id (jsonrpc.ID.Raw: an int64 or a string).
type pending struct {
	mu      sync.Mutex
	changed *sync.Cond
	ids     map[any]bool
	stopped bool
}

func newPending() *pending {
	p := &pending{ids: map[any]bool{}}
	p.changed = sync.NewCond(&p.mu)
	return p
}

// given notes the requests among msgs, and forgets those a
// notifications/cancelled among them cancels: the server answers those no
// more.
func (p *pending) given(msgs []jsonrpc.Message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range msgs {
		req, ok := m.(*jsonrpc.Request)
		switch {
		case !ok:
		case req.ID.IsValid():
			p.ids[req.ID.Raw()] = true
		case req.Method == "notifications/cancelled":
			var params struct {
				RequestID any `json:"requestId"`
			}
			if json.Unmarshal(req.Params, &params) == nil {
				if id, err := jsonrpc.MakeID(params.RequestID); err == nil && id.IsValid() {
					delete(p.ids, id.Raw())
				}
			}
		}
	}
	p.changed.Broadcast()
}

// answered forgets the requests msg, one message or a batch the server
// wrote, replies to.
func (p *pending) answered(msg []byte) {
	var ids []any
	if trimmed := bytes.TrimLeft(msg, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(trimmed, &batch) != nil {
			return
		}
		for _, m := range batch {
			if id, ok := replyID(m); ok {
				ids = append(ids, id)
			}
		}
	} else if id, ok := replyID(msg); ok {
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		delete(p.ids, id)
	}
	p.changed.Broadcast()
}

// stop ends every wait: no more replies are coming, or can be delivered.
func (p *pending) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	p.changed.Broadcast()
}

// drain waits until every request given has been answered, or stop.
func (p *pending) drain() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.ids) > 0 && !p.stopped {
		p.changed.Wait()
	}
}

// replyID returns the id of msg, one JSON-RPC message, as jsonrpc.ID.Raw
// gives it, when msg is a response. It reads the keys in their order and
// stops once it knows, so the result of a reply whose id comes first (as
// the SDK writes them) is not read.
func replyID(msg []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(msg))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var id any
	reply := false
	for dec.More() && !(reply && id != nil) {
		key, err := dec.Token()
		if err != nil {
			return nil, false
		}
		switch key {
		case "method":
			return nil, false
		case "id":
			if dec.Decode(&id) != nil {
				return nil, false
			}
			continue
		case "result", "error":
			reply = true
			if id != nil {
				continue // its value need not be read
			}
		}
		if dec.Decode(new(json.RawMessage)) != nil {
			return nil, false
		}
	}
	rid, err := jsonrpc.MakeID(id)
	if !reply || err != nil || !rid.IsValid() {
		return nil, false
	}
	return rid.Raw(), true
}
