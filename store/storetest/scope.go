package storetest

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// testScope: every query that takes a store.Scope returns, counts and pages
// through only what the scope may read.
func testScope(t *testing.T, o opener) {
	subtests(t, o, []subtest{
		{"Reads", testScopeReads},
		{"Approvers", testScopeApprovers},
		{"FindCheckpointIDs", testFindCheckpointIDs},
		{"Grants", testGrants},
		{"OwnOrAdmin", testScopeOwnOrAdmin},
	})
}

// testScopeOwnOrAdmin: of a project's sessions, OwnOrAdmin keeps the user's
// own and those of admins, of owners who are not users and of no owner,
// within what the rest of the scope reads; never another non-admin's, even
// granted.
func testScopeOwnOrAdmin(t *testing.T, st store.Store) {
	ctx := t.Context()
	mustUpdate(t, st, func(tx store.Tx) error {
		for _, u := range []*belay.User{{Name: "amy", Admin: true, CreatedAt: at(0)}, {Name: "nat", CreatedAt: at(0)}, {Name: "ned", CreatedAt: at(0)}} {
			if err := tx.PutUser(ctx, u); err != nil {
				return err
			}
		}
		return nil
	})
	ids := map[string]string{}
	for i, owner := range []string{"amy", "nat", "ned", "local", ""} {
		s := newSession("/p", at(10*(i+1)))
		s.Owner = owner
		ids[owner] = mustInsertSession(t, st, s).ID
	}
	mustUpdate(t, st, func(tx store.Tx) error {
		for _, owner := range []string{"amy", "ned"} {
			if err := tx.PutGrant(ctx, &belay.Grant{SessionID: ids[owner], User: "nat", Role: belay.RoleWrite, GrantedBy: owner, CreatedAt: at(100)}); err != nil {
				return err
			}
		}
		return nil
	})
	for _, tc := range []struct {
		name   string
		scope  store.Scope
		owners []string // newest first
	}{
		{"NonAdmin", store.Scope{User: "nat", OwnOrAdmin: true}, []string{"nat", "amy"}},
		{"NonAdminWithoutGrants", store.Scope{User: "ned", OwnOrAdmin: true}, []string{"ned"}},
		{"Admin", store.Scope{All: true, User: "amy", OwnOrAdmin: true}, []string{"", "local", "amy"}},
		{"LocalUser", store.Scope{All: true, User: "local", OwnOrAdmin: true}, []string{"", "local", "amy"}},
		{"InProjects", store.Scope{All: true, User: "amy", OwnOrAdmin: true, Projects: []string{"/q"}}, nil},
		{"Zero", store.Scope{OwnOrAdmin: true}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := []string{}
			for _, owner := range tc.owners {
				want = append(want, ids[owner])
			}
			got, _, _, err := st.ListSessions(ctx, store.SessionQuery{Scope: tc.scope, ProjectPath: "/p", Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, "sessions", want, sessionIDs(got))
			active, err := st.ActiveSession(ctx, "/p", tc.scope)
			switch {
			case len(want) == 0 && !belay.IsCode(err, belay.CodeSessionNotFound):
				t.Errorf("active session = %v, %v; want none", active, err)
			case len(want) > 0 && (err != nil || active.ID != want[0]):
				t.Errorf("active session = %v, %v; want %s", active, err, want[0])
			}
		})
	}
}

// scopeSessions are the sessions of the scope fixture, in creation order:
// several owners and projects, with paths that a careless prefix match takes
// for /w/a/b or /w/10%_off.
var scopeSessions = []struct{ name, owner, project string }{
	{"ab", "alice", "/w/a/b"},
	{"abc", "alice", "/w/a/b/c"},
	{"sibling", "alice", "/w/a/bc"}, // not below /w/a/b
	{"upper", "alice", "/w/A/b/c"},  // nor this: paths are case-sensitive
	{"literal", "alice", "/w/10%_off/x"},
	{"wildcard", "alice", "/w/10zzoff/x"}, // below /w/10%_off only as a LIKE pattern
	{"bobs", "bob", "/w/a/b/d"},
	{"read", "carol", "/w/a/b/e"},
	{"write", "carol", "/w/g"},
	{"decide", "carol", "/w/h"},
	{"revoked", "carol", "/w/a/b/f"},
	{"ownerless", "", "/w/a/b"},
}

// scopeGrants: bob holds each role in one of carol's sessions and a needless
// grant in his own; dave reads one of alice's. Bob's grant in "revoked" is
// deleted once made.
var scopeGrants = []struct {
	session, user string
	role          belay.Role
}{
	{"read", "bob", belay.RoleRead},
	{"write", "bob", belay.RoleWrite},
	{"decide", "bob", belay.RoleDecide},
	{"bobs", "bob", belay.RoleRead},
	{"ab", "dave", belay.RoleRead},
	{"revoked", "bob", belay.RoleRead},
}

// scopeFixture holds, for every session of scopeSessions, a plain checkpoint
// and a pending HITL request, and one event; besides them, events of no
// session and of a session that no longer exists.
type scopeFixture struct {
	sessions map[string]*belay.Session
	plain    map[string]*belay.Checkpoint
	pending  map[string]*belay.Checkpoint
	events   []*belay.Event
}

func newScopeFixture(t *testing.T, st store.Store) *scopeFixture {
	t.Helper()
	f := &scopeFixture{sessions: map[string]*belay.Session{}, plain: map[string]*belay.Checkpoint{}, pending: map[string]*belay.Checkpoint{}}
	f.events = append(f.events, &belay.Event{Type: "webhook.created", CreatedAt: at(0)})
	for i, sp := range scopeSessions {
		s := newSession(sp.project, at(10*i))
		s.Owner = sp.owner
		f.sessions[sp.name] = mustInsertSession(t, st, s)
		plain := newCheckpoint(s, 1, at(10*i+1))
		plain.Name, plain.Tags = "plain", []string{"t"}
		f.plain[sp.name] = mustInsertCheckpoint(t, st, plain)
		pending := withHITL(newCheckpoint(s, 2, at(10*i+2)), time.Time{})
		pending.Name, pending.Tags = "pending", []string{"t", "u"}
		f.pending[sp.name] = mustInsertCheckpoint(t, st, pending)
		f.events = append(f.events, &belay.Event{Type: belay.EventSessionCreated, SessionID: s.ID, CreatedAt: at(10 * i)})
	}
	f.events = append(f.events,
		&belay.Event{Type: belay.EventSessionDeleted, SessionID: newID(), CreatedAt: at(200)},
		&belay.Event{Type: "token.created", CreatedAt: at(201)})
	appendEvents(t, st, f.events...)
	mustUpdate(t, st, func(tx store.Tx) error {
		for _, g := range scopeGrants {
			err := tx.PutGrant(t.Context(), &belay.Grant{SessionID: f.sessions[g.session].ID, User: g.user, Role: g.role,
				GrantedBy: f.sessions[g.session].Owner, CreatedAt: at(300)})
			if err != nil {
				return err
			}
		}
		return tx.DeleteGrant(t.Context(), f.sessions["revoked"].ID, "bob")
	})
	return f
}

func testScopeReads(t *testing.T, st store.Store) {
	f := newScopeFixture(t, st)
	var all []string
	for _, sp := range scopeSessions {
		all = append(all, sp.name)
	}
	alices := []string{"ab", "abc", "sibling", "upper", "literal", "wildcard"}
	for _, tc := range []struct {
		name  string
		scope store.Scope
		want  []string // the sessions in scope
	}{
		{"All", store.Everything, all},
		{"Owner", store.Scope{User: "alice"}, alices},
		{"GranteeOfEveryRole", store.Scope{User: "bob"}, []string{"bobs", "read", "write", "decide"}},
		{"OwnerOfGranted", store.Scope{User: "carol"}, []string{"read", "write", "decide", "revoked"}},
		{"OneGrant", store.Scope{User: "dave"}, []string{"ab"}},
		{"Stranger", store.Scope{User: "eve"}, nil},
		{"Zero", store.Scope{}, nil},
		{"Project", store.Scope{User: "alice", Projects: []string{"/w/a/b"}}, []string{"ab", "abc"}},
		{"PercentAndUnderscore", store.Scope{User: "alice", Projects: []string{"/w/10%_off"}}, []string{"literal"}},
		{"PercentIsLiteral", store.Scope{User: "alice", Projects: []string{"/w/10%off"}}, nil},
		{"UnderscoreIsLiteral", store.Scope{User: "alice", Projects: []string{"/w/10z_off"}}, nil},
		{"Projects", store.Scope{User: "alice", Projects: []string{"/w/a/bc", "/w/10%_off"}}, []string{"sibling", "literal"}},
		{"ProjectRoot", store.Scope{User: "alice", Projects: []string{"/"}}, alices},
		{"ProjectOfAll", store.Scope{All: true, Projects: []string{"/w/a/b"}},
			[]string{"ab", "abc", "bobs", "read", "revoked", "ownerless"}},
		{"ProjectOfGrantee", store.Scope{User: "bob", Projects: []string{"/w/a"}}, []string{"bobs", "read"}},
		{"ProjectOfStranger", store.Scope{User: "eve", Projects: []string{"/w"}}, nil},
		{"NoProject", store.Scope{All: true, Projects: []string{"/nowhere"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := map[string]bool{}
			for _, name := range tc.want {
				in[f.sessions[name].ID] = true
			}
			f.checkSessions(t, st, tc.scope, in)
			f.checkCheckpoints(t, st, tc.scope, in)
			f.checkPending(t, st, tc.scope, in)
			f.checkEvents(t, st, tc.scope, in)
		})
	}
}

// inScope returns the sessions of the fixture whose id is in, newest first.
func (f *scopeFixture) inScope(in map[string]bool) []*belay.Session {
	var out []*belay.Session
	for _, s := range f.sessions {
		if in[s.ID] {
			out = append(out, s)
		}
	}
	return newestFirst(out)
}

// checkpointsIn returns the checkpoints of cps whose session is in, oldest first.
func checkpointsIn(in map[string]bool, cps ...map[string]*belay.Checkpoint) []*belay.Checkpoint {
	var out []*belay.Checkpoint
	for _, m := range cps {
		for _, c := range m {
			if in[c.SessionID] {
				out = append(out, c)
			}
		}
	}
	slices.SortFunc(out, compareCheckpoints(false, false))
	return out
}

func (f *scopeFixture) checkSessions(t *testing.T, st store.Store, scope store.Scope, in map[string]bool) {
	t.Helper()
	want := f.inScope(in)
	got, total, _, err := st.ListSessions(t.Context(), store.SessionQuery{Scope: scope, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "sessions", sessionIDs(want), sessionIDs(got))
	if total != int64(len(want)) {
		t.Errorf("sessions: total = %d, want %d", total, len(want))
	}

	// Paging never leaves the scope, and every page counts the same total.
	var walked []*belay.Session
	q := store.SessionQuery{Scope: scope, Limit: 2}
	for page := 0; page <= len(f.sessions); page++ {
		items, total, _, err := st.ListSessions(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		if total != int64(len(want)) {
			t.Errorf("sessions page %d: total = %d, want %d", page, total, len(want))
		}
		walked = append(walked, items...)
		if len(items) < q.Limit {
			break
		}
		last := items[len(items)-1]
		q.After = &store.SessionKey{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	wantEqual(t, "sessions paged by 2", sessionIDs(want), sessionIDs(walked))

	// A project filter narrows the scope, never widens it.
	var wantProject []string
	for _, s := range want {
		if s.ProjectPath == "/w/a/b" {
			wantProject = append(wantProject, s.ID)
		}
	}
	got, total, _, err = st.ListSessions(t.Context(), store.SessionQuery{Scope: scope, ProjectPath: "/w/a/b", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "sessions of /w/a/b", wantProject, nilIfEmpty(sessionIDs(got)))
	if total != int64(len(wantProject)) {
		t.Errorf("sessions of /w/a/b: total = %d, want %d", total, len(wantProject))
	}

	// ActiveSession: the newest open session of the project within scope.
	for _, sp := range scopeSessions {
		i := slices.IndexFunc(want, func(s *belay.Session) bool { return s.ProjectPath == sp.project })
		got, err := st.ActiveSession(t.Context(), sp.project, scope)
		if i < 0 {
			wantCode(t, "ActiveSession("+sp.project+") out of scope", err, belay.CodeSessionNotFound)
			continue
		}
		if err != nil {
			t.Errorf("ActiveSession(%s): %v", sp.project, err)
			continue
		}
		wantEqual(t, "ActiveSession("+sp.project+")", want[i].ID, got.ID)
	}
}

func (f *scopeFixture) checkCheckpoints(t *testing.T, st store.Store, scope store.Scope, in map[string]bool) {
	t.Helper()
	both := checkpointsIn(in, f.plain, f.pending)
	for _, tc := range []struct {
		name string
		q    store.CheckpointQuery
		want []*belay.Checkpoint
	}{
		{"all", store.CheckpointQuery{}, both},
		{"tagged", store.CheckpointQuery{Tags: []string{"u"}}, checkpointsIn(in, f.pending)},
		{"named", store.CheckpointQuery{Name: "plain"}, checkpointsIn(in, f.plain)},
		{"of /w/a/b", store.CheckpointQuery{ProjectPath: "/w/a/b"},
			slices.DeleteFunc(slices.Clone(both), func(c *belay.Checkpoint) bool { return c.ProjectPath != "/w/a/b" })},
	} {
		tc.q.Scope = scope
		got, totals := walk(t, st, tc.q, 3, nil)
		wantEqual(t, "checkpoints "+tc.name+", paged by 3", nilIfEmpty(checkpointIDs(tc.want)), nilIfEmpty(checkpointIDs(got)))
		for i, n := range totals {
			if n != int64(len(tc.want)) {
				t.Errorf("checkpoints %s, page %d: total = %d, want %d", tc.name, i, n, len(tc.want))
			}
		}
	}
	// Within one session: all of it in scope, nothing of it out of scope.
	for name, s := range f.sessions {
		want := 0
		if in[s.ID] {
			want = 2
		}
		items, total, _, err := st.ListCheckpoints(t.Context(), store.CheckpointQuery{Scope: scope, SessionID: s.ID, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(items) != want || total != int64(want) {
			t.Errorf("checkpoints of session %s: %d items, total %d; want %d", name, len(items), total, want)
		}
	}
	ids := checkpointIDs(both)
	slices.Sort(ids)
	got, err := st.FindCheckpointIDs(t.Context(), "", scope, 100)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "FindCheckpointIDs", nilIfEmpty(ids), nilIfEmpty(got))
}

func (f *scopeFixture) checkPending(t *testing.T, st store.Store, scope store.Scope, in map[string]bool) {
	t.Helper()
	want := checkpointIDs(checkpointsIn(in, f.pending))
	wantEqual(t, "pending", nilIfEmpty(want), nilIfEmpty(pendingIDs(t, st, store.PendingQuery{Scope: scope, Limit: 100})))
	wantEqual(t, "pending paged by 2", nilIfEmpty(want), nilIfEmpty(walkPending(t, st, store.PendingQuery{Scope: scope, Limit: 2})))
}

func (f *scopeFixture) checkEvents(t *testing.T, st store.Store, scope store.Scope, in map[string]bool) {
	t.Helper()
	var want []int64
	for _, e := range f.events {
		// Events of no session, or of a session that is gone, are for All only.
		if in[e.SessionID] || (scope.All && len(scope.Projects) == 0) {
			want = append(want, e.Seq)
		}
	}
	wantEqual(t, "events", want, seqs(listEvents(t, st, store.EventQuery{Scope: scope, Limit: 100})))
	var walked []int64
	q := store.EventQuery{Scope: scope, Limit: 2}
	for range len(f.events) {
		page := listEvents(t, st, q)
		walked = append(walked, seqs(page)...)
		if len(page) < q.Limit {
			break
		}
		q.After = page[len(page)-1].Seq
	}
	wantEqual(t, "events paged by 2", want, walked)
	var wantOfOne []int64
	ab := f.sessions["ab"].ID
	if in[ab] {
		wantOfOne = []int64{f.events[1].Seq} // the event of ab, the first session
	}
	wantEqual(t, "events of session ab", wantOfOne, seqs(listEvents(t, st, store.EventQuery{Scope: scope, SessionID: ab, Limit: 100})))
}

func pendingIDs(t *testing.T, st store.Reader, q store.PendingQuery) []string {
	t.Helper()
	got, _, err := st.PendingHITL(t.Context(), q)
	if err != nil {
		t.Fatalf("PendingHITL: %v", err)
	}
	return checkpointIDs(got)
}

// walkPending pages through q with After, q.Limit at a time.
func walkPending(t *testing.T, st store.Reader, q store.PendingQuery) []string {
	t.Helper()
	var out []string
	for page := 0; ; page++ {
		if page > 100 {
			t.Fatal("paging does not end")
		}
		got, _, err := st.PendingHITL(t.Context(), q)
		if err != nil {
			t.Fatalf("PendingHITL: %v", err)
		}
		out = append(out, checkpointIDs(got)...)
		if len(got) < q.Limit {
			return out
		}
		q.After = keyOf(got[len(got)-1])
	}
}

// testScopeApprovers: a user named among a request's approvers sees that
// pending request, in a session they are no member of, and nothing else of
// that session; the request's project must still be within the scope.
func testScopeApprovers(t *testing.T, st store.Store) {
	sa := newSession("/p/a", at(0))
	sc := newSession("/p/c", at(0))
	sc.Owner = "carol"
	sh := newSession("/q", at(0))
	sh.Owner = "hank"
	for _, s := range []*belay.Session{sa, sc, sh} {
		mustInsertSession(t, st, s)
	}
	mustUpdate(t, st, func(tx store.Tx) error {
		return tx.PutGrant(t.Context(), &belay.Grant{SessionID: sc.ID, User: "bob", Role: belay.RoleRead, GrantedBy: "carol", CreatedAt: at(0)})
	})
	request := func(s *belay.Session, seq int64, approvers ...string) *belay.Checkpoint {
		c := withHITL(newCheckpoint(s, seq, at(int(seq))), time.Time{})
		c.HITL.Approvers = approvers
		return mustInsertCheckpoint(t, st, c)
	}
	a1 := request(sa, 1)
	a2 := request(sa, 2, "frank")
	c3 := request(sc, 3, "frank", "gina", "bob")
	c4 := request(sc, 4)
	decided := request(sa, 5, "frank")
	h6 := request(sh, 6, "frankie")
	// A context PostgreSQL's JSON parser refuses (\u0000, lone surrogates),
	// as earlier versions stored: it fails no one's read and hides nothing.
	oddContext := json.RawMessage(`{"nul":"\u0000","lone":"\ud800","low":"\uDC00","text":"\\u0000"}`)
	c7 := withHITL(newCheckpoint(sc, 7, at(7)), time.Time{})
	c7.HITL.Approvers, c7.HITL.Context = []string{"gina", `h\u0000`}, oddContext
	mustInsertCheckpoint(t, st, c7)
	decide(t, st, decided.ID, newDecision("alice", at(7)))

	ids := func(cs ...*belay.Checkpoint) []string { return checkpointIDs(cs) }
	for _, tc := range []struct {
		name string
		q    store.PendingQuery
		want []string
	}{
		{"All", store.PendingQuery{Scope: store.Everything}, ids(a1, a2, c3, c4, h6, c7)},
		{"Owner", store.PendingQuery{Scope: store.Scope{User: "alice"}}, ids(a1, a2)},
		{"Approver", store.PendingQuery{Scope: store.Scope{User: "frank"}}, ids(a2, c3)},
		{"OtherApprover", store.PendingQuery{Scope: store.Scope{User: "gina"}}, ids(c3, c7)},
		{"ApproverIsExact", store.PendingQuery{Scope: store.Scope{User: "frankie"}}, ids(h6)},
		{"ApproverWithBackslash", store.PendingQuery{Scope: store.Scope{User: `h\u0000`}}, ids(c7)},
		{"ApproverAndGrantee", store.PendingQuery{Scope: store.Scope{User: "bob"}}, ids(c3, c4, c7)},
		{"ApproverInSession", store.PendingQuery{Scope: store.Scope{User: "frank"}, SessionID: sa.ID}, ids(a2)},
		{"ApproverInProjects", store.PendingQuery{Scope: store.Scope{User: "frank", Projects: []string{"/p/c"}}}, ids(c3)},
		{"ApproverOutsideProjects", store.PendingQuery{Scope: store.Scope{User: "frank", Projects: []string{"/q"}}}, nil},
		{"Stranger", store.PendingQuery{Scope: store.Scope{User: "eve"}}, nil},
		{"Zero", store.PendingQuery{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.Limit = 100
			wantEqual(t, "pending", tc.want, nilIfEmpty(pendingIDs(t, st, q)))
			q.Limit = 1
			wantEqual(t, "pending paged by 1", tc.want, nilIfEmpty(walkPending(t, st, q)))
		})
	}
	// Being an approver shows the request, not the rest of the session.
	frank := store.Scope{User: "frank"}
	if items, total, _, err := st.ListCheckpoints(t.Context(), store.CheckpointQuery{Scope: frank, Limit: 10}); err != nil || len(items) != 0 || total != 0 {
		t.Errorf("ListCheckpoints of an approver = %d items, total %d, %v; want none", len(items), total, err)
	}
	if items, total, _, err := st.ListSessions(t.Context(), store.SessionQuery{Scope: frank, Limit: 10}); err != nil || len(items) != 0 || total != 0 {
		t.Errorf("ListSessions of an approver = %d items, total %d, %v; want none", len(items), total, err)
	}

	// With Approvals, the events of a request naming the user among its
	// approvers: its HITL events only, within the scope's projects.
	approvers := func(names ...string) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"approvers": names, "title": "t"})
		return b
	}
	events := []*belay.Event{
		{Type: belay.EventHITLRequired, SessionID: sa.ID, CheckpointID: a2.ID, Data: approvers("frank"), CreatedAt: at(10)},
		{Type: belay.EventCheckpointCreated, SessionID: sa.ID, CheckpointID: a2.ID, Data: approvers("frank"), CreatedAt: at(11)},
		{Type: belay.EventHITLRequired, SessionID: sc.ID, CheckpointID: c3.ID, Data: approvers("frank", "gina"), CreatedAt: at(12)},
		{Type: belay.EventHITLDecided, SessionID: sa.ID, CheckpointID: decided.ID, Data: approvers("frank"), CreatedAt: at(13)},
		{Type: belay.EventHITLTimedOut, SessionID: sh.ID, CheckpointID: h6.ID, Data: approvers("frankie"), CreatedAt: at(14)},
		{Type: belay.EventHITLRequired, SessionID: sa.ID, CheckpointID: a1.ID, CreatedAt: at(15)},
		{Type: belay.EventHITLRequired, SessionID: newID(), CheckpointID: newID(), Data: approvers("frank"), CreatedAt: at(16)}, // its session is gone
		{Type: belay.EventHITLRequired, SessionID: sc.ID, CheckpointID: c7.ID, Data: json.RawMessage(`{"approvers":["gina"],"context":` + string(oddContext) + `}`), CreatedAt: at(17)},
	}
	first := lastSeq(t, st)
	appendEvents(t, st, events...)
	seq := func(i ...int) []int64 {
		var out []int64
		for _, n := range i {
			out = append(out, first+int64(n)+1)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		q    store.EventQuery
		want []int64
	}{
		{"WithoutApprovals", store.EventQuery{Scope: frank}, nil},
		{"Approver", store.EventQuery{Scope: frank, Approvals: true}, seq(0, 2, 3)},
		{"ApproverIsExact", store.EventQuery{Scope: store.Scope{User: "frankie"}, Approvals: true}, seq(4)},
		{"ApproverInProjects", store.EventQuery{Scope: store.Scope{User: "frank", Projects: []string{"/p/c"}}, Approvals: true}, seq(2)},
		{"OddContext", store.EventQuery{Scope: store.Scope{User: "gina"}, Approvals: true}, seq(2, 7)},
		{"ApproverAndGrantee", store.EventQuery{Scope: store.Scope{User: "bob"}, Approvals: true}, seq(2, 7)},
		{"Type", store.EventQuery{Scope: frank, Approvals: true, Types: []string{belay.EventHITLDecided}}, seq(3)},
		{"Session", store.EventQuery{Scope: frank, Approvals: true, SessionID: sc.ID}, seq(2)},
	} {
		t.Run("Events"+tc.name, func(t *testing.T) {
			q := tc.q
			q.After, q.Limit = first, 100
			wantEqual(t, "events", tc.want, seqs(listEvents(t, st, q)))
		})
	}
}

// testFindCheckpointIDs: ids that begin with the prefix (taken literally),
// within scope, in id order, up to the limit.
func testFindCheckpointIDs(t *testing.T, st store.Store) {
	sa := mustInsertSession(t, st, newSession("/p", at(0)))
	sb := newSession("/q", at(0))
	sb.Owner = "bob"
	mustInsertSession(t, st, sb)
	for i, c := range []struct {
		s  *belay.Session
		id string
	}{{sa, "ab2"}, {sa, "ab1"}, {sa, "a%1"}, {sa, "a_1"}, {sa, "b1"}, {sb, "ab3"}} {
		cp := newCheckpoint(c.s, int64(i+1), at(i))
		cp.ID = c.id
		mustInsertCheckpoint(t, st, cp)
	}
	alice := store.Scope{User: "alice"}
	for _, tc := range []struct {
		name   string
		prefix string
		scope  store.Scope
		limit  int
		want   []string
	}{
		{"All", "ab", store.Everything, 10, []string{"ab1", "ab2", "ab3"}},
		{"Limit", "ab", store.Everything, 2, []string{"ab1", "ab2"}},
		{"IdOrder", "a", store.Everything, 10, []string{"a%1", "a_1", "ab1", "ab2", "ab3"}},
		{"Owner", "ab", alice, 10, []string{"ab1", "ab2"}},
		{"OwnerLimit", "ab", alice, 1, []string{"ab1"}},
		{"PercentIsLiteral", "a%", alice, 10, []string{"a%1"}},
		{"UnderscoreIsLiteral", "a_", store.Everything, 10, []string{"a_1"}},
		{"EmptyPrefix", "", store.Scope{User: "bob"}, 10, []string{"ab3"}},
		{"Stranger", "ab", store.Scope{User: "eve"}, 10, nil},
		{"Zero", "ab", store.Scope{}, 10, nil},
		{"OutsideProjects", "ab", store.Scope{User: "alice", Projects: []string{"/q"}}, 10, nil},
		{"ProjectOfAll", "ab", store.Scope{All: true, Projects: []string{"/q"}}, 10, []string{"ab3"}},
		{"NoMatch", "zz", store.Everything, 10, nil},
	} {
		got, err := st.FindCheckpointIDs(t.Context(), tc.prefix, tc.scope, tc.limit)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		wantEqual(t, tc.name, tc.want, nilIfEmpty(got))
	}
}

// testGrants: one grant per user and session, replaced by a later put,
// listed oldest first, deleted once, and gone with their session.
func testGrants(t *testing.T, st store.Store) {
	ctx := t.Context()
	s := mustInsertSession(t, st, newSession("/p", at(0)))
	other := mustInsertSession(t, st, newSession("/p", at(1)))
	grants := func(id string) []*belay.Grant {
		t.Helper()
		gs, err := st.SessionGrants(ctx, id)
		if err != nil {
			t.Fatalf("SessionGrants: %v", err)
		}
		return gs
	}
	put := func(gs ...*belay.Grant) error {
		return st.Update(ctx, func(tx store.Tx) error {
			for _, g := range gs {
				if err := tx.PutGrant(ctx, g); err != nil {
					return err
				}
			}
			return nil
		})
	}
	del := func(sessionID, user string) error {
		return st.Update(ctx, func(tx store.Tx) error { return tx.DeleteGrant(ctx, sessionID, user) })
	}
	if gs := grants(s.ID); len(gs) != 0 {
		t.Fatalf("grants of a new session: %d", len(gs))
	}
	bob := &belay.Grant{SessionID: s.ID, User: "bob", Role: belay.RoleRead, GrantedBy: "alice", CreatedAt: at(2).Add(1)}
	carol := &belay.Grant{SessionID: s.ID, User: "carol", Role: belay.RoleWrite, GrantedBy: "alice", CreatedAt: at(1)}
	elsewhere := &belay.Grant{SessionID: other.ID, User: "bob", Role: belay.RoleDecide, GrantedBy: "alice", CreatedAt: at(1)}
	wantAllSet(t, "grant", bob)
	if err := put(bob, carol, elsewhere); err != nil {
		t.Fatal(err)
	}
	got := grants(s.ID)
	wantEqual(t, "grants, oldest first", []*belay.Grant{carol, bob}, got)
	for _, g := range got {
		wantUTC(t, "grant CreatedAt", g.CreatedAt)
	}

	// A second grant to the same user replaces the first.
	bob2 := &belay.Grant{SessionID: s.ID, User: "bob", Role: belay.RoleDecide, GrantedBy: "carol", CreatedAt: at(3)}
	if err := put(bob2); err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "grants after a replacement", []*belay.Grant{carol, bob2}, grants(s.ID))
	wantEqual(t, "grants of the other session", []*belay.Grant{elsewhere}, grants(other.ID))

	if err := del(s.ID, "carol"); err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "grants after a delete", []*belay.Grant{bob2}, grants(s.ID))
	wantCode(t, "DeleteGrant twice", del(s.ID, "carol"), belay.CodeNotFound)
	wantCode(t, "DeleteGrant of a user without one", del(s.ID, "dave"), belay.CodeNotFound)
	wantCode(t, "DeleteGrant in an unknown session", del(newID(), "bob"), belay.CodeNotFound)

	if put(&belay.Grant{SessionID: newID(), User: "bob", Role: belay.RoleRead, GrantedBy: "alice", CreatedAt: at(4)}) == nil {
		t.Error("a grant in a missing session was stored")
	}
	mustUpdate(t, st, func(tx store.Tx) error { return tx.DeleteSession(ctx, s.ID) })
	if gs := grants(s.ID); len(gs) != 0 {
		t.Errorf("grants of a deleted session: %d", len(gs))
	}
	wantEqual(t, "grants of the other session after the delete", []*belay.Grant{elsewhere}, grants(other.ID))
}
