package trpc

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// transformer is how values cross the wire: plain JSON, or superjson
// ({"json": value, "meta": {"values": {path: ["Date"]}}}), as the client's
// transformer option says.
type transformer interface {
	// input turns a sent input into plain JSON.
	input(raw json.RawMessage) (json.RawMessage, error)
	// output wraps a plain JSON value for the client.
	output(v json.RawMessage) (json.RawMessage, error)
}

type plain struct{}

func (plain) input(raw json.RawMessage) (json.RawMessage, error) { return raw, nil }
func (plain) output(v json.RawMessage) (json.RawMessage, error)  { return v, nil }

// superJSON speaks superjson's format. Dates are the only rich values belay
// sends: every string field named like a time (createdAt, expiresAt, …)
// that holds an RFC 3339 time is marked a Date, so the client gets Date
// objects. Inputs carry dates as ISO strings in "json", which Go reads as
// times; their meta is not needed.
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

func (superJSON) output(v json.RawMessage) (json.RawMessage, error) {
	// Numbers stay as written: only strings are looked at.
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	dates := map[string][]string{}
	markDates(tree, "", "", dates)
	env := map[string]any{"json": json.RawMessage(v)}
	if len(dates) > 0 {
		env["meta"] = map[string]any{"values": dates}
	}
	return json.Marshal(env)
}

// markDates records the paths of date strings under v (at path, whose last
// key is key), in superjson's dotted form.
func markDates(v any, path, key string, dates map[string][]string) {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			markDates(c, join(path, escape(k)), k, dates)
		}
	case []any:
		for i, c := range t {
			markDates(c, join(path, strconv.Itoa(i)), key, dates)
		}
	case string:
		if isTimeKey(key) {
			if _, err := time.Parse(time.RFC3339Nano, t); err == nil {
				dates[path] = []string{"Date"}
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

// isTimeKey reports whether a field holds a time in belay's shapes.
func isTimeKey(k string) bool {
	return strings.HasSuffix(k, "At") || k == "createdAfter" || k == "createdBefore"
}
