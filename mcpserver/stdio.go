package mcpserver

import (
	"bufio"
	"bytes"
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
func Stdio(in io.ReadCloser, out io.WriteCloser) (io.ReadCloser, io.WriteCloser) {
	w := &syncWriter{w: out}
	return &lineFilter{in: bufio.NewReader(in), closer: in, out: w}, w
}

// lineFilter passes on the lines of in that are JSON-RPC messages and
// answers the others.
type lineFilter struct {
	in     *bufio.Reader
	closer io.Closer
	out    *syncWriter
	line   []byte // the line being read
	next   []byte // what is left to pass on of the current message
	err    error  // in's error, returned once next is passed on
}

func (f *lineFilter) Read(p []byte) (int, error) {
	for len(f.next) == 0 {
		if f.err != nil {
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
			answer = checkPayload(line)
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

func (f *lineFilter) Close() error { return f.closer.Close() }

// syncWriter keeps the SDK's messages and the filter's answers whole on the
// shared output: each writes one message a Write.
type syncWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Close()
}
