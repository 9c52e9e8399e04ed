package dashboard_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
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

func TestExportAndDiffForm(t *testing.T) {
	e := newEnv(t)
	s, err := e.svc.CreateSession(agent(), belay.CreateSessionInput{Title: "export me", ProjectPath: e.project})
	if err != nil {
		t.Fatal(err)
	}
	one := e.snapshot(t, s.ID, "first", map[string]string{"a.txt": "a\n"}, `{}`)
	two := e.snapshot(t, s.ID, "second", map[string]string{"a.txt": "b\n"}, `{}`)
	c := e.client(t)
	e.signIn(t, c)
	_, body := get(t, c, e.srv.URL+"/sessions/"+s.ID)
	for _, want := range []string{`<select id="from" name="from">`, `value="` + one.ID + `"`, `value="` + two.ID + `"`, `/sessions/` + s.ID + `/export`} {
		if !strings.Contains(body, want) {
			t.Errorf("session page lacks %q", want)
		}
	}
	res, err := c.Get(e.srv.URL + "/sessions/" + s.ID + "/export")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Content-Disposition"), "attachment") || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("export: %s %v, %d bytes", res.Status, res.Header, len(b))
	}
	other := newEnv(t)
	imported, err := other.svc.ImportSession(agent(), belay.ImportInput{ProjectPath: other.project}, strings.NewReader(string(b)))
	if err != nil || imported.Checkpoints != 2 {
		t.Fatalf("import of the download: %+v, %v", imported, err)
	}
}

// The first load (page, style, scripts) stays far under 200 KB.
func TestFirstLoadIsSmall(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	e.signIn(t, c)
	total := 0
	for _, p := range []string{"/", "/static/style.css", "/static/app.js", "/static/htmx.min.js"} {
		code, body := get(t, c, e.srv.URL+p)
		if code != 200 {
			t.Fatalf("%s: %d", p, code)
		}
		total += len(body)
	}
	if total > 200<<10 {
		t.Fatalf("first load is %d bytes uncompressed", total)
	}
	t.Logf("first load: %d bytes uncompressed", total)
}

// At phone width nothing scrolls sideways, and a bad modification is
// reported in the card, which stays.
func TestBrowserPhoneWidthAndErrors(t *testing.T) {
	e := newEnv(t)
	s, err := e.svc.CreateSession(agent(), belay.CreateSessionInput{Title: "a rather long session title that has to wrap on a phone", ProjectPath: e.project})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := e.svc.CreateCheckpoint(agent(), belay.CreateCheckpointInput{SessionID: s.ID, Summary: "plan", HITL: &belay.HITLInput{
		Required: true, Title: "Change the plan?", Context: []byte(`{"path":"/a/very/long/path/that/should/wrap/instead/of/overflowing/the/screen/file.go"}`),
		Options: []belay.HITLOption{{ID: "edit", Label: "Edit the plan", Action: belay.ActionModify}, {ID: "ok", Label: "Keep", Action: belay.ActionApprove, IsDefault: true}},
		Timeout: &belay.TimeoutInput{Duration: 600, DefaultAction: belay.ActionApprove}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(375, 740)); err != nil {
		t.Fatal(err)
	}
	e.signInBrowser(t, ctx)
	card := `#card-` + cp.ID
	if err := chromedp.Do(ctx, chromedp.WaitVisible(card)); err != nil {
		t.Fatal(err)
	}
	wide, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > document.documentElement.clientWidth ||
		[...document.querySelectorAll(".card, .card *")].some(el => el.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5)`))
	if wide {
		t.Error("the inbox scrolls sideways at 375 px")
	}
	screenshot(t, ctx, "dashboard-phone")
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(`#mod-`+cp.ID, `{not json`),
		chromedp.Click(card+` button[value="edit"]`),
	); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("err-`+cp.ID+`").textContent !== ""`)); err != nil {
		t.Fatal(err)
	}
	msg, _ := chromedp.Run(ctx, chromedp.Text(`#err-`+cp.ID))
	if !strings.Contains(msg, "must be JSON") {
		t.Fatalf("error %q", msg)
	}
	if err := chromedp.Do(ctx,
		chromedp.SetValue(`#mod-`+cp.ID, `{"tasks":["a","b"]}`),
		chromedp.Click(card+` button[value="edit"]`),
		chromedp.WaitNotPresent(card),
	); err != nil {
		t.Fatal(err)
	}
	got, _ := e.svc.GetCheckpoint(agent(), cp.ID)
	if got.Decision == nil || got.Decision.Action != belay.ActionModify || string(got.Decision.Modifications) != `{"tasks":["a","b"]}` {
		t.Fatalf("decision %+v", got.Decision)
	}
}

// The event feed starts with recent events and shows new ones live.
func TestBrowserEventFeed(t *testing.T) {
	e := newEnv(t)
	old := e.ask(t, "before", "Asked before the feed opened?", "", "", 0)
	ctx := browser(t)
	e.signInBrowser(t, ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate(e.srv.URL+"/feed"), chromedp.WaitVisible(`#feed a[href*="`+old.SessionID+`"]`)); err != nil {
		t.Fatalf("the feed lacks a recent event: %v", err)
	}
	cp := e.ask(t, "<b>live</b>", "Asked while the feed is open?", "", "", 0)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#feed a[href*="`+cp.SessionID+`"]`)); err != nil {
		t.Fatalf("the feed did not show a new event: %v", err)
	}
	text, _ := chromedp.Run(ctx, chromedp.Text(`#feed`))
	if !strings.Contains(text, "hitl.required") || !strings.Contains(text, "session.created") {
		t.Fatalf("feed:\n%s", text)
	}
}

// The sessions list shows status, progress of a plan and cost, and filters
// by status.
func TestSessionsListProgressAndFilter(t *testing.T) {
	e := newEnv(t)
	s, err := e.svc.CreateSession(agent(), belay.CreateSessionInput{Title: "planned work", ProjectPath: e.project})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.SetPlan(agent(), belay.SetPlanInput{SessionID: s.ID, Tasks: []belay.Task{{ID: "a", Title: "A"}, {ID: "b", Title: "B"}, {ID: "c", Title: "C"}}}); err != nil {
		t.Fatal(err)
	}
	for _, st := range []belay.TaskStatus{belay.TaskRunning, belay.TaskCompleted} {
		if _, err := e.svc.UpdateTask(agent(), belay.TaskUpdate{SessionID: s.ID, TaskID: "a", Status: st}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.svc.AddCost(agent(), belay.CostInput{SessionID: s.ID, Micros: 250000}); err != nil {
		t.Fatal(err)
	}
	done, err := e.svc.CreateSession(agent(), belay.CreateSessionInput{Title: "finished work", ProjectPath: filepath.Dir(e.project)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.EndSession(agent(), belay.EndSessionInput{SessionID: done.ID, Status: belay.SessionCompleted}); err != nil {
		t.Fatal(err)
	}
	c := e.client(t)
	e.signIn(t, c)
	_, body := get(t, c, e.srv.URL+"/sessions")
	for _, want := range []string{"planned work", "1/3 tasks", "$0.25", "running", "finished work", "completed"} {
		if !strings.Contains(body, want) {
			t.Errorf("sessions page lacks %q", want)
		}
	}
	_, body = get(t, c, e.srv.URL+"/sessions?status=completed")
	if !strings.Contains(body, "finished work") || strings.Contains(body, "planned work") {
		t.Errorf("status filter:\n%s", body)
	}
}

// The session page follows its session: a new checkpoint shows up, and a
// rollback's branch is indented under the checkpoint it starts from.
func TestBrowserSessionPageIsLiveAndBranches(t *testing.T) {
	e := newEnv(t)
	s, err := e.svc.CreateSession(agent(), belay.CreateSessionInput{Title: "branches", ProjectPath: e.project})
	if err != nil {
		t.Fatal(err)
	}
	one := e.snapshot(t, s.ID, "one", map[string]string{"a.txt": "1\n"}, `{}`)
	e.snapshot(t, s.ID, "two", map[string]string{"a.txt": "2\n"}, `{}`)
	if _, err := e.svc.RestoreCheckpoint(agent(), belay.RestoreInput{CheckpointID: one.ID}); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	e.signInBrowser(t, ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate(e.srv.URL+"/sessions/"+s.ID), chromedp.WaitVisible(`#cp-`+one.ID)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	three := e.snapshot(t, s.ID, "three, on the branch", map[string]string{"a.txt": "3\n"}, `{}`)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#cp-`+three.ID)); err != nil {
		t.Fatalf("the new checkpoint never appeared: %v", err)
	}
	indented, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("#cp-`+three.ID+`").className.includes("depth-1")`))
	head, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("#cp-`+three.ID+`").classList.contains("head")`))
	if !indented || !head {
		t.Fatalf("the branch's checkpoint: indented %v, head %v", indented, head)
	}
}

// A new request while the tab is in the background raises a notification
// (when the person allowed them).
func TestBrowserNotifiesInTheBackground(t *testing.T) {
	e := newEnv(t)
	ctx := browser(t)
	e.signInBrowser(t, ctx)
	// Stand-ins for the permission prompt and a hidden tab.
	fake := `(function(){ window.__notes = [];
		window.Notification = function(title, o){ window.__notes.push(title + ": " + o.body) };
		window.Notification.permission = "granted";
		Object.defineProperty(document, "hidden", {get: function(){ return true }});
		return true })()`
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fake)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	cp := e.ask(t, "bg", "Noticed in the background?", "", "", 0)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#card-`+cp.ID)); err != nil {
		t.Fatal(err)
	}
	notes, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.__notes`))
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || notes[0] != "belay: decision needed: Noticed in the background?" {
		t.Fatalf("notifications %q", notes)
	}
}

// The session page offers only what the signed-in user may do: a reader
// sees no export and no rollback, the owner both; an approver who may not
// read the session finds its request in the inbox without a link to it.
func TestPagesOfferOnlyWhatTheUserMayDo(t *testing.T) {
	e := newEnv(t)
	if err := os.WriteFile(filepath.Join(e.project, "a.txt"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := e.svc.CreateSession(agent(), belay.CreateSessionInput{Title: "shared", ProjectPath: e.project})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := e.svc.CreateCheckpoint(agent(), belay.CreateCheckpointInput{SessionID: s.ID, Summary: "files", Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"reader", "approver"} {
		if _, err := e.svc.CreateToken(agent(), belayToken(user)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.svc.GrantSession(agent(), belay.GrantInput{SessionID: s.ID, User: "reader", Role: belay.RoleRead}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.CreateCheckpoint(agent(), belay.CreateCheckpointInput{SessionID: s.ID, Summary: "ask",
		HITL: &belay.HITLInput{Required: true, Title: "Go on?", Approvers: []string{"approver"}}}); err != nil {
		t.Fatal(err)
	}
	signInAs := func(user string) *http.Client {
		t.Helper()
		tk, err := e.svc.CreateToken(agent(), belayToken(user))
		if err != nil {
			t.Fatal(err)
		}
		e.token = tk.Secret
		c := e.client(t)
		e.signIn(t, c)
		return c
	}
	page := "/sessions/" + s.ID
	rollback := "/rollback?to=" + cp.ID
	for user, offered := range map[string]bool{"admin": true, "reader": false} {
		_, body := get(t, signInAs(user), e.srv.URL+page)
		if strings.Contains(body, "/export") != offered || strings.Contains(body, rollback) != offered {
			t.Errorf("%s's session page offers export %v, rollback %v; want %v", user, strings.Contains(body, "/export"), strings.Contains(body, rollback), offered)
		}
		if !strings.Contains(body, "Diff with now") {
			t.Errorf("%s's session page offers no diff", user)
		}
	}
	_, body := get(t, signInAs("approver"), e.srv.URL+"/inbox")
	if !strings.Contains(body, "Go on?") || strings.Contains(body, `href="`+page+`"`) {
		t.Errorf("the approver's inbox: request shown %v, linked to the session %v", strings.Contains(body, "Go on?"), strings.Contains(body, `href="`+page+`"`))
	}
}
