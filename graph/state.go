package graph

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/belayhq/belay"
)

// encodeState returns the state as JSON. A state JSON cannot hold is a
// VALIDATION_ERROR that names where, e.g. "state.trends[3].sources: func value".
func encodeState(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
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

// decodeState reads a stored state.
func decodeState[S any](raw json.RawMessage) (S, error) {
	var s S
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, belay.Errorf(belay.CodeCheckpointCorrupt, "the stored state does not fit %T: %v", s, err)
	}
	return s, nil
}

// applyUpdate writes update's top-level keys over the state's, as a node's
// partial update does in LangGraph: keys update names replace the state's,
// the rest stay. Both must be JSON objects.
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
	for k, v := range changes {
		fields[k] = v
	}
	merged, err := json.Marshal(fields)
	if err != nil {
		return zero, nil, belay.Invalid("update", "the updated state cannot be encoded: %v", err)
	}
	var s S
	if err := json.Unmarshal(merged, &s); err != nil {
		return zero, nil, belay.Invalid("update", "the update does not fit the state %T: %v", s, err)
	}
	out, err := encodeState(s)
	return s, out, err
}
