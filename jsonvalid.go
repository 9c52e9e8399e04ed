package belay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// validJSON reports whether data is one JSON value, exactly as json.Valid
// does (FuzzValidJSON holds the two equal), in one pass that skips through
// strings a byte at a time without the standard scanner's per-byte state
// function calls: every save validates its agent state, and json.Valid took
// about 10 µs of a save's CPU for a 2 KB state.
func validJSON(data []byte) bool {
	// stack holds the open containers: '{' or '['. json.Valid allows
	// maxJSONDepth of them.
	var buf [64]byte
	stack := buf[:0]
	i := skipSpace(data, 0)
	for {
		// A value is expected at i.
		if i >= len(data) {
			return false
		}
		switch c := data[i]; {
		case c == '{' || c == '[':
			if len(stack) == maxJSONDepth {
				return false
			}
			stack = append(stack, c)
			i = skipSpace(data, i+1)
			if i < len(data) && data[i] == c+2 { // '}' is '{'+2, ']' is '['+2
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				if i = objectKey(data, i); i < 0 {
					return false
				}
			}
			continue
		case c == '"':
			if i = skipString(data, i); i < 0 {
				return false
			}
		case c == '-' || c >= '0' && c <= '9':
			if i = skipNumber(data, i); i < 0 {
				return false
			}
		case c == 't':
			if i = skipLiteral(data, i, "true"); i < 0 {
				return false
			}
		case c == 'f':
			if i = skipLiteral(data, i, "false"); i < 0 {
				return false
			}
		case c == 'n':
			if i = skipLiteral(data, i, "null"); i < 0 {
				return false
			}
		default:
			return false
		}
		// A value ended before i: close containers, or go on to the next
		// element of the innermost one.
		for {
			i = skipSpace(data, i)
			if len(stack) == 0 {
				return i == len(data)
			}
			if i >= len(data) {
				return false
			}
			open := stack[len(stack)-1]
			if data[i] == open+2 {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if data[i] != ',' {
				return false
			}
			i = skipSpace(data, i+1)
			if open == '{' {
				if i = objectKey(data, i); i < 0 {
					return false
				}
			}
			break
		}
	}
}

// maxJSONDepth is encoding/json's limit on nested arrays and objects.
const maxJSONDepth = 10000

// objectKey skips an object's key and its colon at i and the space after
// them, and returns where the value starts, or -1.
func objectKey(data []byte, i int) int {
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	if i = skipString(data, i); i < 0 {
		return -1
	}
	i = skipSpace(data, i)
	if i >= len(data) || data[i] != ':' {
		return -1
	}
	return skipSpace(data, i+1)
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// stringStop marks the bytes that end a run of plain string content: the
// quote, the backslash and the control characters JSON forbids unescaped.
var stringStop = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// skipString returns the index after the string starting at i (a quote), or
// -1. Like json.Valid it accepts any byte from 0x20 up, invalid UTF-8 too.
func skipString(data []byte, i int) int {
	i++
	for {
		for i < len(data) && !stringStop[data[i]] {
			i++
		}
		if i >= len(data) {
			return -1
		}
		switch data[i] {
		case '"':
			return i + 1
		case '\\':
			if i+1 >= len(data) {
				return -1
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) {
					return -1
				}
				for _, h := range data[i+2 : i+6] {
					if !isHex(h) {
						return -1
					}
				}
				i += 6
			default:
				return -1
			}
		default:
			return -1 // a control character
		}
	}
}

// unstorableEscape returns the first \u escape in the valid JSON text data
// that PostgreSQL's jsonb refuses, or "": \u0000 (its text holds no NUL) and
// a surrogate not in a high-low pair (no character). Valid JSON has
// backslashes only in strings, each beginning an escape.
func unstorableEscape(data []byte) string {
	for i := 0; ; {
		j := bytes.IndexByte(data[i:], '\\')
		if j < 0 {
			return ""
		}
		i += j
		if data[i+1] != 'u' {
			i += 2
			continue
		}
		switch r := hex4(data[i+2 : i+6]); {
		case r == 0:
			return string(data[i : i+6])
		case r >= 0xd800 && r < 0xdc00: // high: a low one must follow
			if i+12 > len(data) || data[i+6] != '\\' || data[i+7] != 'u' {
				return string(data[i : i+6])
			}
			if low := hex4(data[i+8 : i+12]); low < 0xdc00 || low > 0xdfff {
				return string(data[i : i+6])
			}
			i += 12
		case r >= 0xdc00 && r <= 0xdfff:
			return string(data[i : i+6])
		default:
			i += 6
		}
	}
}

// hex4 reads four hexadecimal digits.
func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		default:
			r = r<<4 | rune(c-'A'+10)
		}
	}
	return r
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// skipNumber returns the index after the number starting at i, or -1:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func skipNumber(data []byte, i int) int {
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && isDigit(data[i]):
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	default:
		return -1
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i >= len(data) || !isDigit(data[i]) {
			return -1
		}
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || !isDigit(data[i]) {
			return -1
		}
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	}
	return i
}

// skipLiteral returns the index after lit at i, or -1.
func skipLiteral(data []byte, i int, lit string) int {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// JSONKind names what JSON value a Go type takes, for an error about a value
// of the wrong type: "an integer" for an integer type, "a number" for a float.
func JSONKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "of another type"
}

// InvalidUTF8 returns nil when data, a JSON text decoded into dst (a
// pointer), is UTF-8; else a VALIDATION_ERROR naming the field whose text
// holds its first invalid byte. encoding/json reads such bytes in a string as
// U+FFFD, so a transport that decodes with it must ask, or it would store
// text other than what was sent (belay's own CLI refuses it). The field is
// named as Validate names it: "summary", "tags[1]", "context.k", and a JSON
// document ("agentState", "hitl.context") whole.
func InvalidUTF8(data []byte, dst any) error {
	if utf8.Valid(data) {
		return nil
	}
	field := fieldOf(reflect.TypeOf(dst), jsonPathAt(data, invalidAt(data)))
	return Invalid(field, "%s is not valid UTF-8", field)
}

// invalidAt returns the index of data's first byte that is not UTF-8.
func invalidAt(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(data)
}

// jsonPathAt returns the keys and indexes leading to the string of the JSON
// text data that holds byte off: the object's path for a key, the value's
// own for a value.
func jsonPathAt(data []byte, off int) []any {
	type frame struct {
		object  bool
		key     string
		index   int
		wantKey bool
	}
	var stack []frame
	path := func(value bool) []any {
		var out []any
		for i, f := range stack {
			if i == len(stack)-1 && !value {
				break
			}
			if f.object {
				out = append(out, f.key)
			} else {
				out = append(out, f.index)
			}
		}
		return out
	}
	// after marks a value done in the container holding it.
	after := func() {
		if len(stack) == 0 {
			return
		}
		if f := &stack[len(stack)-1]; f.object {
			f.wantKey = true
		} else {
			f.index++
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		isKey := len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].wantKey
		if dec.InputOffset() > int64(off) {
			return path(!isKey)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			stack = append(stack, frame{object: tok == json.Delim('{'), wantKey: true})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			after()
			continue
		}
		if isKey {
			f := &stack[len(stack)-1]
			f.key, f.wantKey = tok.(string), false
			continue
		}
		after()
	}
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// fieldOf names the field at path in a value of type t as Validate does:
// down to a JSON document (a json.RawMessage), or as far as t has fields.
func fieldOf(t reflect.Type, path []any) string {
	var b strings.Builder
	for _, seg := range path {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == rawMessageType {
			break
		}
		switch seg := seg.(type) {
		case int:
			if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
				return orBody(b.String())
			}
			fmt.Fprintf(&b, "[%d]", seg)
			t = t.Elem()
			continue
		case string:
			next, ok := jsonField(t, seg)
			if !ok {
				return orBody(b.String())
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(seg)
			t = next
		}
	}
	return orBody(b.String())
}

// orBody is field, or "body" for the whole input.
func orBody(field string) string {
	if field == "" {
		return "body"
	}
	return field
}

// jsonField returns the type of the value under key in a value of type t:
// a map's element, or the struct field encoding/json would decode key into.
func jsonField(t reflect.Type, key string) (reflect.Type, bool) {
	switch t.Kind() {
	case reflect.Map:
		return t.Elem(), true
	case reflect.Struct:
		for _, f := range reflect.VisibleFields(t) {
			if !f.IsExported() || f.Anonymous && f.Tag.Get("json") == "" {
				continue
			}
			if n := jsonKey(f); n != "" && strings.EqualFold(n, key) {
				return f.Type, true
			}
		}
	}
	return nil, false
}

// jsonKey is the key encoding/json reads and writes field f under: its
// tag's name, else its Go name; "" when the tag skips it ("-").
func jsonKey(f reflect.StructField) string {
	n, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch n {
	case "-":
		return ""
	case "":
		return f.Name
	}
	return n
}

// InvalidText returns nil when all text in v is UTF-8; else a
// VALIDATION_ERROR naming the first field (a string, a map's key, a JSON
// document) whose text is not, as InvalidUTF8 names it in the bytes. A
// client encoding v with encoding/json asks first: it would send such text
// as U+FFFD, which the service would store as if it had been given.
func InvalidText(v any) error {
	if field, bad := invalidText(reflect.ValueOf(v), ""); bad {
		field = orBody(field)
		return Invalid(field, "%s is not valid UTF-8", field)
	}
	return nil
}

func invalidText(v reflect.Value, field string) (string, bool) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return "", false
		}
		return invalidText(v.Elem(), field)
	case reflect.String:
		return field, !utf8.ValidString(v.String())
	case reflect.Slice, reflect.Array:
		if v.Type() == rawMessageType {
			return field, !utf8.Valid(v.Bytes())
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return "", false // bytes, sent as base64
		}
		for i := range v.Len() {
			if f, bad := invalidText(v.Index(i), fmt.Sprintf("%s[%d]", field, i)); bad {
				return f, true
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			k := it.Key()
			if k.Kind() == reflect.String && !utf8.ValidString(k.String()) {
				return field, true
			}
			if f, bad := invalidText(it.Value(), dotted(field, fmt.Sprint(k.Interface()))); bad {
				return f, true
			}
		}
	case reflect.Struct:
		for _, sf := range reflect.VisibleFields(v.Type()) {
			n := jsonKey(sf)
			if !sf.IsExported() || sf.Anonymous || n == "" {
				continue
			}
			fv, err := v.FieldByIndexErr(sf.Index)
			if err != nil {
				continue // in a nil embedded pointer
			}
			if f, bad := invalidText(fv, dotted(field, n)); bad {
				return f, true
			}
		}
	}
	return "", false
}

// dotted is field.name, or name at the top.
func dotted(field, name string) string {
	if field == "" {
		return name
	}
	return field + "." + name
}
