package cli_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The demo pauses for each decision made with 'belay decide' in another
// process's place: refine, restart, then approve, and completes its session.
func TestDemoThroughTheCLI(t *testing.T) {
	c := newHITLCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	demo, done := c.start(ctx, nil, "demo", "--topic", "agents")
	decideRe := regexp.MustCompile(`belay decide (\S+) --option approved`)
	for round, answer := range [][]string{{"refine", "--feedback", "open source only"}, {"restart"}, {"approved"}} {
		demo.stdout.waitFor(t, "Round "+strconv.Itoa(round+1)+":")
		// The round's decide hints follow its heading: wait for them too.
		ids := demo.stdout.waitForMatches(t, decideRe, round+1)
		if len(ids) != round+1 {
			t.Fatalf("round %d: %d decide hints in\n%s", round+1, len(ids), demo.stdout)
		}
		c.ok(t, nil, append([]string{"decide", ids[round][1], "--option"}, answer...)...)
	}
	r := <-done
	if r.code != 0 {
		t.Fatalf("demo: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	demo.stdout.waitFor(t, "completed after")
	demo.stdout.waitFor(t, "Build something for agents adoption")
	if out := c.ok(t, nil, "sessions"); !strings.Contains(out, "completed") {
		t.Fatalf("sessions after the demo:\n%s\nwant its session completed", out)
	}
}

// TestDemoContinuesItsInterruptedRun: a demo stopped (Ctrl-C) while it
// waited for a decision is continued by the next 'belay demo' of the same
// topic, whether the request is still open (the hints are shown again) or
// was decided meanwhile; no second session is started.
func TestDemoContinuesItsInterruptedRun(t *testing.T) {
	c := newHITLCLI(t)
	decideRe := regexp.MustCompile(`belay decide (\S+) --option approved`)
	interrupted := func(what, topic string) (string, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		demo, done := c.start(ctx, nil, "demo", "--topic", topic)
		demo.stdout.waitFor(t, "Round 1:")
		id := demo.stdout.waitForMatches(t, decideRe, 1)[0][1]
		cancel()
		if r := <-done; r.code != 130 {
			t.Fatalf("%s: exit %d after Ctrl-C\nstdout: %s\nstderr: %s", what, r.code, r.stdout, r.stderr)
		}
		return id, demo.stdout.String()
	}
	first, _ := interrupted("the first demo", "agents")
	// A demo of another topic begins a session of its own in between.
	if other, _ := interrupted("a demo of another topic", "robots"); other == first {
		t.Fatal("a demo of another topic continued the first one's run")
	}
	again, out := interrupted("the demo run again before a decision", "agents")
	if again != first || !strings.Contains(out, "Continuing session") {
		t.Fatalf("the demo run again asks for %s, want the first run's %s continued:\n%s", again, first, out)
	}
	c.ok(t, nil, "decide", first, "--option", "approved")
	out = c.ok(t, nil, "demo", "--topic", "agents")
	if !strings.Contains(out, "Continuing session") || !strings.Contains(out, "completed after") {
		t.Fatalf("the demo after the decision:\n%s\nwant the waiting run continued and completed", out)
	}
	var sessions struct {
		Items []struct{ Status string } `json:"items"`
	}
	if err := json.Unmarshal([]byte(c.ok(t, nil, "--json", "sessions")), &sessions); err != nil {
		t.Fatal(err)
	}
	var completed int
	for _, sess := range sessions.Items {
		if sess.Status == "completed" {
			completed++
		}
	}
	if len(sessions.Items) != 2 || completed != 1 {
		t.Errorf("sessions after the demo: %+v, want its one session completed beside the other topic's", sessions.Items)
	}
}
