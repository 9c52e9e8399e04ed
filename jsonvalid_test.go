package belay

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

var jsonCases = []string{
	``, ` `, `null`, `true`, `false`, `nul`, `truex`, `0`, `-0`, `01`, `-`, `1.`, `1.5`, `1e`, `1e+`, `1E-7`, `-12.5e10`,
	`""`, `"a"`, `"\"`, `"\u00e9"`, `"\u00g9"`, `"\x"`, "\"\x01\"", "\"\x7f\"", "\"\xff\"", `"\/\b\f\n\r\t"`,
	`{}`, `[]`, `{ }`, `[ ]`, `{"a":1}`, `{"a":1,}`, `{"a" : [1, 2, {"b": null}] }`, `[1,]`, `[,1]`, `{"a"}`,
	`{1:2}`, `{"a":1 "b":2}`, `[1 2]`, `]`, `}`, `[}`, `{]`, `[[[]]]`, `[[[]]`, ` {"k":"v"} `, `{"k":"v"} x`,
	"\t[\n1\r]\n", `[true,false,null]`, `"abc`, `{"a":`, `{"a":1`, `[1`, `[`, `{`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
	strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
}

func TestValidJSON(t *testing.T) {
	for _, c := range jsonCases {
		if got, want := validJSON([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("validJSON(%.40q) = %v, json.Valid says %v", c, got, want)
		}
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, c := range jsonCases {
		f.Add([]byte(c))
	}
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi \u263a"}],"step":3,"score":-1.5e-3,"done":false}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := validJSON(data), json.Valid(data); got != want {
			t.Errorf("validJSON(%q) = %v, json.Valid says %v", data, got, want)
		}
	})
}

func TestUnstorableEscape(t *testing.T) {
	for doc, want := range map[string]string{
		`{}`:                     "",
		`"\u0000"`:               `\u0000`,
		`{"\u0000":1}`:           `\u0000`,
		`["a\u00e9\n","\u0000"]`: `\u0000`,
		`"\ud800"`:               `\ud800`,
		`"\uDBFFx"`:              `\uDBFF`,
		`"\ud800\u0041"`:         `\ud800`,
		`"\ud800\n"`:             `\ud800`,
		`"\ud800\ud800"`:         `\ud800`,
		`"\udc00"`:               `\udc00`,
		`"\uDFFF\ud800"`:         `\uDFFF`,
		`"\ud83d\ude80"`:         "",
		`"\uD83D\uDE80\u0001"`:   "",
		`"\\u0000 \\ud800"`:      "", // escaped backslashes, then text
		`"\\\u0000"`:             `\u0000`,
		`"\"\u0000"`:             `\u0000`,
		`"\/\b\f\r\t"`:           "",
	} {
		if !validJSON([]byte(doc)) {
			t.Fatalf("case %s is not valid JSON", doc)
		}
		if got := unstorableEscape([]byte(doc)); got != want {
			t.Errorf("unstorableEscape(%s) = %q, want %q", doc, got, want)
		}
	}
}

func BenchmarkValidJSON(b *testing.B) {
	state := []byte(`{"messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 170) + `"}],"step":3,"score":-1.5e-3}`)
	b.Run("validJSON", func(b *testing.B) {
		b.SetBytes(int64(len(state)))
		for b.Loop() {
			validJSON(state)
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(state)))
		for b.Loop() {
			json.Valid(state)
		}
	})
}

func TestJSONKind(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{"", "a string"}, {true, "a boolean"}, {0, "an integer"}, {int64(0), "an integer"}, {uint8(0), "an integer"},
		{0.5, "a number"}, {[]int{}, "an array"}, {map[string]int{}, "an object"}, {struct{}{}, "an object"}, {new(int), "an integer"},
	} {
		if got := JSONKind(reflect.TypeOf(c.v)); got != c.want {
			t.Errorf("JSONKind(%T) = %q, want %q", c.v, got, c.want)
		}
	}
}

func TestInvalidUTF8(t *testing.T) {
	const bad = "\xff"
	for body, want := range map[string]string{
		`{"summary":"ok"}`:                                                   "",
		`{"summary":"a` + bad + `"}`:                                         "summary",
		`{"projectPath":"/p","summary":"` + bad + `"}`:                       "summary",
		`{"tags":["a","b` + bad + `"]}`:                                      "tags[1]",
		`{"context":{"k":"` + bad + `"}}`:                                    "context.k",
		`{"context":{"` + bad + `":"v"}}`:                                    "context",
		`{"agentState":{"a":[1,"` + bad + `"]}}`:                             "agentState",
		`{"hitl":{"title":"t","context":{"x":"` + bad + `"}}}`:               "hitl.context",
		`{"hitl":{"options":[{"id":"a"},{"id":"b","label":"` + bad + `"}]}}`: "hitl.options[1].label",
		`{"HITL":{"Message":"` + bad + `"}}`:                                 "HITL.Message",
		`{"summary":"x","events":[{"type":"t","data":{"a":"` + bad + `"}}]}`: "events[0].data",
		`"` + bad + `"`: "body",
	} {
		var in CreateCheckpointInput
		if body[0] == '{' && json.Unmarshal([]byte(body), &in) != nil {
			t.Fatalf("case %q does not decode", body)
		}
		err := InvalidUTF8([]byte(body), &in)
		if want == "" {
			if err != nil {
				t.Errorf("InvalidUTF8(%q) = %v, want nil", body, err)
			}
			continue
		}
		if e, ok := err.(*Error); !ok || e.Code != CodeValidation || e.Details["field"] != want {
			t.Errorf("InvalidUTF8(%q) = %v, want a VALIDATION_ERROR naming %s", body, err, want)
		}
	}
}

func TestInvalidText(t *testing.T) {
	const bad = "\xff"
	for _, c := range []struct {
		in   any
		want string
	}{
		{CreateCheckpointInput{Summary: "ok", Tags: []string{"a"}, Context: map[string]string{"k": "v"}}, ""},
		{CreateCheckpointInput{Summary: "a" + bad}, "summary"},
		{&CreateCheckpointInput{Tags: []string{"a", bad}}, "tags[1]"},
		{CreateCheckpointInput{Context: map[string]string{"k": bad}}, "context.k"},
		{CreateCheckpointInput{Context: map[string]string{bad: "v"}}, "context"},
		{CreateCheckpointInput{AgentState: json.RawMessage(`{"a":"` + bad + `"}`)}, "agentState"},
		{CreateCheckpointInput{HITL: &HITLInput{Options: []HITLOption{{}, {Label: bad}}}}, "hitl.options[1].label"},
		{CreateSessionInput{Holder: bad}, ""}, // not sent
		{map[string]any{"reason": bad}, "reason"},
		{bad, "body"},
	} {
		err := InvalidText(c.in)
		if c.want == "" {
			if err != nil {
				t.Errorf("InvalidText(%+v) = %v, want nil", c.in, err)
			}
			continue
		}
		if e, ok := err.(*Error); !ok || e.Code != CodeValidation || e.Details["field"] != c.want {
			t.Errorf("InvalidText(%+v) = %v, want a VALIDATION_ERROR naming %s", c.in, err, c.want)
		}
	}
}
