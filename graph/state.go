package graph

import (
	"cmp"
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"unicode"

	"github.com/belayhq/belay"
)

// encodeState returns the state as JSON. A state JSON cannot hold is a
// VALIDATION_ERROR that names where, e.g. "state.trends[3].sources: func value";
// so is one larger than belay.MaxStateBytes, which no checkpoint can hold:
// a run fails on it rather than stop at a save that fails the same way on
// every Resume.
func encodeState(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err == nil && len(b) > belay.MaxStateBytes {
		return nil, belay.Invalid("state", "the state is %d bytes as JSON, more than the limit of %d (belay.MaxStateBytes)", len(b), belay.MaxStateBytes).
			With("bytes", len(b)).With("limit", belay.MaxStateBytes)
	}
	if err == nil {
		return b, nil
	}
	if path, what := unsupported(reflect.ValueOf(v), "state", map[uintptr]bool{}); path != "" {
		return nil, belay.Invalid(path, "%s: %s cannot be stored as JSON", path, what).With("path", path)
	}
	return nil, belay.Invalid("state", "the state cannot be stored as JSON: %v", err)
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	unmarshalerType   = reflect.TypeFor[json.Unmarshaler]()
)

// unsupported finds the first value under v that encoding/json refuses and
// returns its path and what it is; "" when it finds none (the failure is then
// a custom marshaler's, reported as is).
func unsupported(v reflect.Value, path string, visiting map[uintptr]bool) (string, string) {
	if !v.IsValid() {
		return "", ""
	}
	if v.Type().Implements(marshalerType) || v.Type().Implements(textMarshalerType) {
		return "", ""
	}
	switch v.Kind() {
	case reflect.Func, reflect.Chan, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		return path, v.Kind().String() + " value"
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return path, fmt.Sprintf("the number %v", f)
		}
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return "", ""
		}
		if v.Kind() == reflect.Pointer {
			if visiting[v.Pointer()] {
				return path, "a cycle"
			}
			visiting[v.Pointer()] = true
			defer delete(visiting, v.Pointer())
		}
		return unsupported(v.Elem(), path, visiting)
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return "", ""
		}
		for i := range v.Len() {
			if p, w := unsupported(v.Index(i), fmt.Sprintf("%s[%d]", path, i), visiting); p != "" {
				return p, w
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			if p, w := unsupported(iter.Value(), fmt.Sprintf("%s[%v]", path, iter.Key()), visiting); p != "" {
				return p, w
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, skip := jsonName(f)
			if skip {
				continue
			}
			p := path + "." + name
			if f.Anonymous {
				p = path
			}
			if p, w := unsupported(v.Field(i), p, visiting); p != "" {
				return p, w
			}
		}
	}
	return "", ""
}

// jsonName is the key encoding/json writes for a field, and whether it
// skips the field.
func jsonName(f reflect.StructField) (string, bool) {
	if !f.IsExported() && !f.Anonymous {
		return "", true
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", true
	}
	if name, _, _ := strings.Cut(tag, ","); name != "" {
		return name, false
	}
	return f.Name, false
}

// stateFields lists the keys encoding/json reads into a struct state, in
// the order of their fields, as it names them: a field's tag, else its Go
// name; an embedded struct's fields promoted, the shallowest of several
// fields of one name winning, then the one a tag names, a tie hiding the
// name. Nil when S is not a struct, or decodes itself (json.Unmarshaler):
// its keys cannot be known before it runs.
func stateFields(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	type field struct {
		name   string
		tagged bool
		index  []int
	}
	type embedded struct {
		typ   reflect.Type
		index []int
	}
	var fields []field
	next := []embedded{{typ: t}}
	visited := map[reflect.Type]bool{}
	for len(next) > 0 {
		level := next
		next = nil
		// A struct embedded twice at one depth hides its fields' names.
		count := map[reflect.Type]int{}
		for _, e := range level {
			count[e.typ]++
		}
		for _, e := range level {
			if visited[e.typ] {
				continue
			}
			visited[e.typ] = true
			for i := range e.typ.NumField() {
				f := e.typ.Field(i)
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if !f.IsExported() && (!f.Anonymous || ft.Kind() != reflect.Struct) {
					continue
				}
				tag := f.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				if !validTagName(name) {
					name = ""
				}
				index := append(slices.Clip(e.index), i)
				if name == "" && f.Anonymous && ft.Kind() == reflect.Struct {
					next = append(next, embedded{ft, index})
					continue
				}
				fd := field{name: name, tagged: name != "", index: index}
				if fd.name == "" {
					fd.name = f.Name
				}
				fields = append(fields, fd)
				if count[e.typ] > 1 {
					fields = append(fields, fd)
				}
			}
		}
	}
	byName := map[string][]field{}
	for _, f := range fields {
		byName[f.name] = append(byName[f.name], f)
	}
	var out []field
	for _, fs := range byName {
		// The shallowest fields of the name, tagged ones first.
		slices.SortStableFunc(fs, func(a, b field) int {
			if c := cmp.Compare(len(a.index), len(b.index)); c != 0 {
				return c
			}
			switch {
			case a.tagged == b.tagged:
				return 0
			case a.tagged:
				return -1
			}
			return 1
		})
		if len(fs) > 1 && len(fs[0].index) == len(fs[1].index) && fs[0].tagged == fs[1].tagged {
			continue // a tie: encoding/json reads neither
		}
		out = append(out, fs[0])
	}
	slices.SortFunc(out, func(a, b field) int { return slices.Compare(a.index, b.index) })
	names := make([]string, len(out))
	for i, f := range out {
		names[i] = f.name
	}
	return names
}

// validTagName says whether encoding/json takes name, from a json tag, as
// a field's key; it names the field by its Go name otherwise.
func validTagName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		if !strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c) && !unicode.IsLetter(c) && !unicode.IsDigit(c) {
			return false
		}
	}
	return true
}

// fieldKey is the key of the field that encoding/json decodes key into,
// among a struct state's keys (stateFields): key itself, else the first
// that equals it but for case; false when none does.
func fieldKey(fields []string, key string) (string, bool) {
	if slices.Contains(fields, key) {
		return key, true
	}
	i := slices.IndexFunc(fields, func(f string) bool { return strings.EqualFold(f, key) })
	if i < 0 {
		return "", false
	}
	return fields[i], true
}

// checkpointed returns state s as its checkpoint holds it: its JSON
// (encodeState), and the state decoded from that JSON into a fresh S, which
// every node gets. A run resumed after its process died gets the state
// from the checkpoint, so a run that never stops must get the same: an
// unexported field, kept in memory, would be lost only after a crash, a
// number in an any would be an int before one and a float64 after, and
// two fields that share a pointer would share it only before.
//
// Refusing a state that does not decode back to itself (reflect.DeepEqual
// after a round trip) would cost the same decoding and a comparison, and
// refuse states that are fine as JSON, such as a map[string]any holding an
// int. Deciding from S's type when the decoding can be skipped would
// miss the sharing of pointers, slices and maps. The decoding costs about
// four times the encoding: microseconds on a state of a few KB, 15-20 ms of
// CPU a step on a 1 MB one, where a step cost 22-33 ms before.
//
// A state whose JSON does not decode back at all (an interface with
// methods, a marshaler without its unmarshaler) is a VALIDATION_ERROR
// naming its type: no run could be resumed from it.
func checkpointed[S any](s S) (S, json.RawMessage, error) {
	raw, err := encodeState(s)
	if err != nil {
		return s, nil, err
	}
	var out S
	if err := json.Unmarshal(raw, &out); err != nil {
		return s, nil, belay.Invalid("state", "the state's JSON does not decode back into %T, so the run could not be resumed from it: %v", out, err).
			With("type", fmt.Sprintf("%T", out))
	}
	return out, raw, nil
}

// decodeState reads a stored state.
func decodeState[S any](raw json.RawMessage) (S, error) {
	var s S
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, belay.Errorf(belay.CodeCheckpointCorrupt, "the stored state does not fit %T: %v", s, err)
	}
	return s, nil
}

// applyUpdate writes update's top-level keys over the state's, as a node's
// partial update does in LangGraph: each key replaces the value of the
// state's field that encoding/json decodes it into — the field's JSON name,
// or one that equals it but for case — and the rest stay. Both must be JSON
// objects. A key that names no field of a struct state (LangGraph refuses an
// update of an unknown channel), or a field another key names too, is a
// VALIDATION_ERROR naming it; a map state takes any key.
func applyUpdate[S any](state json.RawMessage, update any) (S, json.RawMessage, error) {
	var zero S
	patch, err := json.Marshal(update)
	if err != nil {
		return zero, nil, belay.Invalid("update", "the update cannot be encoded as JSON: %v", err)
	}
	var fields, changes map[string]json.RawMessage
	if err := json.Unmarshal(patch, &changes); err != nil || changes == nil {
		return zero, nil, belay.Invalid("update", "the update must encode as a JSON object of state fields, got %s", belay.Clip(string(patch), 60))
	}
	if err := json.Unmarshal(state, &fields); err != nil || fields == nil {
		return zero, nil, belay.Invalid("update", "only a state that encodes as a JSON object can be updated")
	}
	names := stateFields(reflect.TypeFor[S]())
	by := map[string]string{} // the update's key of each field it sets
	for _, k := range slices.Sorted(maps.Keys(changes)) {
		field := k
		if names != nil {
			var ok bool
			if field, ok = fieldKey(names, k); !ok {
				return zero, nil, belay.Invalid("update", "the update sets %q, which is no field of the state %s; its fields are %v",
					belay.Clip(k, 60), reflect.TypeFor[S](), names).With("key", belay.Clip(k, 60)).With("fields", names)
			}
			if other, dup := by[field]; dup {
				return zero, nil, belay.Invalid("update", "the update sets field %q of the state twice, as %q and %q", field, other, belay.Clip(k, 60)).
					With("key", belay.Clip(k, 60)).With("field", field)
			}
			by[field] = k
		}
		fields[field] = changes[k]
	}
	merged, err := json.Marshal(fields)
	if err != nil {
		return zero, nil, belay.Invalid("update", "the updated state cannot be encoded: %v", err)
	}
	var s S
	if err := json.Unmarshal(merged, &s); err != nil {
		return zero, nil, belay.Invalid("update", "the update does not fit the state %T: %v", s, err)
	}
	return checkpointed(s)
}
