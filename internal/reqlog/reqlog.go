// Package reqlog carries, in a request's context, who the request
// authenticated as, so the one request log line the HTTP server writes names
// the user whichever handler authenticated it: the API's bearer token, tRPC's
// header or connectionParams, the dashboard's cookie.
package reqlog

import (
	"context"
	"sync/atomic"
)

type slotKey struct{}

// WithSlot returns ctx with an empty slot for the request's user, and a
// function that reads it. A handler may note the user from any goroutine
// (a WebSocket's reader, say).
func WithSlot(ctx context.Context) (context.Context, func() string) {
	var user atomic.Pointer[string]
	return context.WithValue(ctx, slotKey{}, &user), func() string {
		if u := user.Load(); u != nil {
			return *u
		}
		return ""
	}
}

// NoteUser records that the request of ctx authenticated as user; without a
// slot (ctx is no request's from the server) it does nothing.
func NoteUser(ctx context.Context, user string) {
	if s, ok := ctx.Value(slotKey{}).(*atomic.Pointer[string]); ok {
		s.Store(&user)
	}
}
