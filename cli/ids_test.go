package cli_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
)

// shownPrefix is the shortest prefix lists show: a UUID v7's millisecond.
const shownPrefix = 13

// uniquePrefix is how lists show id: its shortest prefix of at least
// shownPrefix characters that none of others begins with.
func uniquePrefix(id string, others ...string) string {
	for n := shownPrefix; n < len(id); n++ {
		unique := true
		for _, o := range others {
			if o != id && strings.HasPrefix(o, id[:n]) {
				unique = false
			}
		}
		if unique {
			return id[:n]
		}
	}
	return id
}

// column returns field i of each data row of a table (after its header,
// up to its first blank or summary line).
func column(table string, i int) []string {
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) <= i || strings.Contains(line, " of ") && len(f) < 4 {
			break
		}
		out = append(out, f[i])
	}
	return out
}

// TestListsShowUniqueIDPrefixes: checkpoints made in the same minute share
// their first 8 characters; lists show each id as its shortest prefix
// unique among those listed, at least its millisecond, and every command
// takes it back, also when ids not listed were made in the same minute.
func TestListsShowUniqueIDPrefixes(t *testing.T) {
	h := newHarness(t)
	h.ok(t, "", "save", "-m", "elsewhere", "--no-snapshot", "--project", t.TempDir())
	for _, m := range []string{"one", "two", "three"} {
		h.ok(t, "", "save", "-m", m, "--no-snapshot")
	}
	list := okJSON[belay.CheckpointList](t, h, "checkpoints")
	var ids []string
	for _, cp := range list.Items {
		ids = append(ids, cp.ID)
	}
	table := h.ok(t, "", "checkpoints")
	shown, sessions := column(table, 1), column(table, 2)
	if len(shown) != 3 {
		t.Fatalf("checkpoints table:\n%s", table)
	}
	for i, id := range ids {
		if want := uniquePrefix(id, ids...); shown[i] != want {
			t.Errorf("row %d shows id %q, want %q (of %s)", i, shown[i], want, id)
		}
		if want := uniquePrefix(list.Items[i].SessionID); sessions[i] != want {
			t.Errorf("row %d shows session %q, want %q", i, sessions[i], want)
		}
		if got := okJSON[belay.Checkpoint](t, h, "show", shown[i]); got.ID != id {
			t.Errorf("show %s = %s, want %s", shown[i], got.ID, id)
		}
		if got := okJSON[belay.Session](t, h, "session-info", sessions[i]); got.ID != list.Items[i].SessionID {
			t.Errorf("session-info %s = %s, want %s", sessions[i], got.ID, list.Items[i].SessionID)
		}
	}

	// Tokens made together, too.
	for range 2 {
		h.ok(t, "", "token", "create", "--user", "ci")
	}
	tokens := h.ok(t, "", "token", "list")
	if ids := column(tokens, 0); len(ids) != 2 || ids[0] == ids[1] || len(ids[0]) < belay.MinIDPrefix {
		t.Errorf("token list ids %v:\n%s", ids, tokens)
	}
}

// TestSessionsByPrefix: every command that takes a session takes a unique
// prefix of its id; an ambiguous one is refused with the candidates.
func TestSessionsByPrefix(t *testing.T) {
	h := newHarness(t)
	other := t.TempDir()
	h.ok(t, "", "save", "-m", "here", "--no-snapshot")
	h.ok(t, "", "save", "-m", "there", "--no-snapshot", "--project", other)
	list := okJSON[belay.SessionList](t, h, "sessions")
	if len(list.Items) != 2 {
		t.Fatalf("sessions = %+v", list)
	}
	there, here := list.Items[0], list.Items[1]
	ref := uniquePrefix(there.ID, here.ID)

	if got := okJSON[belay.Session](t, h, "session-info", ref); got.ID != there.ID {
		t.Errorf("session-info %s = %s, want %s", ref, got.ID, there.ID)
	}
	if got := okJSON[belay.CheckpointList](t, h, "checkpoints", "--session", ref); len(got.Items) != 1 || got.Items[0].Summary != "there" {
		t.Errorf("checkpoints --session %s = %+v", ref, got)
	}
	if got := okJSON[belay.Checkpoint](t, h, "show", "1", "--session", ref); got.Summary != "there" {
		t.Errorf("show 1 --session %s = %+v", ref, got)
	}
	if got := okJSON[[]belay.PendingHITL](t, h, "pending", "--session", ref); len(got) != 0 {
		t.Errorf("pending --session %s = %+v", ref, got)
	}
	archive := filepath.Join(t.TempDir(), "there.tar.gz")
	if out := h.ok(t, "", "export", ref, "-o", archive); !strings.Contains(out, there.ID) {
		t.Errorf("export %s printed %q", ref, out)
	}

	common := here.ID[:belay.MinIDPrefix]
	for _, args := range [][]string{{"session-info", common}, {"checkpoints", "--session", common}, {"sessions", "delete", common, "--yes"}} {
		r := h.run(t, "", args...)
		if r.code != cli.ExitError || !strings.Contains(r.stderr, "is ambiguous: matches ") ||
			!strings.Contains(r.stderr, here.ID) || !strings.Contains(r.stderr, there.ID) {
			t.Errorf("belay %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	if r := h.run(t, "", "session-info", "ffffffff"); r.code != cli.ExitError || !strings.Contains(r.stderr, "SESSION_NOT_FOUND") {
		t.Errorf("unknown prefix: exit %d, stderr %q", r.code, r.stderr)
	}

	if out := h.ok(t, "", "sessions", "delete", ref, "--yes"); !strings.Contains(out, "Deleted session "+there.ID) {
		t.Errorf("sessions delete %s printed %q", ref, out)
	}
	if left := okJSON[belay.SessionList](t, h, "sessions"); len(left.Items) != 1 || left.Items[0].ID != here.ID {
		t.Errorf("sessions after delete = %+v", left)
	}
}

// TestNoSessionHereHints: in a project without a session, a command says how
// to name one in a way it accepts.
func TestNoSessionHereHints(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		args      []string
		want, not string
	}{
		{[]string{"session-info"}, "belay session-info ID", "--session"},
		{[]string{"export"}, "belay export SESSION", "--session"},
		{[]string{"show", "1"}, "pass --session ID", ""},
		{[]string{"rollbacks"}, "pass --session ID", ""},
	} {
		r := h.run(t, "", tc.args...)
		if r.code != cli.ExitError || !strings.Contains(r.stderr, "SESSION_NOT_FOUND") || !strings.Contains(r.stderr, tc.want) ||
			tc.not != "" && strings.Contains(r.stderr, tc.not) {
			t.Errorf("belay %s: exit %d, stderr %q; want a hint with %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.want)
		}
	}
}

// TestSaveAfterSessionEndedSaysSo: when the project's session failed, the
// next save starts a new session and says so, and the list points back.
func TestSaveAfterSessionEndedSaysSo(t *testing.T) {
	c := newHITLCLI(t)
	c.ok(t, nil, "save", "-m", "before", "--no-snapshot")
	old := c.ok(t, nil, "session-info", "--json")
	var oldSess belay.Session
	if err := json.Unmarshal([]byte(old), &oldSess); err != nil {
		t.Fatal(err)
	}
	lead := belay.WithActor(context.Background(), belay.Actor{UserID: "lead", Admin: true})
	ask, err := c.svc.CreateCheckpoint(lead, belay.CreateCheckpointInput{SessionID: oldSess.ID, Summary: "go on?",
		HITL: &belay.HITLInput{Required: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.svc.Decide(lead, belay.DecideInput{CheckpointID: ask.ID, SelectedOption: "reject"}); err != nil {
		t.Fatal(err)
	}

	r := c.run(t, nil, "save", "-m", "after", "--no-snapshot")
	if r.code != 0 || !strings.HasPrefix(r.stdout.String(), "Saved checkpoint #1 ") {
		t.Fatalf("save after the failure: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var newSess belay.Session
	if err := json.Unmarshal([]byte(c.ok(t, nil, "session-info", "--json")), &newSess); err != nil || newSess.ID == oldSess.ID {
		t.Fatalf("current session %+v, %v; want a new one", newSess, err)
	}
	want := "belay: session " + oldSess.ID + " is failed; started session " + newSess.ID + " — checkpoint numbers restart at #1.\n" +
		"The earlier checkpoints: belay checkpoints --session " + oldSess.ID + "\n"
	if r.stderr.String() != want {
		t.Errorf("stderr %q\nwant   %q", r.stderr, want)
	}
	// The JSON result carries it for scripts.
	r = c.run(t, nil, "save", "-m", "again", "--no-snapshot", "--json")
	if r.code != 0 || strings.Contains(r.stdout.String(), "startedSession") || r.stderr.String() != "" {
		t.Errorf("save in the new session: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	list := c.ok(t, nil, "checkpoints")
	if !strings.Contains(list, "This is session "+newSess.ID+". Also in this project: session "+oldSess.ID+
		" (failed, 2 checkpoints): belay checkpoints --session "+oldSess.ID) {
		t.Errorf("checkpoints in the project:\n%s", list)
	}
}
