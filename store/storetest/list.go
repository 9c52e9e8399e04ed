package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/chunkstore"
)

// listFixture is eight checkpoints over two sessions and projects, with
// every type, pending and decided HITL requests, tags, and two pairs created
// at the same instant so that the id breaks ties.
type listFixture struct {
	s1, s2 *belay.Session
	cps    []*belay.Checkpoint
}

func newListFixture(t *testing.T, st store.Store) *listFixture {
	t.Helper()
	f := &listFixture{
		s1: mustInsertSession(t, st, newSession("/p/one", at(0))),
		s2: mustInsertSession(t, st, newSession("/p/two", at(0))),
	}
	specs := []struct {
		two    bool
		typ    belay.CheckpointType
		minute int
		hitl   string // "", "pending" or "decided"
		tags   []string
	}{
		{false, belay.TypeManual, 0, "", []string{"a"}},
		{false, belay.TypeAuto, 1, "", []string{"a", "b"}},
		{false, belay.TypeHITL, 2, "pending", []string{"b"}},
		{false, belay.TypeHITL, 3, "decided", []string{"a", "b", "c"}},
		{true, belay.TypePhase, 3, "", nil},
		{true, belay.TypeHITL, 4, "pending", []string{"c"}},
		{true, belay.TypeError, 5, "", []string{"a"}},
		{true, belay.TypeManual, 5, "", []string{}},
	}
	seqs := map[string]int64{}
	for _, sp := range specs {
		sess := f.s1
		if sp.two {
			sess = f.s2
		}
		seqs[sess.ID]++
		c := newCheckpoint(sess, seqs[sess.ID], at(sp.minute))
		if sp.hitl != "" {
			withHITL(c, time.Time{})
		}
		c.Type, c.Tags, c.Name, c.Step = sp.typ, sp.tags, fmt.Sprintf("at-%d", sp.minute), int(seqs[sess.ID])
		mustInsertCheckpoint(t, st, c)
		if sp.hitl == "decided" && !decide(t, st, c.ID, newDecision("bob", at(sp.minute+1))) {
			t.Fatalf("deciding fixture checkpoint %s failed", c.ID)
		}
		f.cps = append(f.cps, c)
	}
	return f
}

// ids returns the ids of the fixture's checkpoints at idx, in the default
// order (created ascending).
func (f *listFixture) ids(idx ...int) []string {
	var out []*belay.Checkpoint
	for _, i := range idx {
		out = append(out, f.cps[i])
	}
	slices.SortFunc(out, compareCheckpoints(false, false))
	return checkpointIDs(out)
}

// inSession returns the ids of the fixture's checkpoints at idx, all of one
// session, in the session's order (by seq: the fixture's order).
func (f *listFixture) inSession(idx ...int) []string {
	var out []string
	for _, i := range idx {
		out = append(out, f.cps[i].ID)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func testListCheckpoints(t *testing.T, o opener) {
	subtests(t, o, []subtest{
		{"Filters", testListFilters},
		{"Orders", testListOrders},
		{"PagingWithFilter", testListPagingWithFilter},
		{"SessionOrder", testListSessionOrder},
		{"Offset", testListOffset},
		{"Bytes", testListBytes},
		{"Empty", func(t *testing.T, st store.Store) {
			items, total, _, err := st.ListCheckpoints(t.Context(), store.CheckpointQuery{Scope: store.Everything, Limit: 10})
			if err != nil || len(items) != 0 || total != 0 {
				t.Errorf("ListCheckpoints of an empty store = %d items, total %d, %v", len(items), total, err)
			}
		}},
	})
	t.Run("PagingWhileInserting", func(t *testing.T) {
		t.Parallel()
		testListPagingWhileInserting(t, o)
	})
}

func testListFilters(t *testing.T, st store.Store) {
	f := newListFixture(t, st)
	for _, tc := range []struct {
		name string
		q    store.CheckpointQuery
		want []string
	}{
		{"None", store.CheckpointQuery{}, f.ids(0, 1, 2, 3, 4, 5, 6, 7)},
		{"Session", store.CheckpointQuery{SessionID: f.s1.ID}, f.inSession(0, 1, 2, 3)},
		{"UnknownSession", store.CheckpointQuery{SessionID: newID()}, nil},
		{"ProjectPath", store.CheckpointQuery{ProjectPath: "/p/two"}, f.ids(4, 5, 6, 7)},
		{"ProjectPathIsExact", store.CheckpointQuery{ProjectPath: "/p"}, nil},
		{"Type", store.CheckpointQuery{Type: belay.TypeHITL}, f.ids(2, 3, 5)},
		{"TypeManual", store.CheckpointQuery{Type: belay.TypeManual}, f.ids(0, 7)},
		{"HITLRequired", store.CheckpointQuery{HITLRequired: ptr(true)}, f.ids(2, 3, 5)},
		{"HITLNotRequired", store.CheckpointQuery{HITLRequired: ptr(false)}, f.ids(0, 1, 4, 6, 7)},
		{"HITLDecided", store.CheckpointQuery{HITLDecided: ptr(true)}, f.ids(3)},
		{"HITLUndecided", store.CheckpointQuery{HITLDecided: ptr(false)}, f.ids(2, 5)},
		// Both bounds are exclusive.
		{"CreatedAfter", store.CheckpointQuery{CreatedAfter: ptr(at(3))}, f.ids(5, 6, 7)},
		{"CreatedBefore", store.CheckpointQuery{CreatedBefore: ptr(at(3))}, f.ids(0, 1, 2)},
		{"CreatedBetween", store.CheckpointQuery{CreatedAfter: ptr(at(1)), CreatedBefore: ptr(at(5))}, f.ids(2, 3, 4, 5)},
		{"CreatedNanosecondBounds", store.CheckpointQuery{CreatedAfter: ptr(at(3).Add(-1)), CreatedBefore: ptr(at(3).Add(1))}, f.ids(3, 4)},
		{"Tag", store.CheckpointQuery{Tags: []string{"a"}}, f.ids(0, 1, 3, 6)},
		{"TagsAreAnded", store.CheckpointQuery{Tags: []string{"a", "b"}}, f.ids(1, 3)},
		{"ThreeTags", store.CheckpointQuery{Tags: []string{"c", "b", "a"}}, f.ids(3)},
		{"UnknownTag", store.CheckpointQuery{Tags: []string{"a", "nope"}}, nil},
		{"Combined", store.CheckpointQuery{SessionID: f.s1.ID, Type: belay.TypeHITL, HITLDecided: ptr(false)}, f.inSession(2)},
		{"ProjectAndTag", store.CheckpointQuery{ProjectPath: "/p/two", Tags: []string{"a"}}, f.ids(6)},
		{"Name", store.CheckpointQuery{Name: "at-3"}, f.ids(3, 4)},
		{"NameAndSession", store.CheckpointQuery{Name: "at-5", SessionID: f.s2.ID}, f.inSession(6, 7)},
		{"NameIsExact", store.CheckpointQuery{Name: "at-"}, nil},
		{"Step", store.CheckpointQuery{Step: 2}, f.ids(1, 5)},
		{"StepAndSession", store.CheckpointQuery{Step: 4, SessionID: f.s2.ID}, f.inSession(7)},
		{"UnknownStep", store.CheckpointQuery{Step: 9}, nil},
		{"RequiredAndBefore", store.CheckpointQuery{HITLRequired: ptr(true), CreatedBefore: ptr(at(4))}, f.ids(2, 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.Scope, q.Limit = store.Everything, 100
			items, total, _, err := st.ListCheckpoints(t.Context(), q)
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, "ids", tc.want, nilIfEmpty(checkpointIDs(items)))
			if total != int64(len(tc.want)) {
				t.Errorf("total = %d, want %d", total, len(tc.want))
			}
			q.Limit = 1
			items, total, _, err = st.ListCheckpoints(t.Context(), q)
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, "ids with limit 1", nilIfEmpty(tc.want[:min(1, len(tc.want))]), nilIfEmpty(checkpointIDs(items)))
			if total != int64(len(tc.want)) {
				t.Errorf("total with limit 1 = %d, want %d", total, len(tc.want))
			}
		})
	}
}

type order struct{ byType, desc bool }

var orders = []order{{false, false}, {false, true}, {true, false}, {true, true}}

func (o order) String() string {
	s := "CreatedAt"
	if o.byType {
		s = "Type"
	}
	if o.desc {
		return s + "Desc"
	}
	return s + "Asc"
}

// walk pages through q with After, limit at a time, calling between after each
// page, and returns every item and the totals of each page.
func walk(t *testing.T, st store.Store, q store.CheckpointQuery, limit int, between func(page int, last *belay.Checkpoint)) ([]*belay.Checkpoint, []int64) {
	t.Helper()
	var all []*belay.Checkpoint
	var totals []int64
	q.Limit, q.After = limit, nil
	for page := 0; ; page++ {
		if page > 1000 {
			t.Fatal("paging does not end")
		}
		items, total, more, err := st.ListCheckpoints(t.Context(), q)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		if len(items) > limit {
			t.Fatalf("page %d holds %d items, more than the limit %d", page, len(items), limit)
		}
		all, totals = append(all, items...), append(totals, total)
		if !more {
			return all, totals
		}
		if len(items) < limit && q.MaxBytes == 0 {
			t.Fatalf("page %d holds %d items, fewer than the limit %d, yet more follow", page, len(items), limit)
		}
		last := items[len(items)-1]
		q.After = keyOf(last)
		if between != nil {
			between(page, last)
		}
	}
}

func testListOrders(t *testing.T, st store.Store) {
	f := newListFixture(t, st)
	for _, o := range orders {
		t.Run(o.String(), func(t *testing.T) {
			want := slices.Clone(f.cps)
			slices.SortFunc(want, compareCheckpoints(o.byType, o.desc))
			q := store.CheckpointQuery{Scope: store.Everything, OrderByType: o.byType, Desc: o.desc, Limit: 100}
			items, total, _, err := st.ListCheckpoints(t.Context(), q)
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, "one page", checkpointIDs(want), checkpointIDs(items))
			if total != int64(len(want)) {
				t.Errorf("total = %d, want %d", total, len(want))
			}
			for _, limit := range []int{1, 3, 8} {
				got, totals := walk(t, st, q, limit, nil)
				wantEqual(t, fmt.Sprintf("walked in pages of %d", limit), checkpointIDs(want), checkpointIDs(got))
				for i, n := range totals {
					if n != int64(len(want)) {
						t.Errorf("limit %d, page %d: total = %d, want %d (After must not change it)", limit, i, n, len(want))
					}
				}
			}
		})
	}
}

func testListPagingWithFilter(t *testing.T, st store.Store) {
	f := newListFixture(t, st)
	for _, o := range orders {
		t.Run(o.String(), func(t *testing.T) {
			var want []*belay.Checkpoint
			for _, c := range f.cps {
				if slices.Contains(c.Tags, "a") {
					want = append(want, c)
				}
			}
			slices.SortFunc(want, compareCheckpoints(o.byType, o.desc))
			q := store.CheckpointQuery{Scope: store.Everything, Tags: []string{"a"}, OrderByType: o.byType, Desc: o.desc}
			got, totals := walk(t, st, q, 1, nil)
			wantEqual(t, "walked", checkpointIDs(want), checkpointIDs(got))
			for i, n := range totals {
				if n != int64(len(want)) {
					t.Errorf("page %d: total = %d, want %d", i, n, len(want))
				}
			}
		})
	}
}

// testListSessionOrder: one session's checkpoints list in the session's
// order, by seq, also where their creation times disagree (concurrent saves),
// and page by seq in both directions; the same checkpoints listed by project
// keep the order of their creation.
func testListSessionOrder(t *testing.T, st store.Store) {
	sess := mustInsertSession(t, st, newSession("/p/order", at(0)))
	minutes := []int{2, 1, 3, 3, 0}
	var bySeq []*belay.Checkpoint
	for i, m := range minutes {
		bySeq = append(bySeq, mustInsertCheckpoint(t, st, newCheckpoint(sess, int64(i+1), at(m))))
	}
	byCreated := slices.Clone(bySeq)
	slices.SortFunc(byCreated, compareCheckpoints(false, false))
	for _, desc := range []bool{false, true} {
		wantSeq, wantCreated := slices.Clone(bySeq), slices.Clone(byCreated)
		if desc {
			slices.Reverse(wantSeq)
			slices.Reverse(wantCreated)
		}
		for _, limit := range []int{1, 2, 100} {
			name := fmt.Sprintf("desc %v, pages of %d", desc, limit)
			got, _ := walk(t, st, store.CheckpointQuery{Scope: store.Everything, SessionID: sess.ID, Desc: desc}, limit, nil)
			wantEqual(t, "session, "+name, checkpointIDs(wantSeq), checkpointIDs(got))
			got, _ = walk(t, st, store.CheckpointQuery{Scope: store.Everything, ProjectPath: "/p/order", Desc: desc}, limit, nil)
			wantEqual(t, "project, "+name, checkpointIDs(wantCreated), checkpointIDs(got))
		}
	}
}

// testListPagingWhileInserting creates checkpoints between pages, before and
// after the position reached and at the very same instant: every checkpoint
// that existed at the start is returned exactly once, in order, and no page
// goes backwards.
func testListPagingWhileInserting(t *testing.T, o opener) {
	for _, ord := range orders {
		t.Run(ord.String(), func(t *testing.T) {
			t.Parallel()
			st := o.fresh(t)
			f := newListFixture(t, st)
			var initial []*belay.Checkpoint
			for i := range 12 {
				c := newCheckpoint(f.s1, int64(100+i), at(10+i/2))
				c.Type = []belay.CheckpointType{belay.TypeAuto, belay.TypePhase, belay.TypeManual}[i%3]
				initial = append(initial, mustInsertCheckpoint(t, st, c))
			}
			initial = append(initial, f.cps...)
			slices.SortFunc(initial, compareCheckpoints(ord.byType, ord.desc))
			seq := int64(1000)
			types := []belay.CheckpointType{belay.TypeAuto, belay.TypeError, belay.TypeHITL, belay.TypeManual, belay.TypePhase}
			q := store.CheckpointQuery{Scope: store.Everything, OrderByType: ord.byType, Desc: ord.desc}
			got, _ := walk(t, st, q, 4, func(page int, last *belay.Checkpoint) {
				for i, when := range []time.Time{last.CreatedAt.Add(-time.Minute), last.CreatedAt, last.CreatedAt.Add(time.Minute)} {
					seq++
					c := newCheckpoint(f.s2, seq, when)
					c.Type = types[(page+i)%len(types)]
					mustInsertCheckpoint(t, st, c)
				}
			})
			less := compareCheckpoints(ord.byType, ord.desc)
			seen := map[string]bool{}
			for i, c := range got {
				if seen[c.ID] {
					t.Errorf("checkpoint %s returned twice", c.ID)
				}
				seen[c.ID] = true
				if i > 0 && less(got[i-1], c) >= 0 {
					t.Errorf("item %d (%s) does not come after item %d (%s)", i, c.ID, i-1, got[i-1].ID)
				}
			}
			var initialGot []string
			for _, c := range got {
				if slices.ContainsFunc(initial, func(x *belay.Checkpoint) bool { return x.ID == c.ID }) {
					initialGot = append(initialGot, c.ID)
				}
			}
			wantEqual(t, "initial checkpoints in walk order", checkpointIDs(initial), initialGot)
		})
	}
}

// testListOffset: offset paging skips that many rows of the order, and the
// total ignores it.
func testListOffset(t *testing.T, st store.Store) {
	sess := mustInsertSession(t, st, newSession("/p", at(0)))
	var ids []string
	for i := 1; i <= 7; i++ {
		ids = append(ids, mustInsertCheckpoint(t, st, newCheckpoint(sess, int64(i), at(i))).ID)
	}
	for _, tc := range []struct{ offset, limit int }{{0, 3}, {3, 3}, {6, 3}, {7, 3}, {2, 10}} {
		items, total, _, err := st.ListCheckpoints(t.Context(), store.CheckpointQuery{Scope: store.Everything, Offset: tc.offset, Limit: tc.limit})
		if err != nil {
			t.Fatal(err)
		}
		end := min(tc.offset+tc.limit, len(ids))
		wantEqual(t, fmt.Sprintf("offset %d limit %d", tc.offset, tc.limit), ids[min(tc.offset, len(ids)):end], checkpointIDs(items))
		wantEqual(t, "total", int64(7), total)
	}
}

// testListBytes: MaxBytes ends a page after the checkpoint whose agent
// state, outputs and metadata bring it to MaxBytes or more, whether the
// state is stored in its row or in chunks; paging on reads every checkpoint
// once, whole, and the last page says no more follow.
func testListBytes(t *testing.T, st store.Store) {
	sess := mustInsertSession(t, st, newSession("/p", at(0)))
	// state, outputs and metadata bytes of each checkpoint
	sizes := [][3]int{{3000, 0, 0}, {100, 50, 50}, {chunkstore.InlineMax + 5000, 0, 0}, {2000, 1000, 0}, {100, 0, 10}, {4000, 0, 0}, {10, 0, 0}}
	var want []*belay.Checkpoint
	for i, sz := range sizes {
		c := newCheckpoint(sess, int64(i+1), at(i))
		c.AgentState = jsonOfSize(sz[0])
		c.Outputs, c.Metadata = jsonOfSize(sz[1]), jsonOfSize(sz[2])
		want = append(want, mustInsertCheckpoint(t, st, c))
	}
	const maxBytes = 5000
	// The pages the rule makes, counted here by hand.
	var pages [][]string
	var page []string
	used := 0
	for i, sz := range sizes {
		page, used = append(page, want[i].ID), used+sz[0]+sz[1]+sz[2]
		if used >= maxBytes || len(page) == 3 {
			pages, page, used = append(pages, page), nil, 0
		}
	}
	if page != nil {
		pages = append(pages, page)
	}
	q := store.CheckpointQuery{Scope: store.Everything, SessionID: sess.ID, Limit: 3, MaxBytes: maxBytes}
	for i, ids := range pages {
		items, total, more, err := st.ListCheckpoints(t.Context(), q)
		if err != nil {
			t.Fatalf("page %d: %v", i, err)
		}
		wantEqual(t, fmt.Sprintf("page %d", i), ids, checkpointIDs(items))
		wantEqual(t, fmt.Sprintf("page %d: more", i), i < len(pages)-1, more)
		wantEqual(t, "total", int64(len(sizes)), total)
		for _, c := range items {
			if len(c.AgentState) != sizes[c.Seq-1][0] {
				t.Errorf("checkpoint #%d: state of %d bytes, want %d", c.Seq, len(c.AgentState), sizes[c.Seq-1][0])
			}
		}
		if len(items) > 0 {
			q.After = keyOf(items[len(items)-1])
		}
	}
	got, _ := walk(t, st, store.CheckpointQuery{Scope: store.Everything, MaxBytes: maxBytes}, 2, nil)
	wantEqual(t, "walked by created_at", checkpointIDs(want), checkpointIDs(got))
	one, _, more, err := st.ListCheckpoints(t.Context(), store.CheckpointQuery{Scope: store.Everything, MaxBytes: 1, Limit: 10})
	if err != nil || len(one) != 1 || !more {
		t.Errorf("a budget of 1 byte = %d items, more %v, %v; want the first checkpoint alone, and more", len(one), more, err)
	}
}

// jsonOfSize returns a JSON string of n bytes, or nil for 0.
func jsonOfSize(n int) json.RawMessage {
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i*7%26)
	}
	b[0], b[n-1] = '"', '"'
	return b
}
