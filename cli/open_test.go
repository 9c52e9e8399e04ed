package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
)

func TestOpenPrintsTheDashboardURL(t *testing.T) {
	h := newHarness(t)
	if got := strings.TrimSpace(h.ok(t, "", "open", "--print")); got != "http://127.0.0.1:7420/" {
		t.Fatalf("default dashboard URL %q", got)
	}
	h.env["BELAY_URL"] = "https://user:pw@belay.example.com:8443/base?x=1"
	if got := strings.TrimSpace(h.ok(t, "", "open", "--print")); got != "https://belay.example.com:8443/base/" {
		t.Fatalf("dashboard URL from BELAY_URL %q", got)
	}
	h.env["BELAY_URL"] = "ftp://x"
	if r := h.run(t, "", "open", "--print"); r.code == 0 {
		t.Fatalf("a bad BELAY_URL was accepted: %+v", r)
	}
}

func TestOpenPrintsJSON(t *testing.T) {
	h := newHarness(t)
	got := okJSON[struct {
		URL    string `json:"url"`
		Opened bool   `json:"opened"`
	}](t, h, "open", "--print")
	if got.URL != "http://127.0.0.1:7420/" || got.Opened {
		t.Errorf("open --print --json = %+v", got)
	}
}

// An unknown command is found before any flag is parsed; --json still holds.
func TestUnknownCommandErrorInJSON(t *testing.T) {
	h := newHarness(t)
	r := h.run(t, "", "frobnicate", "--json")
	var e struct {
		Error belay.Error `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stderr), &e); err != nil || r.code != cli.ExitUsage || e.Error.Code != belay.CodeValidation ||
		!strings.Contains(e.Error.Message, `unknown command "frobnicate"`) {
		t.Errorf("belay frobnicate --json: exit %d, stderr %q (%v)", r.code, r.stderr, err)
	}
}
