package httpapi

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/belayhq/belay"
)

// pacedBody is a request body that must keep a pace: after grace, at least
// rate bytes a second on average since the request began. Each read moves
// the connection's read deadline to when the bytes read so far stop
// covering the time taken, so a client trickling a byte now and then (a
// slowloris) is cut off, while a large upload that keeps the pace, however
// long, is not. A body that does not keep it fails with REQUEST_TIMEOUT.
type pacedBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	start time.Time
	grace time.Duration
	rate  int64
	read  int64
	ended atomic.Bool
	// relaxed bodies keep no pace (see relax).
	relaxed bool
}

// relax lets the body take its time: an import's archive may be piped from
// an export still gathering it. Only an answer given before the body ends
// is still bounded (see answered).
func (b *pacedBody) relax() {
	b.relaxed = true
	_ = b.rc.SetReadDeadline(time.Time{})
}

func (b *pacedBody) Read(p []byte) (int, error) {
	if !b.relaxed {
		b.bound()
	}
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	switch {
	case errors.Is(err, io.EOF):
		b.ended.Store(true)
		// The server reads on in the background to notice a client that
		// goes away while the handler runs: no deadline for that.
		_ = b.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		return n, belay.Errorf(belay.CodeRequestTimeout, "the request body arrived too slowly: %d bytes in %s; after the first %s send at least %d bytes a second",
			b.read, time.Since(b.start).Round(time.Millisecond), b.grace, b.rate).With("minBytesPerSecond", b.rate)
	}
	return n, err
}

// bound sets the connection's read deadline to when the bytes read so far
// stop covering the time taken. Not every connection takes deadlines
// (HTTP/2 may not); it then reads as before.
func (b *pacedBody) bound() {
	perByte := time.Second / time.Duration(b.rate) // whole seconds first: read may be large
	_ = b.rc.SetReadDeadline(b.start.Add(b.grace + time.Duration(b.read/b.rate)*time.Second + time.Duration(b.read%b.rate)*perByte))
}

// unread reports whether the body may hold bytes the handler did not read.
func (b *pacedBody) unread() bool { return !b.ended.Load() }

// answered is called as the answer begins. What is left of an unread body
// net/http reads before it answers (up to 256 KiB; a larger rest closes the
// connection after a linger), so that the client, still sending, reads the
// answer instead of a reset: the pace bounds that read too, so a client
// that declared a body it never sends holds the connection no longer than
// the pace allows.
func (b *pacedBody) answered() {
	if b.unread() {
		b.bound()
	}
}
