package cli_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/client"
	"github.com/belayhq/belay/internal/testutil"
)

// serveInstances starts n `belay serve` processes on one fresh PostgreSQL
// schema, each with its own data directory (as on n machines), and returns
// them, their URLs and the admin token the first one printed.
func serveInstances(t *testing.T, n int) ([]*exec.Cmd, []string, string) {
	t.Helper()
	dbURL := testutil.PostgresSchema(t)
	bin := belayBinary(t)
	home := t.TempDir()
	var (
		procs []*exec.Cmd
		urls  []string
		token string
	)
	for i := range n {
		env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C", "BELAY_DATA_DIR=" + t.TempDir(), "BELAY_DATABASE_URL=" + dbURL}
		cmd, u, tok, stderr, _ := startServer(t, bin, env)
		if i == 0 {
			if token = tok; token == "" {
				t.Fatalf("the first instance printed no admin token; stderr:\n%s", stderr.String())
			}
		}
		procs, urls = append(procs, cmd), append(urls, u)
	}
	return procs, urls, token
}

// Three `belay serve` processes on one PostgreSQL database behave as one
// belay: a decision is taken once, a timeout fires once, every instance's
// events reach a follower of any other in order, and killing one loses
// nothing it acknowledged.
func TestServeInstancesOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary, runs three servers and waits out a HITL timeout")
	}
	procs, urls, token := serveInstances(t, 3)
	srvC := procs[2]
	var clients [3]*client.Client
	for i, u := range urls {
		c, err := client.New(u, token)
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
	}
	ctx := t.Context()
	root := t.TempDir()
	project := func(name string) string {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// An SSE follower on A from the start of the log.
	var (
		evMu   sync.Mutex
		events []belay.Event
	)
	followCtx, stopFollow := context.WithCancel(ctx)
	followDone := make(chan error, 1)
	go func() {
		followDone <- clients[0].Events(followCtx, belay.EventFilter{After: 0}, func(e belay.Event) error {
			evMu.Lock()
			events = append(events, e)
			evMu.Unlock()
			return nil
		})
	}()
	t.Cleanup(func() { stopFollow(); <-followDone })

	hitl := func(c *client.Client, name string, timeout *belay.TimeoutInput) *belay.Checkpoint {
		t.Helper()
		cp, err := c.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: project(name), Summary: name,
			HITL: &belay.HITLInput{Required: true, Timeout: timeout}})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		return cp
	}

	// Timeouts first, so the decides below run while they wait: a burst
	// of requests with the shortest timeout, created through all three.
	const timeouts = 30
	timed := map[string]bool{}
	for i := range timeouts {
		cp := hitl(clients[i%3], fmt.Sprint("timeout-", i),
			&belay.TimeoutInput{Duration: belay.MinTimeoutSeconds, DefaultAction: belay.ActionReject})
		timed[cp.ID] = true
	}
	timeoutsDue := time.Now().Add(belay.MinTimeoutSeconds * time.Second)

	t.Run("RacingDecides", func(t *testing.T) {
		for i := range 5 {
			cp := hitl(clients[i%3], fmt.Sprint("race-", i), nil)
			const racers = 9
			errs := make(chan error, racers)
			var wg sync.WaitGroup
			for r := range racers {
				wg.Go(func() {
					_, err := clients[r%3].Decide(ctx, belay.DecideInput{CheckpointID: cp.ID, SelectedOption: "approve",
						Feedback: fmt.Sprint("racer ", r)})
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			won := 0
			for err := range errs {
				var be *belay.Error
				switch {
				case err == nil:
					won++
				case errors.As(err, &be) && be.Code == belay.CodeHITLAlreadyDecided:
				default:
					t.Errorf("decide %s: %v, want success or %s", cp.ID, err, belay.CodeHITLAlreadyDecided)
				}
			}
			if won != 1 {
				t.Errorf("%d of %d decides across three instances won on %s, want exactly 1", won, racers, cp.ID)
			}
		}
	})

	t.Run("IdempotentRetriesAcrossInstances", func(t *testing.T) {
		cp := hitl(clients[0], "retried", nil)
		const racers = 6
		ids := make(chan string, racers)
		var wg sync.WaitGroup
		for r := range racers {
			wg.Go(func() {
				res, err := clients[r%3].Decide(ctx, belay.DecideInput{CheckpointID: cp.ID, SelectedOption: "approve",
					IdempotencyKey: "retry-1"})
				if err != nil {
					t.Errorf("decide with the same idempotency key through instance %d: %v, want the one decision", r%3, err)
					return
				}
				ids <- res.Decision.ID
			})
		}
		wg.Wait()
		close(ids)
		seen := map[string]bool{}
		for id := range ids {
			seen[id] = true
		}
		if len(seen) != 1 {
			t.Errorf("retries with one idempotency key across instances made decisions %v, want exactly one", seen)
		}
	})

	t.Run("KillMidBurst", func(t *testing.T) {
		var (
			mu    sync.Mutex
			acked = map[string]string{} // summary → id
		)
		burstCtx, stopBurst := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for w := range 4 {
			proj := project(fmt.Sprint("burst-", w))
			wg.Go(func() {
				for n := 0; burstCtx.Err() == nil; n++ {
					summary := fmt.Sprintf("burst %d.%d", w, n)
					cp, err := clients[2].CreateCheckpoint(burstCtx, belay.CreateCheckpointInput{ProjectPath: proj, Summary: summary})
					if err != nil {
						if client.IsConnectionError(err) || burstCtx.Err() != nil {
							return // C is gone
						}
						continue
					}
					mu.Lock()
					acked[summary] = cp.ID
					mu.Unlock()
				}
			})
		}
		time.Sleep(300 * time.Millisecond)
		if err := srvC.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		stopBurst()
		wg.Wait()
		if len(acked) == 0 {
			t.Fatal("no create was acknowledged before the kill")
		}
		seen := map[string]int{}
		for w := range 4 {
			list, err := clients[1].ListCheckpoints(ctx, belay.ListCheckpointsInput{ProjectPath: filepath.Join(root, fmt.Sprint("burst-", w)), Limit: belay.MaxListLimit})
			if err != nil {
				t.Fatal(err)
			}
			for _, cp := range list.Items {
				seen[cp.Summary]++
			}
		}
		for summary, n := range seen {
			if n != 1 {
				t.Errorf("%q stored %d times", summary, n)
			}
		}
		for summary := range acked {
			if seen[summary] == 0 {
				t.Errorf("acknowledged %q is missing after the kill", summary)
			}
		}
		t.Logf("%d creates acknowledged before kill -9, %d stored", len(acked), len(seen))
	})

	t.Run("TimeoutsOnce", func(t *testing.T) {
		count := func() map[string]int {
			evMu.Lock()
			defer evMu.Unlock()
			n := map[string]int{}
			for _, e := range events {
				if e.Type == belay.EventHITLTimedOut {
					n[e.CheckpointID]++
				}
			}
			return n
		}
		deadline := timeoutsDue.Add(30 * time.Second)
		for len(count()) < timeouts && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(2 * time.Second) // a second firing would show meanwhile
		got := count()
		for id := range timed {
			if got[id] != 1 {
				t.Errorf("checkpoint %s timed out %d times, want once", id, got[id])
			}
		}
		if len(got) != timeouts {
			t.Errorf("%d checkpoints timed out, want %d", len(got), timeouts)
		}
	})

	t.Run("FollowerSeesEveryInstance", func(t *testing.T) {
		last := hitl(clients[1], "last", nil)
		deadline := time.Now().Add(10 * time.Second)
		for {
			evMu.Lock()
			done := slices.ContainsFunc(events, func(e belay.Event) bool { return e.CheckpointID == last.ID })
			evMu.Unlock()
			if done {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("A's follower did not see the event written through B")
			}
			time.Sleep(20 * time.Millisecond)
		}
		evMu.Lock()
		defer evMu.Unlock()
		for i, e := range events {
			if e.Seq != int64(i+1) {
				t.Fatalf("event %d of A's stream has seq %d: the stream skipped or repeated (want 1, 2, 3… without gaps)", i, e.Seq)
			}
		}
	})
}

// A rollback asked of an instance that does not hold the session's
// snapshots (it runs on another machine, with its own data directory) is
// refused with a clear error naming where they are, and touches no file; the
// instance that took them rolls back.
func TestRollbackThroughAnotherInstance(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs two servers")
	}
	_, urls, token := serveInstances(t, 2)
	urlA, urlB := urls[0], urls[1]
	a, err := client.New(urlA, token)
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.New(urlB, token)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	project := t.TempDir()
	file := filepath.Join(project, "main.go")
	if err := os.WriteFile(file, []byte("package main // v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	first, err := a.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: project, Summary: "v1", Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("package main // v2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dry := range []bool{true, false} {
		_, err = b.RestoreCheckpoint(ctx, belay.RestoreInput{CheckpointID: first.ID, DryRun: dry})
		var be *belay.Error
		if !errors.As(err, &be) || be.Code != belay.CodeRestoreFailed || be.Details["cause"] != "SNAPSHOT_NOT_HERE" ||
			!strings.Contains(be.Message, "roll back through that instance") {
			t.Fatalf("rollback (dry run %v) through an instance without the snapshot: %v, want %s with cause SNAPSHOT_NOT_HERE", dry, err, belay.CodeRestoreFailed)
		}
	}
	// A diff through B says the same, not that the checkpoint is corrupted.
	for _, to := range []string{belay.DiffCurrent, first.ID} {
		_, err = b.DiffCheckpoint(ctx, belay.DiffInput{CheckpointID: first.ID, To: to})
		var be *belay.Error
		if !errors.As(err, &be) || be.Code != belay.CodeNotFound || be.Details["cause"] != "SNAPSHOT_NOT_HERE" ||
			!strings.Contains(be.Message, "diff through that instance") {
			t.Fatalf("diff (to %s) through an instance without the snapshot: %v, want %s with cause SNAPSHOT_NOT_HERE", to, err, belay.CodeNotFound)
		}
	}
	list, err := a.ListCheckpoints(ctx, belay.ListCheckpointsInput{SessionID: first.SessionID, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if list.TotalCount != 1 {
		t.Errorf("the refused rollback left %d checkpoints, want the 1 there was (no safety checkpoint on the wrong machine)", list.TotalCount)
	}
	if got, _ := os.ReadFile(file); string(got) != "package main // v2\n" {
		t.Errorf("after the refused rollback the file holds %q, want it untouched", got)
	}
	if _, err := a.RestoreCheckpoint(ctx, belay.RestoreInput{CheckpointID: first.ID}); err != nil {
		t.Fatalf("rollback through A, which took the snapshot: %v", err)
	}
	if got, _ := os.ReadFile(file); string(got) != "package main // v1\n" {
		t.Errorf("after the rollback through A the file holds %q, want v1", got)
	}
}

// A dashboard sign-in works on every instance behind a load balancer (no
// sticky sessions), and signing out through one ends it on all of them.
func TestDashboardAcrossInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs two servers")
	}
	_, urls, token := serveInstances(t, 2)
	urlA, urlB := urls[0], urls[1]
	noFollow := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c := &http.Client{CheckRedirect: noFollow}
	res, err := c.PostForm(urlA+"/signin", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var cookie *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == "belay_dashboard" {
			cookie = ck
		}
	}
	if res.StatusCode != http.StatusSeeOther || cookie == nil {
		t.Fatalf("sign in on A: %s, cookie %v", res.Status, cookie)
	}
	// page fetches path from base with the sign-in cookie: its status and body.
	page := func(base, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.AddCookie(cookie)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	code, body := page(urlB, "/sessions")
	if code != http.StatusOK {
		t.Fatalf("A's sign-in on B: %d, want the page", code)
	}
	m := regexp.MustCompile(`data-csrf="([^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token on B's page:\n%s", body)
	}
	req, _ := http.NewRequest(http.MethodPost, urlB+"/signout", strings.NewReader(url.Values{"csrf": {m[1]}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(cookie)
	if res, err = c.Do(req); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out on B: %s", res.Status)
	}
	for _, base := range []string{urlA, urlB} {
		if code, _ := page(base, "/sessions"); code != http.StatusSeeOther {
			t.Errorf("the signed-out cookie on %s: %d, want a redirect to sign-in", base, code)
		}
	}
}
