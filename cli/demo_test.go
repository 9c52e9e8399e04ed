package cli_test

import (
	"context"
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
