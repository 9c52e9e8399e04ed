package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/belayhq/belay"
)

// decodeJSON reads exactly one JSON object into dst (whatever the
// Content-Type says, so a plain `curl -d` works), rejecting unknown fields,
// trailing data, text that is not UTF-8 and oversize bodies with coded
// errors that name the field.
func decodeJSON(w http.ResponseWriter, r *http.Request, dst any) error {
	// Read whole: the decoder buffers a value whole anyway, and the bytes
	// are what tells whether a string was UTF-8 before it was decoded.
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, belay.MaxBodyBytes))
	if err != nil {
		return decodeError(err, "")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeError(err, timeField(dst))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return belay.Invalid("body", "request body must hold exactly one JSON object")
	}
	return belay.InvalidUTF8(data, dst)
}

// decodeOptionalJSON is decodeJSON for a body that may be left out.
func decodeOptionalJSON(w http.ResponseWriter, r *http.Request, dst any) error {
	if r.ContentLength == 0 {
		return nil
	}
	return decodeJSON(w, r, dst)
}

// decodeError turns a JSON decoding error into a VALIDATION_ERROR (or
// PAYLOAD_TOO_LARGE) naming the field. encoding/json does not say which field
// a time failed in, so timeField names it when the input has only one.
func decodeError(err error, timeField string) error {
	var coded *belay.Error
	if errors.As(err, &coded) {
		return coded // the body's own (REQUEST_TIMEOUT)
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return belay.Errorf(belay.CodeTooLarge, "request body is larger than %d bytes", tooBig.Limit).With("limit", tooBig.Limit)
	case errors.Is(err, io.EOF):
		return belay.Invalid("body", "request body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return belay.Invalid("body", "request body is truncated JSON")
	case errors.As(err, &syntax):
		return belay.Invalid("body", "malformed JSON at byte %d: %s", syntax.Offset, syntax.Error())
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "body"
		}
		return belay.Invalid(field, "%s must be %s, got %s", field, belay.JSONKind(typ.Type), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return belay.Invalid(name, "unknown field %q", name)
	}
	var perr *time.ParseError
	if errors.As(err, &perr) || strings.HasPrefix(err.Error(), "Time.UnmarshalJSON: ") {
		if timeField == "" {
			timeField = "body"
		}
		return belay.Invalid(timeField, "%s must be an RFC 3339 time, e.g. 2025-01-15T12:00:00Z", timeField)
	}
	return belay.Invalid("body", "malformed JSON: %v", err)
}

var timeType = reflect.TypeFor[time.Time]()

// timeField returns the JSON name of the one time field of the struct dst
// points to, or "" when it has none or several.
func timeField(dst any) string {
	t := reflect.TypeOf(dst)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return ""
	}
	name := ""
	for i := range t.NumField() {
		f := t.Field(i)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft != timeType {
			continue
		}
		if name != "" {
			return ""
		}
		name, _, _ = strings.Cut(f.Tag.Get("json"), ",")
	}
	return name
}

// checkQuery refuses a query string that does not parse (a bad %-escape, a
// ';' separator) or that holds a parameter not among params, naming the
// parameter, or "query" when its name is what is malformed: r.URL.Query
// would drop a malformed pair and answer as if it had not been sent.
func checkQuery(raw string, params []string) error {
	values, err := url.ParseQuery(raw)
	if err != nil {
		return malformedQuery(raw)
	}
	for _, name := range slices.Sorted(maps.Keys(values)) {
		if !slices.Contains(params, name) {
			return belay.Invalid(name, "unknown query parameter %q", name)
		}
	}
	return nil
}

// query reads typed query parameters, remembering the first error. The
// route has checked the query string (checkQuery).
type query struct {
	values url.Values
	err    error
}

func newQuery(r *http.Request) *query {
	return &query{values: r.URL.Query()}
}

// malformedQuery names the first parameter of a query string that does not
// parse.
func malformedQuery(raw string) error {
	for pair := range strings.SplitSeq(raw, "&") {
		name, value, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(name)
		if err != nil || strings.Contains(pair, ";") {
			break
		}
		if _, err := url.QueryUnescape(value); err != nil {
			return belay.Invalid(key, "%s is not valid query encoding: %v", key, err)
		}
	}
	return belay.Invalid("query", "the query string is malformed; escape '%%' as %%25 and separate parameters with '&'")
}

func (q *query) fail(err error) {
	if q.err == nil {
		q.err = err
	}
}

func (q *query) str(name string) string {
	v := q.values[name]
	if len(v) == 0 {
		return ""
	}
	if len(v) > 1 {
		q.fail(belay.Invalid(name, "%s is given %d times", name, len(v)))
	}
	return v[0]
}

// list accepts both ?tag=a&tag=b and ?tag=a,b.
func (q *query) list(name string) []string {
	var out []string
	for _, v := range q.values[name] {
		// Empty items are kept, so validation refuses them as core does.
		out = append(out, strings.Split(v, ",")...)
	}
	return out
}

func (q *query) int(name string) int {
	s := q.str(name)
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		q.fail(belay.Invalid(name, "%s must be an integer, got %q", name, s))
	}
	return n
}

// limit reads a page size; an explicit 0 is out of range, not "the default".
func (q *query) limit() int {
	n := q.int("limit")
	if n == 0 && len(q.values["limit"]) > 0 {
		q.fail(belay.Invalid("limit", "limit must be 1-%d, got 0", belay.MaxListLimit))
	}
	return n
}

func (q *query) boolPtr(name string) *bool {
	s := q.str(name)
	if s == "" {
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		q.fail(belay.Invalid(name, "%s must be true or false, got %q", name, s))
		return nil
	}
	return &b
}

// flag is a boolean parameter that is false when absent.
func (q *query) flag(name string) bool {
	b := q.boolPtr(name)
	return b != nil && *b
}

func (q *query) time(name string) *time.Time {
	s := q.str(name)
	if s == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		q.fail(belay.Invalid(name, "%s must be an RFC 3339 time, e.g. 2025-01-15T12:00:00Z, got %q", name, s))
		return nil
	}
	return &t
}

// done returns the first error.
func (q *query) done() error { return q.err }

func pathID(r *http.Request, name string) (string, error) {
	id := r.PathValue(name)
	if err := belay.ValidateID(name, id); err != nil {
		return "", err
	}
	return id, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The status is already sent; a failed write means the client went away.
	_ = json.NewEncoder(w).Encode(v)
}
