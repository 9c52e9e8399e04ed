package testutil

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// RawRequest sends head (a request line and headers, each line ending in
// CRLF) and the first bytes of a body to the HTTP server at addr over a
// connection of its own, then trickles the rest of the body a byte every
// pause until the server answers. It returns the answer's status and body,
// and whether the server closed the connection after it.
func RawRequest(t *testing.T, addr, head, first, rest string, pause time.Duration) (int, string, bool) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, head+"\r\n"+first); err != nil {
		t.Fatal(err)
	}
	answered := make(chan struct{})
	go func() {
		for i := range len(rest) {
			select {
			case <-answered:
				return
			case <-time.After(pause):
			}
			if _, err := io.WriteString(conn, rest[i:i+1]); err != nil {
				return
			}
		}
	}()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	close(answered)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	_, err = br.ReadByte()
	return resp.StatusCode, string(body), errors.Is(err, io.EOF)
}
