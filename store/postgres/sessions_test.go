package postgres_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/postgres"
)

// TestActiveSessionWaitsForTheNewestToClose: a save by project waits for
// the lock on the project's newest open session while another transaction
// completes it. The save's lookup then returns the project's older open
// session, as it would have without the wait, not "none" (which would start
// a third session).
func TestActiveSessionWaitsForTheNewestToClose(t *testing.T) {
	schema := testutil.PostgresSchema(t)
	u, err := url.Parse(schema)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	app := "belay_test_" + uuid.NewString()[:8]
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	closer, err := postgres.Open(t.Context(), schema)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	saver, err := postgres.Open(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer saver.Close()

	ctx := t.Context()
	now := time.Now().UTC()
	older := &belay.Session{ID: uuid.NewString(), ProjectPath: "/p", Owner: "alice", Status: belay.SessionRunning, CreatedAt: now, UpdatedAt: now}
	newest := &belay.Session{ID: uuid.NewString(), ProjectPath: "/p", Owner: "alice", Status: belay.SessionRunning, CreatedAt: now.Add(time.Second), UpdatedAt: now}
	err = closer.Update(ctx, func(tx store.Tx) error {
		if err := tx.InsertSession(ctx, older); err != nil {
			return err
		}
		return tx.InsertSession(ctx, newest)
	})
	if err != nil {
		t.Fatal(err)
	}

	locked, complete, closed := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		closed <- closer.Update(context.Background(), func(tx store.Tx) error {
			s, err := tx.GetSession(ctx, newest.ID)
			if err != nil {
				return err
			}
			close(locked)
			<-complete
			s.Status = belay.SessionCompleted
			return tx.UpdateSession(ctx, s)
		})
	}()
	<-locked
	found := make(chan string, 1)
	go func() {
		_ = saver.Update(context.Background(), func(tx store.Tx) error {
			s, err := tx.ActiveSession(ctx, "/p", store.Everything)
			if err != nil {
				t.Errorf("ActiveSession: %v", err)
				found <- ""
				return err
			}
			found <- s.ID
			return nil
		})
	}()
	// Complete the session once the save waits for its lock.
	for waiting := 0; waiting == 0; {
		select {
		case id := <-found:
			t.Fatalf("ActiveSession returned %q without waiting for the lock on the session a writer holds", id)
		default:
		}
		if err := closer.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	close(complete)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if got := <-found; got != older.ID {
		t.Errorf("ActiveSession = %q, want the older open session %s", got, older.ID)
	}
}
