package core_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testclock"
	"github.com/belayhq/belay/internal/testutil"
)

// realCursors lists checkpoints in every order and returns each order's first
// nextCursor with the item it points after.
func realCursors(tb testing.TB) (map[string]string, map[string]*belay.Checkpoint) {
	tb.Helper()
	svc := newService(tb, testclock.New(start, time.Millisecond))
	project := tb.TempDir()
	for i := range 6 {
		mustCreate(tb, svc, belay.CreateCheckpointInput{ProjectPath: project, Summary: fmt.Sprint(i), Type: types[i%len(types)]})
	}
	cursors, last := map[string]string{}, map[string]*belay.Checkpoint{}
	for _, order := range orders {
		in := order
		in.Limit = 2
		list, err := svc.ListCheckpoints(localCtx, in)
		if err != nil {
			tb.Fatal(err)
		}
		if !list.HasMore || list.NextCursor == "" {
			tb.Fatalf("%s: no next page", orderName(order))
		}
		cursors[orderName(order)] = list.NextCursor
		last[orderName(order)] = list.Items[len(list.Items)-1]
	}
	return cursors, last
}

func TestCursorFromRealListDecodesToItsPosition(t *testing.T) {
	cursors, last := realCursors(t)
	for _, order := range orders {
		name := orderName(order)
		in := order
		in.Cursor = cursors[name]
		key, err := core.DecodeCheckpointCursor(&in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cp := last[name]
		if key == nil || key.ID != cp.ID || !key.CreatedAt.Equal(cp.CreatedAt) {
			t.Errorf("%s: key %+v, want the position of %s at %v", name, key, cp.ID, cp.CreatedAt)
		}
		if order.OrderBy == belay.OrderType && key.Type != cp.Type {
			t.Errorf("%s: key type %q, want %q", name, key.Type, cp.Type)
		}
		// Every other order refuses it.
		for _, other := range orders {
			if orderName(other) == name {
				continue
			}
			o := other
			o.Cursor = cursors[name]
			_, err := core.DecodeCheckpointCursor(&o)
			testutil.WantCode(t, err, belay.CodeValidation, "cursor")
		}
	}
	if key, err := core.DecodeCheckpointCursor(&belay.ListCheckpointsInput{}); key != nil || err != nil {
		t.Errorf("no cursor: key %v err %v, want nil, nil", key, err)
	}
}

func TestCursorRejectsForgeries(t *testing.T) {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	id := "01890000-0000-7000-8000-000000000000"
	tests := []struct {
		name   string
		cursor string
		in     belay.ListCheckpointsInput
	}{
		{"not base64", "***", belay.ListCheckpointsInput{}},
		{"padded base64", base64.URLEncoding.EncodeToString([]byte(`{"o":"cd","c":1,"i":"` + id + `"}`)), belay.ListCheckpointsInput{}},
		{"not JSON", enc("hello"), belay.ListCheckpointsInput{}},
		{"JSON null", enc("null"), belay.ListCheckpointsInput{}},
		{"no order", enc(`{"c":1,"i":"` + id + `"}`), belay.ListCheckpointsInput{}},
		{"bad id", enc(`{"o":"cd","c":1,"i":"x"}`), belay.ListCheckpointsInput{}},
		{"zero time", enc(`{"o":"cd","c":0,"i":"` + id + `"}`), belay.ListCheckpointsInput{}},
		{"negative time", enc(`{"o":"cd","c":-5,"i":"` + id + `"}`), belay.ListCheckpointsInput{}},
		{"type order without type", enc(`{"o":"td","c":1,"i":"` + id + `"}`), belay.ListCheckpointsInput{OrderBy: belay.OrderType}},
		{"type order with unknown type", enc(`{"o":"ta","t":"x","c":1,"i":"` + id + `"}`),
			belay.ListCheckpointsInput{OrderBy: belay.OrderType, OrderDir: belay.OrderAsc}},
		{"session cursor", enc(`{"o":"s","c":1,"i":"` + id + `"}`), belay.ListCheckpointsInput{}},
		{"too long", enc(`{"o":"cd","c":1,"i":"` + id + `","x":"` + string(make([]byte, 600)) + `"}`), belay.ListCheckpointsInput{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Cursor = tt.cursor
			key, err := core.DecodeCheckpointCursor(&in)
			if key != nil {
				t.Errorf("key = %+v, want none", key)
			}
			testutil.WantCode(t, err, belay.CodeValidation, "cursor")
		})
	}
}

// canonicalOrder is the order DecodeCheckpointCursor binds a cursor to: any
// orderBy but "type" means createdAt, any orderDir but "asc" means desc.
func canonicalOrder(in *belay.ListCheckpointsInput) (byType, asc bool) {
	return in.OrderBy == belay.OrderType, in.OrderDir == belay.OrderAsc
}

func FuzzDecodeCheckpointCursor(f *testing.F) {
	cursors, _ := realCursors(f)
	for _, order := range orders {
		c := cursors[orderName(order)]
		f.Add(c, order.OrderBy, order.OrderDir)
		f.Add(c, belay.OrderType, belay.OrderDesc)
		f.Add(c[:len(c)/2], order.OrderBy, order.OrderDir)
	}
	f.Add("", "", "")
	f.Add("e30", "", "")
	f.Add("bnVsbA", "type", "asc")
	f.Fuzz(func(t *testing.T, cursor, orderBy, orderDir string) {
		in := belay.ListCheckpointsInput{Cursor: cursor, OrderBy: orderBy, OrderDir: orderDir}
		key, err := core.DecodeCheckpointCursor(&in)
		if err != nil {
			var be *belay.Error
			if !errors.As(err, &be) || be.Code != belay.CodeValidation || be.Details["field"] != "cursor" {
				t.Fatalf("error %v (%T), want VALIDATION_ERROR on cursor", err, err)
			}
			if key != nil {
				t.Fatalf("key %+v returned with an error", key)
			}
			return
		}
		if cursor == "" {
			if key != nil {
				t.Fatalf("empty cursor gave key %+v", key)
			}
			return
		}
		byType, asc := canonicalOrder(&in)
		if key == nil || !belay.IsUUID(key.ID) || key.CreatedAt.UnixNano() <= 0 {
			t.Fatalf("accepted cursor %q gave key %+v", cursor, key)
		}
		if byType && !key.Type.Valid() {
			t.Fatalf("type-order cursor %q gave type %q", cursor, key.Type)
		}
		// The same cursor is refused by the opposite direction.
		flipped := belay.ListCheckpointsInput{Cursor: cursor, OrderBy: orderBy, OrderDir: belay.OrderAsc}
		if asc {
			flipped.OrderDir = belay.OrderDesc
		}
		if _, err := core.DecodeCheckpointCursor(&flipped); err == nil {
			t.Fatalf("cursor %q accepted by both directions", cursor)
		}
	})
}

// TestSessionListPagesInSeqOrder: a session's checkpoints page in the
// session's order, by seq, also when their creation times disagree (a clock
// set back between saves), and a cursor of that order is refused by a list
// of another.
func TestSessionListPagesInSeqOrder(t *testing.T) {
	clock := testclock.New(start, time.Millisecond)
	svc := newService(t, clock)
	sess, err := svc.CreateSession(localCtx, belay.CreateSessionInput{ProjectPath: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i, back := range []time.Duration{0, -time.Hour, time.Minute, -2 * time.Hour} {
		clock.Set(start.Add(back))
		cp := mustCreate(t, svc, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: fmt.Sprint(i)})
		want = append(want, cp.ID)
	}
	for _, dir := range []string{belay.OrderAsc, belay.OrderDesc} {
		in := belay.ListCheckpointsInput{SessionID: sess.ID, OrderDir: dir, Limit: 1}
		var got []string
		for range len(want) + 1 {
			list, err := svc.ListCheckpoints(localCtx, in)
			if err != nil {
				t.Fatal(err)
			}
			for _, cp := range list.Items {
				got = append(got, cp.ID)
			}
			if !list.HasMore {
				break
			}
			in.Cursor = list.NextCursor
		}
		w := slices.Clone(want)
		if dir == belay.OrderDesc {
			slices.Reverse(w)
		}
		if !slices.Equal(got, w) {
			t.Errorf("%s: paged %v, want the session's order %v", dir, got, w)
		}
	}
	page, err := svc.ListCheckpoints(localCtx, belay.ListCheckpointsInput{SessionID: sess.ID, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.ListCheckpoints(localCtx, belay.ListCheckpointsInput{ProjectPath: sess.ProjectPath, Limit: 1, Cursor: page.NextCursor})
	testutil.WantCode(t, err, belay.CodeValidation, "cursor")
	other, err := svc.ListCheckpoints(localCtx, belay.ListCheckpointsInput{ProjectPath: sess.ProjectPath, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.ListCheckpoints(localCtx, belay.ListCheckpointsInput{SessionID: sess.ID, Limit: 1, Cursor: other.NextCursor})
	testutil.WantCode(t, err, belay.CodeValidation, "cursor")
}
