package trpc

import (
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// transformer is how values cross the wire: plain JSON, or superjson
// ({"json": value, "meta": {"values": {path: ["Date"]}}}), as the client's
// transformer option says.
type transformer interface {
	// input turns a sent input into plain JSON.
	input(raw json.RawMessage) (json.RawMessage, error)
	// output encodes a value for the client.
	output(v any) (json.RawMessage, error)
}

type plain struct{}

func (plain) input(raw json.RawMessage) (json.RawMessage, error) { return raw, nil }
func (plain) output(v any) (json.RawMessage, error)              { return json.Marshal(v) }

// superJSON speaks superjson's format. Dates are the only rich values belay
// sends: each time.Time of belay's own types (createdAt, expiresAt, …) is
// marked a Date, so the client gets Date objects. The documents belay keeps
// for its users (agent state, metadata, outputs, HITL context and
// modifications, event data, session state: json.RawMessage) are never
// looked into, so they arrive byte for byte as over plain JSON. Inputs carry
// dates as ISO strings in "json", which Go reads as times; their meta is not
// needed.
type superJSON struct{}

func (superJSON) input(raw json.RawMessage) (json.RawMessage, error) {
	var env struct {
		JSON json.RawMessage `json:"json"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return nil, err
	}
	if env.JSON == nil {
		return json.RawMessage("null"), nil
	}
	return env.JSON, nil
}

func (superJSON) output(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dates := map[string][]string{}
	markDates(reflect.ValueOf(v), "", dates)
	if len(dates) == 0 {
		return slices.Concat([]byte(`{"json":`), b, []byte(`}`)), nil
	}
	meta, err := json.Marshal(map[string]any{"values": dates})
	if err != nil {
		return nil, err
	}
	return slices.Concat([]byte(`{"json":`), b, []byte(`,"meta":`), meta, []byte(`}`)), nil
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// markDates records in dates the superjson path (its keys joined by dots)
// of each time.Time in v, at path, where encoding/json puts it: struct
// fields under their JSON names (the fields of embedded structs promoted),
// slice and array elements under their index, the values of maps with
// string keys under their key, through pointers and interfaces. A value that encodes itself
// (json.RawMessage, any other json.Marshaler or encoding.TextMarshaler) is
// opaque: its JSON is not belay's to mark.
func markDates(v reflect.Value, path string, dates map[string][]string) {
	if !v.IsValid() {
		return
	}
	t := v.Type()
	switch {
	case v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface:
		if !v.IsNil() {
			markDates(v.Elem(), path, dates)
		}
		return
	case t == timeType:
		dates[path] = []string{"Date"}
		return
	case t.Implements(jsonMarshaler) || t.Implements(textMarshaler) ||
		reflect.PointerTo(t).Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(textMarshaler):
		return
	}
	switch v.Kind() {
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			markDates(v.Index(i), join(path, strconv.Itoa(i)), dates)
		}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return
		}
		for it := v.MapRange(); it.Next(); {
			markDates(it.Value(), join(path, escape(it.Key().String())), dates)
		}
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			name, _, _ := strings.Cut(tag, ",")
			embedded := f.Type
			if embedded.Kind() == reflect.Pointer {
				embedded = embedded.Elem()
			}
			switch {
			case tag == "-":
			case f.Anonymous && name == "" && embedded.Kind() == reflect.Struct:
				markDates(v.Field(i), path, dates)
			case !f.IsExported():
			default:
				if name == "" {
					name = f.Name
				}
				markDates(v.Field(i), join(path, escape(name)), dates)
			}
		}
	}
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// escape escapes a key for superjson's paths, where "." separates keys.
func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, `\`, `\\`), ".", `\.`)
}
