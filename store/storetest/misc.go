package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

func testRollbacks(t *testing.T, o opener) {
	subtests(t, o, []subtest{
		{"InsertList", func(t *testing.T, st store.Store) {
			s1 := mustInsertSession(t, st, newSession("/p", at(0)))
			s2 := mustInsertSession(t, st, newSession("/p", at(0)))
			rbs := []*belay.Rollback{
				{ID: newID(), SessionID: s1.ID, FromCheckpointID: newID(), TargetID: newID(), Reason: "tests broke",
					UserID: "alice", RestoredFiles: []string{"a.go", "b/c.go"}, CreatedAt: at(3)},
				{ID: newID(), SessionID: s1.ID, TargetID: newID(), UserID: "bob", RestoredFiles: []string{}, CreatedAt: at(1)},
				{ID: newID(), SessionID: s1.ID, TargetID: newID(), UserID: "bob", CreatedAt: at(2).Add(1)},
				{ID: newID(), SessionID: s2.ID, TargetID: newID(), UserID: "carol", CreatedAt: at(0)},
			}
			wantAllSet(t, "rollback", rbs[0])
			mustUpdate(t, st, func(tx store.Tx) error {
				for _, rb := range rbs {
					if err := tx.InsertRollback(t.Context(), rb); err != nil {
						return err
					}
				}
				return nil
			})
			got, err := st.ListRollbacks(t.Context(), s1.ID)
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, "rollbacks of s1, oldest first", []*belay.Rollback{rbs[1], rbs[2], rbs[0]}, got)
			for _, rb := range got {
				wantUTC(t, "rollback CreatedAt", rb.CreatedAt)
			}
			got, err = st.ListRollbacks(t.Context(), newID())
			if err != nil || len(got) != 0 {
				t.Errorf("ListRollbacks of an unknown session = %d, %v", len(got), err)
			}
		}},
		{"MissingSession", func(t *testing.T, st store.Store) {
			err := st.Update(t.Context(), func(tx store.Tx) error {
				return tx.InsertRollback(t.Context(), &belay.Rollback{ID: newID(), SessionID: newID(), TargetID: newID(), CreatedAt: at(0)})
			})
			if err == nil {
				t.Error("a rollback of a missing session was stored")
			}
		}},
	})
}

func testUsers(t *testing.T, o opener) {
	subtests(t, o, []subtest{
		{"PutGetCount", func(t *testing.T, st store.Store) {
			if n, err := st.CountUsers(t.Context()); err != nil || n != 0 {
				t.Fatalf("CountUsers of an empty store = %d, %v", n, err)
			}
			_, err := st.GetUser(t.Context(), "alice")
			wantCode(t, "GetUser of a missing user", err, belay.CodeNotFound)
			alice := &belay.User{Name: "alice", CreatedAt: at(1).Add(1)}
			put := func(u *belay.User) {
				t.Helper()
				mustUpdate(t, st, func(tx store.Tx) error { return tx.PutUser(t.Context(), u) })
			}
			put(alice)
			got, err := st.GetUser(t.Context(), "alice")
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, "user", alice, got)
			wantUTC(t, "user CreatedAt", got.CreatedAt)

			// PutUser of an existing name updates it; the user keeps its creation time.
			put(&belay.User{Name: "alice", Admin: true, CreatedAt: at(9)})
			got, err = st.GetUser(t.Context(), "alice")
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, "user after upsert", &belay.User{Name: "alice", Admin: true, CreatedAt: alice.CreatedAt}, got)
			if n, err := st.CountUsers(t.Context()); err != nil || n != 1 {
				t.Errorf("CountUsers after an upsert = %d, %v; want 1", n, err)
			}
			put(&belay.User{Name: "bob", CreatedAt: at(2)})
			if n, err := st.CountUsers(t.Context()); err != nil || n != 2 {
				t.Errorf("CountUsers = %d, %v; want 2", n, err)
			}
		}},
		{"Tokens", testTokens},
	})
}

func testWebhooks(t *testing.T, o opener) {
	subtests(t, o, []subtest{
		{"InsertListDelete", func(t *testing.T, st store.Store) {
			if hooks, err := st.ListWebhooks(t.Context()); err != nil || len(hooks) != 0 {
				t.Fatalf("ListWebhooks of an empty store = %d, %v", len(hooks), err)
			}
			w1 := &belay.Webhook{ID: newID(), URL: "https://example.com/a", Secret: "s1",
				Events: []string{belay.EventHITLRequired, belay.EventHITLDecided}, LastSeq: 3, CreatedAt: at(2).Add(1)}
			w2 := &belay.Webhook{ID: newID(), URL: "https://example.com/b", Secret: "s2", CreatedAt: at(1)}
			w3 := &belay.Webhook{ID: newID(), URL: "https://example.com/c", Secret: "s3", Events: []string{}, CreatedAt: at(3)}
			wantAllSet(t, "webhook", w1)
			insertWebhooks(t, st, w1, w2, w3)
			hooks, err := st.ListWebhooks(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, "webhooks, oldest first", []*belay.Webhook{w2, w1, w3}, hooks)
			for _, w := range hooks {
				wantUTC(t, "webhook CreatedAt", w.CreatedAt)
			}
			mustUpdate(t, st, func(tx store.Tx) error { return tx.DeleteWebhook(t.Context(), w2.ID) })
			err = st.Update(t.Context(), func(tx store.Tx) error { return tx.DeleteWebhook(t.Context(), w2.ID) })
			wantCode(t, "DeleteWebhook twice", err, belay.CodeNotFound)
			hooks, err = st.ListWebhooks(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, "webhooks after delete", []*belay.Webhook{w1, w3}, hooks)
		}},
		{"AdvanceOnlyForward", func(t *testing.T, st store.Store) {
			w := &belay.Webhook{ID: newID(), URL: "https://example.com", Secret: "s", CreatedAt: at(0)}
			other := &belay.Webhook{ID: newID(), URL: "https://example.com/o", Secret: "s", LastSeq: 1, CreatedAt: at(1)}
			insertWebhooks(t, st, w, other)
			for _, step := range []struct{ to, want int64 }{{5, 5}, {3, 5}, {5, 5}, {0, 5}, {9, 9}} {
				mustUpdate(t, st, func(tx store.Tx) error { return tx.AdvanceWebhook(t.Context(), w.ID, step.to) })
				hooks, err := st.ListWebhooks(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if len(hooks) != 2 || hooks[0].LastSeq != step.want || hooks[1].LastSeq != 1 {
					t.Fatalf("after AdvanceWebhook(%d): %+v, want LastSeq %d and the other hook untouched", step.to, hooks, step.want)
				}
			}
		}},
		{"Claim", func(t *testing.T, st store.Store) {
			w := &belay.Webhook{ID: newID(), URL: "https://example.com", Secret: "s", CreatedAt: at(0)}
			other := &belay.Webhook{ID: newID(), URL: "https://example.com/o", Secret: "s", CreatedAt: at(1)}
			insertWebhooks(t, st, w, other)
			claim := func(id, holder string, now, until time.Time) bool {
				t.Helper()
				var ok bool
				mustUpdate(t, st, func(tx store.Tx) error {
					var err error
					ok, err = tx.ClaimWebhook(t.Context(), id, holder, now, until)
					return err
				})
				return ok
			}
			steps := []struct {
				id, holder string
				now, until time.Time
				want       bool
				why        string
			}{
				{w.ID, "a", at(0), at(10), true, "a free webhook"},
				{w.ID, "b", at(5), at(15), false, "another's live lease"},
				{other.ID, "b", at(5), at(15), true, "another webhook, free"},
				{w.ID, "a", at(9), at(20), true, "renewing its own lease"},
				{w.ID, "b", at(19), at(30), false, "the renewed lease, still live"},
				{w.ID, "b", at(20), at(30), true, "a lease whose until has come"},
				{w.ID, "a", at(21), at(31), false, "the lease it lost"},
				{newID(), "a", at(0), at(10), false, "a missing webhook"},
			}
			for _, s := range steps {
				if got := claim(s.id, s.holder, s.now, s.until); got != s.want {
					t.Fatalf("ClaimWebhook by %s (%s) = %v, want %v", s.holder, s.why, got, s.want)
				}
			}
		}},
		{"ClaimRace", func(t *testing.T, st store.Store) {
			w := &belay.Webhook{ID: newID(), URL: "https://example.com", Secret: "s", CreatedAt: at(0)}
			insertWebhooks(t, st, w)
			const n = 8
			wins := make(chan bool, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					var ok bool
					err := st.Update(t.Context(), func(tx store.Tx) error {
						var err error
						ok, err = tx.ClaimWebhook(t.Context(), w.ID, fmt.Sprint("holder-", i), at(0), at(10))
						return err
					})
					if err != nil {
						t.Error(err)
					}
					wins <- ok
				})
			}
			wg.Wait()
			close(wins)
			won := 0
			for ok := range wins {
				if ok {
					won++
				}
			}
			if won != 1 {
				t.Fatalf("%d of %d racing holders claimed one free webhook, want exactly 1", won, n)
			}
		}},
		{"Deliveries", testDeliveries},
	})
}

func insertWebhooks(t *testing.T, st store.Store, hooks ...*belay.Webhook) {
	t.Helper()
	mustUpdate(t, st, func(tx store.Tx) error {
		for _, w := range hooks {
			if err := tx.InsertWebhook(t.Context(), w); err != nil {
				return err
			}
		}
		return nil
	})
}

func testDeliveries(t *testing.T, st store.Store) {
	w1 := &belay.Webhook{ID: newID(), URL: "https://example.com/1", Secret: "s", CreatedAt: at(0)}
	w2 := &belay.Webhook{ID: newID(), URL: "https://example.com/2", Secret: "s", CreatedAt: at(0)}
	insertWebhooks(t, st, w1, w2)
	ds := []*belay.Delivery{
		{ID: newID(), WebhookID: w1.ID, EventSeq: 1, EventType: belay.EventHITLRequired, Attempt: 1, StatusCode: 500,
			Error: "server error", DurationMs: 120, CreatedAt: at(1).Add(1)},
		{ID: newID(), WebhookID: w1.ID, EventSeq: 1, EventType: belay.EventHITLRequired, Attempt: 2, StatusCode: 200, DurationMs: 80, CreatedAt: at(3)},
		{ID: newID(), WebhookID: w2.ID, EventSeq: 1, EventType: belay.EventHITLRequired, Attempt: 1, StatusCode: 204, CreatedAt: at(2)},
		{ID: newID(), WebhookID: w1.ID, EventSeq: 2, EventType: belay.EventHITLDecided, Attempt: 1, StatusCode: 200, CreatedAt: at(4)},
		{ID: newID(), WebhookID: w2.ID, EventSeq: 2, EventType: belay.EventHITLDecided, Attempt: 1, Error: "dial tcp: refused", CreatedAt: at(5)},
	}
	wantAllSet(t, "delivery", ds[0])
	mustUpdate(t, st, func(tx store.Tx) error {
		for _, d := range ds {
			if err := tx.InsertDelivery(t.Context(), d); err != nil {
				return err
			}
		}
		return nil
	})
	newest := []*belay.Delivery{ds[4], ds[3], ds[1], ds[2], ds[0]}
	for _, tc := range []struct {
		name string
		q    store.DeliveryQuery
		want []*belay.Delivery
	}{
		{"All", store.DeliveryQuery{Limit: 10}, newest},
		{"Limit", store.DeliveryQuery{Limit: 2}, newest[:2]},
		{"Webhook", store.DeliveryQuery{WebhookID: w1.ID, Limit: 10}, []*belay.Delivery{ds[3], ds[1], ds[0]}},
		{"WebhookLimit", store.DeliveryQuery{WebhookID: w2.ID, Limit: 1}, []*belay.Delivery{ds[4]}},
		{"UnknownWebhook", store.DeliveryQuery{WebhookID: newID(), Limit: 10}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := st.ListDeliveries(t.Context(), tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				got = nil
			}
			wantEqual(t, "deliveries, newest first", tc.want, got)
			for _, d := range got {
				wantUTC(t, "delivery CreatedAt", d.CreatedAt)
			}
		})
	}
	for _, tc := range []struct {
		name    string
		webhook string
		seq     int64
		want    *belay.Delivery
	}{
		{"LastDeliveryHighestAttempt", w1.ID, 1, ds[1]},
		{"LastDeliveryOfItsWebhook", w2.ID, 1, ds[2]},
		{"LastDeliveryNone", w1.ID, 3, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := st.LastDelivery(t.Context(), tc.webhook, tc.seq)
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, "last delivery", tc.want, got)
		})
	}
	// Deleting a webhook deletes its delivery log.
	mustUpdate(t, st, func(tx store.Tx) error { return tx.DeleteWebhook(t.Context(), w2.ID) })
	got, err := st.ListDeliveries(t.Context(), store.DeliveryQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "deliveries after deleting a webhook", []*belay.Delivery{ds[3], ds[1], ds[0]}, got)
}
