package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
	"github.com/belayhq/belay/cmd/belay/wire"
)

// terminalRun is belay running on a pseudo-terminal.
type terminalRun struct {
	screen *lockedBuffer
	keys   func(string)
	done   <-chan int
}

// startOnTerminal runs belay with args on a pseudo-terminal in huh's
// accessible mode, as a person with a screen reader would: plain line
// prompts, one answer typed after each.
func (c *hitlCLI) startOnTerminal(t *testing.T, ctx context.Context, args ...string) terminalRun {
	t.Helper()
	tty, screen, keys := openPTYWithInput(t)
	env := map[string]string{"BELAY_ACCESSIBLE": "1", "TERM": "xterm"}
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, append([]string{"--data-dir", c.dir}, args...), cli.Env{Backend: wire.Backend(),
			Stdin: tty, Stdout: tty, Stderr: tty,
			Getenv: func(k string) string { return env[k] },
			Getwd:  func() (string, error) { return c.dir, nil },
		})
	}()
	return terminalRun{screen: screen, keys: keys, done: done}
}

// shown is what the terminal showed so far, without escapes.
func (r terminalRun) shown() string { return hitlANSI.ReplaceAllString(r.screen.String(), "") }

// waitFor polls until the terminal shows s, for at most 10 s.
func (r terminalRun) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(r.shown(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal never showed %q; it shows:\n%s", s, r.shown())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// exit waits for the command's exit code, for at most 20 s.
func (r terminalRun) exit(t *testing.T) int {
	t.Helper()
	select {
	case code := <-r.done:
		return code
	case <-time.After(20 * time.Second):
		t.Fatalf("no exit; the terminal shows:\n%s", r.shown())
	}
	return 0
}

// TestHITLCLIInteractiveDecide drives `belay decide` on a terminal as a
// person with a screen reader would: huh's accessible mode, one answer typed
// after each prompt.
func TestHITLCLIInteractiveDecide(t *testing.T) {
	c := newHITLCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	t.Run("modify with feedback and modifications", func(t *testing.T) {
		cp := c.interactiveRequest(t)
		r := c.startOnTerminal(t, ctx, "decide", cp.ID)
		r.waitFor(t, "Enter a number between 1 and 3")
		screen := r.shown()
		for _, want := range []string{
			"Review Specification",
			"Please review the generated specification before proceeding.",
			"Context:", `"specPath": "docs/specs/SPEC-001.md"`, `"estimatedCost": 5.5`,
			"If nobody decides by", ": approve.",
			"Select option",
			"1. [ok] Ship it (default) - merge as is",
			"2. [change] Change - adjust the plan",
			"3. [no] Stop",
		} {
			if !strings.Contains(screen, want) {
				t.Errorf("screen lacks %q:\n%s", want, screen)
			}
		}
		if strings.Count(screen, "(default)") != 1 {
			t.Errorf("(default) marks %d options, want 1", strings.Count(screen, "(default)"))
		}
		r.keys("2\n")
		r.waitFor(t, "Feedback (optional)")
		r.keys("smaller steps, please\n")
		r.waitFor(t, "Modifications as a JSON object")
		r.keys(`{"steps": 3}` + "\n")
		if code := r.exit(t); code != 0 {
			t.Fatalf("exit %d\n%s", code, r.shown())
		}
		r.waitFor(t, fmt.Sprintf("Decided change (modify). Session %s is running.", cp.SessionID))
		d := c.decision(t, cp.ID)
		if d == nil || d.Action != belay.ActionModify || d.SelectedOption != "change" || d.Feedback != "smaller steps, please" ||
			string(d.Modifications) != `{"steps":3}` {
			t.Errorf("decision = %+v", d)
		}
	})

	t.Run("enter takes the default", func(t *testing.T) {
		cp := c.interactiveRequest(t)
		r := c.startOnTerminal(t, ctx, "decide", cp.ID)
		r.waitFor(t, "Enter a number between 1 and 3")
		r.keys("\n")
		r.waitFor(t, "Feedback (optional)")
		r.keys("\n")
		if code := r.exit(t); code != 0 {
			t.Fatalf("exit %d\n%s", code, r.shown())
		}
		if d := c.decision(t, cp.ID); d == nil || d.Action != belay.ActionApprove || d.SelectedOption != "ok" || d.Feedback != "" {
			t.Errorf("decision = %+v", d)
		}
	})

	t.Run("the expiry before a pause timeout", func(t *testing.T) {
		sess, err := c.svc.CreateSession(hitlAgent, belay.CreateSessionInput{Title: "expiring"})
		if err != nil {
			t.Fatal(err)
		}
		exp := time.Now().Add(time.Hour)
		cp, err := c.svc.CreateCheckpoint(hitlAgent, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "plan ready", ExpiresAt: &exp,
			HITL: &belay.HITLInput{Required: true, Title: "Expires first", Options: hitlCLIOptions[:3],
				Timeout: &belay.TimeoutInput{Duration: 7200, DefaultAction: belay.ActionPause}}})
		if err != nil {
			t.Fatal(err)
		}
		r := c.startOnTerminal(t, ctx, "decide", cp.ID)
		r.waitFor(t, "Enter a number between 1 and 3")
		screen := r.shown()
		for _, want := range []string{", when the checkpoint expires: reject.", "3. [no] Stop (default)"} {
			if !strings.Contains(screen, want) {
				t.Errorf("screen lacks %q:\n%s", want, screen)
			}
		}
		if strings.Count(screen, "(default)") != 1 {
			t.Errorf("(default) marks %d options, want 1", strings.Count(screen, "(default)"))
		}
		r.keys("\n")
		r.waitFor(t, "Feedback (optional)")
		r.keys("\n")
		if code := r.exit(t); code != 0 {
			t.Fatalf("exit %d\n%s", code, r.shown())
		}
		if d := c.decision(t, cp.ID); d == nil || d.SelectedOption != "no" {
			t.Errorf("decision = %+v, want the preselected no", d)
		}
	})

	t.Run("a pause timeout keeps the request's default", func(t *testing.T) {
		sess, err := c.svc.CreateSession(hitlAgent, belay.CreateSessionInput{Title: "pausing"})
		if err != nil {
			t.Fatal(err)
		}
		cp, err := c.svc.CreateCheckpoint(hitlAgent, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "plan ready",
			HITL: &belay.HITLInput{Required: true, Title: "Pauses", Options: hitlCLIOptions[:3],
				Timeout: &belay.TimeoutInput{Duration: 3600, DefaultAction: belay.ActionPause}}})
		if err != nil {
			t.Fatal(err)
		}
		r := c.startOnTerminal(t, ctx, "decide", cp.ID)
		r.waitFor(t, "Enter a number between 1 and 3")
		if screen := r.shown(); !strings.Contains(screen, ": pause.") || strings.Count(screen, "(default)") != 1 ||
			!strings.Contains(screen, "[ok] Ship it (default)") {
			t.Errorf("a pause deadline: want the request's own default marked:\n%s", screen)
		}
		r.keys("\n")
		r.waitFor(t, "Feedback (optional)")
		r.keys("\n")
		if code := r.exit(t); code != 0 {
			t.Fatalf("exit %d\n%s", code, r.shown())
		}
		if d := c.decision(t, cp.ID); d == nil || d.SelectedOption != "ok" {
			t.Errorf("decision = %+v, want the request's default, ok", d)
		}
	})

	t.Run("choose among pending requests", func(t *testing.T) {
		a := c.request(t, "", belay.HITLInput{Title: "First question"})
		b := c.request(t, "", belay.HITLInput{Title: "Second question"})
		r := c.startOnTerminal(t, ctx, "decide")
		r.waitFor(t, "Which request?")
		r.waitFor(t, "Enter a number between 1 and 2")
		// Each request shows an id prefix the other's id does not begin with.
		s := r.shown()
		shownID := func(title string) string {
			_, rest, _ := strings.Cut(s, title+"  (")
			id, _, _ := strings.Cut(rest, ",")
			return id
		}
		if pa, pb := shownID("First question"), shownID("Second question"); !strings.HasPrefix(a.ID, pa) || !strings.HasPrefix(b.ID, pb) ||
			len(pa) < belay.MinIDPrefix || strings.HasPrefix(b.ID, pa) || strings.HasPrefix(a.ID, pb) {
			t.Errorf("request choice shows ids %q and %q for %s and %s:\n%s", pa, pb, a.ID, b.ID, s)
		}
		r.keys("2\n")
		r.waitFor(t, "Enter a number between 1 and 6")
		r.keys("5\n")
		r.waitFor(t, "Feedback (optional)")
		r.keys("later\n")
		if code := r.exit(t); code != 0 {
			t.Fatalf("exit %d\n%s", code, r.shown())
		}
		if d := c.decision(t, b.ID); d == nil || d.Action != belay.ActionSkip || d.Feedback != "later" {
			t.Errorf("decision of the chosen request = %+v", d)
		}
		if d := c.decision(t, a.ID); d != nil {
			t.Errorf("the other request was decided: %+v", d)
		}
	})

	// Answers typed ahead (or pasted) arrive before the prompts that read
	// them: every prompt must still get its own line.
	t.Run("answers typed at once", func(t *testing.T) {
		cp := c.interactiveRequest(t)
		r := c.startOnTerminal(t, ctx, "decide", cp.ID)
		r.keys("2\nsmaller steps, please\n{\"steps\": 3}\n")
		if code := r.exit(t); code != 0 {
			t.Fatalf("exit %d\n%s", code, r.shown())
		}
		d := c.decision(t, cp.ID)
		if d == nil || d.Action != belay.ActionModify || d.Feedback != "smaller steps, please" || string(d.Modifications) != `{"steps":3}` {
			t.Errorf("decision = %+v; the answers after the first line were lost", d)
		}
	})
}

// TestInterruptDecideSaysSo: Ctrl-C (the command's context ending) while
// decide asks on a terminal ends it with exit code 130 and one line saying
// it was interrupted.
func TestInterruptDecideSaysSo(t *testing.T) {
	c := newHITLCLI(t)
	cp := c.request(t, "", belay.HITLInput{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := c.startOnTerminal(t, ctx, "decide", cp.ID)
	r.waitFor(t, "Enter a number between 1 and 6")
	before := r.shown()
	cancel()
	if code := r.exit(t); code != cli.ExitInterrupted {
		t.Errorf("decide interrupted: exit %d; want 130", code)
	}
	time.Sleep(50 * time.Millisecond)
	if after := strings.TrimPrefix(r.shown(), before); strings.Count(after, "belay:") != 1 || !strings.Contains(after, "belay: interrupted") {
		t.Errorf("decide interrupted printed %q; want one line: belay: interrupted", after)
	}
}

// TestNoPromptWhenOutputIsNotATerminal: typing on a terminal while the
// output goes to a file or a pipe, decide refuses to ask rather than write
// its questions where nobody sees them.
func TestNoPromptWhenOutputIsNotATerminal(t *testing.T) {
	c := newHITLCLI(t)
	cp := c.request(t, "", belay.HITLInput{})
	tty, _, _ := openPTYWithInput(t)
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code := cli.Run(ctx, []string{"--data-dir", c.dir, "decide", cp.ID}, cli.Env{Backend: wire.Backend(),
		Stdin: tty, Stdout: &out, Stderr: &errOut,
		Getenv: func(string) string { return "" },
		Getwd:  func() (string, error) { return c.dir, nil },
	})
	if code != cli.ExitUsage || !strings.Contains(errOut.String(), "--option") || out.Len() != 0 {
		t.Errorf("decide with output to a buffer: exit %d, stdout %.200q, stderr %q; want %d naming --option", code, out.String(), errOut.String(), cli.ExitUsage)
	}
	if d := c.decision(t, cp.ID); d != nil {
		t.Errorf("decided: %+v", d)
	}
}

// TestCtrlCInAFullScreenPromptSaysSo: Ctrl-C typed into decide's
// full-screen prompt, which reads it as a key rather than a signal, ends the
// command as an interrupt does: exit code 130 and one line saying so.
func TestCtrlCInAFullScreenPromptSaysSo(t *testing.T) {
	c := newHITLCLI(t)
	cp := c.request(t, "", belay.HITLInput{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tty, screen, keys := openPTYWithInput(t)
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, []string{"--data-dir", c.dir, "decide", cp.ID}, cli.Env{Backend: wire.Backend(),
			Stdin: tty, Stdout: tty, Stderr: tty,
			Getenv: func(k string) string { return map[string]string{"TERM": "xterm"}[k] },
			Getwd:  func() (string, error) { return c.dir, nil },
		})
	}()
	r := terminalRun{screen: screen, keys: keys, done: done}
	r.waitFor(t, "Select option")
	r.keys("\x03")
	if code := r.exit(t); code != cli.ExitInterrupted {
		t.Errorf("decide after Ctrl-C: exit %d; want 130", code)
	}
	r.waitFor(t, "belay: interrupted")
}
