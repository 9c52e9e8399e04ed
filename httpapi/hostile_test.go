package httpapi_test

import (
	"strings"
	"testing"

	"github.com/belayhq/belay"
)

// TestHostileInput: JSON documents holding invalid UTF-8 are refused (they
// would be stored and echoed as invalid JSON), and so are query strings
// whose encoding is malformed (they were read as no parameter at all).
func TestHostileInput(t *testing.T) {
	const bad = "\xff\xfe"
	run(t, []scenario{
		{name: "agentState invalid UTF-8", method: "POST", path: "/v1/checkpoints",
			body:       `{"projectPath":"{project}","summary":"s","agentState":{"a":"` + bad + `"}}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "agentState"},
		{name: "outputs invalid UTF-8", method: "POST", path: "/v1/checkpoints",
			body:       `{"projectPath":"{project}","summary":"s","outputs":["` + bad + `"]}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "outputs"},
		{name: "metadata invalid UTF-8", method: "POST", path: "/v1/checkpoints",
			body:       `{"projectPath":"{project}","summary":"s","metadata":{"` + bad + `":1}}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "metadata"},
		{name: "hitl.context invalid UTF-8", method: "POST", path: "/v1/checkpoints",
			body:       `{"projectPath":"{project}","summary":"s","hitl":{"required":true,"context":{"a":"` + bad + `"}}}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "hitl.context"},
		{name: "session metadata invalid UTF-8", method: "POST", path: "/v1/sessions",
			body:       `{"projectPath":"{project}","metadata":{"a":"` + bad + `"}}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "metadata"},
		{name: "modifications invalid UTF-8", method: "POST", path: "/v1/checkpoints/{cp3}/decide",
			body:       `{"action":"modify","selectedOption":"modify","modifications":{"a":"` + bad + `"}}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "modifications"},
		// encoding/json reads invalid UTF-8 in a string as U+FFFD: it is
		// refused instead, as the local CLI refuses it.
		{name: "summary invalid UTF-8", method: "POST", path: "/v1/checkpoints",
			body:       `{"projectPath":"{project}","summary":"bad ` + bad + ` utf"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "summary"},
		{name: "tag invalid UTF-8", method: "POST", path: "/v1/checkpoints",
			body:       `{"projectPath":"{project}","summary":"s","tags":["a","` + bad + `"]}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "tags[1]"},
		{name: "option label invalid UTF-8", method: "POST", path: "/v1/checkpoints",
			body:       `{"projectPath":"{project}","summary":"s","hitl":{"required":true,"options":[{"id":"a","label":"` + bad + `","action":"approve"}]}}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "hitl.options[0].label"},
		{name: "session title invalid UTF-8", method: "PATCH", path: "/v1/sessions/{sid}",
			body:       `{"title":"` + bad + `"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "title"},
		{name: "feedback invalid UTF-8", method: "POST", path: "/v1/checkpoints/{cp3}/decide",
			body:       `{"action":"approve","selectedOption":"approve","feedback":"` + bad + `"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "feedback"},

		// PostgreSQL's jsonb refuses \u0000 and lone surrogates: neither
		// driver stores them, so a database can move between the two.
		{name: "hitl.context NUL escape", method: "POST", path: "/v1/checkpoints",
			body:       `{"projectPath":"{project}","summary":"s","hitl":{"required":true,"title":"t","context":{"note":"\u0000"}}}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "hitl.context"},
		{name: "agentState lone surrogate", method: "POST", path: "/v1/checkpoints",
			body:       `{"projectPath":"{project}","summary":"s","agentState":{"a":"\ud800"}}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "agentState"},
		{name: "outputs lone low surrogate", method: "POST", path: "/v1/checkpoints",
			body:       `{"projectPath":"{project}","summary":"s","outputs":["\uDC00x"]}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "outputs"},
		{name: "session metadata NUL escape", method: "POST", path: "/v1/sessions",
			body:       `{"projectPath":"{project}","metadata":{"\u0000":1}}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "metadata"},
		{name: "modifications NUL escape", method: "POST", path: "/v1/checkpoints/{cp3}/decide",
			body:       `{"action":"modify","selectedOption":"modify","modifications":{"a":"\u0000"}}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "modifications"},
		{name: "event data NUL escape", method: "POST", path: "/v1/sessions/{sid}/events",
			body:       `{"events":[{"type":"graph.node_start","data":{"a":"\u0000"}}]}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "events[0].data"},
		{name: "agentState surrogate pair and escaped backslash", method: "POST", path: "/v1/checkpoints",
			body:       `{"projectPath":"{project}","summary":"s","agentState":{"a":"\ud83d\ude80 \\u0000 \\ud800"}}`,
			wantStatus: 201},

		// Text PostgreSQL cannot store (NUL) or index (a path over 2 KB).
		{name: "checkpoint projectPath NUL", method: "POST", path: "/v1/checkpoints",
			body:       `{"projectPath":"{project}\u0000b","summary":"s"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "session projectPath NUL", method: "POST", path: "/v1/sessions",
			body:       `{"projectPath":"{project}\u0000b"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "checkpoint projectPath too long", method: "POST", path: "/v1/checkpoints",
			body:       `{"projectPath":"/` + strings.Repeat("p", belay.MaxPathLen) + `","summary":"s"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "sessions projectPath NUL", method: "GET", path: "/v1/sessions?projectPath=/a%00b",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "checkpoints projectPath NUL", method: "GET", path: "/v1/checkpoints?projectPath=/a%00b",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "search projectPath NUL", method: "GET", path: "/v1/search?q=x&projectPath=/a%00b",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "active session projectPath NUL", method: "GET", path: "/v1/sessions/active?projectPath=/a%00b",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "heartbeat holder NUL", method: "POST", path: "/v1/sessions/{sid}/heartbeat",
			body:       `{"holder":"h\u0000"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "holder"},
		{name: "resume holder NUL", method: "POST", path: "/v1/sessions/resume",
			body:       `{"holder":"h\u0000"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "holder"},
		{name: "fail reason NUL", method: "POST", path: "/v1/sessions/{sid}/fail",
			body:       `{"reason":"r\u0000"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "reason"},
		{name: "checkpoint endReason NUL", method: "POST", path: "/v1/checkpoints",
			body:       `{"sessionId":"{sid}","summary":"s","end":"failed","endReason":"r\u0000"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "endReason"},
		{name: "malformed cursor encoding", method: "GET", path: "/v1/checkpoints?cursor=%%%%",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "cursor"},
		{name: "malformed value encoding", method: "GET", path: "/v1/sessions?limit=1&projectPath=%zz",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "malformed name encoding", method: "GET", path: "/v1/hitl/pending?%zz=1",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "query"},
	})
}
