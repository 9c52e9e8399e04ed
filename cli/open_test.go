package cli_test

import (
	"strings"
	"testing"
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
