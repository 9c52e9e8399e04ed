package storetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// testSearch: the full-text index follows checkpoints in their own
// transaction, hostile text is never a syntax error, both rankings stay in
// scope, project and tags, and the embedding queue and vectors keep to one
// model.
func testSearch(t *testing.T, o opener) {
	subtests(t, o, []subtest{
		{"TextAtOnce", testSearchText},
		{"HostileText", testSearchHostile},
		{"Scope", testSearchScope},
		{"TagsExact", testSearchTagsExact},
		{"Vectors", testSearchVectors},
		{"Queue", testEmbeddingQueue},
		{"Claims", testEmbeddingClaims},
		{"ModelChange", testEmbeddingModelChange},
		{"TokenCount", testSetTokenCount},
	})
}

// testModel is the vector space of the suite: 4 dimensions.
var testModel = store.IndexModel{Model: "test-model", Dimensions: 4}

// unit returns the unit vector along dimension i of 4, tilted towards j by w.
func unit(i, j int, w float32) []float32 {
	v := make([]float32, 4)
	v[i] = 1
	v[j] += w
	var n float32
	for _, x := range v {
		n += x * x
	}
	for k := range v {
		v[k] /= sqrt32(n)
	}
	return v
}

func sqrt32(x float32) float32 {
	r := x
	for range 20 {
		r = (r + x/r) / 2
	}
	return r
}

func search(t *testing.T, st store.Reader, q store.SearchQuery) []store.SearchHit {
	t.Helper()
	if q.Limit == 0 {
		q.Limit = 10
	}
	if q.Scope.User == "" && !q.Scope.All {
		q.Scope = store.Everything
	}
	hits, err := st.SearchCheckpoints(t.Context(), q)
	if err != nil {
		t.Fatalf("SearchCheckpoints(%q): %v", q.Text, err)
	}
	return hits
}

// byText returns the ids of the text ranking, best first.
func byText(hits []store.SearchHit) []string {
	return ranking(hits, func(h store.SearchHit) int { return h.TextRank })
}

// byVector returns the ids of the vector ranking, best first.
func byVector(hits []store.SearchHit) []string {
	return ranking(hits, func(h store.SearchHit) int { return h.VectorRank })
}

func ranking(hits []store.SearchHit, rank func(store.SearchHit) int) []string {
	var ranked []store.SearchHit
	for _, h := range hits {
		if rank(h) > 0 {
			ranked = append(ranked, h)
		}
	}
	slices.SortFunc(ranked, func(a, b store.SearchHit) int { return rank(a) - rank(b) })
	var out []string
	for i, h := range ranked {
		if rank(h) != i+1 {
			return append(out, "ranks are not 1, 2, 3…")
		}
		out = append(out, h.CheckpointID)
	}
	return out
}

func putVector(t *testing.T, st store.Store, id string, v []float32) {
	t.Helper()
	mustUpdate(t, st, func(tx store.Tx) error {
		return tx.PutEmbedding(t.Context(), id, store.Embedding{Model: testModel.Model, Vector: v})
	})
}

func queue(t *testing.T, st store.Store, m store.IndexModel, all bool) int64 {
	t.Helper()
	var n int64
	mustUpdate(t, st, func(tx store.Tx) error {
		var err error
		n, err = tx.QueueEmbeddings(t.Context(), m, all, at(100))
		return err
	})
	return n
}

func testSearchText(t *testing.T, st store.Store) {
	s := mustInsertSession(t, st, newSession("/p", at(0)))
	jwt := newCheckpoint(s, 1, at(1))
	jwt.Summary, jwt.Tags = "Implemented JWT authentication", []string{"auth"}
	migration := newCheckpoint(s, 2, at(2))
	migration.Summary, migration.Description = "Fixed OC-41252", "the users table migration failed on null emails"
	named := newCheckpoint(s, 3, at(3))
	named.Summary, named.Name = "done", "architecture"
	for _, c := range []*belay.Checkpoint{jwt, migration, named} {
		mustInsertCheckpoint(t, st, c)
	}
	for _, tc := range []struct{ text, want string }{
		{"jwt", jwt.ID},                    // summary
		{"AUTH", jwt.ID},                   // tags, any case
		{"emails migration", migration.ID}, // description
		{"OC-41252", migration.ID},         // an identifier with a dash
		{"architecture", named.ID},         // name
	} {
		if got := byText(search(t, st, store.SearchQuery{Text: tc.text})); !slices.Equal(got, []string{tc.want}) {
			t.Errorf("text %q found %v, want [%s]", tc.text, got, tc.want)
		}
	}
	// More words of the query rank higher.
	both := newCheckpoint(s, 4, at(4))
	both.Summary = "JWT authentication tokens expire"
	mustInsertCheckpoint(t, st, both)
	if got := byText(search(t, st, store.SearchQuery{Text: "jwt tokens expire"})); len(got) != 2 || got[0] != both.ID {
		t.Errorf("jwt tokens expire ranked %v, want %s first of two", got, both.ID)
	}
	hits := search(t, st, store.SearchQuery{Text: "jwt"})
	for _, h := range hits {
		if h.TextScore <= 0 || h.VectorRank != 0 || h.HasVector {
			t.Errorf("text hit %+v: want a positive score and no vector part", h)
		}
	}

	// Deleting a checkpoint, or its session, takes it out of the index in
	// the same transaction.
	mustUpdate(t, st, func(tx store.Tx) error { return tx.DeleteCheckpoint(t.Context(), jwt.ID) })
	if got := byText(search(t, st, store.SearchQuery{Text: "jwt"})); !slices.Equal(got, []string{both.ID}) {
		t.Errorf("after deleting %s, jwt found %v", jwt.ID, got)
	}
	mustUpdate(t, st, func(tx store.Tx) error { return tx.DeleteSession(t.Context(), s.ID) })
	if got := search(t, st, store.SearchQuery{Text: "jwt OC-41252 architecture"}); len(got) != 0 {
		t.Errorf("after deleting the session, search found %v", got)
	}
	// A rolled-back insert leaves nothing in the index.
	s2 := mustInsertSession(t, st, newSession("/p", at(10)))
	ghost := newCheckpoint(s2, 1, at(11))
	ghost.Summary = "phantom"
	seal(t, ghost)
	err := st.Update(t.Context(), func(tx store.Tx) error {
		if err := tx.InsertCheckpoint(t.Context(), ghost); err != nil {
			return err
		}
		return belay.Errorf(belay.CodeConflict, "roll back")
	})
	wantCode(t, "rolled-back insert", err, belay.CodeConflict)
	if got := search(t, st, store.SearchQuery{Text: "phantom"}); len(got) != 0 {
		t.Errorf("a rolled-back checkpoint was found: %v", got)
	}
}

func testSearchHostile(t *testing.T, st store.Store) {
	s := mustInsertSession(t, st, newSession("/p", at(0)))
	c := newCheckpoint(s, 1, at(1))
	c.Summary = `Fixed OC-41252 and the "quoted" AND (grouped) NEAR thing`
	mustInsertCheckpoint(t, st, c)
	for _, text := range []string{
		`OC-41252`, `"`, `""`, `AND (`, `(`, `)`, `OR`, `NOT`, `AND`, `NEAR(a b, 2)`, `*`, `a*`, `^start`,
		`summary:fixed`, `{summary}: x`, `'; DROP TABLE checkpoints; --`, `\`, `-`, `+`, "\x00", `🚀`, ``, `   `,
		`"unbalanced`, `a OR OR b`, `a AND AND`, `(((((`, `$$`, `col1 : col2`,
	} {
		if _, err := st.SearchCheckpoints(t.Context(), store.SearchQuery{Scope: store.Everything, Text: text, Limit: 5}); err != nil {
			t.Errorf("text %q: %v", text, err)
		}
	}
	for _, text := range []string{`OC-41252`, `"quoted"`, `AND (`, `NEAR`} {
		if got := byText(search(t, st, store.SearchQuery{Text: text})); !slices.Equal(got, []string{c.ID}) {
			t.Errorf("text %q found %v, want [%s]", text, got, c.ID)
		}
	}
	// Words of the query are words, not operators.
	if got := search(t, st, store.SearchQuery{Text: `NOT fixed`}); len(byText(got)) != 1 {
		t.Errorf("NOT fixed found %v, want the checkpoint (NOT is a word)", got)
	}
}

func testSearchScope(t *testing.T, st store.Store) {
	f := newScopeFixture(t, st)
	queue(t, st, testModel, false)
	for _, c := range f.plain {
		putVector(t, st, c.ID, unit(0, 1, 0))
	}
	for _, c := range f.pending {
		putVector(t, st, c.ID, unit(0, 1, 1))
	}
	for _, tc := range []struct {
		name  string
		scope store.Scope
		want  []string
	}{
		{"Owner", store.Scope{User: "alice"}, []string{"ab", "abc", "sibling", "upper", "literal", "wildcard"}},
		{"Grantee", store.Scope{User: "bob"}, []string{"bobs", "read", "write", "decide"}},
		{"Stranger", store.Scope{User: "eve"}, nil},
		{"Zero", store.Scope{}, nil},
		{"Project", store.Scope{User: "alice", Projects: []string{"/w/a/b"}}, []string{"ab", "abc"}},
		{"PercentIsLiteral", store.Scope{User: "alice", Projects: []string{"/w/10%off"}}, nil},
		{"ProjectOfAll", store.Scope{All: true, Projects: []string{"/w/a/b"}},
			[]string{"ab", "abc", "bobs", "read", "revoked", "ownerless"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := map[string]bool{}
			for _, name := range tc.want {
				in[f.sessions[name].ID] = true
			}
			for _, q := range []struct {
				name string
				q    store.SearchQuery
				want []*belay.Checkpoint
			}{
				{"all", store.SearchQuery{}, checkpointsIn(in, f.plain, f.pending)},
				{"tagged", store.SearchQuery{Tags: []string{"t", "u"}}, checkpointsIn(in, f.pending)},
				{"of /w/a/b", store.SearchQuery{ProjectPath: "/w/a/b"}, slices.DeleteFunc(checkpointsIn(in, f.plain, f.pending),
					func(c *belay.Checkpoint) bool { return c.ProjectPath != "/w/a/b" })},
			} {
				q.q.Scope, q.q.Text, q.q.Vector, q.q.Model, q.q.Limit = tc.scope, "checkpoint", unit(0, 1, 0.5), testModel.Model, 100
				hits, err := st.SearchCheckpoints(t.Context(), q.q)
				if err != nil {
					t.Fatal(err)
				}
				want := checkpointIDs(q.want)
				slices.Sort(want)
				for _, got := range [][]string{byText(hits), byVector(hits)} {
					slices.Sort(got)
					wantEqual(t, q.name, nilIfEmpty(want), nilIfEmpty(got))
				}
			}
		})
	}
}

func testSearchVectors(t *testing.T, st store.Store) {
	s := mustInsertSession(t, st, newSession("/p", at(0)))
	var cps []*belay.Checkpoint
	for i := range 4 {
		c := newCheckpoint(s, int64(i+1), at(i+1))
		c.Summary = []string{"alpha", "beta", "gamma", "delta"}[i]
		cps = append(cps, mustInsertCheckpoint(t, st, c))
	}
	queue(t, st, testModel, false)
	putVector(t, st, cps[0].ID, unit(0, 1, 0))    // the query's direction
	putVector(t, st, cps[1].ID, unit(0, 1, 1))    // 45° off
	putVector(t, st, cps[2].ID, unit(2, 0, 0))    // orthogonal: similarity 0, never ranked
	putVector(t, st, cps[3].ID, unit(1, 0, -0.1)) // nearly orthogonal, on the negative side: never ranked
	q := store.SearchQuery{Text: "gamma", Vector: unit(0, 1, 0), Model: testModel.Model}
	hits := search(t, st, q)
	wantEqual(t, "vector ranking", []string{cps[0].ID, cps[1].ID}, byVector(hits))
	wantEqual(t, "text ranking", []string{cps[2].ID}, byText(hits))
	for _, h := range hits {
		want := map[string]float64{cps[0].ID: 1, cps[1].ID: 0.7071, cps[2].ID: 0}[h.CheckpointID]
		if !h.HasVector || h.Similarity < want-0.001 || h.Similarity > want+0.001 {
			t.Errorf("%s: similarity %v (has vector %v), want %v", h.CheckpointID, h.Similarity, h.HasVector, want)
		}
	}
	q.Limit = 1
	wantEqual(t, "vector ranking of 1", []string{cps[0].ID}, byVector(search(t, st, q)))

	// A replaced vector counts, a deleted checkpoint's is gone.
	putVector(t, st, cps[1].ID, unit(0, 1, 0.01))
	putVector(t, st, cps[0].ID, unit(0, 1, 2))
	wantEqual(t, "after replacing", []string{cps[1].ID, cps[0].ID}, byVector(search(t, st, store.SearchQuery{Vector: unit(0, 1, 0), Model: testModel.Model})))
	mustUpdate(t, st, func(tx store.Tx) error { return tx.DeleteCheckpoint(t.Context(), cps[1].ID) })
	wantEqual(t, "after deleting", []string{cps[0].ID}, byVector(search(t, st, store.SearchQuery{Vector: unit(0, 1, 0), Model: testModel.Model})))

	// Vectors of another model, or another length, are never compared.
	for _, q := range []store.SearchQuery{
		{Vector: unit(0, 1, 0), Model: "other-model"},
		{Vector: []float32{1, 0, 0}, Model: testModel.Model},
	} {
		if got := search(t, st, q); len(got) != 0 {
			t.Errorf("query of model %s, %d dimensions found %v", q.Model, len(q.Vector), got)
		}
	}
	// Inside a transaction the search sees the transaction's own vectors.
	mustUpdate(t, st, func(tx store.Tx) error {
		if err := tx.PutEmbedding(t.Context(), cps[3].ID, store.Embedding{Model: testModel.Model, Vector: unit(0, 1, 0)}); err != nil {
			return err
		}
		hits, err := tx.SearchCheckpoints(t.Context(), store.SearchQuery{Scope: store.Everything, Vector: unit(0, 1, 0), Model: testModel.Model, Limit: 5})
		if err != nil {
			return err
		}
		wantEqual(t, "in a transaction", []string{cps[3].ID, cps[0].ID}, byVector(hits))
		return nil
	})
}

// dueEmbeddings returns the ids DueEmbeddings gives at at(i).
func dueEmbeddings(t *testing.T, st store.Reader, i int) []string {
	t.Helper()
	jobs, err := st.DueEmbeddings(t.Context(), at(i), 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, j := range jobs {
		out = append(out, j.Checkpoint.ID)
	}
	return out
}

func indexState(t *testing.T, st store.Reader) store.IndexState {
	t.Helper()
	s, err := st.SearchIndex(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testEmbeddingQueue(t *testing.T, st store.Store) {
	wantEqual(t, "empty index", store.IndexState{}, indexState(t, st))
	s := mustInsertSession(t, st, newSession("/p", at(0)))
	a := mustInsertCheckpoint(t, st, newCheckpoint(s, 1, at(1)))
	b := mustInsertCheckpoint(t, st, newCheckpoint(s, 2, at(2)))
	// A checkpoint waits for its vector from the transaction that saves it.
	wantEqual(t, "queued by insert", []string{a.ID, b.ID}, dueEmbeddings(t, st, 3))
	jobs, err := st.DueEmbeddings(t.Context(), at(3), 1)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("DueEmbeddings limit 1: %v, %v", jobs, err)
	}
	wantEqual(t, "job's checkpoint", a, jobs[0].Checkpoint)
	wantEqual(t, "job's attempts", 0, jobs[0].Attempts)

	if n := queue(t, st, testModel, false); n != 2 {
		t.Errorf("QueueEmbeddings = %d, want 2", n)
	}
	// A failed attempt waits for its retry; the others go first.
	mustUpdate(t, st, func(tx store.Tx) error { return tx.RetryEmbedding(t.Context(), a.ID, 1, at(10), "endpoint down") })
	wantEqual(t, "during a's backoff", []string{b.ID}, dueEmbeddings(t, st, 9))
	wantEqual(t, "after a's backoff", []string{b.ID, a.ID}, dueEmbeddings(t, st, 10))
	jobs, _ = st.DueEmbeddings(t.Context(), at(10), 10)
	if jobs[1].Attempts != 1 {
		t.Errorf("attempts after a failure = %d, want 1", jobs[1].Attempts)
	}
	want := store.IndexState{IndexModel: testModel, Checkpoints: 2, Queued: 2, Failing: 1, LastError: "endpoint down"}
	wantEqual(t, "state with a failure", want, indexState(t, st))

	putVector(t, st, b.ID, unit(0, 1, 0))
	wantEqual(t, "after b's vector", []string{a.ID}, dueEmbeddings(t, st, 10))
	want = store.IndexState{IndexModel: testModel, Checkpoints: 2, Embedded: 1, Queued: 1, Failing: 1, LastError: "endpoint down"}
	wantEqual(t, "state after b's vector", want, indexState(t, st))
	// A vector for a checkpoint deleted meanwhile is no error.
	mustUpdate(t, st, func(tx store.Tx) error { return tx.DeleteCheckpoint(t.Context(), a.ID) })
	putVector(t, st, a.ID, unit(0, 1, 0))
	wantEqual(t, "after deleting a", []string(nil), dueEmbeddings(t, st, 100))

	// Reindexing everything queues b again, with a clean slate, and keeps
	// its vector until the new one lands.
	if n := queue(t, st, testModel, true); n != 1 {
		t.Errorf("QueueEmbeddings(all) = %d, want 1", n)
	}
	wantEqual(t, "queued again", []string{b.ID}, dueEmbeddings(t, st, 0))
	wantEqual(t, "vector kept meanwhile", []string{b.ID}, byVector(search(t, st, store.SearchQuery{Vector: unit(0, 1, 0), Model: testModel.Model})))
}

func testEmbeddingModelChange(t *testing.T, st store.Store) {
	s := mustInsertSession(t, st, newSession("/p", at(0)))
	a := mustInsertCheckpoint(t, st, newCheckpoint(s, 1, at(1)))
	b := mustInsertCheckpoint(t, st, newCheckpoint(s, 2, at(2)))
	queue(t, st, testModel, false)
	putVector(t, st, a.ID, unit(0, 1, 0))
	putVector(t, st, b.ID, unit(0, 1, 0))
	wantEqual(t, "all embedded", []string(nil), dueEmbeddings(t, st, 100))

	// Another model: every checkpoint waits again, and a late vector of the
	// old model is dropped instead of mixing the two spaces.
	next := store.IndexModel{Model: "next-model", Dimensions: 3}
	if n := queue(t, st, next, false); n != 2 {
		t.Errorf("QueueEmbeddings(next model) = %d, want 2", n)
	}
	putVector(t, st, a.ID, unit(0, 1, 0.5))
	both := []string{a.ID, b.ID}
	slices.Sort(both) // queued at one time: in id order
	wantEqual(t, "old model's vector dropped", both, dueEmbeddings(t, st, 100))
	mustUpdate(t, st, func(tx store.Tx) error {
		return tx.PutEmbedding(t.Context(), a.ID, store.Embedding{Model: next.Model, Vector: []float32{0, 0, 1, 0}})
	})
	wantEqual(t, "vector of the wrong length dropped", both, dueEmbeddings(t, st, 100))
	mustUpdate(t, st, func(tx store.Tx) error {
		return tx.PutEmbedding(t.Context(), a.ID, store.Embedding{Model: next.Model, Vector: []float32{0, 0, 1}})
	})
	wantEqual(t, "after a's new vector", []string{b.ID}, dueEmbeddings(t, st, 100))
	wantEqual(t, "state", store.IndexState{IndexModel: next, Checkpoints: 2, Embedded: 1, Queued: 1}, indexState(t, st))
	// The old space still answers only its own queries: b's old vector.
	wantEqual(t, "old model's query", []string{b.ID}, byVector(search(t, st, store.SearchQuery{Vector: unit(0, 1, 0), Model: testModel.Model})))
	wantEqual(t, "new model's query", []string{a.ID}, byVector(search(t, st, store.SearchQuery{Vector: []float32{0, 0, 1}, Model: next.Model})))
}

func testSetTokenCount(t *testing.T, st store.Store) {
	s := mustInsertSession(t, st, newSession("/p", at(0)))
	c := mustInsertCheckpoint(t, st, newCheckpoint(s, 1, at(1)))
	mustUpdate(t, st, func(tx store.Tx) error { return tx.SetTokenCount(t.Context(), c.ID, 7, "o200k_base") })
	got := mustGetCheckpoint(t, st, c.ID)
	if got.TokenCount != 7 || got.TokenEncoding != "o200k_base" {
		t.Errorf("token count %d %q, want 7 o200k_base", got.TokenCount, got.TokenEncoding)
	}
	if err := got.VerifyChecksum(); err != nil {
		t.Errorf("a token count changed the checksum: %v", err)
	}
	err := st.Update(t.Context(), func(tx store.Tx) error { return tx.SetTokenCount(t.Context(), newID(), 1, "o200k_base") })
	wantCode(t, "SetTokenCount of a missing checkpoint", err, belay.CodeCheckpointNotFound)
}

// testSearchTagsExact: a tag filter matches tags exactly, whatever words or
// characters they are made of.
func testSearchTagsExact(t *testing.T, st store.Store) {
	s := mustInsertSession(t, st, newSession("/p", at(0)))
	tags := [][]string{{"auth-v2"}, {"auth v2"}, {"x\ue000y"}, {"x y"}, {"Über"}, {"über", "auth-v2"}}
	var ids []string
	for i, tt := range tags {
		c := newCheckpoint(s, int64(i+1), at(i+1))
		c.Summary, c.Tags = "release plan", tt
		ids = append(ids, mustInsertCheckpoint(t, st, c).ID)
	}
	for _, tc := range []struct {
		tags []string
		want []string
	}{
		{[]string{"auth-v2"}, []string{ids[0], ids[5]}},
		{[]string{"auth v2"}, []string{ids[1]}},
		{[]string{"x\ue000y"}, []string{ids[2]}},
		{[]string{"x y"}, []string{ids[3]}},
		{[]string{"Über"}, []string{ids[4]}},
		{[]string{"über", "auth-v2"}, []string{ids[5]}},
		{[]string{"auth"}, nil},
	} {
		got := byText(search(t, st, store.SearchQuery{Text: "release plan", Tags: tc.tags}))
		slices.Sort(got)
		want := slices.Clone(tc.want)
		slices.Sort(want)
		wantEqual(t, fmt.Sprintf("tags %q", tc.tags), nilIfEmpty(want), nilIfEmpty(got))
	}
}

// claim runs ClaimEmbeddings at at(now) until at(until) and returns the ids.
func claim(t *testing.T, st store.Store, now, until, limit int) []string {
	t.Helper()
	var ids []string
	mustUpdate(t, st, func(tx store.Tx) error {
		jobs, err := tx.ClaimEmbeddings(t.Context(), at(now), at(until), limit)
		for _, j := range jobs {
			ids = append(ids, j.Checkpoint.ID)
		}
		return err
	})
	return ids
}

func testEmbeddingClaims(t *testing.T, st store.Store) {
	queue(t, st, testModel, false)
	s := mustInsertSession(t, st, newSession("/p", at(0)))
	a := mustInsertCheckpoint(t, st, newCheckpoint(s, 1, at(1)))
	b := mustInsertCheckpoint(t, st, newCheckpoint(s, 2, at(2)))
	c := mustInsertCheckpoint(t, st, newCheckpoint(s, 3, at(3)))
	// A claim takes the longest waiting first, and what it took is not
	// due to anyone else until the claim ends.
	wantEqual(t, "first claim", []string{a.ID, b.ID}, claim(t, st, 5, 20, 2))
	wantEqual(t, "second claim", []string{c.ID}, claim(t, st, 5, 20, 10))
	wantEqual(t, "nothing left to claim", []string(nil), claim(t, st, 6, 20, 10))
	wantEqual(t, "due while claimed", []string(nil), dueEmbeddings(t, st, 19))
	// Settled: a embedded, b failed and waits for its retry.
	putVector(t, st, a.ID, unit(1, 0, 0))
	mustUpdate(t, st, func(tx store.Tx) error { return tx.RetryEmbedding(t.Context(), b.ID, 1, at(30), "endpoint down") })
	// c's claim was never settled (its instance died): due again at its end.
	wantEqual(t, "an unsettled claim, once it ends", []string{c.ID}, dueEmbeddings(t, st, 20))
	wantEqual(t, "claimed again", []string{c.ID}, claim(t, st, 20, 40, 10))
	wantEqual(t, "the failure, at its retry", []string{b.ID}, claim(t, st, 30, 50, 10))
}
