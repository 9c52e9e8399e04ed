package belay

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
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
// become one space, other control characters are escaped as Printable does,
// then Clip.
func OneLine(s string, n int) string {
	return Clip(Printable(strings.Join(strings.Fields(s), " ")), n)
}

// Printable makes stored text safe to print to a terminal: every control
// character but newline and tab (ESC, CR, BEL, DEL, the C1 controls), the
// bidirectional and line-breaking format characters (U+202E and the like,
// which reorder what follows on screen) and every byte that is not UTF-8
// becomes a visible escape such as \x1b or \u202e, so the text cannot move
// the cursor, retitle the window, write the clipboard or show itself in
// another order than it holds.
func Printable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, escaped) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case escaped(r) && r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case escaped(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// escaped reports whether Printable escapes r: control characters a terminal
// acts on (all of them but newline and tab; all lie below U+0100), and the
// format characters that reorder text (Unicode's Bidi_Control) or break it.
func escaped(r rune) bool {
	return unicode.IsControl(r) && r != '\n' && r != '\t' || unicode.Is(unicode.Bidi_Control, r) ||
		r == '\u2028' || r == '\u2029'
}
