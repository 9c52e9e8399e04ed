package dashboard_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/belayhq/belay"
)

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	res, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestSearchFindsCheckpoints(t *testing.T) {
	e := newEnv(t)
	s, err := e.svc.CreateSession(agent(), belay.CreateSessionInput{Title: "search", ProjectPath: e.project})
	if err != nil {
		t.Fatal(err)
	}
	for _, sum := range []string{"migrated the billing tables to PostgreSQL", "wrote the <README> intro"} {
		if _, err := e.svc.CreateCheckpoint(agent(), belay.CreateCheckpointInput{SessionID: s.ID, Summary: sum}); err != nil {
			t.Fatal(err)
		}
	}
	c := e.client(t)
	e.signIn(t, c)
	code, body := get(t, c, e.srv.URL+"/search?q=billing+postgres")
	if code != 200 || !strings.Contains(body, "migrated the billing tables to PostgreSQL") {
		t.Fatalf("search: %d\n%s", code, body)
	}
	code, body = get(t, c, e.srv.URL+"/search?q=README")
	if code != 200 || !strings.Contains(body, "&lt;README&gt;") || strings.Contains(body, "<README>") {
		t.Fatalf("search for README: %d\n%s", code, body)
	}
}

// A session can be read only by those the token allows: another user's
// session is not found, and their requests are not in the inbox.
func TestDashboardActsAsTheSignedInUser(t *testing.T) {
	e := newEnv(t)
	cp := e.ask(t, "admin's session", "Admin's question?", "", "", 0)
	tk, err := e.svc.CreateToken(agent(), belayToken("carol"))
	if err != nil {
		t.Fatal(err)
	}
	e.token = tk.Secret
	c := e.client(t)
	e.signIn(t, c)
	if _, body := get(t, c, e.srv.URL+"/"); strings.Contains(body, "Admin&#39;s question?") || !strings.Contains(body, "Nothing waits") {
		t.Fatalf("carol sees the admin's request:\n%s", body)
	}
	if code, _ := get(t, c, e.srv.URL+"/sessions/"+cp.SessionID); code != http.StatusNotFound && code != http.StatusForbidden {
		t.Fatalf("carol reads the admin's session: %d", code)
	}
}

// A 7 MB agent state (near the 8 MB limit) is shown clipped; a diff of 5,000 files shows its
// first files with a note.
func TestHugeStateAndDiffAreCapped(t *testing.T) {
	e := newEnv(t)
	s, err := e.svc.CreateSession(agent(), belay.CreateSessionInput{Title: "big", ProjectPath: e.project})
	if err != nil {
		t.Fatal(err)
	}
	big := `{"blob":"` + strings.Repeat("x", 7<<20) + `"}`
	one := e.snapshot(t, s.ID, "empty", map[string]string{"keep.txt": "k\n"}, big)
	files := map[string]string{}
	for i := range 5000 {
		files[fmt.Sprintf("f%04d.txt", i)] = fmt.Sprintf("line %d\n", i)
	}
	two := e.snapshot(t, s.ID, "5000 files", files, `{}`)
	c := e.client(t)
	e.signIn(t, c)
	start := time.Now()
	code, body := get(t, c, e.srv.URL+"/sessions/"+s.ID)
	if code != 200 || len(body) > 1<<20 || !strings.Contains(body, "first 256 KB") {
		t.Fatalf("session page: %d, %d bytes", code, len(body))
	}
	code, body = get(t, c, e.srv.URL+"/sessions/"+s.ID+"/diff?from="+one.ID+"&to="+two.ID)
	if code != 200 || !strings.Contains(body, "Showing the first 200 of 5000 files") || strings.Contains(body, "f4999.txt") {
		t.Fatalf("diff page: %d\n%.2000s", code, body)
	}
	t.Logf("pages served in %v", time.Since(start))
}

// Keyboard only: Tab to an option and press Enter to decide.
func TestBrowserKeyboardDecide(t *testing.T) {
	e := newEnv(t)
	cp := e.ask(t, "keys", "Decide by keyboard?", "", "", 0)
	ctx := browser(t)
	e.signInBrowser(t, ctx)
	card := `#card-` + cp.ID
	if err := chromedp.Do(ctx, chromedp.WaitVisible(card), chromedp.Focus(`#fb-`+cp.ID)); err != nil {
		t.Fatal(err)
	}
	// From the feedback box, Tab reaches the first option (the default).
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.Tab)); err != nil {
		t.Fatal(err)
	}
	focused, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.value`))
	if focused != "ship" {
		t.Fatalf("Tab focused %q, want the first option", focused)
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.Enter), chromedp.WaitNotPresent(card)); err != nil {
		t.Fatal(err)
	}
	got, _ := e.svc.GetCheckpoint(agent(), cp.ID)
	if got.Decision == nil || got.Decision.SelectedOption != "ship" {
		t.Fatalf("decision %+v", got.Decision)
	}
}

// The server going away shows "Reconnecting…"; when it is back the page
// catches up and stays live.
func TestBrowserReconnects(t *testing.T) {
	e := newEnv(t)
	ctx := browser(t)
	e.signInBrowser(t, ctx)
	time.Sleep(300 * time.Millisecond)
	e.down.Store(true)
	e.srv.CloseClientConnections()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("live").textContent === "Reconnecting…"`)); err != nil {
		t.Fatalf("no reconnecting indicator: %v", err)
	}
	// Created while the server was away: shown after the reconnect.
	cp := e.ask(t, "while away", "Asked while the server was away?", "", "", 0)
	e.down.Store(false)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#card-`+cp.ID)); err != nil {
		t.Fatalf("did not recover: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("live").textContent === ""`)); err != nil {
		t.Fatalf("still reconnecting: %v", err)
	}
	cp2 := e.ask(t, "after", "Asked after the reconnect?", "", "", 0)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#card-`+cp2.ID)); err != nil {
		t.Fatalf("not live after the reconnect: %v", err)
	}
}
