package storetest

import (
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// testTokens: a token round-trips with its user's admin flag, is found by the
// hash of its secret and by its id (revoked too), lists newest first, keeps its first
// revocation and its last use.
func testTokens(t *testing.T, st store.Store) {
	ctx := t.Context()
	alice := &belay.User{Name: "alice", Admin: true, CreatedAt: at(1)}
	bob := &belay.User{Name: "bob", CreatedAt: at(2)}
	full := &belay.Token{ID: newID(), User: "alice", Name: "ci agent", Admin: true,
		Scopes: []belay.Scope{belay.ScopeRead, belay.ScopeDecide}, Projects: []string{"/home/alice/a", "/srv/b"},
		CreatedAt: at(3).Add(1)}
	minimal := &belay.Token{ID: newID(), User: "bob", CreatedAt: at(5)}
	older := &belay.Token{ID: newID(), User: "bob", Name: "old", Scopes: []belay.Scope{}, CreatedAt: at(2)}
	tokens := []struct {
		tk   *belay.Token
		hash string
		user *belay.User
	}{{full, "h1", alice}, {minimal, "h2", bob}, {older, "h3", bob}}
	insertToken := func(tk *belay.Token, hash string) error {
		return st.Update(ctx, func(tx store.Tx) error { return tx.InsertToken(ctx, tk, hash) })
	}
	mustUpdate(t, st, func(tx store.Tx) error {
		for _, u := range []*belay.User{alice, bob} {
			if err := tx.PutUser(ctx, u); err != nil {
				return err
			}
		}
		return nil
	})
	for _, tc := range tokens {
		if err := insertToken(tc.tk, tc.hash); err != nil {
			t.Fatalf("InsertToken(%s): %v", tc.hash, err)
		}
	}
	byHash := func(hash string) *belay.Token {
		t.Helper()
		tk, _, err := st.TokenByHash(ctx, hash)
		if err != nil {
			t.Fatalf("TokenByHash(%s): %v", hash, err)
		}
		return tk
	}
	for _, tc := range tokens {
		tk, u, err := st.TokenByHash(ctx, tc.hash)
		if err != nil {
			t.Fatalf("TokenByHash(%s): %v", tc.hash, err)
		}
		wantEqual(t, "token of "+tc.hash, tc.tk, tk)
		wantEqual(t, "user of "+tc.hash, tc.user, u)
		wantUTC(t, "token CreatedAt", tk.CreatedAt)
	}
	_, _, err := st.TokenByHash(ctx, "unknown")
	wantCode(t, "TokenByHash of an unknown hash", err, belay.CodeNotFound)

	if insertToken(&belay.Token{ID: newID(), User: "bob", CreatedAt: at(4)}, "h1") == nil {
		t.Error("a second token with the same hash was stored")
	}
	if insertToken(&belay.Token{ID: full.ID, User: "bob", CreatedAt: at(4)}, "h8") == nil {
		t.Error("a second token with the same id was stored")
	}
	if insertToken(&belay.Token{ID: newID(), User: "nobody", CreatedAt: at(4)}, "h9") == nil {
		t.Error("a token of a missing user was stored")
	}
	wantEqual(t, "token h1 after rejected inserts", full, byHash("h1"))

	list, err := st.ListTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "tokens, newest first", []*belay.Token{minimal, full, older}, list)

	// A later touch moves the last use; a second revocation keeps the first.
	for _, step := range []func(tx store.Tx) error{
		func(tx store.Tx) error { return tx.TouchToken(ctx, full.ID, at(10)) },
		func(tx store.Tx) error { return tx.TouchToken(ctx, full.ID, at(11).Add(1)) },
		func(tx store.Tx) error { return tx.RevokeToken(ctx, full.ID, at(20).Add(1)) },
		func(tx store.Tx) error { return tx.RevokeToken(ctx, full.ID, at(30)) },
	} {
		mustUpdate(t, st, step)
	}
	want := *full
	want.LastUsedAt, want.RevokedAt = ptr(at(11).Add(1)), ptr(at(20).Add(1))
	wantAllSet(t, "revoked token", &want)
	got := byHash("h1")
	wantEqual(t, "token after touch and revoke (still found by hash)", &want, got)
	wantUTC(t, "token LastUsedAt", *got.LastUsedAt)
	wantUTC(t, "token RevokedAt", *got.RevokedAt)
	wantEqual(t, "untouched token", minimal, byHash("h2"))
	list, err = st.ListTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "tokens after revoke", []*belay.Token{minimal, &want, older}, list)
	byID, err := st.GetToken(ctx, full.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "revoked token by id", &want, byID)
	_, err = st.GetToken(ctx, newID())
	wantCode(t, "GetToken of an unknown id", err, belay.CodeNotFound)

	err = st.Update(ctx, func(tx store.Tx) error { return tx.RevokeToken(ctx, newID(), at(40)) })
	wantCode(t, "RevokeToken of an unknown id", err, belay.CodeNotFound)
	err = st.Update(ctx, func(tx store.Tx) error { return tx.TouchToken(ctx, newID(), at(40)) })
	wantCode(t, "TouchToken of an unknown id", err, belay.CodeNotFound)
}
