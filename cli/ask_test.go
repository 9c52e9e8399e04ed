package cli_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
)

func TestAsk(t *testing.T) {
	c := newHITLCLI(t)
	out := c.ok(t, nil, "ask", "Deploy to prod?", "--option", "yes:approve:Deploy", "--option", "no:reject",
		"--timeout", "10m", "--default", "reject", "--message", "v2.1, 3 migrations", "--no-snapshot")
	if !strings.HasPrefix(out, "Asked as checkpoint #1 ") || !strings.Contains(out, "Decide with: belay decide ") {
		t.Errorf("ask printed %q", out)
	}
	var cp belay.Checkpoint
	if err := json.Unmarshal([]byte(c.ok(t, nil, "show", "1", "--json")), &cp); err != nil {
		t.Fatal(err)
	}
	h := cp.HITL
	want := []belay.HITLOption{{ID: "yes", Label: "Deploy", Action: belay.ActionApprove}, {ID: "no", Label: "no", Action: belay.ActionReject, IsDefault: true}}
	if !cp.HITLRequired || cp.Type != belay.TypeHITL || cp.Summary != "Deploy to prod?" || h.Title != "Deploy to prod?" ||
		h.Message != "v2.1, 3 migrations" || len(h.Options) != 2 || h.Options[0] != want[0] || h.Options[1] != want[1] ||
		h.Timeout == nil || h.Timeout.Duration != 600 || h.Timeout.DefaultAction != belay.ActionReject {
		t.Errorf("asked checkpoint = %+v, request %+v", cp, h)
	}
	if out := c.ok(t, nil, "pending"); !strings.Contains(out, "Deploy to prod?") || !strings.Contains(out, "yes,no") {
		t.Errorf("pending:\n%s", out)
	}
	if out := c.ok(t, nil, "show", "1"); !strings.Contains(out, "Options:      yes  Deploy (approve)\n") || !strings.Contains(out, "              no   (reject, default)\n") {
		t.Errorf("show:\n%s", out)
	}

	// Without options: approve and reject, as the service offers.
	var plain belay.Checkpoint
	if err := json.Unmarshal([]byte(c.ok(t, nil, "ask", "Go on?", "--no-snapshot", "--json")), &plain); err != nil {
		t.Fatal(err)
	}
	if plain.Seq != 2 || len(plain.HITL.Options) != 2 || plain.HITL.Options[0].Action != belay.ActionApprove || plain.HITL.Timeout != nil {
		t.Errorf("ask without options = %+v", plain.HITL)
	}

	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"ask"}, cli.ExitUsage, "accepts 1 arg"},
		{[]string{"ask", " "}, cli.ExitUsage, "a question is required"},
		{[]string{"ask", "Q?", "--option", "yes"}, cli.ExitUsage, "ID:ACTION"},
		{[]string{"ask", "Q?", "--timeout", "10m"}, cli.ExitUsage, "--timeout needs --default"},
		{[]string{"ask", "Q?", "--option", "yes:maybe"}, cli.ExitError, "VALIDATION_ERROR"},
		{[]string{"ask", "Q?", "--option", "y\x1b[1m:approve"}, cli.ExitError, "hitl.options[0].id must not contain control characters"},
		{[]string{"ask", "Q?", "--option", "y:approve:L\x1b[5mabel"}, cli.ExitError, "hitl.options[0].label must not contain control characters"},
		{[]string{"ask", "Q?", "--tag", "x\x1b[2J"}, cli.ExitError, "tags[0] must not contain control characters"},
		{[]string{"ask", "Q?", "--timeout", "10s", "--default", "reject"}, cli.ExitError, "VALIDATION_ERROR"},
		{[]string{"ask", "Q?", "--timeout", "10m", "--default", "skip"}, cli.ExitError, "VALIDATION_ERROR"},
	} {
		r := c.run(t, nil, append(tc.args, "--no-snapshot")...)
		if r.code != tc.code || !strings.Contains(r.stderr.String(), tc.stderr) {
			t.Errorf("belay %s: exit %d, stderr %q; want %d and %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.code, tc.stderr)
		}
	}
}

// TestAskDefaultWithoutOptions: with no --option, --default marks the
// offered option with the default's action, not approve.
func TestAskDefaultWithoutOptions(t *testing.T) {
	c := newHITLCLI(t)
	var cp belay.Checkpoint
	if err := json.Unmarshal([]byte(c.ok(t, nil, "ask", "Deploy?", "--timeout", "1m", "--default", "reject", "--no-snapshot", "--json")), &cp); err != nil {
		t.Fatal(err)
	}
	want := []belay.HITLOption{{ID: "approve", Label: "Approve", Action: belay.ActionApprove}, {ID: "reject", Label: "Reject", Action: belay.ActionReject, IsDefault: true}}
	if !slices.Equal(cp.HITL.Options, want) {
		t.Errorf("options = %+v, want %+v", cp.HITL.Options, want)
	}
	if out := c.ok(t, nil, "show", "1"); !strings.Contains(out, "approve  Approve (approve)\n") || !strings.Contains(out, "reject   Reject (reject, default)\n") {
		t.Errorf("show:\n%s", out)
	}
}

// TestAskWait: ask --wait blocks until the decision and exits as wait does.
func TestAskWait(t *testing.T) {
	c := newHITLCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, done := c.start(ctx, nil, "ask", "Ship it?", "--option", "yes:approve", "--option", "no:reject", "--wait", "--no-snapshot")
	r.stderr.waitFor(t, "waiting for a decision")
	list, err := c.svc.PendingHITL(belay.WithActor(ctx, belay.Actor{UserID: "lead", Admin: true}), "")
	if err != nil || len(list) != 1 {
		t.Fatalf("pending = %+v, %v", list, err)
	}
	if _, err := c.svc.Decide(belay.WithActor(ctx, belay.Actor{UserID: "lead", Admin: true}),
		belay.DecideInput{CheckpointID: list[0].Checkpoint.ID, SelectedOption: "no", Feedback: "not today"}); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.code != cli.ExitRejected || strings.TrimSpace(res.stdout.String()) != "reject (option no) by lead: not today" {
		t.Errorf("ask --wait: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
}

func TestSessionNewAndTitle(t *testing.T) {
	h := newHarness(t)
	h.ok(t, "", "save", "-m", "old work", "--no-snapshot")
	out := h.ok(t, "", "session", "new", "--title", "refactor billing")
	if !strings.HasPrefix(out, "Started session ") || !strings.Contains(out, h.project) {
		t.Errorf("session new printed %q", out)
	}
	if out := h.ok(t, "", "save", "-m", "new work", "--no-snapshot"); !strings.HasPrefix(out, "Saved checkpoint #1 ") {
		t.Errorf("save after session new printed %q", out)
	}
	current := okJSON[belay.Session](t, h, "session-info")
	if current.Title != "refactor billing" || current.CheckpointCount != 1 {
		t.Errorf("current session = %+v", current)
	}
	if out := h.ok(t, "", "sessions"); !strings.Contains(out, "refactor billing") {
		t.Errorf("sessions:\n%s", out)
	}

	if out := h.ok(t, "", "session", "title", "billing, part 2"); !strings.Contains(out, "billing, part 2") {
		t.Errorf("session title printed %q", out)
	}
	list := okJSON[belay.SessionList](t, h, "sessions")
	old := list.Items[1]
	ref := uniquePrefix(old.ID, list.Items[0].ID)
	if got := okJSON[belay.Session](t, h, "session", "title", ref, "the old one"); got.ID != old.ID || got.Title != "the old one" {
		t.Errorf("session title %s = %+v", ref, got)
	}
	if got := okJSON[belay.Session](t, h, "session-info"); got.Title != "billing, part 2" {
		t.Errorf("current session title = %q", got.Title)
	}
	if r := h.run(t, "", "session", "title"); r.code != cli.ExitUsage {
		t.Errorf("session title without a title: exit %d", r.code)
	}
	if r := h.run(t, "", "session", "title", "a", "b", "c"); r.code != cli.ExitUsage {
		t.Errorf("session title with three args: exit %d", r.code)
	}
	if r := h.run(t, "", "session", "new", "--title", strings.Repeat("x", 501)); r.code != cli.ExitError || !strings.Contains(r.stderr, "VALIDATION_ERROR") {
		t.Errorf("session new with a long title: exit %d, stderr %q", r.code, r.stderr)
	}
}
