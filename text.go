package belay

import (
	"strings"
	"unicode"
)

// Clip shortens s to at most n runes for a message or a column, ending a cut
// string with "…" (within the n).
func Clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n || n < 1 {
		return s
	}
	return string(r[:n-1]) + "…"
}

// OneLine makes s fit on one line of at most n runes: runs of white space
// and control characters become one space, then Clip.
func OneLine(s string, n int) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	return Clip(s, n)
}
