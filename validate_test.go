package belay_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/belayhq/belay"
)

// wantField fails unless err is a VALIDATION_ERROR naming field, or nil when
// field is "".
func wantField(t *testing.T, err error, field string) {
	t.Helper()
	if field == "" {
		if err != nil {
			t.Errorf("Validate() = %v, want nil", err)
		}
		return
	}
	if err == nil {
		t.Errorf("Validate() = nil, want a VALIDATION_ERROR for %s", field)
		return
	}
	if code := belay.ErrorCode(err); code != belay.CodeValidation {
		t.Errorf("Validate() = %v with code %s, want %s", err, code, belay.CodeValidation)
	}
	e, ok := err.(*belay.Error)
	if !ok {
		t.Fatalf("Validate() returned %T, want *belay.Error", err)
	}
	if got := e.Details["field"]; got != field {
		t.Errorf("details.field = %v, want %s (error: %v)", got, field, err)
	}
}

// rep repeats a two-byte character n times: limits count characters, not bytes.
func rep(n int) string { return strings.Repeat("é", n) }

func tags(n, length int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%0*d", length, i)
	}
	return out
}

func contextPairs(n int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("k%d", i)] = "v"
	}
	return m
}

func options(n int) []belay.HITLOption {
	out := make([]belay.HITLOption, n)
	for i := range out {
		out[i] = belay.HITLOption{ID: fmt.Sprintf("o%d", i), Label: "Option", Action: belay.ActionApprove}
	}
	return out
}

func approvers(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("user%d", i)
	}
	return out
}

const uuid = "0190c2a0-1b2c-7d3e-8f40-123456789abc"

// dirs returns an existing directory and a regular file in it.
func dirs(t *testing.T) (dir, file string) {
	dir = t.TempDir()
	file = filepath.Join(dir, "file.txt")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

func TestCreateCheckpointInputValidate(t *testing.T) {
	dir, _ := dirs(t)
	for _, tc := range []struct {
		name  string
		edit  func(in *belay.CreateCheckpointInput)
		field string // "" when the input is valid
	}{
		{"Valid", func(*belay.CreateCheckpointInput) {}, ""},
		{"SessionWithoutProject", func(in *belay.CreateCheckpointInput) { in.ProjectPath, in.SessionID = "", uuid }, ""},
		{"UpperCaseUUID", func(in *belay.CreateCheckpointInput) { in.SessionID = strings.ToUpper(uuid) }, ""},
		{"InvalidSessionID", func(in *belay.CreateCheckpointInput) { in.SessionID = "not-a-uuid" }, "sessionId"},
		{"SessionIDTooLong", func(in *belay.CreateCheckpointInput) { in.SessionID = uuid + "0" }, "sessionId"},
		{"SessionIDBadDash", func(in *belay.CreateCheckpointInput) { in.SessionID = strings.Replace(uuid, "-", "x", 1) }, "sessionId"},
		{"NeitherSessionNorProject", func(in *belay.CreateCheckpointInput) { in.ProjectPath = "" }, "projectPath"},
		{"RelativeProject", func(in *belay.CreateCheckpointInput) { in.ProjectPath = "project" }, "projectPath"},

		{"SummaryEmpty", func(in *belay.CreateCheckpointInput) { in.Summary = "" }, "summary"},
		{"Summary1", func(in *belay.CreateCheckpointInput) { in.Summary = "x" }, ""},
		{"Summary500", func(in *belay.CreateCheckpointInput) { in.Summary = rep(500) }, ""},
		{"Summary500FourByte", func(in *belay.CreateCheckpointInput) { in.Summary = strings.Repeat("🚀", 500) }, ""},
		{"Summary501", func(in *belay.CreateCheckpointInput) { in.Summary = rep(501) }, "summary"},
		{"SummaryInvalidUTF8", func(in *belay.CreateCheckpointInput) { in.Summary = "ok\xff" }, "summary"},
		{"Description10000", func(in *belay.CreateCheckpointInput) { in.Description = rep(10000) }, ""},
		{"Description10001", func(in *belay.CreateCheckpointInput) { in.Description = rep(10001) }, "description"},
		{"Name200", func(in *belay.CreateCheckpointInput) { in.Name = rep(200) }, ""},
		{"Name201", func(in *belay.CreateCheckpointInput) { in.Name = rep(201) }, "name"},
		{"NameNewline", func(in *belay.CreateCheckpointInput) { in.Name = "a\nb" }, "name"},
		{"NameTab", func(in *belay.CreateCheckpointInput) { in.Name = "a\tb" }, "name"},
		{"NameUnicode", func(in *belay.CreateCheckpointInput) { in.Name = "déploiement ✓" }, ""},
		{"Phase201", func(in *belay.CreateCheckpointInput) { in.Phase = rep(201) }, "phase"},
		{"WorkspaceRefSHA1", func(in *belay.CreateCheckpointInput) { in.WorkspaceRef = strings.Repeat("4b825dc6", 5) }, ""},
		{"WorkspaceRefSHA256", func(in *belay.CreateCheckpointInput) { in.WorkspaceRef = strings.Repeat("4b825dc6", 8) }, ""},
		{"WorkspaceRefAbbreviated", func(in *belay.CreateCheckpointInput) { in.WorkspaceRef = "4b82" }, ""},
		{"WorkspaceRefUpperCase", func(in *belay.CreateCheckpointInput) { in.WorkspaceRef = "4B825DC6" }, ""},
		{"WorkspaceRef3", func(in *belay.CreateCheckpointInput) { in.WorkspaceRef = "4b8" }, "workspaceRef"},
		{"WorkspaceRef65", func(in *belay.CreateCheckpointInput) { in.WorkspaceRef = strings.Repeat("4b825dc6", 8) + "0" }, "workspaceRef"},
		{"WorkspaceRef41", func(in *belay.CreateCheckpointInput) { in.WorkspaceRef = strings.Repeat("4b825dc6", 5) + "0" }, "workspaceRef"},
		{"WorkspaceRef201", func(in *belay.CreateCheckpointInput) { in.WorkspaceRef = rep(201) }, "workspaceRef"},
		{"WorkspaceRefOption", func(in *belay.CreateCheckpointInput) { in.WorkspaceRef = "--output=/tmp/x" }, "workspaceRef"},
		{"WorkspaceRefHEAD", func(in *belay.CreateCheckpointInput) { in.WorkspaceRef = "HEAD" }, "workspaceRef"},
		{"WorkspaceRefBranch", func(in *belay.CreateCheckpointInput) { in.WorkspaceRef = "refs/heads/master" }, "workspaceRef"},
		{"WorkspaceRefRevision", func(in *belay.CreateCheckpointInput) { in.WorkspaceRef = "4b825dc6^" }, "workspaceRef"},

		{"TypeValid", func(in *belay.CreateCheckpointInput) { in.Type = belay.TypePhase }, ""},
		{"TypeUnknown", func(in *belay.CreateCheckpointInput) { in.Type = "nightly" }, "type"},
		{"TriggerValid", func(in *belay.CreateCheckpointInput) { in.Trigger = belay.TriggerCostThreshold }, ""},
		{"TriggerUnknown", func(in *belay.CreateCheckpointInput) { in.Trigger = "cron" }, "trigger"},
		{"StepNegative", func(in *belay.CreateCheckpointInput) { in.Step = -1 }, "step"},

		{"AgentStateAnyJSON", func(in *belay.CreateCheckpointInput) { in.AgentState = json.RawMessage(`[1,"a"]`) }, ""},
		{"AgentStateInvalid", func(in *belay.CreateCheckpointInput) { in.AgentState = json.RawMessage(`{"a":`) }, "agentState"},
		{"AgentStateInvalidUTF8", func(in *belay.CreateCheckpointInput) { in.AgentState = json.RawMessage("{\"a\":\"\xff\"}") }, "agentState"},
		{"AgentStateUTF8", func(in *belay.CreateCheckpointInput) { in.AgentState = json.RawMessage(`{"é":"\u00e9 🚀"}`) }, ""},
		{"OutputsInvalidUTF8", func(in *belay.CreateCheckpointInput) { in.Outputs = json.RawMessage("[\"\xc3\"]") }, "outputs"},
		{"MetadataInvalidUTF8", func(in *belay.CreateCheckpointInput) { in.Metadata = json.RawMessage("{\"\xed\xa0\x80\":1}") }, "metadata"},
		{"AgentStateNULEscape", func(in *belay.CreateCheckpointInput) { in.AgentState = json.RawMessage(`{"a":"\u0000"}`) }, "agentState"},
		{"AgentStateLoneSurrogate", func(in *belay.CreateCheckpointInput) { in.AgentState = json.RawMessage(`["\ud800"]`) }, "agentState"},
		{"AgentStateSurrogatePair", func(in *belay.CreateCheckpointInput) { in.AgentState = json.RawMessage(`["\ud83d\ude80"]`) }, ""},
		{"MetadataNULEscape", func(in *belay.CreateCheckpointInput) { in.Metadata = json.RawMessage(`{"\u0000":1}`) }, "metadata"},
		{"HITLContextNULEscape", func(in *belay.CreateCheckpointInput) {
			in.HITL = validHITL()
			in.HITL.Context = json.RawMessage(`{"note":"\u0000"}`)
		}, "hitl.context"},
		{"AgentStateAtLimit", func(in *belay.CreateCheckpointInput) { in.AgentState = jsonString(belay.MaxStateBytes) }, ""},
		{"AgentStateTooBig", func(in *belay.CreateCheckpointInput) { in.AgentState = jsonString(belay.MaxStateBytes + 1) }, "agentState"},
		{"OutputsInvalid", func(in *belay.CreateCheckpointInput) { in.Outputs = json.RawMessage(`nope`) }, "outputs"},
		{"MetadataObject", func(in *belay.CreateCheckpointInput) { in.Metadata = json.RawMessage(`{"a":1}`) }, ""},
		{"MetadataNull", func(in *belay.CreateCheckpointInput) { in.Metadata = json.RawMessage(`null`) }, ""},
		{"MetadataArray", func(in *belay.CreateCheckpointInput) { in.Metadata = json.RawMessage(`[1]`) }, "metadata"},
		{"MetadataString", func(in *belay.CreateCheckpointInput) { in.Metadata = json.RawMessage(`"x"`) }, "metadata"},

		{"Context50Pairs", func(in *belay.CreateCheckpointInput) { in.Context = contextPairs(50) }, ""},
		{"Context51Pairs", func(in *belay.CreateCheckpointInput) { in.Context = contextPairs(51) }, "context"},
		{"ContextKey50", func(in *belay.CreateCheckpointInput) { in.Context = map[string]string{rep(50): "v"} }, ""},
		{"ContextKey51", func(in *belay.CreateCheckpointInput) { in.Context = map[string]string{rep(51): "v"} }, "context"},
		{"ContextKeyEmpty", func(in *belay.CreateCheckpointInput) { in.Context = map[string]string{"": "v"} }, "context"},
		{"ContextValue500", func(in *belay.CreateCheckpointInput) { in.Context = map[string]string{"k": rep(500)} }, ""},
		{"ContextValue501", func(in *belay.CreateCheckpointInput) { in.Context = map[string]string{"k": rep(501)} }, "context.k"},
		{"ContextValueEmpty", func(in *belay.CreateCheckpointInput) { in.Context = map[string]string{"k": ""} }, ""},

		{"Tags20", func(in *belay.CreateCheckpointInput) { in.Tags = tags(20, 50) }, ""},
		{"Tags21", func(in *belay.CreateCheckpointInput) { in.Tags = tags(21, 5) }, "tags"},
		{"Tag50", func(in *belay.CreateCheckpointInput) { in.Tags = []string{rep(50)} }, ""},
		{"Tag51", func(in *belay.CreateCheckpointInput) { in.Tags = []string{"ok", rep(51)} }, "tags[1]"},
		{"TagEmpty", func(in *belay.CreateCheckpointInput) { in.Tags = []string{""} }, "tags[0]"},
		{"TagEscape", func(in *belay.CreateCheckpointInput) { in.Tags = []string{"ok", "x\x1b[2J"} }, "tags[1]"},
		{"TagNewline", func(in *belay.CreateCheckpointInput) { in.Tags = []string{"a\nb"} }, "tags[0]"},
		{"TagC1", func(in *belay.CreateCheckpointInput) { in.Tags = []string{"a\u009bb"} }, "tags[0]"},
		{"TagUnicode", func(in *belay.CreateCheckpointInput) { in.Tags = []string{"déploiement ✓"} }, ""},

		{"MaxFileSizeWithSnapshot", func(in *belay.CreateCheckpointInput) { in.Snapshot, in.MaxFileSize = true, 1<<20 }, ""},
		{"MaxFileSizeAtLimit", func(in *belay.CreateCheckpointInput) { in.Snapshot, in.MaxFileSize = true, belay.MaxFileSizeLimit }, ""},
		{"MaxFileSizeTooBig", func(in *belay.CreateCheckpointInput) { in.Snapshot, in.MaxFileSize = true, belay.MaxFileSizeLimit+1 }, "maxFileSize"},
		{"MaxFileSizeNegative", func(in *belay.CreateCheckpointInput) { in.Snapshot, in.MaxFileSize = true, -1 }, "maxFileSize"},
		{"MaxFileSizeWithoutSnapshot", func(in *belay.CreateCheckpointInput) { in.MaxFileSize = 1 << 20 }, "maxFileSize"},

		{"HITLValid", func(in *belay.CreateCheckpointInput) { in.HITL = validHITL() }, ""},
		{"HITLInvalid", func(in *belay.CreateCheckpointInput) {
			in.HITL = validHITL()
			in.HITL.Timeout.Duration = 59
		}, "hitl.timeout.duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := belay.CreateCheckpointInput{ProjectPath: dir, Summary: "Saved the plan"}
			tc.edit(&in)
			wantField(t, in.Validate(), tc.field)
		})
	}
}

// jsonString is a JSON string document of exactly n bytes.
func jsonString(n int) json.RawMessage {
	return json.RawMessage(`"` + strings.Repeat("a", n-2) + `"`)
}

func validHITL() *belay.HITLInput {
	return &belay.HITLInput{
		Required: true, Title: "Which database?", Message: "Pick one.",
		Options: []belay.HITLOption{
			{ID: "pg", Label: "PostgreSQL", Action: belay.ActionApprove, IsDefault: true},
			{ID: "sqlite", Label: "SQLite", Description: "smaller", Action: belay.ActionModify},
		},
		Context:   json.RawMessage(`{"a":1}`),
		Timeout:   &belay.TimeoutInput{Duration: 3600, DefaultAction: belay.ActionApprove},
		Approvers: []string{"bob"},
		OnReject:  belay.OnRejectContinue,
	}
}

func TestHITLInputValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(h *belay.HITLInput)
		field string
	}{
		{"Valid", func(*belay.HITLInput) {}, ""},
		{"Empty", func(h *belay.HITLInput) { *h = belay.HITLInput{} }, ""},
		{"Title200", func(h *belay.HITLInput) { h.Title = rep(200) }, ""},
		{"Title201", func(h *belay.HITLInput) { h.Title = rep(201) }, "hitl.title"},
		{"Message2000", func(h *belay.HITLInput) { h.Message = rep(2000) }, ""},
		{"Message2001", func(h *belay.HITLInput) { h.Message = rep(2001) }, "hitl.message"},

		{"OptionsNil", func(h *belay.HITLInput) { h.Options = nil }, ""},
		{"OptionsEmpty", func(h *belay.HITLInput) { h.Options = []belay.HITLOption{} }, "hitl.options"},
		{"Options1", func(h *belay.HITLInput) { h.Options = options(1) }, ""},
		{"Options6", func(h *belay.HITLInput) { h.Options = options(6) }, ""},
		{"Options7", func(h *belay.HITLInput) { h.Options = options(7) }, "hitl.options"},
		{"DuplicateOptionID", func(h *belay.HITLInput) {
			h.Options = options(3)
			h.Options[2].ID = h.Options[0].ID
		}, "hitl.options[2].id"},
		{"TwoDefaults", func(h *belay.HITLInput) {
			h.Options = options(3)
			h.Options[0].IsDefault, h.Options[2].IsDefault = true, true
		}, "hitl.options"},
		{"NoDefault", func(h *belay.HITLInput) { h.Options = options(2) }, ""},
		{"OptionID50", func(h *belay.HITLInput) { h.Options[1].ID = rep(50) }, ""},
		{"OptionID51", func(h *belay.HITLInput) { h.Options[1].ID = rep(51) }, "hitl.options[1].id"},
		{"OptionIDEmpty", func(h *belay.HITLInput) { h.Options[0].ID = "" }, "hitl.options[0].id"},
		{"OptionLabel50", func(h *belay.HITLInput) { h.Options[0].Label = rep(50) }, ""},
		{"OptionLabel51", func(h *belay.HITLInput) { h.Options[0].Label = rep(51) }, "hitl.options[0].label"},
		{"OptionLabelEmpty", func(h *belay.HITLInput) { h.Options[1].Label = "" }, "hitl.options[1].label"},
		{"OptionIDEscape", func(h *belay.HITLInput) { h.Options[1].ID = "y\x1b[1m" }, "hitl.options[1].id"},
		{"OptionIDTab", func(h *belay.HITLInput) { h.Options[0].ID = "a\tb" }, "hitl.options[0].id"},
		{"OptionLabelEscape", func(h *belay.HITLInput) { h.Options[0].Label = "L\x1b[5mabel" }, "hitl.options[0].label"},
		{"OptionLabelNewline", func(h *belay.HITLInput) { h.Options[0].Label = "a\nb" }, "hitl.options[0].label"},
		{"OptionDescription200", func(h *belay.HITLInput) { h.Options[0].Description = rep(200) }, ""},
		{"OptionDescription201", func(h *belay.HITLInput) { h.Options[0].Description = rep(201) }, "hitl.options[0].description"},
		{"OptionActionUnknown", func(h *belay.HITLInput) { h.Options[1].Action = "delete" }, "hitl.options[1].action"},
		{"OptionActionPause", func(h *belay.HITLInput) { h.Options[1].Action = belay.ActionPause }, "hitl.options[1].action"},
		{"OptionActionEmpty", func(h *belay.HITLInput) { h.Options[0].Action = "" }, "hitl.options[0].action"},

		{"ContextArray", func(h *belay.HITLInput) { h.Context = json.RawMessage(`[]`) }, "hitl.context"},
		{"ContextInvalid", func(h *belay.HITLInput) { h.Context = json.RawMessage(`{`) }, "hitl.context"},
		{"ContextInvalidUTF8", func(h *belay.HITLInput) { h.Context = json.RawMessage("{\"a\":\"\xfe\"}") }, "hitl.context"},

		{"Timeout59", func(h *belay.HITLInput) { h.Timeout.Duration = 59 }, "hitl.timeout.duration"},
		{"Timeout60", func(h *belay.HITLInput) { h.Timeout.Duration = 60 }, ""},
		{"Timeout86400", func(h *belay.HITLInput) { h.Timeout.Duration = 86400 }, ""},
		{"Timeout86401", func(h *belay.HITLInput) { h.Timeout.Duration = 86401 }, "hitl.timeout.duration"},
		{"TimeoutZero", func(h *belay.HITLInput) { h.Timeout.Duration = 0 }, "hitl.timeout.duration"},
		{"TimeoutNegative", func(h *belay.HITLInput) { h.Timeout.Duration = -60 }, "hitl.timeout.duration"},
		{"DefaultApprove", func(h *belay.HITLInput) { h.Timeout.DefaultAction = belay.ActionApprove }, ""},
		{"DefaultPause", func(h *belay.HITLInput) { h.Timeout.DefaultAction = belay.ActionPause }, ""},
		{"DefaultModify", func(h *belay.HITLInput) { h.Timeout.DefaultAction = belay.ActionModify }, "hitl.timeout.defaultAction"},
		{"DefaultEmpty", func(h *belay.HITLInput) { h.Timeout.DefaultAction = "" }, "hitl.timeout.defaultAction"},
		{"DefaultNotOffered", func(h *belay.HITLInput) { h.Timeout.DefaultAction = belay.ActionReject }, "hitl.timeout.defaultAction"},
		{"DefaultOffered", func(h *belay.HITLInput) {
			h.Timeout.DefaultAction = belay.ActionReject
			h.Options = append(h.Options, belay.HITLOption{ID: "no", Label: "No", Action: belay.ActionReject})
		}, ""},
		{"DefaultWithoutOptions", func(h *belay.HITLInput) { h.Timeout.DefaultAction, h.Options = belay.ActionReject, nil }, ""},

		{"Approvers20", func(h *belay.HITLInput) { h.Approvers = approvers(20) }, ""},
		{"Approvers21", func(h *belay.HITLInput) { h.Approvers = approvers(21) }, "hitl.approvers"},
		{"ApproverEmpty", func(h *belay.HITLInput) { h.Approvers = []string{"bob", ""} }, "hitl.approvers[1]"},
		{"Approver201", func(h *belay.HITLInput) { h.Approvers = []string{rep(201)} }, "hitl.approvers[0]"},
		{"OnRejectFail", func(h *belay.HITLInput) { h.OnReject = belay.OnRejectFail }, ""},
		{"OnRejectEmpty", func(h *belay.HITLInput) { h.OnReject = "" }, ""},
		{"OnRejectUnknown", func(h *belay.HITLInput) { h.OnReject = "retry" }, "hitl.onReject"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := validHITL()
			tc.edit(h)
			wantField(t, h.Validate(), tc.field)
		})
	}
}

func TestListCheckpointsInputValidate(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		in    belay.ListCheckpointsInput
		field string
	}{
		{"Zero", belay.ListCheckpointsInput{}, ""},
		{"Everything", belay.ListCheckpointsInput{
			SessionID: uuid, ProjectPath: "/does/not/need/to/exist", Type: belay.TypeHITL,
			CreatedAfter: &t0, CreatedBefore: ptr(t0.Add(1)), Tags: tags(20, 50),
			Limit: 100, OrderBy: belay.OrderType, OrderDir: belay.OrderAsc,
		}, ""},
		{"InvalidSessionID", belay.ListCheckpointsInput{SessionID: "123"}, "sessionId"},
		{"TypeUnknown", belay.ListCheckpointsInput{Type: "x"}, "type"},
		{"Limit1", belay.ListCheckpointsInput{Limit: 1}, ""},
		{"LimitNegative", belay.ListCheckpointsInput{Limit: -1}, "limit"},
		{"Limit101", belay.ListCheckpointsInput{Limit: 101}, "limit"},
		{"OrderByCreatedAt", belay.ListCheckpointsInput{OrderBy: belay.OrderCreatedAt, OrderDir: belay.OrderDesc}, ""},
		{"OrderByUnknown", belay.ListCheckpointsInput{OrderBy: "name"}, "orderBy"},
		{"OrderDirUnknown", belay.ListCheckpointsInput{OrderDir: "up"}, "orderDir"},
		{"AfterEqualsBefore", belay.ListCheckpointsInput{CreatedAfter: &t0, CreatedBefore: &t0}, "createdAfter"},
		{"AfterPastBefore", belay.ListCheckpointsInput{CreatedAfter: ptr(t0.Add(1)), CreatedBefore: &t0}, "createdAfter"},
		{"OnlyBefore", belay.ListCheckpointsInput{CreatedBefore: &t0}, ""},
		{"RelativeProject", belay.ListCheckpointsInput{ProjectPath: "rel/path"}, "projectPath"},
		{"Tags21", belay.ListCheckpointsInput{Tags: tags(21, 3)}, "tags"},
		{"Tag51", belay.ListCheckpointsInput{Tags: []string{rep(51)}}, "tags[0]"},
		// Older versions stored tags with control characters: they still find them.
		{"TagWithATab", belay.ListCheckpointsInput{Tags: []string{"ci\tnightly"}}, ""},
		{"TagWithAnEscape", belay.ListCheckpointsInput{Tags: []string{"x\x1b[2J"}}, ""},
		{"TagWithAComma", belay.ListCheckpointsInput{Tags: []string{"a,b"}}, "tags[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantField(t, tc.in.Validate(), tc.field)
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestProjectDir: a project path that does not exist or is a file is a
// VALIDATION_ERROR naming the field (core asks once the caller may look).
func TestProjectDir(t *testing.T) {
	dir, file := dirs(t)
	if err := belay.ProjectDir("projectPath", dir); err != nil {
		t.Errorf("ProjectDir(a directory) = %v", err)
	}
	for _, p := range []string{filepath.Join(dir, "missing"), file} {
		err := belay.ProjectDir("projectPath", p)
		var be *belay.Error
		if !errors.As(err, &be) || be.Code != belay.CodeValidation || be.Details["field"] != "projectPath" {
			t.Errorf("ProjectDir(%s) = %v, want a VALIDATION_ERROR for projectPath", p, err)
		}
	}
}

func TestCreateSessionInputValidate(t *testing.T) {
	dir, _ := dirs(t)
	for _, tc := range []struct {
		name  string
		in    belay.CreateSessionInput
		field string
	}{
		{"Zero", belay.CreateSessionInput{}, ""},
		{"Everything", belay.CreateSessionInput{ProjectPath: dir, Title: rep(500), Phase: rep(200), Metadata: json.RawMessage(`{"a":1}`)}, ""},
		{"RelativeProject", belay.CreateSessionInput{ProjectPath: "."}, "projectPath"},
		{"ProjectNUL", belay.CreateSessionInput{ProjectPath: "/a\x00b"}, "projectPath"},
		{"ProjectInvalidUTF8", belay.CreateSessionInput{ProjectPath: "/a\xffb"}, "projectPath"},
		{"ProjectAtLimit", belay.CreateSessionInput{ProjectPath: "/" + strings.Repeat("a", belay.MaxPathLen-1)}, ""},
		{"ProjectTooLong", belay.CreateSessionInput{ProjectPath: "/" + strings.Repeat("a", belay.MaxPathLen)}, "projectPath"},
		{"Title501", belay.CreateSessionInput{Title: rep(501)}, "title"},
		{"Phase201", belay.CreateSessionInput{Phase: rep(201)}, "phase"},
		{"MetadataArray", belay.CreateSessionInput{Metadata: json.RawMessage(`[]`)}, "metadata"},
		{"MetadataInvalid", belay.CreateSessionInput{Metadata: json.RawMessage(`{"a"}`)}, "metadata"},
		{"MetadataInvalidUTF8", belay.CreateSessionInput{Metadata: json.RawMessage("{\"a\":\"\xff\"}")}, "metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantField(t, tc.in.Validate(), tc.field)
		})
	}
}

func TestLeaseInputValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    belay.LeaseInput
		field string
	}{
		{"Valid", belay.LeaseInput{SessionID: uuid, Holder: "host:42", Lease: time.Minute}, ""},
		{"BadSession", belay.LeaseInput{SessionID: "s", Holder: "h"}, "sessionId"},
		{"NoHolder", belay.LeaseInput{SessionID: uuid}, "holder"},
		{"HolderNUL", belay.LeaseInput{SessionID: uuid, Holder: "h\x00"}, "holder"},
		{"HolderInvalidUTF8", belay.LeaseInput{SessionID: uuid, Holder: "h\xff"}, "holder"},
		{"Holder200", belay.LeaseInput{SessionID: uuid, Holder: rep(200)}, ""},
		{"Holder201", belay.LeaseInput{SessionID: uuid, Holder: rep(201)}, "holder"},
		{"LeaseTooLong", belay.LeaseInput{SessionID: uuid, Holder: "h", Lease: time.Hour}, "lease"},
		{"EventsWithoutRelease", belay.LeaseInput{SessionID: uuid, Holder: "h", Events: []belay.EventRecord{{Type: "graph.custom"}}}, "events"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantField(t, tc.in.Validate(), tc.field)
		})
	}
}

func TestEndSessionInputValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    belay.EndSessionInput
		field string
	}{
		{"Valid", belay.EndSessionInput{SessionID: uuid, Status: belay.SessionFailed, Reason: "tests fail"}, ""},
		{"BadSession", belay.EndSessionInput{SessionID: "s", Status: belay.SessionFailed}, "sessionId"},
		{"Running", belay.EndSessionInput{SessionID: uuid, Status: belay.SessionRunning}, "status"},
		{"ReasonNUL", belay.EndSessionInput{SessionID: uuid, Status: belay.SessionFailed, Reason: "r\x00"}, "reason"},
		{"ReasonInvalidUTF8", belay.EndSessionInput{SessionID: uuid, Status: belay.SessionFailed, Reason: "r\xff"}, "reason"},
		{"ReasonAtLimit", belay.EndSessionInput{SessionID: uuid, Status: belay.SessionFailed, Reason: strings.Repeat("r", belay.MaxEndReason)}, ""},
		{"ReasonTooLong", belay.EndSessionInput{SessionID: uuid, Status: belay.SessionFailed, Reason: strings.Repeat("r", belay.MaxEndReason+1)}, "reason"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantField(t, tc.in.Validate(), tc.field)
		})
	}
}

func TestListSessionsInputValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    belay.ListSessionsInput
		field string
	}{
		{"Zero", belay.ListSessionsInput{}, ""},
		{"Everything", belay.ListSessionsInput{ProjectPath: "/p", Status: belay.SessionInterrupted, Limit: 100}, ""},
		{"StatusUnknown", belay.ListSessionsInput{Status: "done"}, "status"},
		{"Limit101", belay.ListSessionsInput{Limit: 101}, "limit"},
		{"LimitNegative", belay.ListSessionsInput{Limit: -5}, "limit"},
		{"RelativeProject", belay.ListSessionsInput{ProjectPath: "p"}, "projectPath"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantField(t, tc.in.Validate(), tc.field)
		})
	}
}

func TestDecideInputValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(in *belay.DecideInput)
		field string
	}{
		{"Valid", func(*belay.DecideInput) {}, ""},
		{"InvalidCheckpointID", func(in *belay.DecideInput) { in.CheckpointID = "cp-1" }, "checkpointId"},
		{"ActionUnknown", func(in *belay.DecideInput) { in.Action = "maybe" }, "action"},
		{"ActionPause", func(in *belay.DecideInput) { in.Action = belay.ActionPause }, "action"},
		{"SelectedOptionEmpty", func(in *belay.DecideInput) { in.SelectedOption = "" }, "selectedOption"},
		{"SelectedOption51", func(in *belay.DecideInput) { in.SelectedOption = rep(51) }, "selectedOption"},
		{"Feedback2000", func(in *belay.DecideInput) { in.Feedback = rep(2000) }, ""},
		{"Feedback2001", func(in *belay.DecideInput) { in.Feedback = rep(2001) }, "feedback"},
		{"ModificationsWithModify", func(in *belay.DecideInput) {
			in.Action, in.Modifications = belay.ActionModify, json.RawMessage(`{"db":"sqlite"}`)
		}, ""},
		{"ModificationsWithApprove", func(in *belay.DecideInput) { in.Modifications = json.RawMessage(`{"db":"sqlite"}`) }, "modifications"},
		{"ModificationsArray", func(in *belay.DecideInput) {
			in.Action, in.Modifications = belay.ActionModify, json.RawMessage(`[1]`)
		}, "modifications"},
		{"ModificationsInvalidUTF8", func(in *belay.DecideInput) {
			in.Action, in.Modifications = belay.ActionModify, json.RawMessage("{\"db\":\"\xff\"}")
		}, "modifications"},
		{"IdempotencyKey201", func(in *belay.DecideInput) { in.IdempotencyKey = rep(201) }, "idempotencyKey"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := belay.DecideInput{CheckpointID: uuid, Action: belay.ActionApprove, SelectedOption: "approve", IdempotencyKey: "k"}
			tc.edit(&in)
			wantField(t, in.Validate(), tc.field)
		})
	}
}

// FuzzCreateCheckpointInput decodes arbitrary bytes the way a transport does
// (unknown fields rejected) and validates them: Validate never panics, never
// changes its input, fails only with a VALIDATION_ERROR naming a field, and
// whatever it accepts keeps every limit.
func FuzzCreateCheckpointInput(f *testing.F) {
	for _, seed := range []string{
		`{"summary":"x","projectPath":"/"}`,
		`{"summary":"x","sessionId":"0190c2a0-1b2c-7d3e-8f40-123456789abc","tags":["a","b"],"context":{"k":"v"}}`,
		`{"summary":"é","projectPath":"/tmp","type":"hitl","trigger":"phase_change","step":3,"agentState":{"a":[1,2]},"metadata":null,` +
			`"hitl":{"required":true,"title":"t","options":[{"id":"a","label":"A","action":"approve","isDefault":true}],` +
			`"timeout":{"duration":60,"defaultAction":"pause"},"approvers":["bob"],"onReject":"continue"}}`,
		`{"summary":"","projectPath":"relative"}`,
		`{"summary":"x","projectPath":"/","hitl":{"options":[]}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		var in belay.CreateCheckpointInput
		if err := dec.Decode(&in); err != nil {
			return
		}
		before, err := json.Marshal(&in)
		if err != nil {
			t.Fatalf("marshal decoded input: %v", err)
		}
		verr := in.Validate()
		after, err := json.Marshal(&in)
		if err != nil || !bytes.Equal(before, after) {
			t.Fatalf("Validate changed its input:\n%s\n%s", before, after)
		}
		if verr != nil {
			var e *belay.Error
			if !errors.As(verr, &e) || e.Code != belay.CodeValidation {
				t.Fatalf("Validate() = %#v, want a VALIDATION_ERROR", verr)
			}
			if field, _ := e.Details["field"].(string); field == "" {
				t.Fatalf("Validate() = %v without details.field", verr)
			}
			if !utf8.ValidString(e.Message) {
				t.Fatalf("error message is not valid UTF-8: %q", e.Message)
			}
			return
		}
		checkAccepted(t, &in)
	})
}

// checkAccepted fails for every limit that a validated input breaks.
func checkAccepted(t *testing.T, in *belay.CreateCheckpointInput) {
	t.Helper()
	text := func(field, s string, lo, hi int) {
		t.Helper()
		if n := utf8.RuneCountInString(s); !utf8.ValidString(s) || n < lo || n > hi {
			t.Fatalf("accepted %s of %d characters (%q), want %d-%d", field, n, s, lo, hi)
		}
	}
	object := func(field string, raw json.RawMessage) {
		t.Helper()
		if raw == nil {
			return
		}
		if !json.Valid(raw) || !utf8.Valid(raw) || len(raw) > belay.MaxStateBytes {
			t.Fatalf("accepted %s that is not valid UTF-8 JSON within the size limit: %q", field, raw)
		}
		if s := bytes.TrimSpace(raw); s[0] != '{' && string(s) != "null" {
			t.Fatalf("accepted %s that is not an object: %s", field, raw)
		}
	}
	text("summary", in.Summary, 1, belay.MaxSummary)
	text("description", in.Description, 0, belay.MaxDescription)
	text("name", in.Name, 0, belay.MaxNameLen)
	if strings.ContainsFunc(in.Name, unicode.IsControl) {
		t.Fatalf("accepted a name with a control character: %q", in.Name)
	}
	text("phase", in.Phase, 0, belay.MaxNameLen)
	if ref := in.WorkspaceRef; ref != "" {
		if len(ref) < 4 || len(ref) > 40 && len(ref) != 64 || strings.Trim(ref, "0123456789abcdefABCDEF") != "" {
			t.Fatalf("accepted workspaceRef %q that is not 4-40 or 64 hex digits", ref)
		}
	}
	switch {
	case in.SessionID != "" && !belay.IsUUID(in.SessionID):
		t.Fatalf("accepted sessionId %q", in.SessionID)
	case in.ProjectPath == "" && in.SessionID == "":
		t.Fatal("accepted neither sessionId nor projectPath")
	case in.ProjectPath != "":
		if fi, err := os.Stat(in.ProjectPath); !filepath.IsAbs(in.ProjectPath) || err != nil || !fi.IsDir() {
			t.Fatalf("accepted projectPath %q that is not an absolute directory", in.ProjectPath)
		}
	}
	if in.Type != "" && !in.Type.Valid() || in.Trigger != "" && !in.Trigger.Valid() || in.Step < 0 {
		t.Fatalf("accepted type %q, trigger %q, step %d", in.Type, in.Trigger, in.Step)
	}
	for _, raw := range []json.RawMessage{in.AgentState, in.Outputs} {
		if raw != nil && (!json.Valid(raw) || !utf8.Valid(raw) || len(raw) > belay.MaxStateBytes) {
			t.Fatalf("accepted invalid JSON or invalid UTF-8 %q", raw)
		}
	}
	object("metadata", in.Metadata)
	if len(in.Context) > belay.MaxContextPairs {
		t.Fatalf("accepted %d context pairs", len(in.Context))
	}
	for k, v := range in.Context {
		text("context key", k, 1, belay.MaxContextKey)
		text("context value", v, 0, belay.MaxContextValue)
	}
	if len(in.Tags) > belay.MaxTags {
		t.Fatalf("accepted %d tags", len(in.Tags))
	}
	for _, tag := range in.Tags {
		text("tag", tag, 1, belay.MaxTagLen)
		if strings.ContainsFunc(tag, unicode.IsControl) {
			t.Fatalf("accepted a tag with a control character: %q", tag)
		}
	}
	h := in.HITL
	if h == nil {
		return
	}
	text("hitl.title", h.Title, 0, belay.MaxHITLTitle)
	text("hitl.message", h.Message, 0, belay.MaxHITLMessage)
	if h.Options != nil && (len(h.Options) < 1 || len(h.Options) > belay.MaxHITLOptions) {
		t.Fatalf("accepted %d options", len(h.Options))
	}
	ids, defaults := map[string]bool{}, 0
	for _, o := range h.Options {
		text("option id", o.ID, 1, belay.MaxOptionIDLen)
		text("option label", o.Label, 1, belay.MaxOptionLabel)
		if strings.ContainsFunc(o.ID+o.Label, unicode.IsControl) {
			t.Fatalf("accepted option %+v with a control character in its id or label", o)
		}
		text("option description", o.Description, 0, belay.MaxOptionDesc)
		if ids[o.ID] || !o.Action.Valid() {
			t.Fatalf("accepted option %+v (duplicate id or invalid action)", o)
		}
		ids[o.ID] = true
		if o.IsDefault {
			defaults++
		}
	}
	if defaults > 1 {
		t.Fatalf("accepted %d default options", defaults)
	}
	object("hitl.context", h.Context)
	if to := h.Timeout; to != nil {
		if to.Duration < belay.MinTimeoutSeconds || to.Duration > belay.MaxTimeoutSeconds {
			t.Fatalf("accepted a timeout of %d seconds", to.Duration)
		}
		if to.DefaultAction != belay.ActionApprove && to.DefaultAction != belay.ActionReject && to.DefaultAction != belay.ActionPause {
			t.Fatalf("accepted default action %q", to.DefaultAction)
		}
	}
	if len(h.Approvers) > belay.MaxApprovers {
		t.Fatalf("accepted %d approvers", len(h.Approvers))
	}
	for _, a := range h.Approvers {
		text("approver", a, 1, belay.MaxNameLen)
	}
	if h.OnReject != "" && h.OnReject != belay.OnRejectFail && h.OnReject != belay.OnRejectContinue {
		t.Fatalf("accepted onReject %q", h.OnReject)
	}
}

// TestExportBranchInputValidateBranchNames: git's ref-format rules for a
// branch name (git check-ref-format --branch), and no name that reads as
// another ref (HEAD, refs/heads/main would become refs/heads/refs/heads/main).
func TestExportBranchInputValidateBranchNames(t *testing.T) {
	const id = "01a1fdb8-0000-7000-8000-000000000000"
	for _, c := range []struct {
		branch string
		ok     bool
	}{
		{"", true}, {"main", true}, {"feature/x", true}, {"belay/" + id, true}, {"a.b", true}, {"ü", true}, {"x-y_z", true},
		{"HEAD", false}, {"refs/heads/main", false}, {"refs/x", false}, {"@", false}, {"-x", false},
		{"a..b", false}, {"a@{b", false}, {"x.lock", false}, {"a/x.lock/b", false}, {"a/.b", false}, {".a", false},
		{"a//b", false}, {"/a", false}, {"a/", false}, {"a.", false}, {"a b", false}, {"a~b", false}, {"a^b", false},
		{"a:b", false}, {"a?b", false}, {"a*b", false}, {"a[b", false}, {`a\b`, false}, {"a\x7fb", false}, {"a\tb", false},
	} {
		err := (&belay.ExportBranchInput{SessionID: id, Branch: c.branch}).Validate()
		if c.ok {
			wantField(t, err, "")
		} else {
			wantField(t, err, "branch")
		}
		if t.Failed() {
			t.Fatalf("branch %q", c.branch)
		}
	}
}
