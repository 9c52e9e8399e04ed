// Package storetest is the behaviour suite every store driver must pass. A
// driver's tests call Run with a function that opens a fresh, empty store:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "belay.db"))
//			if err != nil {
//				t.Fatal(err)
//			}
//			return db
//		})
//	}
//
// The suite speaks only the store interfaces, so every engine runs the same
// checks: what one driver passes, every driver must pass.
package storetest

import (
	"testing"

	"github.com/belayhq/belay/store"
)

// opener opens a fresh, empty store for one subtest.
type opener func(t *testing.T) store.Store

// fresh opens a store and closes it when the test ends.
func (o opener) fresh(t *testing.T) store.Store {
	t.Helper()
	st := o(t)
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return st
}

// Run runs the conformance suite. open must return a new, empty store each
// time it is called, and be safe to call from parallel subtests; Run closes
// every store it opens when its subtest ends.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	o := opener(open)
	groups := []struct {
		name string
		run  func(t *testing.T, o opener)
	}{
		{"Session", testSessions},
		{"Checkpoint", testCheckpoints},
		{"ListCheckpoints", testListCheckpoints},
		{"HITL", testHITL},
		{"Event", testEvents},
		{"Update", testUpdate},
		{"Rollback", testRollbacks},
		{"User", testUsers},
		{"Webhook", testWebhooks},
		{"Scope", testScope},
		{"Search", testSearch},
		{"Life", testLife},
		{"Settings", testSettings},
		{"StateChunks", testStateChunks},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			g.run(t, o)
		})
	}
}

// subtests runs each case as a parallel subtest on its own fresh store.
func subtests(t *testing.T, o opener, cases []subtest) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, o.fresh(t))
		})
	}
}

type subtest struct {
	name string
	run  func(t *testing.T, st store.Store)
}
