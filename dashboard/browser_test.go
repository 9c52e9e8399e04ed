package dashboard_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/belayhq/belay"
)

// The whole loop in a real browser: sign in, a request appears live while
// the inbox is open, the person decides it with a click, the card leaves,
// and the session's timeline shows the decision.
func TestBrowserDecideLive(t *testing.T) {
	e := newEnv(t)
	ctx := browser(t)
	e.signInBrowser(t, ctx)

	// The page is open and empty; the request is created afterwards.
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#empty`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitReady(`body`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // let the EventSource connect
	cp := e.ask(t, "Release 1.2", "Deploy release 1.2?", "All tests pass.",
		`{"branch":"release/1.2","pr":"https://example.com/pr/7"}`, 1800)
	card := `#card-` + cp.ID
	if err := chromedp.Do(ctx, chromedp.WaitVisible(card)); err != nil {
		t.Fatalf("the new request never appeared: %v", err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text(card))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Deploy release 1.2?", "Release 1.2", "All tests pass.", "release/1.2", "Ship it", "(default)", "deploy to production"} {
		if !strings.Contains(text, want) {
			t.Errorf("card lacks %q:\n%s", want, text)
		}
	}
	// The countdown rounds up: 30:00 in the first second, 29:59 after.
	if !strings.Contains(text, "Auto-approve in 30:00") && !strings.Contains(text, "Auto-approve in 29:") {
		t.Errorf("card lacks the countdown from 30 minutes:\n%s", text)
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(title, "(1) ") {
		t.Errorf("title %q has no badge count", title)
	}
	screenshot(t, ctx, "dashboard-inbox")

	if err := chromedp.Do(ctx,
		chromedp.SendKeys(`#fb-`+cp.ID, "go ahead"),
		chromedp.Click(card+` button[value="ship"]`),
		chromedp.WaitNotPresent(card),
	); err != nil {
		t.Fatalf("deciding: %v", err)
	}
	got, err := e.svc.GetCheckpoint(agent(), cp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d := got.Decision; d == nil || d.SelectedOption != "ship" || d.Action != belay.ActionApprove || d.UserID != "admin" || d.Feedback != "go ahead" {
		t.Fatalf("decision %+v", got.Decision)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#empty`)); err != nil {
		t.Fatal(err)
	}

	// The session page shows the decision in the timeline.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/sessions/"+cp.SessionID),
		chromedp.WaitVisible(`#cp-`+cp.ID+` .decision`),
	); err != nil {
		t.Fatal(err)
	}
	dec, err := chromedp.Run(ctx, chromedp.Text(`#cp-`+cp.ID+` .decision`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dec, "approve (ship) by admin") || !strings.Contains(dec, "go ahead") {
		t.Fatalf("timeline decision %q", dec)
	}
}

// A request decided elsewhere while its card is on screen: the card leaves
// live; clicking a stale card says who decided what.
func TestBrowserDecidedElsewhere(t *testing.T) {
	e := newEnv(t)
	a := e.ask(t, "s1", "First?", "", "", 0)
	b := e.ask(t, "s2", "Second?", "", "", 0)
	ctx := browser(t)
	e.signInBrowser(t, ctx)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#card-`+a.ID), chromedp.WaitVisible(`#card-`+b.ID)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	bob := belay.WithActor(t.Context(), belay.Actor{UserID: "bob", Admin: true})
	if _, err := e.svc.Decide(bob, belay.DecideInput{CheckpointID: a.ID, SelectedOption: "stop"}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitNotPresent(`#card-`+a.ID)); err != nil {
		t.Fatalf("a request decided elsewhere stayed: %v", err)
	}
	// A stale card: keep b's card, let it be decided elsewhere (the card
	// leaves live), then put the old card back and click it.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(window.__stale = document.getElementById("card-`+b.ID+`").outerHTML) !== ""`)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Decide(bob, belay.DecideInput{CheckpointID: b.ID, SelectedOption: "ship"}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitNotPresent(`#card-`+b.ID)); err != nil {
		t.Fatal(err)
	}
	restore := `(function(){ var box = document.getElementById("inbox"); box.insertAdjacentHTML("beforeend", window.__stale);
		htmx.process(box.lastElementChild); return true })()`
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](restore)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(`#card-`+b.ID+` button[value="stop"]`), chromedp.WaitVisible(`.notice`)); err != nil {
		t.Fatal(err)
	}
	msg, err := chromedp.Run(ctx, chromedp.Text(`.notice`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "Already decided: approve (ship) by bob") {
		t.Fatalf("conflict notice %q", msg)
	}
}

// HTML and script in a title, a message and the context stay text.
func TestBrowserXSSPayloadStaysText(t *testing.T) {
	e := newEnv(t)
	const payload = `<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>`
	cp := e.ask(t, payload, payload, payload, `{"file":"<b onmouseover=window.__xss=3>x</b>"}`, 0)
	ctx := browser(t)
	e.signInBrowser(t, ctx)
	card := `#card-` + cp.ID
	if err := chromedp.Do(ctx, chromedp.WaitVisible(card)); err != nil {
		t.Fatal(err)
	}
	title, err := chromedp.Run(ctx, chromedp.TextContent(card+` h2`))
	if err != nil {
		t.Fatal(err)
	}
	if title != payload {
		t.Fatalf("title rendered as %q", title)
	}
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#inbox img, #inbox script, #inbox b").length`))
	if err != nil {
		t.Fatal(err)
	}
	xss, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__xss !== undefined`))
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 || xss {
		t.Fatalf("payload became markup: %d elements, script ran: %v", n, xss)
	}
	// The session page in a tab of its own (signed in by the shared
	// cookie): the inbox's live stream and swaps cannot race its navigation.
	tab, closeTab := chromedp.NewContext(ctx)
	defer closeTab()
	if err := chromedp.Do(tab, chromedp.Navigate(e.srv.URL+"/sessions/"+cp.SessionID)); err != nil {
		t.Fatalf("session page in the browser: %v; the server answers: %s", err, e.answer(t, "/sessions/"+cp.SessionID))
	}
	// The heading is looked up afresh at every poll: live updates may
	// replace the node a selector wait would hold on to.
	h1, err := chromedp.Run(tab, chromedp.Poll[string](`document.querySelector("h1") && document.querySelector("h1").textContent`,
		chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil {
		t.Fatalf("session page heading: %v", err)
	}
	xss, _ = chromedp.Run(tab, chromedp.Evaluate[bool](`window.__xss !== undefined`))
	if h1 != payload || xss {
		t.Fatalf("session page: h1 %q, script ran: %v", h1, xss)
	}
}

// An expired session sends the browser back to sign-in.
func TestBrowserExpiredSessionGoesToSignin(t *testing.T) {
	e := newEnv(t)
	ctx := browser(t)
	e.signInBrowser(t, ctx)
	e.clock.advance(2 * time.Hour)
	if err := chromedp.Do(ctx, chromedp.Navigate(e.srv.URL+"/sessions"), chromedp.WaitVisible(`input#token`)); err != nil {
		t.Fatal(err)
	}
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	if !strings.Contains(loc, "/signin") {
		t.Fatalf("at %s", loc)
	}
}

// A request whose checkpoint expires before its pause timeout counts down to
// the expiry and marks the option the expiry picks as the default.
func TestBrowserInboxCountsDownToTheExpiry(t *testing.T) {
	e := newEnv(t)
	s, err := e.svc.CreateSession(agent(), belay.CreateSessionInput{Title: "expiring", ProjectPath: e.project})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour)
	cp, err := e.svc.CreateCheckpoint(agent(), belay.CreateCheckpointInput{SessionID: s.ID, Summary: "needs a person", ExpiresAt: &exp,
		HITL: &belay.HITLInput{Required: true, Title: "Expires first?", Options: []belay.HITLOption{
			{ID: "ship", Label: "Ship it", Action: belay.ActionApprove, IsDefault: true},
			{ID: "stop", Label: "Stop", Action: belay.ActionReject},
		}, Timeout: &belay.TimeoutInput{Duration: 7200, DefaultAction: belay.ActionPause}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	e.signInBrowser(t, ctx)
	card := `#card-` + cp.ID
	if err := chromedp.Do(ctx, chromedp.WaitVisible(card)); err != nil {
		t.Fatal(err)
	}
	countdown, err := chromedp.Run(ctx, chromedp.Poll[string](`(function(){ var el = document.querySelector("`+card+` .countdown");
		return el && el.textContent.indexOf(" in ") > 0 ? el.textContent : "" })()`, chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	// The countdown rounds up: 1:00:00 in the first second, 59:59 after.
	if !(strings.HasPrefix(countdown, "Auto-reject in 59:") || strings.HasPrefix(countdown, "Auto-reject in 1:00:00")) ||
		!strings.HasSuffix(countdown, "(checkpoint expires)") {
		t.Errorf("countdown %q, want the expiry's rejection within the hour", countdown)
	}
	dflt, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("`+card+` button.default")).map(function(b){ return b.value })`))
	if err != nil {
		t.Fatal(err)
	}
	if len(dflt) != 1 || dflt[0] != "stop" {
		t.Errorf("default options %v, want [stop], the option the expiry picks", dflt)
	}
}
