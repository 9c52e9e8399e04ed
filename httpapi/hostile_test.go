package httpapi_test

import (
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
		{name: "malformed cursor encoding", method: "GET", path: "/v1/checkpoints?cursor=%%%%",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "cursor"},
		{name: "malformed value encoding", method: "GET", path: "/v1/sessions?limit=1&projectPath=%zz",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "malformed name encoding", method: "GET", path: "/v1/hitl/pending?%zz=1",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "query"},
	})
}
