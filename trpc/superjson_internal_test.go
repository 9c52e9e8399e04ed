package trpc

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMarkDatesFollowsEncodingJSON: markDates marks each time where
// encoding/json puts it — under JSON names, through embedded structs,
// pointers, interfaces, slices and maps, "." in keys escaped — and none
// inside a value that encodes itself: each path it marks leads to an
// RFC 3339 string in the encoded value.
func TestMarkDatesFollowsEncodingJSON(t *testing.T) {
	type inner struct {
		When time.Time `json:"when"`
	}
	type Embedded struct {
		EmbeddedAt time.Time `json:"embeddedAt"`
	}
	type doc struct {
		Embedded
		*inner
		Named    time.Time `json:"named"`
		Untagged time.Time
		Skipped  time.Time `json:"-"`
		hidden   time.Time
		Nil      *time.Time      `json:"nil,omitempty"`
		Ptr      *time.Time      `json:"ptr"`
		List     []inner         `json:"list"`
		Details  map[string]any  `json:"details"`
		Any      any             `json:"any"`
		Raw      json.RawMessage `json:"raw"`
	}
	now := time.Date(2026, 1, 1, 10, 0, 0, 123456789, time.FixedZone("", 2*3600))
	v := doc{Embedded: Embedded{now}, inner: &inner{now}, Named: now, Untagged: now, Skipped: now, hidden: now,
		Ptr: &now, List: []inner{{now}, {now}}, Details: map[string]any{"a.b": now, "decision": &inner{now}},
		Any: inner{now}, Raw: json.RawMessage(`{"createdAt":"2026-01-01T00:00:00Z"}`)}
	dates := map[string][]string{}
	markDates(reflect.ValueOf(v), "", dates)
	want := []string{"embeddedAt", "when", "named", "Untagged", "ptr", "list.0.when", "list.1.when",
		`details.a\.b`, "details.decision.when", "any.when"}
	if got := slices.Sorted(maps.Keys(dates)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("marked %q, want %q", got, want)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		t.Fatal(err)
	}
	for path := range dates {
		at := tree
		for _, key := range splitPath(path) {
			obj, ok := at.(map[string]any)
			if list, isList := at.([]any); isList {
				obj, ok = map[string]any{}, true
				for i, x := range list {
					obj[strconv.Itoa(i)] = x
				}
			}
			if !ok {
				t.Fatalf("%s: no object at %q in %s", path, key, b)
			}
			at = obj[key]
		}
		s, _ := at.(string)
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			t.Errorf("%s leads to %v in %s", path, at, b)
		}
	}
}

// splitPath splits a superjson path into its keys.
func splitPath(path string) []string {
	var keys []string
	var key strings.Builder
	for i := 0; i < len(path); i++ {
		switch {
		case path[i] == '\\' && i+1 < len(path):
			i++
			key.WriteByte(path[i])
		case path[i] == '.':
			keys = append(keys, key.String())
			key.Reset()
		default:
			key.WriteByte(path[i])
		}
	}
	return append(keys, key.String())
}
