package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/dashboard"
	"github.com/belayhq/belay/store/sqlite"
	"github.com/belayhq/belay/workspace"
)

// env is a real belay service on a fresh SQLite database with workspace
// snapshots, served with the dashboard by an httptest server.
type env struct {
	svc     *core.Service
	srv     *httptest.Server
	token   string // the admin's API token
	project string
	clock   *clock
	// down makes the server answer 502, as a proxy does while belay restarts.
	down atomic.Bool
}

// clock is the dashboard's session clock; tests move it to expire sessions.
type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

func newEnv(t *testing.T) *env {
	t.Helper()
	data, root := t.TempDir(), t.TempDir()
	project := filepath.Join(root, "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(data, "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.New(workspace.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := core.New(core.Options{Store: db, Workspaces: ws, WorkspaceRoots: []string{root}, Logger: log})
	token, err := svc.Bootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{svc: svc, token: token, project: project, clock: &clock{}}
	h, err := dashboard.New(dashboard.Options{Service: svc, Authenticate: svc.Authenticate, Logger: log,
		Now: e.clock.now, SessionTTL: time.Hour, Heartbeat: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e.down.Load() {
			http.Error(w, "server away", http.StatusBadGateway)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		e.srv.CloseClientConnections()
		e.srv.Close()
		svc.Close()
		db.Close()
	})
	return e
}

// agent is the context of the agent that asks for decisions.
func agent() context.Context {
	return belay.WithActor(context.Background(), belay.Actor{UserID: "agent", Admin: true})
}

// ask creates a pending HITL request in a new session titled sessionTitle.
func (e *env) ask(t *testing.T, sessionTitle, title, message string, ctxJSON string, timeout int) *belay.Checkpoint {
	t.Helper()
	s, err := e.svc.CreateSession(agent(), belay.CreateSessionInput{Title: sessionTitle, ProjectPath: e.project})
	if err != nil {
		t.Fatal(err)
	}
	in := &belay.HITLInput{Required: true, Title: title, Message: message, Options: []belay.HITLOption{
		{ID: "ship", Label: "Ship it", Description: "deploy to production", Action: belay.ActionApprove, IsDefault: true},
		{ID: "stop", Label: "Stop", Description: "end the session", Action: belay.ActionReject},
	}}
	if ctxJSON != "" {
		in.Context = []byte(ctxJSON)
	}
	if timeout > 0 {
		in.Timeout = &belay.TimeoutInput{Duration: timeout, DefaultAction: belay.ActionApprove}
	}
	cp, err := e.svc.CreateCheckpoint(agent(), belay.CreateCheckpointInput{SessionID: s.ID, Summary: "needs a person", HITL: in})
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// client is an HTTP client with a cookie jar that does not follow redirects.
func (e *env) client(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// signIn signs c in and returns the CSRF token of its session.
func (e *env) signIn(t *testing.T, c *http.Client) string {
	t.Helper()
	res, err := c.PostForm(e.srv.URL+"/signin", url.Values{"token": {e.token}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/" {
		t.Fatalf("sign-in: %s to %q", res.Status, res.Header.Get("Location"))
	}
	res, err = c.Get(e.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	const marker = `data-csrf="`
	i := strings.Index(string(b), marker)
	if res.StatusCode != 200 || i < 0 {
		t.Fatalf("inbox after sign-in: %s\n%s", res.Status, b)
	}
	rest := string(b[i+len(marker):])
	return rest[:strings.IndexByte(rest, '"')]
}

// answer is what the server answers a signed-in GET of path within 10 s —
// status, time and the start of the body — to tell a browser's failure from
// the server's.
func (e *env) answer(t *testing.T, path string) string {
	t.Helper()
	c := e.client(t)
	c.Timeout = 10 * time.Second
	e.signIn(t, c)
	start := time.Now()
	res, err := c.Get(e.srv.URL + path)
	if err != nil {
		return fmt.Sprintf("%v after %s", err, time.Since(start))
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 300))
	return fmt.Sprintf("%s after %s: %q", res.Status, time.Since(start), b)
}

// browser starts headless Chromium for one test, or skips the test when
// there is none.
func browser(t *testing.T) context.Context {
	t.Helper()
	var bin string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Skip("no chromium binary found (apt-get install chromium): skipping the browser test")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1100, 900),
		chromedp.UserDataDir(t.TempDir()),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() {
		cancelT()
		cancelC()
		cancelA()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// signInBrowser signs the browser in through the sign-in form.
func (e *env) signInBrowser(t *testing.T, ctx context.Context) {
	t.Helper()
	err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/"),
		chromedp.WaitVisible(`input#token`),
		chromedp.SendKeys(`input#token`, e.token),
		chromedp.Submit(`input#token`),
		chromedp.WaitVisible(`#inbox`),
	)
	if err != nil {
		t.Fatalf("sign in: %v", err)
	}
}

// screenshot saves a full-page screenshot to $BELAY_SCREENSHOTS/name.png
// when that variable is set.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("BELAY_SCREENSHOTS")
	if dir == "" {
		return
	}
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
		t.Fatal(err)
	}
}
