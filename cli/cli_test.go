package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
	"github.com/belayhq/belay/cmd/belay/wire"
)

// harness runs belay in-process against a temp data directory, with a temp
// project directory as the working directory and a temp HOME, so nothing
// outside the test's directories is touched.
type harness struct {
	project string
	env     map[string]string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return &harness{project: t.TempDir(), env: map[string]string{
		"HOME":           t.TempDir(),
		"BELAY_DATA_DIR": t.TempDir(),
	}}
}

type result struct {
	code           int
	stdout, stderr string
}

func (h *harness) run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	env := cli.Env{Backend: wire.Backend(),
		Stdin:  strings.NewReader(stdin),
		Stdout: &out,
		Stderr: &errOut,
		Getenv: func(k string) string { return h.env[k] },
		Getwd:  func() (string, error) { return h.project, nil },
	}
	code := cli.Run(context.Background(), args, env)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// ok runs a command that must succeed and returns its standard output.
func (h *harness) ok(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := h.run(t, stdin, args...)
	if r.code != cli.ExitOK {
		t.Fatalf("belay %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// okJSON runs a command with --json and decodes its output into T.
func okJSON[T any](t *testing.T, h *harness, args ...string) T {
	t.Helper()
	out := h.ok(t, "", append([]string{"--json"}, args...)...)
	var v T
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("belay --json %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return v
}

// compact removes the indentation --json adds inside raw JSON fields.
func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("compact %s: %v", raw, err)
	}
	return b.String()
}

func TestSaveShowListDelete(t *testing.T) {
	h := newHarness(t)
	stateFile := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(stateFile, []byte("{\n  \"plan\": [\"a\", \"b\"]\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	out := h.ok(t, "", "save", "-m", "architecture approved", "--tag", "arch", "--tag", "v1", "--name", "architecture",
		"--type", "phase", "--state-file", stateFile, "--context", "ticket=BEL-1", "--context", "expr=a=b",
		"--phase", "build", "--step", "2", "--description", "the long story")
	if !strings.HasPrefix(out, "Saved checkpoint #1 ") {
		t.Errorf("save printed %q", out)
	}
	out = h.ok(t, `{"step": 3}`, "save", "-m", "step three", "--state-file", "-", "--trigger", "subtask_complete")
	if !strings.HasPrefix(out, "Saved checkpoint #2 ") {
		t.Errorf("second save printed %q", out)
	}

	first := okJSON[belay.Checkpoint](t, h, "show", "1")
	if first.Seq != 1 || first.Summary != "architecture approved" || first.Name != "architecture" || first.Type != belay.TypePhase ||
		!slices.Equal(first.Tags, []string{"arch", "v1"}) || first.Context["ticket"] != "BEL-1" || first.Context["expr"] != "a=b" ||
		compact(t, first.AgentState) != `{"plan":["a","b"]}` || first.Phase != "build" || first.Step != 2 ||
		first.Description != "the long story" || first.ProjectPath != h.project {
		t.Errorf("checkpoint 1 = %+v", first)
	}
	second := okJSON[belay.Checkpoint](t, h, "show", "#2")
	if second.ParentID != first.ID || second.SessionID != first.SessionID || compact(t, second.AgentState) != `{"step":3}` ||
		second.Trigger != belay.TriggerSubtaskComplete || second.Type != belay.TypeManual {
		t.Errorf("checkpoint 2 = %+v", second)
	}

	text := h.ok(t, "", "show", first.ID)
	for _, want := range []string{"Checkpoint #1  " + first.ID, "architecture approved", "phase (trigger user_request)",
		"arch, v1", "BEL-1", "the long story", `"plan"`} {
		if !strings.Contains(text, want) {
			t.Errorf("show by id lacks %q:\n%s", want, text)
		}
	}

	table := h.ok(t, "", "checkpoints")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "SEQ") || !strings.HasPrefix(lines[1], "2 ") ||
		!strings.HasPrefix(lines[2], "1 ") || lines[3] != "2 of 2" {
		t.Errorf("checkpoints table:\n%s", table)
	}
	list := okJSON[belay.CheckpointList](t, h, "checkpoints")
	if len(list.Items) != 2 || list.Items[0].ID != second.ID || list.Items[1].ID != first.ID || list.TotalCount != 2 {
		t.Errorf("checkpoints --json = %+v", list)
	}
	asc := okJSON[belay.CheckpointList](t, h, "ls", "--asc", "--tag", "arch")
	if len(asc.Items) != 1 || asc.Items[0].ID != first.ID {
		t.Errorf("ls --asc --tag arch = %+v", asc)
	}

	out = h.ok(t, "", "delete", "2")
	if !strings.HasPrefix(out, "Deleted checkpoint #2 "+second.ID) {
		t.Errorf("delete printed %q", out)
	}
	if r := h.run(t, "", "show", "2"); r.code != cli.ExitError || !strings.Contains(r.stderr, "CHECKPOINT_NOT_FOUND") {
		t.Errorf("show of a deleted checkpoint: exit %d, stderr %q", r.code, r.stderr)
	}
	info := okJSON[belay.Session](t, h, "session-info")
	if info.ID != first.SessionID || info.HeadCheckpointID != first.ID || info.CheckpointCount != 1 || info.LastSeq != 2 {
		t.Errorf("session after delete = %+v", info)
	}
	// The next checkpoint keeps counting.
	if out := h.ok(t, "", "save", "-m", "again"); !strings.HasPrefix(out, "Saved checkpoint #3 ") {
		t.Errorf("save after delete printed %q", out)
	}
	deleted := okJSON[map[string]any](t, h, "delete", first.ID)
	if deleted["deleted"] != first.ID || deleted["seq"] != float64(1) || deleted["sessionId"] != first.SessionID {
		t.Errorf("delete --json = %v", deleted)
	}
}

func TestSessions(t *testing.T) {
	h := newHarness(t)
	if out := h.ok(t, "", "sessions"); !strings.HasPrefix(out, "No sessions.") {
		t.Errorf("sessions with none: %q", out)
	}
	h.ok(t, "", "save", "-m", "one", "--phase", "plan")
	list := okJSON[belay.SessionList](t, h, "sessions")
	if len(list.Items) != 1 || list.Items[0].ProjectPath != h.project || list.Items[0].CheckpointCount != 1 {
		t.Fatalf("sessions --json = %+v", list)
	}
	sess := list.Items[0]
	table := h.ok(t, "", "sessions")
	if !strings.HasPrefix(table, "ID") || !strings.Contains(table, sess.ID) || !strings.Contains(table, "running") {
		t.Errorf("sessions table:\n%s", table)
	}
	text := h.ok(t, "", "session-info")
	for _, want := range []string{"Session " + sess.ID, "Status:       running", "Project:      " + h.project,
		"Phase:        plan (step 0)", "Checkpoints:  1 (last #1)"} {
		if !strings.Contains(text, want) {
			t.Errorf("session-info lacks %q:\n%s", want, text)
		}
	}
	byID := okJSON[belay.Session](t, h, "session-info", sess.ID)
	if byID.ID != sess.ID || byID.Owner == "" {
		t.Errorf("session-info ID = %+v", byID)
	}
	if r := h.run(t, "", "sessions", "--status", "asleep"); r.code != cli.ExitError || !strings.Contains(r.stderr, "VALIDATION_ERROR") {
		t.Errorf("sessions --status asleep: exit %d, %q", r.code, r.stderr)
	}
}

func TestVersion(t *testing.T) {
	h := newHarness(t)
	if out := h.ok(t, "", "version"); !strings.HasPrefix(out, "belay "+cli.Version+" (go") {
		t.Errorf("version printed %q", out)
	}
	v := okJSON[map[string]string](t, h, "version")
	if v["version"] != cli.Version || !strings.HasPrefix(v["go"], "go") {
		t.Errorf("version --json = %v", v)
	}
}

func TestDataDirFlagAndEnvironment(t *testing.T) {
	h := newHarness(t)
	one, two := t.TempDir(), t.TempDir()
	delete(h.env, "BELAY_DATA_DIR")

	h.ok(t, "", "--data-dir", one, "save", "-m", "in one")
	if _, err := os.Stat(filepath.Join(one, "belay.db")); err != nil {
		t.Errorf("--data-dir did not hold the database: %v", err)
	}
	count := func(args ...string) int64 {
		return okJSON[belay.CheckpointList](t, h, append(args, "checkpoints", "--all")...).TotalCount
	}
	h.env["BELAY_DATA_DIR"] = one
	if n := count(); n != 1 {
		t.Errorf("BELAY_DATA_DIR=one: %d checkpoints, want 1", n)
	}
	h.env["BELAY_DATA_DIR"] = two
	if n := count(); n != 0 {
		t.Errorf("BELAY_DATA_DIR=two: %d checkpoints, want 0", n)
	}
	if n := count("--data-dir", one); n != 1 {
		t.Errorf("--data-dir one over BELAY_DATA_DIR=two: %d checkpoints, want 1", n)
	}

	// Without either, the database lives under $HOME/.local/share/belay.
	delete(h.env, "BELAY_DATA_DIR")
	h.ok(t, "", "save", "-m", "at home")
	if _, err := os.Stat(filepath.Join(h.env["HOME"], ".local", "share", "belay", "belay.db")); err != nil {
		t.Errorf("default data dir: %v", err)
	}
	h.env["XDG_DATA_HOME"] = two
	h.ok(t, "", "save", "-m", "xdg")
	if _, err := os.Stat(filepath.Join(two, "belay", "belay.db")); err != nil {
		t.Errorf("XDG_DATA_HOME data dir: %v", err)
	}
}

func TestExitCodes(t *testing.T) {
	h := newHarness(t)
	h.ok(t, "", "save", "-m", "seed")
	badJSON := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(badJSON, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no command", nil, cli.ExitOK, ""},
		{"save without -m", []string{"save"}, cli.ExitUsage, "summary is required"},
		{"unknown flag", []string{"--bogus", "checkpoints"}, cli.ExitUsage, "unknown flag"},
		{"unknown subcommand flag", []string{"save", "-m", "x", "--bogus"}, cli.ExitUsage, "unknown flag"},
		{"flag without value", []string{"save", "-m"}, cli.ExitUsage, "needs an argument"},
		{"bad flag value", []string{"checkpoints", "--limit", "many"}, cli.ExitUsage, "invalid argument"},
		{"unknown command", []string{"frobnicate"}, cli.ExitUsage, "unknown command"},
		{"unknown shell", []string{"completion", "tcsh"}, cli.ExitUsage, `unknown command "tcsh" for "belay completion": it takes one of bash, fish, powershell, zsh`},
		{"unknown subcommand", []string{"webhook", "frobnicate"}, cli.ExitUsage, `unknown command "frobnicate" for "belay webhook": it takes one of add, deliveries, list, remove`},
		{"a group alone", []string{"webhook"}, cli.ExitOK, ""},
		{"too many args to show", []string{"show", "1", "2"}, cli.ExitUsage, "accepts 1 arg"},
		{"show without args", []string{"show"}, cli.ExitUsage, "accepts 1 arg"},
		{"args to save", []string{"save", "-m", "x", "extra"}, cli.ExitUsage, "unknown command"},
		{"args to checkpoints", []string{"checkpoints", "extra"}, cli.ExitUsage, ""},
		{"args to version", []string{"version", "1"}, cli.ExitUsage, ""},
		{"too many args to session-info", []string{"session-info", "a", "b"}, cli.ExitUsage, ""},
		{"delete without args", []string{"delete"}, cli.ExitUsage, ""},
		{"show neither seq, id nor name", []string{"show", "abc"}, cli.ExitError, "no checkpoint is numbered, named or has an id beginning"},
		{"context without =", []string{"save", "-m", "x", "--context", "novalue"}, cli.ExitUsage, "KEY=VALUE"},
		{"show unknown seq", []string{"show", "99"}, cli.ExitError, "CHECKPOINT_NOT_FOUND"},
		{"show unknown id", []string{"show", "01890000-0000-7000-8000-00000000abcd"}, cli.ExitError, "CHECKPOINT_NOT_FOUND"},
		{"delete unknown seq", []string{"delete", "99"}, cli.ExitError, "CHECKPOINT_NOT_FOUND"},
		{"session-info bad id", []string{"session-info", "nope"}, cli.ExitError, "VALIDATION_ERROR"},
		{"empty summary", []string{"save", "-m", ""}, cli.ExitUsage, "summary is required"},
		{"blank summary", []string{"save", "-m", "  "}, cli.ExitUsage, "summary is required"},
		{"bad type", []string{"save", "-m", "x", "--type", "big"}, cli.ExitError, "VALIDATION_ERROR"},
		{"missing state file", []string{"save", "-m", "x", "--state-file", filepath.Join(h.project, "nope.json")}, cli.ExitError, "VALIDATION_ERROR"},
		{"state file not JSON", []string{"save", "-m", "x", "--state-file", badJSON}, cli.ExitError, "VALIDATION_ERROR"},
		{"state on stdin not JSON", []string{"save", "-m", "x", "--state-file", "-"}, cli.ExitError, "VALIDATION_ERROR"},
		{"limit out of range", []string{"checkpoints", "--limit", "101"}, cli.ExitUsage, "--limit must be 1-100, got 101"},
		{"relative project", []string{"save", "-m", "x", "--project", "rel"}, cli.ExitError, "VALIDATION_ERROR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(t, "not json", tt.args...)
			if r.code != tt.code {
				t.Errorf("belay %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(tt.args, " "), r.code, tt.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("stderr %q lacks %q", r.stderr, tt.stderr)
			}
			if tt.code == cli.ExitUsage && !strings.Contains(r.stderr, " --help' for usage.") {
				t.Errorf("usage error without a pointer to --help: %q", r.stderr)
			}
		})
	}
	if n := okJSON[belay.CheckpointList](t, h, "checkpoints").TotalCount; n != 1 {
		t.Errorf("failed commands left %d checkpoints, want the seed only", n)
	}
}

func TestJSONOutputIsJSONEverywhere(t *testing.T) {
	h := newHarness(t)
	id := okJSON[belay.Checkpoint](t, h, "save", "-m", "one").ID
	h.ok(t, "", "save", "-m", "two")
	sessionID := okJSON[belay.Session](t, h, "session-info").ID
	for _, args := range [][]string{
		{"save", "-m", "three", "--tag", "t"},
		{"checkpoints"},
		{"checkpoints", "--all", "--limit", "1"},
		{"checkpoints", "--order-by", "type"},
		{"show", "1"},
		{"show", id},
		{"show", "1", "--session", sessionID},
		{"sessions"},
		{"session-info"},
		{"session-info", sessionID},
		{"pending"},
		{"version"},
		{"delete", "2"},
	} {
		r := h.run(t, "", append([]string{"--json"}, args...)...)
		if r.code != cli.ExitOK || !json.Valid([]byte(r.stdout)) || r.stderr != "" {
			t.Errorf("belay --json %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	// Errors go to stderr, as JSON too; wrong usage as well.
	for _, tc := range []struct {
		args []string
		code int
	}{{[]string{"show", "99"}, cli.ExitError}, {[]string{"save", "-m", ""}, cli.ExitUsage}, {[]string{"session-info", "nope"}, cli.ExitError}} {
		args := tc.args
		r := h.run(t, "", append([]string{"--json"}, args...)...)
		var body struct {
			Error belay.Error `json:"error"`
		}
		if r.code != tc.code || r.stdout != "" || json.Unmarshal([]byte(r.stderr), &body) != nil || body.Error.Code == "" {
			t.Errorf("belay --json %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
}

func TestShowWithoutSession(t *testing.T) {
	h := newHarness(t)
	r := h.run(t, "", "show", "1")
	if r.code != cli.ExitError || !strings.Contains(r.stderr, "SESSION_NOT_FOUND") {
		t.Errorf("show in a project without sessions: exit %d, %q", r.code, r.stderr)
	}
	if out := h.ok(t, "", "checkpoints"); !strings.HasPrefix(out, "No checkpoints. Save one") {
		t.Errorf("checkpoints with none: %q", out)
	}
	h.ok(t, "", "save", "-m", "one", "--no-snapshot", "--tag", "t1")
	// A filter that matches none says so, not that there are none to save.
	if out := h.ok(t, "", "checkpoints", "--tag", "t1", "--tag", "t2"); out != "No checkpoints match.\n" {
		t.Errorf("checkpoints matching no filter: %q", out)
	}
}

// TestUsageErrorNamesTheCommandsHelp: a usage error points at the help of
// the command that was misused, not at belay's own.
func TestUsageErrorNamesTheCommandsHelp(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		args []string
		help string
	}{
		{[]string{"session", "grant"}, "belay session grant"},
		{[]string{"show"}, "belay show"},
		{[]string{"save", "-m", "x", "--bogus"}, "belay save"},
		{[]string{"frobnicate"}, "belay"},
	} {
		r := h.run(t, "", tc.args...)
		if want := "Run '" + tc.help + " --help' for usage.\n"; r.code != cli.ExitUsage || !strings.HasSuffix(r.stderr, want) {
			t.Errorf("belay %s: exit %d, stderr %q; want %d ending %q", strings.Join(tc.args, " "), r.code, r.stderr, cli.ExitUsage, want)
		}
	}
}

// TestProjectFlagHelp: the commands that work on the working directory's
// project take the global --project, whose help says how belay finds the
// project; a local flag hid it behind a help that said the working directory.
func TestProjectFlagHelp(t *testing.T) {
	h := newHarness(t)
	for _, cmd := range [][]string{{"ask"}, {"session", "new"}, {"retention"}} {
		help := h.ok(t, "", append(cmd, "--help")...)
		if strings.Contains(help, "default: the working directory") || !strings.Contains(help, "found from the working directory, as git does") {
			t.Errorf("belay %s --help:\n%s", strings.Join(cmd, " "), help)
		}
	}
}

// TestProjectDotEverywhere: every --project takes a relative path, as
// `checkpoints --project .` always did.
func TestProjectDotEverywhere(t *testing.T) {
	h := newHarness(t)
	sess := okJSON[belay.Session](t, h, "session", "new", "--project", ".", "--json")
	if sess.ProjectPath != h.project {
		t.Fatalf("session new --project . made a session of %q, want %q", sess.ProjectPath, h.project)
	}
	if list := okJSON[belay.SessionList](t, h, "sessions", "--project", ".", "--json"); len(list.Items) != 1 {
		t.Errorf("sessions --project . listed %d, want 1", len(list.Items))
	}
	h.ok(t, "", "retention", "--project", ".", "--keep-last", "5")
	if out := h.ok(t, "", "retention"); !strings.Contains(out, h.project+"  keep last 5") {
		t.Errorf("retention after --project .:\n%s", out)
	}
	// Set through a link, a policy is stored under the directory the link
	// leads to, and said so.
	link := filepath.Join(t.TempDir(), "linkdir")
	if err := os.Symlink(h.project, link); err != nil {
		t.Fatal(err)
	}
	if out := h.ok(t, "", "retention", "--project", link, "--keep-last", "6"); out != "Retention of "+h.project+": keep last 6, max age 0s.\n" {
		t.Errorf("retention set through a link printed %q, want the path it is stored under, %s", out, h.project)
	}
	if p := okJSON[belay.RetentionPolicy](t, h, "retention", "--project", link, "--keep-last", "6"); p.ProjectPath != h.project || p.KeepLast != 6 {
		t.Errorf("retention --json set through a link = %+v, want the policy of %s", p, h.project)
	}
	tk := okJSON[belay.NewToken](t, h, "token", "create", "--user", "bob", "--project", ".", "--json")
	if len(tk.Projects) != 1 || tk.Projects[0] != h.project {
		t.Errorf("token create --project . limited the token to %q, want %q", tk.Projects, h.project)
	}
	if cp := okJSON[belay.Checkpoint](t, h, "ask", "Proceed?", "--project", ".", "--no-snapshot", "--json"); cp.ProjectPath != h.project {
		t.Errorf("ask --project . asked in %q, want %q", cp.ProjectPath, h.project)
	}
}
