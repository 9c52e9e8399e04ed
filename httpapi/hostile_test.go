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
		// Every route refuses a malformed query string and parameters it
		// does not read, before it acts.
		{name: "delete session with unknown parameters", method: "DELETE", path: "/v1/sessions/{sid}?confirm=no&x=%ff",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "confirm"},
		{name: "delete checkpoint with unknown parameter", method: "DELETE", path: "/v1/checkpoints/{cp1}?force=%ff",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "force"},
		{name: "save with malformed query", method: "POST", path: "/v1/checkpoints?x=%zz",
			body:       `{"projectPath":"{project}","summary":"s"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "x"},
		{name: "decide with unknown parameter", method: "POST", path: "/v1/checkpoints/{cp3}/decide?dryRun=true",
			body:       `{"action":"approve","selectedOption":"approve"}`,
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "dryRun"},
		{name: "malformed cursor encoding", method: "GET", path: "/v1/checkpoints?cursor=%%%%",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "cursor"},
		{name: "malformed value encoding", method: "GET", path: "/v1/sessions?limit=1&projectPath=%zz",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "projectPath"},
		{name: "malformed name encoding", method: "GET", path: "/v1/hitl/pending?%zz=1",
			wantStatus: 400, wantCode: belay.CodeValidation, wantField: "query"},
	})
}

// TestEveryRouteRefusesUnknownQueryParameters: a parameter a route does not
// read, or a query string that does not parse, is a VALIDATION_ERROR naming
// it, whatever the route; nothing runs.
func TestEveryRouteRefusesUnknownQueryParameters(t *testing.T) {
	e := newAPI(t)
	routes := []string{
		"POST /v1/sessions", "GET /v1/sessions", "GET /v1/sessions/active", "GET /v1/sessions/{sid}",
		"GET /v1/sessions/{sid}/checkpoints/1", "POST /v1/checkpoints", "GET /v1/checkpoints", "GET /v1/checkpoints/{cp1}",
		"DELETE /v1/checkpoints/{cp1}", "POST /v1/checkpoints/{cp3}/decide", "GET /v1/checkpoints/{cp3}/decision",
		"GET /v1/hitl/pending", "POST /v1/checkpoints/{cp1}/restore", "GET /v1/checkpoints/{cp1}/diff",
		"GET /v1/sessions/{sid}/rollbacks", "DELETE /v1/sessions/{sid}", "POST /v1/sessions/{sid}/export-branch",
		"GET /v1/sessions/{sid}/export", "POST /v1/sessions/import", "GET /v1/validate", "POST /v1/validate",
		"GET /v1/usage", "POST /v1/gc", "GET /v1/events", "POST /v1/sessions/{sid}/events", "GET /v1/ws",
		"GET /v1/checkpoints/resolve", "GET /v1/sessions/current", "GET /v1/sessions/resolve", "PATCH /v1/sessions/{sid}",
		"GET /v1/sessions/{sid}/grants", "POST /v1/sessions/{sid}/grants", "DELETE /v1/sessions/{sid}/grants/bob",
		"POST /v1/tokens", "GET /v1/tokens", "DELETE /v1/tokens/{missing}", "POST /v1/webhooks", "GET /v1/webhooks",
		"DELETE /v1/webhooks/{missing}", "GET /v1/webhooks/deliveries", "POST /v1/sessions/{sid}/complete",
		"POST /v1/sessions/{sid}/fail", "POST /v1/sessions/{sid}/abandon", "POST /v1/sessions/{sid}/heartbeat",
		"POST /v1/sessions/{sid}/resume", "POST /v1/sessions/resume", "POST /v1/sessions/cleanup", "PUT /v1/sessions/{sid}/plan",
		"POST /v1/sessions/{sid}/plan/adjust", "POST /v1/sessions/{sid}/tasks/t1", "POST /v1/sessions/{sid}/cost",
		"GET /v1/sessions/{sid}/context", "PUT /v1/retention", "GET /v1/retention", "GET /v1/search",
		"POST /v1/search/reindex", "GET /v1/search/index", "GET /metrics",
	}
	for _, route := range routes {
		method, path, _ := strings.Cut(route, " ")
		for query, field := range map[string]string{"?bogus=1": "bogus", "?x=%zz": "x", "?%zz=1": "query"} {
			before := e.snapshot(t)
			resp, body := e.do(t, method, e.expand(path)+query, "", "")
			eb := decode[errorBody](t, body)
			if resp.StatusCode != 400 || eb.Error.Code != belay.CodeValidation || eb.Error.Details["field"] != field {
				t.Errorf("%s %s: %d %s, want VALIDATION_ERROR on %s", route, query, resp.StatusCode, clip(body), field)
			}
			if after := e.snapshot(t); after != before {
				t.Errorf("%s %s changed the database: %+v -> %+v", route, query, before, after)
			}
		}
	}
}
