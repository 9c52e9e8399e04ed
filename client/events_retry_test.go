package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/client"
)

// TestEventsRetriesServerErrors: a 502 from a proxy (plain text) or a 503
// from a restarting server is retried; a 4xx ends Events at once.
func TestEventsRetriesServerErrors(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			http.Error(w, "bad gateway", http.StatusBadGateway)
		case 2:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":{"code":"INTERNAL_ERROR","message":"starting"}}`)
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "id: 7\nevent: session.created\ndata: {\"seq\":7,\"type\":\"session.created\"}\n\n")
		}
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stop := errors.New("got it")
	var got []int64
	err = c.Events(ctx, client.EventFilter{After: 0}, func(e belay.Event) error {
		got = append(got, e.Seq)
		return stop
	})
	if !errors.Is(err, stop) || len(got) != 1 || got[0] != 7 || calls.Load() != 3 {
		t.Errorf("Events = %v, events %v after %d requests; want event 7 on the third", err, got, calls.Load())
	}

	denied := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"code":"UNAUTHENTICATED","message":"no token"}}`)
	}))
	defer denied.Close()
	c, _ = client.New(denied.URL, "")
	err = c.Events(ctx, client.EventFilter{After: 0}, func(belay.Event) error { return nil })
	if !belay.IsCode(err, belay.CodeUnauthenticated) {
		t.Errorf("Events against a 401 = %v, want UNAUTHENTICATED at once", err)
	}
}
