package belay_test

import (
	"testing"

	"github.com/belayhq/belay"
)

// TestPrintable: stored text printed to a terminal shows its control
// characters (C0, DEL, C1, bytes that are no UTF-8) as visible escapes and
// keeps newlines, tabs and other text as they are.
func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain déjà vu ✓":                  "plain déjà vu ✓",
		"two\nlines\tand a tab":            "two\nlines\tand a tab",
		"esc \x1b[31mRED\x1b[0m":           `esc \x1b[31mRED\x1b[0m`,
		"title \x1b]0;TITLE\a":             `title \x1b]0;TITLE\x07`,
		"clip \x1b]52;c;ZXZpbA==\x1b\\ ok": `clip \x1b]52;c;ZXZpbA==\x1b\ ok`,
		"over\rwrite":                      `over\x0dwrite`,
		"del\x7f c1 \u009b2J nel \u0085":   `del\x7f c1 \x9b2J nel \x85`,
		"raw byte \x9b2J":                  `raw byte \x9b2J`,
		"bidi \u202egnp.exe\u202c ok":      `bidi \u202egnp.exe\u202c ok`,
		"isolate \u2066x\u2069 line\u2028": `isolate \u2066x\u2069 line\u2028`,
		"":                                 "",
	} {
		if got := belay.Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOneLine: white space runs become one space; other control characters
// are escaped as Printable does, within the width.
func TestOneLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"a\n\n b\tc\r\nd", 40, "a b c d"},
		{"esc \x1b[2J", 40, `esc \x1b[2J`},
		{"abcdef", 4, "abc…"},
	} {
		if got := belay.OneLine(tc.in, tc.n); got != tc.want {
			t.Errorf("OneLine(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
