package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// After sign-in the dashboard goes to the page the person asked for, and
// never to another site: browsers drop tabs and newlines from a URL and read
// a backslash as a slash, so "/\t/evil.com" lands on //evil.com.
func TestSignInRedirectStaysOnSite(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		next, want string
	}{
		{"/sessions/abc?x=1", "/sessions/abc?x=1"},
		{"/inbox", "/inbox"},
		{"/search?q=a%2Fb", "/search?q=a%2Fb"},
		{"", "/"},
		{"/\t/evil.com", "/"},
		{"/\n/evil.com", "/"},
		{"/\r/evil.com", "/"},
		{"\t//evil.com", "/"},
		{"/\t\\evil.com", "/"},
		{"/ /evil.com", "/"},
		{"/\x00/evil.com", "/"},
		{"/\u00a0/evil.com", "/"},
		{"/\\evil.com", "/"},
		{"/sessions\\..\\..\\evil", "/"},
		{"//evil.com", "/"},
		{"//evil.com/path", "/"},
		{"///evil.com", "/"},
		{"https://evil.com", "/"},
		{"javascript:alert(1)", "/"},
		{"evil.com", "/"},
	} {
		// The transport, not a client, so that a hostile Location comes back
		// as sent instead of failing to parse.
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/signin",
			strings.NewReader(url.Values{"token": {e.token}, "next": {tc.next}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		res, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != tc.want {
			t.Errorf("next %q: %s to %q, want %q", tc.next, res.Status, res.Header.Get("Location"), tc.want)
		}
	}
}
