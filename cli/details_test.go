package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testtree"
	"github.com/belayhq/belay/store/sqlite"
)

// TestRollbackWording: counts agree with their nouns, a dry run says what
// would happen, the history counts the files written back, and a rollback
// with nothing changed since the head saves no pre-rollback checkpoint.
func TestRollbackWording(t *testing.T) {
	h := newHarness(t)
	testtree.Write(t, h.project, map[string]string{"a.txt": "a", "b.txt": "b", "c.txt": "c"})
	h.ok(t, "", "save", "-m", "first")
	testtree.Write(t, h.project, map[string]string{"a.txt": "changed", "new.txt": "new"})
	if err := os.Remove(filepath.Join(h.project, "b.txt")); err != nil {
		t.Fatal(err)
	}
	if out := h.ok(t, "", "rollback", "1", "--dry-run"); !strings.HasPrefix(out, "Rolling back to checkpoint #1 would restore 2 files and remove 1 (dry run") {
		t.Errorf("dry run printed:\n%s", out)
	}
	if out := h.ok(t, "", "rollback", "1"); !strings.Contains(out, ": 2 files restored, 1 removed.") || !strings.Contains(out, "Undo with: belay rollback 2") {
		t.Errorf("rollback printed:\n%s", out)
	}
	testtree.Write(t, h.project, map[string]string{"c.txt": "changed"})
	if out := h.ok(t, "", "rollback", "1"); !strings.Contains(out, ": 1 file restored, 0 removed.") || !strings.Contains(out, "Undo with: belay rollback 3") {
		t.Errorf("rollback of one file printed:\n%s", out)
	}
	// Nothing changed since: the head (#1) already holds this state.
	if out := h.ok(t, "", "rollback", "1"); !strings.Contains(out, ": 0 files restored, 0 removed.") ||
		!strings.Contains(out, "Nothing had changed since checkpoint #1: nothing to undo.") || strings.Contains(out, "Undo with") {
		t.Errorf("rollback with nothing changed printed:\n%s", out)
	}
	if n := okJSON[belay.CheckpointList](t, h, "checkpoints").TotalCount; n != 3 {
		t.Errorf("%d checkpoints after three rollbacks, one of them with nothing changed; want 3", n)
	}
	table := h.ok(t, "", "rollbacks")
	if !strings.Contains(strings.Split(table, "\n")[0], "RESTORED") {
		t.Errorf("rollbacks table:\n%s", table)
	}

	// A checkpoint without a snapshot: only the agent state moves.
	h.ok(t, `{"n": 1}`, "save", "-m", "state only", "--no-snapshot", "--state-file", "-")
	if out := h.ok(t, "", "rollback", "4", "--dry-run"); !strings.Contains(out, "only the agent state would be rolled back") ||
		strings.Contains(out, "was rolled back") {
		t.Errorf("dry run of a state-only rollback printed:\n%s", out)
	}
	// Its state is the head's: nothing to undo, and it says so of the state
	// alone (the files may well have changed).
	testtree.Write(t, h.project, map[string]string{"a.txt": "after"})
	if out := h.ok(t, "", "rollback", "4"); !strings.Contains(out, "The agent state was already checkpoint #4's: nothing to undo.") {
		t.Errorf("state-only rollback to the head printed:\n%s", out)
	}
	// Back to #3, which has a snapshot, then state-only to #4: the undo point
	// is a state-only checkpoint, not #3, whose files are older.
	h.ok(t, "", "rollback", "3")
	testtree.Write(t, h.project, map[string]string{"a.txt": "later"})
	if out := h.ok(t, "", "rollback", "4"); !strings.Contains(out, "Undo with: belay rollback 6") {
		t.Errorf("state-only rollback printed:\n%s", out)
	}
	h.ok(t, "", "rollback", "6")
	if got := testtree.Read(t, h.project)["a.txt"]; got != "later" {
		t.Errorf("a.txt = %q after undoing a state-only rollback, want it left as it was", got)
	}
}

// TestRollbackSaysWhatItKept: a file the target's snapshot left out (too
// large then) is kept by the rollback, and the rollback says so.
func TestRollbackSaysWhatItKept(t *testing.T) {
	h := newHarness(t)
	testtree.Write(t, h.project, map[string]string{"a.txt": "a", "big.bin": strings.Repeat("x", 2<<10)})
	h.ok(t, "", "save", "-m", "first", "--max-file-size", "1KiB")
	testtree.Write(t, h.project, map[string]string{"a.txt": "changed", "big.bin": "small"})
	want := "  keep     big.bin (left out of checkpoint #1's snapshot, left as it is)"
	if out := h.ok(t, "", "rollback", "1"); !strings.Contains(out, want) || strings.Contains(out, "remove   big.bin") {
		t.Errorf("rollback printed:\n%s\nwant %q", out, want)
	}
	if got := testtree.Read(t, h.project)["big.bin"]; got != "small" {
		t.Errorf("big.bin = %q after the rollback, want it left as it is", got)
	}
}

// TestShowRequestAndState: show lists a request's options and, once
// decided, the decision with its feedback; --state prints the state alone.
func TestShowRequestAndState(t *testing.T) {
	c := newHITLCLI(t)
	cp := c.request(t, "", belay.HITLInput{Title: "Deploy?", Message: "to production",
		Timeout: &belay.TimeoutInput{Duration: 600, DefaultAction: belay.ActionReject}})
	out := c.ok(t, nil, "show", cp.ID)
	for _, want := range []string{"HITL:         pending: Deploy?", "Message:      to production",
		"Options:      ok      Ship it (approve, default) - merge as is", "              no      Stop (reject)",
		"Timeout:      10m0s, then reject (at "} {
		if !strings.Contains(out, want) {
			t.Errorf("show of a pending request lacks %q:\n%s", want, out)
		}
	}
	c.ok(t, strings.NewReader(`{"steps": 3}`), "decide", cp.ID, "--option", "change", "--feedback", "smaller steps", "--modify-file", "-")
	out = c.ok(t, nil, "show", cp.ID)
	for _, want := range []string{"Decision:     modify (option change) by ", "Feedback:     smaller steps", "Modifications:", `"steps": 3`} {
		if !strings.Contains(out, want) {
			t.Errorf("show of a decided request lacks %q:\n%s", want, out)
		}
	}

	c.ok(t, nil, "save", "-m", "no state", "--no-snapshot")
	if out := c.ok(t, nil, "show", "1", "--state"); out != "null\n" {
		t.Errorf("show --state without state = %q", out)
	}
	c.ok(t, strings.NewReader(`{"plan": ["a", "b"], "long": "`+strings.Repeat("x", 5000)+`"}`), "save", "-m", "state", "--no-snapshot", "--state-file", "-")
	if out := c.ok(t, nil, "show", "2"); !strings.Contains(out, `"plan"`) || !strings.Contains(out, "--state prints all of it") {
		t.Errorf("show of a long state:\n%.300s", out)
	}
	var state map[string]any
	if err := json.Unmarshal([]byte(c.ok(t, nil, "show", "2", "--state")), &state); err != nil || len(state["long"].(string)) != 5000 {
		t.Errorf("show --state: %v, %v", state, err)
	}
}

// TestDecideHelpNamesOptionsNotActions: --option takes an option's id.
func TestDecideHelpNamesOptionsNotActions(t *testing.T) {
	h := newHarness(t)
	out := h.ok(t, "", "decide", "--help")
	if strings.Contains(out, "--option approve") || strings.Contains(out, "--option modify") || !strings.Contains(out, "not an action") {
		t.Errorf("decide --help:\n%s", out)
	}
}

// TestRollbackOfAnotherProjectSaysSo: a checkpoint id from another project
// rolls that project back; the output names it, and the undo command is an
// id, which means the same wherever it is run (a number would mean this
// project's checkpoint).
func TestRollbackOfAnotherProjectSaysSo(t *testing.T) {
	h := newHarness(t)
	here := h.project
	other := t.TempDir()
	h.project = other
	testtree.Write(t, other, map[string]string{"f": "1"})
	cp := okJSON[belay.Checkpoint](t, h, "save", "-m", "there")
	testtree.Write(t, other, map[string]string{"f": "2"})

	h.project = here
	for i := range 4 {
		testtree.Write(t, here, map[string]string{"f": fmt.Sprint(i)})
		h.ok(t, "", "save", "-m", fmt.Sprint(i))
	}
	if out := h.ok(t, "", "rollback", cp.ID, "--dry-run"); !strings.Contains(out, "in "+other+" would restore 1 file") {
		t.Errorf("dry run printed:\n%s", out)
	}
	out := h.ok(t, "", "rollback", cp.ID)
	if !strings.Contains(out, "of session "+cp.SessionID+" in "+other+":") || strings.Contains(out, "Undo with: belay rollback 2\n") {
		t.Fatalf("rollback printed:\n%s", out)
	}
	undo := out[strings.Index(out, "Undo with: ")+len("Undo with: "):]
	args := strings.Fields(undo)[1:]
	h.ok(t, "", args...)
	if got := testtree.Read(t, other)["f"]; got != "2" {
		t.Errorf("%s, run here, left f = %q there; want it undone", strings.TrimSpace(undo), got)
	}
	if got := testtree.Read(t, here)["f"]; got != "3" {
		t.Errorf("f here = %q; the rollbacks were of the other project", got)
	}
}

// TestListAfterEverySessionEnded: with no session open, the list is the
// current session's, whose numbers show and rollback take, and it points
// at the session before it.
func TestListAfterEverySessionEnded(t *testing.T) {
	h := newHarness(t)
	h.ok(t, "", "save", "-m", "one", "--no-snapshot")
	h.ok(t, "", "save", "-m", "two", "--no-snapshot")
	first := okJSON[belay.Session](t, h, "session-info")
	h.ok(t, "", "session", "complete")
	h.ok(t, "", "session", "new")
	h.ok(t, "", "save", "-m", "three", "--no-snapshot")
	h.ok(t, "", "session", "fail", "--reason", "rejected")
	last := okJSON[belay.Session](t, h, "session-info")
	if last.ID == first.ID || last.Status != belay.SessionFailed {
		t.Fatalf("current session = %+v; want the second, failed", last)
	}

	list := okJSON[belay.CheckpointList](t, h, "checkpoints")
	if len(list.Items) != 1 || list.Items[0].SessionID != last.ID || list.Items[0].Summary != "three" {
		t.Errorf("checkpoints = %+v; want the failed session's one", list.Items)
	}
	if out := h.ok(t, "", "checkpoints"); !strings.Contains(out, "Also in this project: session "+first.ID) ||
		!strings.Contains(out, "Session "+last.ID+" has ended (failed): the next save here starts a new session.") {
		t.Errorf("checkpoints printed:\n%s", out)
	}
	if cp := okJSON[belay.Checkpoint](t, h, "show", "1"); cp.Summary != "three" {
		t.Errorf("show 1 = %q, want the listed one", cp.Summary)
	}
	if r := h.run(t, "", "checkpoints", "--tree", "--all"); r.code != cli.ExitUsage || !strings.Contains(r.stderr, "does not combine with --all") {
		t.Errorf("checkpoints --tree --all: exit %d, %s", r.code, r.stderr)
	}
}

// TestListOfAFailedSessionSaysWhereSavesGo: after the newer session failed
// on a rejection, its checkpoints are listed (the numbers mean them), and
// the list says that new checkpoints go to the older session still open.
func TestListOfAFailedSessionSaysWhereSavesGo(t *testing.T) {
	h := newHarness(t)
	older := olderOpenNewerEnded(t, h, "fail", "--reason", "rejected")
	out := h.ok(t, "", "checkpoints")
	if !strings.Contains(out, "newer") || strings.Contains(out, "older") ||
		!strings.Contains(out, "New checkpoints go to session "+older.ID+" (running, 1 checkpoint)") {
		t.Errorf("checkpoints printed:\n%s", out)
	}
	saved := okJSON[belay.Checkpoint](t, h, "save", "-m", "next", "--no-snapshot")
	if saved.SessionID != older.ID {
		t.Errorf("the next save went to %s, want %s", saved.SessionID, older.ID)
	}
	if cp := okJSON[belay.Checkpoint](t, h, "show", "2"); cp.Summary != "next" {
		t.Errorf("show 2 after that save = %q, want the open session's", cp.Summary)
	}
}

// TestEndingWithoutAnIDEndsTheOpenSession: with the newest session ended
// and an older one open, `belay session complete` ends the open one, where
// saves go, not the current one it would refuse.
func TestEndingWithoutAnIDEndsTheOpenSession(t *testing.T) {
	h := newHarness(t)
	older := olderOpenNewerEnded(t, h, "complete")
	if got := okJSON[belay.Session](t, h, "session", "complete"); got.ID != older.ID || got.Status != belay.SessionCompleted {
		t.Errorf("session complete = %s %s, want %s completed", got.ID, got.Status, older.ID)
	}
}

// olderOpenNewerEnded saves "older" in a session, then "newer" in a new one
// it ends with `belay session END...`, and returns the older, still open.
func olderOpenNewerEnded(t *testing.T, h *harness, end ...string) belay.Session {
	t.Helper()
	h.ok(t, "", "save", "-m", "older", "--no-snapshot")
	older := okJSON[belay.Session](t, h, "session-info")
	h.ok(t, "", "session", "new")
	h.ok(t, "", "save", "-m", "newer", "--no-snapshot")
	h.ok(t, "", append([]string{"session"}, end...)...)
	return older
}

// TestAnAgentsSessionFromTheLocalCLI: an agent saving with a token of a
// user of its own (no admin), and a person on the local CLI with no session
// in the project: the person's list and numbers are the agent's session, the
// list says the person's saves start a session of their own, and once they
// do, the person's numbers are their own.
func TestAnAgentsSessionFromTheLocalCLI(t *testing.T) {
	h := newHarness(t)
	db, err := sqlite.Open(t.Context(), filepath.Join(h.env["BELAY_DATA_DIR"], "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	svc := core.New(core.Options{Store: db})
	root := belay.WithActor(t.Context(), belay.Actor{UserID: "root", Admin: true})
	if _, err := svc.CreateToken(root, belay.CreateTokenInput{User: "bot"}); err != nil {
		t.Fatal(err)
	}
	bot := belay.WithActor(t.Context(), belay.Actor{UserID: "bot", Scopes: []belay.Scope{belay.ScopeRead, belay.ScopeWrite}})
	asked, err := svc.CreateCheckpoint(bot, belay.CreateCheckpointInput{ProjectPath: h.project, Summary: "may I?",
		HITL: &belay.HITLInput{Required: true, Title: "Deploy?"}})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	out := h.ok(t, "", "checkpoints")
	if !strings.Contains(out, "may I?") || !strings.Contains(out, "This is session "+asked.SessionID+" of bot. Your next save here starts a session of your own.") {
		t.Errorf("checkpoints printed:\n%s", out)
	}
	if cp := okJSON[belay.Checkpoint](t, h, "show", "1"); cp.ID != asked.ID {
		t.Errorf("show 1 = %s, want the agent's request %s", cp.ID, asked.ID)
	}
	h.ok(t, "", "decide", "1", "--option", "approve")
	mine := okJSON[belay.Checkpoint](t, h, "save", "-m", "mine", "--no-snapshot")
	if mine.SessionID == asked.SessionID {
		t.Fatal("the person's save went to the agent's session")
	}
	if cp := okJSON[belay.Checkpoint](t, h, "show", "1"); cp.ID != mine.ID {
		t.Errorf("show 1 after the person's save = %s, want theirs %s", cp.ID, mine.ID)
	}
}

// TestSessionInfoSaysWhatYouMayDo: session-info reads the session by its id,
// so it carries the caller's access, in JSON and in words.
func TestSessionInfoSaysWhatYouMayDo(t *testing.T) {
	h := newHarness(t)
	h.ok(t, "", "save", "-m", "one", "--no-snapshot")
	sess := okJSON[belay.Session](t, h, "session-info")
	if sess.Access == nil || !sess.Access.Write || !sess.Access.Own {
		t.Errorf("session-info --json access = %+v", sess.Access)
	}
	if out := h.ok(t, "", "session-info"); !strings.Contains(out, "You may:      read, write, decide, export, grant and delete") {
		t.Errorf("session-info printed:\n%s", out)
	}
}
