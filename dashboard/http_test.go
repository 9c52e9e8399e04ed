package dashboard_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
)

func TestSignInRefusesABadToken(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	res, err := c.PostForm(e.srv.URL+"/signin", url.Values{"token": {"belay_nope"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "not valid") {
		t.Fatalf("bad token: %s\n%s", res.Status, b)
	}
	if len(res.Cookies()) != 0 {
		t.Fatalf("a cookie was set for a bad token: %v", res.Cookies())
	}
}

func TestSessionCookieIsHttpOnlyAndStrict(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	res, err := c.PostForm(e.srv.URL+"/signin", url.Values{"token": {e.token}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var found bool
	for _, ck := range res.Cookies() {
		if ck.Name == "belay_dashboard" {
			found = true
			if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Value == e.token || len(ck.Value) < 40 {
				t.Fatalf("session cookie %+v", ck)
			}
		}
	}
	if !found {
		t.Fatal("no session cookie")
	}
	// Behind a TLS-terminating proxy the cookie is HTTPS-only; over plain
	// HTTP it cannot be.
	for _, proto := range []string{"", "https"} {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/signin", strings.NewReader(url.Values{"token": {e.token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if proto != "" {
			req.Header.Set("X-Forwarded-Proto", proto)
		}
		res, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		for _, ck := range res.Cookies() {
			if ck.Name == "belay_dashboard" && ck.Secure != (proto == "https") {
				t.Errorf("X-Forwarded-Proto %q: cookie Secure = %v", proto, ck.Secure)
			}
		}
	}
}

// A POST without the session's CSRF token, or from another origin, is
// refused and decides nothing.
func TestForgedPostIsRefused(t *testing.T) {
	e := newEnv(t)
	cp := e.ask(t, "deploy", "Deploy?", "", "", 0)
	c := e.client(t)
	csrf := e.signIn(t, c)

	post := func(form url.Values, origin string) int {
		req, _ := http.NewRequest("POST", e.srv.URL+"/decide/"+cp.ID, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := post(url.Values{"option": {"ship"}}, ""); got != http.StatusForbidden {
		t.Fatalf("POST without a CSRF token: %d, want 403", got)
	}
	if got := post(url.Values{"option": {"ship"}, "csrf": {"wrong"}}, ""); got != http.StatusForbidden {
		t.Fatalf("POST with a wrong CSRF token: %d, want 403", got)
	}
	if got := post(url.Values{"option": {"ship"}, "csrf": {csrf}}, "https://evil.example"); got != http.StatusForbidden {
		t.Fatalf("cross-origin POST with the right token: %d, want 403", got)
	}
	got, err := e.svc.GetCheckpoint(agent(), cp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Decision != nil {
		t.Fatalf("a refused POST decided: %+v", got.Decision)
	}
	if code := post(url.Values{"option": {"ship"}, "csrf": {csrf}}, e.srv.URL); code != http.StatusSeeOther {
		t.Fatalf("same-origin POST with the token: %d, want 303", code)
	}
	got, _ = e.svc.GetCheckpoint(agent(), cp.ID)
	if got.Decision == nil || got.Decision.SelectedOption != "ship" || got.Decision.UserID != "admin" {
		t.Fatalf("decision %+v", got.Decision)
	}
}

func wantSignin(t *testing.T, c *http.Client, u string) {
	t.Helper()
	res, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/signin") {
		t.Fatalf("GET %s: %s to %q, want a redirect to sign-in", u, res.Status, res.Header.Get("Location"))
	}
}

func TestExpiredUnknownAndSignedOutSessionsGoToSignin(t *testing.T) {
	e := newEnv(t)
	// No cookie.
	wantSignin(t, e.client(t), e.srv.URL+"/sessions")
	// An unknown cookie.
	c := e.client(t)
	u, _ := url.Parse(e.srv.URL)
	c.Jar.SetCookies(u, []*http.Cookie{{Name: "belay_dashboard", Value: "made-up"}})
	wantSignin(t, c, e.srv.URL+"/")
	// An expired session.
	c = e.client(t)
	e.signIn(t, c)
	e.clock.advance(2 * time.Hour)
	wantSignin(t, c, e.srv.URL+"/")
	e.clock.advance(-2 * time.Hour)
	// Signing out revokes the session on the server: the old cookie is dead.
	c = e.client(t)
	csrf := e.signIn(t, c)
	old := c.Jar.Cookies(u)
	res, err := c.PostForm(e.srv.URL+"/signout", url.Values{"csrf": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %s", res.Status)
	}
	c2 := e.client(t)
	c2.Jar.SetCookies(u, old)
	wantSignin(t, c2, e.srv.URL+"/")
}

// A revoked API token ends the dashboard sessions signed in with it.
func TestRevokedTokenEndsTheSession(t *testing.T) {
	e := newEnv(t)
	tk, err := e.svc.CreateToken(agent(), belayToken("bob"))
	if err != nil {
		t.Fatal(err)
	}
	e.token = tk.Secret
	c := e.client(t)
	e.signIn(t, c)
	if err := e.svc.RevokeToken(agent(), tk.ID); err != nil {
		t.Fatal(err)
	}
	wantSignin(t, c, e.srv.URL+"/")
}

func TestPagesEscapeUserData(t *testing.T) {
	e := newEnv(t)
	const payload = `<script>alert(1)</script><img src=x onerror=alert(2)>`
	e.ask(t, payload, payload, payload, `{"`+`k<b>":"`+`<i>v</i>"}`, 0)
	c := e.client(t)
	e.signIn(t, c)
	for _, p := range []string{"/", "/inbox", "/sessions"} {
		res, err := c.Get(e.srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if strings.Contains(string(b), "<script>alert") || strings.Contains(string(b), "<img src=x") || strings.Contains(string(b), "<i>v</i>") {
			t.Fatalf("%s has unescaped user data:\n%s", p, b)
		}
		if !strings.Contains(string(b), "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Fatalf("%s lacks the escaped payload:\n%s", p, b)
		}
	}
}

func belayToken(user string) belay.CreateTokenInput {
	return belay.CreateTokenInput{User: user, Name: "dashboard test"}
}

// Posting the same choice twice (a double click) is not a conflict; another
// choice afterwards is refused and says who decided what.
func TestDoubleSubmitIsNotAConflict(t *testing.T) {
	e := newEnv(t)
	cp := e.ask(t, "twice", "Twice?", "", "", 0)
	c := e.client(t)
	csrf := e.signIn(t, c)
	post := func(option string) (int, string) {
		req, _ := http.NewRequest("POST", e.srv.URL+"/decide/"+cp.ID, strings.NewReader(url.Values{"option": {option}, "csrf": {csrf}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("HX-Request", "true")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for range 2 {
		if code, body := post("ship"); code != 200 || body != "" {
			t.Fatalf("decide: %d %q", code, body)
		}
	}
	if code, body := post("stop"); code != 200 || !strings.Contains(body, "Already decided: approve (ship) by admin") {
		t.Fatalf("another choice: %d %q", code, body)
	}
}

// A token without the decide scope cannot decide through the dashboard: the
// service refuses and the card says why.
func TestReadOnlyTokenCannotDecide(t *testing.T) {
	e := newEnv(t)
	cp := e.ask(t, "ro", "Read only?", "", "", 0)
	tk, err := e.svc.CreateToken(agent(), belay.CreateTokenInput{User: "admin", Name: "read only", Scopes: []belay.Scope{belay.ScopeRead}})
	if err != nil {
		t.Fatal(err)
	}
	e.token = tk.Secret
	c := e.client(t)
	csrf := e.signIn(t, c)
	req, _ := http.NewRequest("POST", e.srv.URL+"/decide/"+cp.ID, strings.NewReader(url.Values{"option": {"ship"}, "csrf": {csrf}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("HX-Request", "true")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.Header.Get("HX-Retarget") != "#err-"+cp.ID || len(b) == 0 {
		t.Fatalf("refusal: %s %v %q", res.Status, res.Header, b)
	}
	got, _ := e.svc.GetCheckpoint(agent(), cp.ID)
	if got.Decision != nil {
		t.Fatalf("a read-only token decided: %+v", got.Decision)
	}
	t.Logf("shown: %s", b)
}

// TestAnErrorPageAnswersTheAPIsStatus: a refusal the dashboard shows as a
// page carries the status the API gives its code: a decision after the
// request's checkpoint expired is 410 Gone, not a conflict.
func TestAnErrorPageAnswersTheAPIsStatus(t *testing.T) {
	e := newEnv(t)
	s, err := e.svc.CreateSession(agent(), belay.CreateSessionInput{Title: "brief", ProjectPath: e.project})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Second)
	cp, err := e.svc.CreateCheckpoint(agent(), belay.CreateCheckpointInput{SessionID: s.ID, Summary: "brief", ExpiresAt: &exp,
		HITL: &belay.HITLInput{Required: true, Title: "Soon gone", OnReject: belay.OnRejectContinue}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(exp) + 50*time.Millisecond)
	c := e.client(t)
	csrf := e.signIn(t, c)
	res, err := c.PostForm(e.srv.URL+"/decide/"+cp.ID, url.Values{"option": {"approve"}, "csrf": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusGone || !strings.Contains(string(b), "expired") {
		t.Fatalf("a decision after the expiry: %s\n%.300s", res.Status, b)
	}
}

// TestSigningOutEndsTheStreams: an event stream opened before its sign-in
// was signed out (from this browser or another) ends at its next delivery.
func TestSigningOutEndsTheStreams(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	csrf := e.signIn(t, c)
	res, err := c.Get(e.srv.URL + "/events?feed=1")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("open the stream: %s", res.Status)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, res.Body)
		ended <- err
	}()
	out, err := c.PostForm(e.srv.URL+"/signout", url.Values{"csrf": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	out.Body.Close()
	select {
	case err := <-ended:
		if err != nil {
			t.Errorf("the stream ended with %v, want its end", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream of a signed-out sign-in goes on")
	}
}
