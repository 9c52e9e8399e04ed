package core_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/postgres"
	"github.com/belayhq/belay/store/sqlite"
	"github.com/belayhq/belay/webhook"
)

// Two instances on one database, each running its dispatcher, deliver every
// event once between them; when one stops, the other takes its webhooks
// over after the lease.
func TestWebhooksOnceAcrossInstances(t *testing.T) {
	drivers := []struct {
		name string
		open func(t *testing.T) func(t *testing.T) store.Store
	}{
		{"sqlite", func(t *testing.T) func(t *testing.T) store.Store {
			path := filepath.Join(t.TempDir(), "belay.db")
			return func(t *testing.T) store.Store {
				db, err := sqlite.Open(localCtx, path)
				if err != nil {
					t.Fatal(err)
				}
				return db
			}
		}},
		{"postgres", func(t *testing.T) func(t *testing.T) store.Store {
			u := testutil.PostgresSchema(t)
			return func(t *testing.T) store.Store {
				db, err := postgres.Open(localCtx, u)
				if err != nil {
					t.Fatal(err)
				}
				return db
			}
		}},
	}
	for _, drv := range drivers {
		t.Run(drv.name, func(t *testing.T) {
			open := drv.open(t)
			var svcs [2]*core.Service
			var stops [2]func()
			for i := range svcs {
				db := open(t)
				svcs[i] = core.New(core.Options{Store: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				t.Cleanup(func() { svcs[i].Close(); db.Close() })
			}
			rc := newHookReceiver(t, nil)
			hook := addWebhook(t, svcs[0], rc.srv.URL+"/hook")
			opts := fastWebhooks
			opts.Timeout, opts.Lease = 300*time.Millisecond, 600*time.Millisecond
			for i, svc := range svcs {
				ctx, cancel := context.WithCancel(localCtx)
				done := make(chan struct{})
				go func() {
					webhook.Run(ctx, svc.WebhookSource(), opts)
					close(done)
				}()
				stops[i] = func() { cancel(); <-done }
				t.Cleanup(stops[i])
			}

			project := t.TempDir()
			burst := func(n int) {
				for i := range n {
					hookSave(t, svcs[i%2], project, "burst")
				}
			}
			// every event after the hook's start, once, in order
			wantAll := func(what string) {
				t.Helper()
				end := hookLogEnd(t, svcs[0])
				hookWait(t, what, func() bool {
					s := rc.seqs()
					return len(s) > 0 && slices.Max(s) >= end
				})
				time.Sleep(3 * opts.PollInterval) // a duplicate would arrive meanwhile
				var want []int64
				for seq := hook.LastSeq + 1; seq <= end; seq++ {
					want = append(want, seq)
				}
				if got := rc.seqs(); !slices.Equal(got, want) {
					t.Fatalf("%s: delivered seqs %v, want each of %d..%d once, in order", what, got, hook.LastSeq+1, end)
				}
			}
			burst(40)
			wantAll("a burst through both instances")

			// Stop both dispatchers in turn: whichever held the webhook,
			// the other one delivers after the lease runs out.
			stops[0]()
			burst(10)
			wantAll("a burst after the first dispatcher stopped")
		})
	}
}
