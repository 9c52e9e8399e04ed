package dashboard_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/belayhq/belay"
)

// snapshot writes files into the project and saves a checkpoint of them.
func (e *env) snapshot(t *testing.T, sessionID, summary string, files map[string]string, state string) *belay.Checkpoint {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(e.project, name)
		if body == "" {
			os.Remove(p)
			continue
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := e.svc.CreateCheckpoint(agent(), belay.CreateCheckpointInput{SessionID: sessionID, Summary: summary,
		Snapshot: true, AgentState: []byte(state)})
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// The session page's timeline, a diff between two checkpoints (file names
// and lines escaped), and a rollback through its dry-run preview and
// confirm step, which puts the files back.
func TestBrowserTimelineDiffRollback(t *testing.T) {
	e := newEnv(t)
	s, err := e.svc.CreateSession(agent(), belay.CreateSessionInput{Title: "Refactor the parser", ProjectPath: e.project})
	if err != nil {
		t.Fatal(err)
	}
	one := e.snapshot(t, s.ID, "parser split in two", map[string]string{
		"parser.go": "package parser\n\nfunc Parse() {}\n", "lexer.go": "package parser\n",
	}, `{"step":1,"notes":"<script>window.__xss=1</script>"}`)
	two := e.snapshot(t, s.ID, "lexer rewritten", map[string]string{
		"lexer.go": "package parser\n\n// <b>new</b> lexer\nfunc Lex() {}\n", "<u>odd.go": "package parser\n", "parser.go": "",
	}, `{"step":2}`)

	ctx := browser(t)
	e.signInBrowser(t, ctx)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/sessions"),
		chromedp.WaitVisible(`a[href="/sessions/`+s.ID+`"]`),
		chromedp.Click(`a[href="/sessions/`+s.ID+`"]`),
		chromedp.WaitVisible(`#cp-`+two.ID),
	); err != nil {
		t.Fatal(err)
	}
	tl, _ := chromedp.Run(ctx, chromedp.Text(`#timeline`))
	for _, want := range []string{"#1", "parser split in two", "#2", "lexer rewritten", "head"} {
		if !strings.Contains(tl, want) {
			t.Errorf("timeline lacks %q:\n%s", want, tl)
		}
	}
	// The agent state opens in place and stays text.
	if err := chromedp.Do(ctx, chromedp.Click(`#cp-`+one.ID+` details.state summary`), chromedp.WaitVisible(`#cp-`+one.ID+` details.state pre`)); err != nil {
		t.Fatal(err)
	}
	st, _ := chromedp.Run(ctx, chromedp.Text(`#cp-`+one.ID+` details.state pre`))
	if !strings.Contains(st, `"notes": "<script>window.__xss=1</script>"`) {
		t.Errorf("agent state shown as %q", st)
	}
	if err := chromedp.Do(ctx, chromedp.Click(`#cp-`+two.ID+` details.changed summary`), chromedp.WaitVisible(`#cp-`+two.ID+` details.changed ul`)); err != nil {
		t.Fatal(err)
	}
	changed, _ := chromedp.Run(ctx, chromedp.Text(`#cp-`+two.ID+` details.changed ul`))
	for _, want := range []string{"added <u>odd.go", "modified lexer.go", "deleted parser.go"} {
		if !strings.Contains(changed, want) {
			t.Errorf("files changed by #2 lack %q:\n%s", want, changed)
		}
	}
	screenshot(t, ctx, "dashboard-timeline")

	// Diff #1 → #2.
	if err := chromedp.Do(ctx,
		chromedp.Click(`#cp-`+two.ID+` a[href*="/diff?from=`+one.ID+`"]`),
		chromedp.WaitVisible(`.patch`),
	); err != nil {
		t.Fatal(err)
	}
	files, _ := chromedp.Run(ctx, chromedp.Text(`ul.files`))
	for _, want := range []string{"<u>odd.go", "lexer.go", "parser.go", "deleted", "added"} {
		if !strings.Contains(files, want) {
			t.Errorf("file list lacks %q:\n%s", want, files)
		}
	}
	patch, _ := chromedp.Run(ctx, chromedp.Text(`.patch`))
	if !strings.Contains(patch, "+// <b>new</b> lexer") {
		t.Errorf("patch lacks the added line:\n%s", patch)
	}
	n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("main u, main b, main script").length`))
	if n != 0 {
		t.Errorf("diff made %d elements of file names or lines", n)
	}
	screenshot(t, ctx, "dashboard-diff")

	// Roll back to #1: the preview lists what changes, nothing changes
	// until the confirm.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/sessions/"+s.ID),
		chromedp.Click(`#cp-`+one.ID+` a[href*="/rollback?to="]`),
		chromedp.WaitVisible(`#preview`),
	); err != nil {
		t.Fatal(err)
	}
	preview, _ := chromedp.Run(ctx, chromedp.Text(`#preview`))
	for _, want := range []string{"restore parser.go", "restore lexer.go", "remove <u>odd.go"} {
		if !strings.Contains(preview, want) {
			t.Errorf("preview lacks %q:\n%s", want, preview)
		}
	}
	if _, err := os.Stat(filepath.Join(e.project, "parser.go")); !os.IsNotExist(err) {
		t.Fatalf("the dry run changed files: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(`#confirm`), chromedp.WaitVisible(`.flash`)); err != nil {
		t.Fatal(err)
	}
	flash, _ := chromedp.Run(ctx, chromedp.Text(`.flash`))
	if !strings.Contains(flash, "Rolled back to #1") {
		t.Fatalf("flash %q", flash)
	}
	b, err := os.ReadFile(filepath.Join(e.project, "parser.go"))
	if err != nil || string(b) != "package parser\n\nfunc Parse() {}\n" {
		t.Fatalf("parser.go after rollback: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(e.project, "<u>odd.go")); !os.IsNotExist(err) {
		t.Fatalf("a file created since #1 is still there: %v", err)
	}
	after, err := e.svc.GetSession(agent(), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.HeadCheckpointID != one.ID {
		t.Fatalf("head %s, want %s", after.HeadCheckpointID, one.ID)
	}
	head, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("#cp-`+one.ID+`").classList.contains("head")`))
	if !head {
		t.Error("the timeline does not mark #1 as the head after the rollback")
	}
}
