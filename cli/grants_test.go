package cli_test

import (
	"encoding/json"
	"maps"
	"regexp"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
)

// roleIndex is the column of accessRoles named name.
func roleIndex(t *testing.T, name string) int {
	t.Helper()
	for i, r := range accessRoles {
		if r.name == name {
			return i
		}
	}
	t.Fatalf("no role %q", name)
	return -1
}

// TestSessionGrantCommands shares a session through a server: the owner
// grants a stranger a role, who may then read the session, lists the
// grants, and revokes the role again, after which the session is gone for
// the stranger.
func TestSessionGrantCommands(t *testing.T) {
	w := newAccessWorld(t)
	sc := w.scene(t, false)
	owner, stranger := roleIndex(t, "owner"), roleIndex(t, "stranger")
	ok := func(r int, args ...string) string {
		t.Helper()
		res := w.run(t, sc, r, args...)
		if res.code != cli.ExitOK {
			t.Fatalf("belay %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), res.code, res.stdout, res.stderr)
		}
		return res.stdout
	}
	wantCode := func(res result, exit int, code belay.Code) {
		t.Helper()
		if res.code != exit || !strings.Contains(res.stderr, string(code)) {
			t.Errorf("exit %d, stderr %q; want exit %d with %s", res.code, res.stderr, exit, code)
		}
	}

	wantCode(w.run(t, sc, stranger, "session-info", sc.session), cli.ExitError, belay.CodeSessionNotFound)
	if out := ok(owner, "session", "grant", sc.session, "stranger", "--role", "write"); out != "Granted stranger the role write in session "+sc.session+".\n" {
		t.Errorf("grant printed %q", out)
	}
	ok(stranger, "session-info", sc.session)
	ok(stranger, "save", "--session", sc.session, "-m", "a stranger no more", "--no-snapshot")

	var grants []belay.Grant
	if err := json.Unmarshal([]byte(ok(owner, "--json", "session", "grants", sc.session)), &grants); err != nil {
		t.Fatal(err)
	}
	roles := map[string]belay.Role{}
	for _, g := range grants {
		if g.SessionID != sc.session || g.GrantedBy != "owner" {
			t.Errorf("grant %+v", g)
		}
		roles[g.User] = g.Role
	}
	if want := map[string]belay.Role{"reader": belay.RoleRead, "writer": belay.RoleWrite, "decider": belay.RoleDecide, "stranger": belay.RoleWrite}; !maps.Equal(roles, want) {
		t.Errorf("grants %v, want %v", roles, want)
	}
	table := ok(stranger, "session", "grants", sc.session)
	if !strings.HasPrefix(table, "USER") || !regexp.MustCompile(`(?m)^stranger\s+write\s+owner\s+\S+ ago$`).MatchString(table) {
		t.Errorf("grants table:\n%s", table)
	}

	wantCode(w.run(t, sc, stranger, "session", "revoke", sc.session, "reader"), cli.ExitError, belay.CodeUnauthorized)
	var revoked map[string]any
	if err := json.Unmarshal([]byte(ok(owner, "--json", "session", "revoke", sc.session, "stranger")), &revoked); err != nil ||
		revoked["sessionId"] != sc.session || revoked["user"] != "stranger" || revoked["revoked"] != true {
		t.Errorf("revoke --json = %v (%v)", revoked, err)
	}
	wantCode(w.run(t, sc, stranger, "session-info", sc.session), cli.ExitError, belay.CodeSessionNotFound)
	wantCode(w.run(t, sc, stranger, "session", "grants", sc.session), cli.ExitError, belay.CodeSessionNotFound)
	wantCode(w.run(t, sc, owner, "session", "revoke", sc.session, "stranger"), cli.ExitError, belay.CodeNotFound)
	if out := ok(owner, "session", "revoke", sc.session, "writer"); out != "Revoked the role of writer in session "+sc.session+".\n" {
		t.Errorf("revoke printed %q", out)
	}
}

// TestSessionGrantUsage: a missing or unknown role and missing arguments are
// usage errors (exit 2), and the help says what each role allows.
func TestSessionGrantUsage(t *testing.T) {
	h := newHarness(t)
	const id = "01900000-0000-7000-8000-000000000001"
	for _, args := range [][]string{
		{"session", "grant", id, "bob"},
		{"session", "grant", id, "bob", "--role", "admin"},
		{"session", "grant", id, "--role", "read"},
		{"session", "revoke", id},
		{"session", "grants"},
	} {
		if r := h.run(t, "", args...); r.code != cli.ExitUsage {
			t.Errorf("belay %s: exit %d, stderr %q; want %d", strings.Join(args, " "), r.code, r.stderr, cli.ExitUsage)
		}
	}
	if r := h.run(t, "", "session", "grant", id, "bob"); !strings.Contains(r.stderr, "--role must be read, write or decide") {
		t.Errorf("without --role: stderr %q", r.stderr)
	}
	help := h.ok(t, "", "session", "--help")
	for _, want := range []string{"grant", "revoke", "grants", "read ", "write ", "decide ", "approvers"} {
		if !strings.Contains(help, want) {
			t.Errorf("session --help lacks %q:\n%s", want, help)
		}
	}
	if help := h.ok(t, "", "session", "grant", "--help"); !strings.Contains(help, "--role") || !strings.Contains(help, "owner or an admin") {
		t.Errorf("session grant --help:\n%s", help)
	}
}

// TestSessionGrantLocal: without BELAY_URL the commands work on the local
// database, as its administrator.
func TestSessionGrantLocal(t *testing.T) {
	h := newHarness(t)
	cp := okJSON[belay.Checkpoint](t, h, "save", "-m", "first", "--no-snapshot")
	if out := h.ok(t, "", "session", "grants", cp.SessionID); !strings.HasPrefix(out, "No grants: only the owner and admins may use session ") {
		t.Errorf("grants of an unshared session printed %q", out)
	}
	r := h.run(t, "", "session", "grant", cp.SessionID, "bob", "--role", "read")
	if r.code != cli.ExitError || !strings.Contains(r.stderr, `"bob" is not a user`) {
		t.Errorf("grant to an unknown user: exit %d, stderr %q", r.code, r.stderr)
	}
	h.ok(t, "", "token", "create", "--user", "bob")
	g := okJSON[belay.Grant](t, h, "session", "grant", cp.SessionID, "bob", "--role", "decide")
	if g.User != "bob" || g.Role != belay.RoleDecide || g.SessionID != cp.SessionID {
		t.Errorf("grant --json = %+v", g)
	}
	if list := okJSON[[]belay.Grant](t, h, "session", "grants", cp.SessionID); len(list) != 1 || list[0].User != "bob" {
		t.Errorf("grants --json = %+v", list)
	}
	// A unique prefix of the session's id will do, as for every command.
	prefix := cp.SessionID[:8]
	if g := okJSON[belay.Grant](t, h, "session", "grant", prefix, "bob", "--role", "read"); g.SessionID != cp.SessionID || g.Role != belay.RoleRead {
		t.Errorf("grant by prefix = %+v", g)
	}
	if list := okJSON[[]belay.Grant](t, h, "session", "grants", prefix); len(list) != 1 || list[0].Role != belay.RoleRead {
		t.Errorf("grants by prefix = %+v", list)
	}
	if out := h.ok(t, "", "session", "revoke", prefix, "bob"); !strings.Contains(out, cp.SessionID) {
		t.Errorf("revoke by prefix printed %q", out)
	}
}
