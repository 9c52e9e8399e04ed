package belay

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// readmeCodes matches README's error codes with their status: "A / B (404".
var readmeCodes = regexp.MustCompile(`((?:[A-Z][A-Z_]+[A-Z]\s*/\s*)*[A-Z][A-Z_]+[A-Z])\s*\((\d{3})`)

// TestREADMEListsEveryErrorCode keeps README's list of error codes and their
// statuses the same as the table the server answers with.
func TestREADMEListsEveryErrorCode(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "## HTTP API")
	if start < 0 {
		t.Fatal("README.md has no HTTP API section")
	}
	listed := map[Code]int{}
	for _, m := range readmeCodes.FindAllStringSubmatch(text[start:], -1) {
		status, _ := strconv.Atoi(m[2])
		for code := range strings.SplitSeq(m[1], "/") {
			listed[Code(strings.TrimSpace(code))] = status
		}
	}
	for code, status := range statusByCode {
		if got, ok := listed[code]; !ok {
			t.Errorf("README does not list %s (%d)", code, status)
		} else if got != status {
			t.Errorf("README lists %s as %d, the server answers %d", code, got, status)
		}
	}
	for code := range listed {
		if _, ok := statusByCode[code]; !ok {
			t.Errorf("README lists %s, which the server never answers", code)
		}
	}
}
