package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// testLife covers the session life's store operations: lapsed leases and
// retention policies.
func testLife(t *testing.T, o opener) {
	subtests(t, o, []subtest{
		{"DueLeasesFindsLapsedOpenSessionsOldestFirst", func(t *testing.T, st store.Store) {
			ctx := context.Background()
			mk := func(i int, status belay.SessionStatus, lease *time.Time) *belay.Session {
				s := newSession("/p", at(i))
				s.Status, s.Holder, s.LeaseExpiresAt = status, "h", lease
				return mustInsertSession(t, st, s)
			}
			l1, l2, l3 := at(10), at(5), at(30)
			late := mk(1, belay.SessionRunning, &l1)
			early := mk(2, belay.SessionAwaitingInput, &l2)
			mk(3, belay.SessionRunning, &l3)   // not due yet
			mk(4, belay.SessionCompleted, &l2) // ended: never due
			mk(5, belay.SessionRunning, nil)   // not held
			due, err := st.DueLeases(ctx, at(20), 10)
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, "due leases", []string{early.ID, late.ID}, sessionIDs(due))
			due, err = st.DueLeases(ctx, at(20), 1)
			if err != nil || len(due) != 1 {
				t.Fatalf("limit 1: %d, %v", len(due), err)
			}
			// Cleared when the lease goes.
			early.LeaseExpiresAt, early.Holder = nil, ""
			mustUpdate(t, st, func(tx store.Tx) error { return tx.UpdateSession(ctx, early) })
			due, err = st.DueLeases(ctx, at(20), 10)
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, "after clearing", []string{late.ID}, sessionIDs(due))
		}},
		{"RetentionPutReplacesAndDeletes", func(t *testing.T, st store.Store) {
			ctx := context.Background()
			mustUpdate(t, st, func(tx store.Tx) error {
				if err := tx.PutRetention(ctx, belay.RetentionPolicy{ProjectPath: "/b", KeepLast: 3}); err != nil {
					return err
				}
				return tx.PutRetention(ctx, belay.RetentionPolicy{ProjectPath: "/a", MaxAge: time.Hour})
			})
			mustUpdate(t, st, func(tx store.Tx) error {
				return tx.PutRetention(ctx, belay.RetentionPolicy{ProjectPath: "/b", KeepLast: 5, MaxAge: 2 * time.Hour})
			})
			list, err := st.ListRetention(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, "policies", []belay.RetentionPolicy{{ProjectPath: "/a", MaxAge: time.Hour},
				{ProjectPath: "/b", KeepLast: 5, MaxAge: 2 * time.Hour}}, list)
			mustUpdate(t, st, func(tx store.Tx) error {
				if err := tx.DeleteRetention(ctx, "/a"); err != nil {
					return err
				}
				return tx.DeleteRetention(ctx, "/missing")
			})
			list, err = st.ListRetention(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, "after delete", 1, len(list))
		}},
	})
}
