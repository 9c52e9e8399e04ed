package storetest

import (
	"bytes"
	"sync"
	"testing"

	"github.com/belayhq/belay/store"
)

func testSettings(t *testing.T, o opener) {
	subtests(t, o, []subtest{
		{"FirstValueWins", func(t *testing.T, st store.Store) {
			init := func(name, v string) []byte {
				t.Helper()
				var got []byte
				mustUpdate(t, st, func(tx store.Tx) (err error) {
					got, err = tx.InitSetting(t.Context(), name, []byte(v))
					return err
				})
				return got
			}
			if got := init("key", "first"); string(got) != "first" {
				t.Errorf("first InitSetting = %q, want first", got)
			}
			if got := init("key", "second"); string(got) != "first" {
				t.Errorf("second InitSetting = %q, want the first value kept", got)
			}
			mustUpdate(t, st, func(tx store.Tx) error { return tx.PutSetting(t.Context(), "key", []byte("put")) })
			if got := init("key", "third"); string(got) != "put" {
				t.Errorf("InitSetting after PutSetting = %q, want put", got)
			}
			// A rolled-back transaction sets nothing.
			_ = st.Update(t.Context(), func(tx store.Tx) error {
				if _, err := tx.InitSetting(t.Context(), "other", []byte("lost")); err != nil {
					return err
				}
				return errBoom
			})
			if got := init("other", "kept"); string(got) != "kept" {
				t.Errorf("after a rolled-back InitSetting = %q, want kept", got)
			}
		}},
		{"Signouts", func(t *testing.T, st store.Store) {
			signedOut := func(id string) bool {
				t.Helper()
				out, err := st.SignedOut(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			if signedOut("a") {
				t.Error("a sign-in never signed out reads as signed out")
			}
			mustUpdate(t, st, func(tx store.Tx) error { return tx.AddSignout(t.Context(), "a", at(10), at(1)) })
			mustUpdate(t, st, func(tx store.Tx) error { return tx.AddSignout(t.Context(), "a", at(10), at(1)) })
			if !signedOut("a") {
				t.Error("a signed-out sign-in does not read as signed out")
			}
			// Once it would have ended, its record is forgotten by the next.
			mustUpdate(t, st, func(tx store.Tx) error { return tx.AddSignout(t.Context(), "b", at(30), at(10)) })
			if signedOut("a") || !signedOut("b") {
				t.Errorf("after a's end: a %v, b %v; want a forgotten, b signed out", signedOut("a"), signedOut("b"))
			}
		}},
		{"RacersAgree", func(t *testing.T, st store.Store) {
			const n = 8
			got := make([][]byte, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					err := st.Update(t.Context(), func(tx store.Tx) (err error) {
						got[i], err = tx.InitSetting(t.Context(), "raced", []byte{byte(i), 0, 255})
						return err
					})
					if err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			for i := range got {
				if !bytes.Equal(got[i], got[0]) || len(got[i]) != 3 {
					t.Fatalf("racers got %v, want one value for all", got)
				}
			}
		}},
	})
}
