package cli_test

import (
	"strings"
	"testing"

	"github.com/belayhq/belay/cli"
)

// TestUnreachableServer: with BELAY_URL pointing nowhere, the error says
// which server could not be reached and why.
func TestUnreachableServer(t *testing.T) {
	h := newHarness(t)
	h.env["BELAY_URL"] = "http://127.0.0.1:1"
	r := h.run(t, "", "sessions")
	if r.code != cli.ExitError || !strings.Contains(r.stderr, "cannot reach the belay server at http://127.0.0.1:1") {
		t.Errorf("exit %d, stderr %q; want exit 1 naming the unreachable server", r.code, r.stderr)
	}
}
