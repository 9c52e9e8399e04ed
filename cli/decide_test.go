package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
	"github.com/belayhq/belay/cmd/belay/wire"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/store/sqlite"
)

// hitlOutput is a writer a test may read while a command still writes.
type hitlOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *hitlOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

var hitlANSI = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

// String returns what was written so far, without terminal escapes.
func (o *hitlOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return hitlANSI.ReplaceAllString(o.buf.String(), "")
}

// waitFor polls until the output holds s, for at most 10 s.
func (o *hitlOutput) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(o.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("output never showed %q; it is:\n%s", s, o.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitForMatches polls until re matches the output n times, for at most
// 10 s, and returns the matches.
func (o *hitlOutput) waitForMatches(t *testing.T, re *regexp.Regexp, n int) [][]string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := re.FindAllStringSubmatch(o.String(), -1); len(m) >= n {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("output never matched %s %d times; it is:\n%s", re, n, o.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// hitlCLI is a data directory the belay command works on, and the same
// database opened by the test as an agent would.
type hitlCLI struct {
	dir string
	db  *sqlite.DB
	svc *core.Service
	env map[string]string
}

func newHITLCLI(t *testing.T) *hitlCLI {
	t.Helper()
	dir := t.TempDir()
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc := core.New(core.Options{Store: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return &hitlCLI{dir: dir, db: db, svc: svc, env: map[string]string{}}
}

type hitlRun struct {
	code           int
	stdout, stderr *hitlOutput
}

// start runs belay with args on the data directory in a goroutine; the
// returned channel yields its result.
func (c *hitlCLI) start(ctx context.Context, stdin io.Reader, args ...string) (hitlRun, <-chan hitlRun) {
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	r := hitlRun{stdout: &hitlOutput{}, stderr: &hitlOutput{}}
	env := cli.Env{Backend: wire.Backend(), Stdin: stdin, Stdout: r.stdout, Stderr: r.stderr,
		Getenv: func(k string) string { return c.env[k] },
		Getwd:  func() (string, error) { return c.dir, nil }}
	done := make(chan hitlRun, 1)
	go func() {
		res := r
		res.code = cli.Run(ctx, append([]string{"--data-dir", c.dir}, args...), env)
		done <- res
	}()
	return r, done
}

// run runs belay with args and waits for it, for at most 20 s.
func (c *hitlCLI) run(t *testing.T, stdin io.Reader, args ...string) hitlRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, done := c.start(ctx, stdin, args...)
	return <-done
}

func (c *hitlCLI) ok(t *testing.T, stdin io.Reader, args ...string) string {
	t.Helper()
	r := c.run(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("belay %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout.String()
}

var hitlCLIOptions = []belay.HITLOption{
	{ID: "ok", Label: "Ship it", Description: "merge as is", Action: belay.ActionApprove, IsDefault: true},
	{ID: "change", Label: "Change", Description: "adjust the plan", Action: belay.ActionModify},
	{ID: "no", Label: "Stop", Action: belay.ActionReject},
	{ID: "again", Label: "Again", Action: belay.ActionRetry},
	{ID: "pass", Label: "Skip", Action: belay.ActionSkip},
	{ID: "up", Label: "Ask boss", Action: belay.ActionEscalate},
}

var hitlAgent = belay.WithActor(context.Background(), belay.Actor{UserID: "agent"})

// request has the agent ask in a new session (or sessionID) and returns the checkpoint.
func (c *hitlCLI) request(t *testing.T, sessionID string, h belay.HITLInput) *belay.Checkpoint {
	t.Helper()
	if sessionID == "" {
		sess, err := c.svc.CreateSession(hitlAgent, belay.CreateSessionInput{Title: "refactor billing"})
		if err != nil {
			t.Fatal(err)
		}
		sessionID = sess.ID
	}
	h.Required = true
	if h.Options == nil {
		h.Options = hitlCLIOptions
	}
	cp, err := c.svc.CreateCheckpoint(hitlAgent, belay.CreateCheckpointInput{SessionID: sessionID, Summary: "plan ready", HITL: &h})
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

func (c *hitlCLI) decision(t *testing.T, id string) *belay.Decision {
	t.Helper()
	cp, err := c.db.GetCheckpoint(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return cp.Decision
}

func TestHITLCLIPending(t *testing.T) {
	c := newHITLCLI(t)
	if out := c.ok(t, nil, "pending"); !strings.Contains(out, "Nothing waits for a decision.") {
		t.Errorf("empty pending: %q", out)
	}
	timed := c.request(t, "", belay.HITLInput{Title: "Review the plan", Timeout: &belay.TimeoutInput{Duration: 3600, DefaultAction: belay.ActionApprove}})
	plain := c.request(t, "", belay.HITLInput{Title: "Pick a database"})

	out := c.ok(t, nil, "pending")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !regexp.MustCompile(`^CHECKPOINT\s+SEQ\s+SESSION\s+TITLE\s+OPTIONS\s+TIME LEFT\s+ASKED$`).MatchString(lines[0]) {
		t.Fatalf("pending table:\n%s", out)
	}
	wantRow := regexp.MustCompile(regexp.QuoteMeta(timed.ID) + `\s+1\s+` + uniquePrefix(timed.SessionID, plain.SessionID) +
		`\s+Review the plan\s+ok,change,no,again,pass,up\s+(59m\d+s|1h0m0s) → approve\s+\ds ago`)
	if !wantRow.MatchString(lines[1]) {
		t.Errorf("row of the timed request = %q", lines[1])
	}
	if !regexp.MustCompile(regexp.QuoteMeta(plain.ID) + `.*Pick a database.*\s-\s+\ds ago$`).MatchString(lines[2]) {
		t.Errorf("row of the request without timeout = %q", lines[2])
	}
	if lines[3] != "Decide with: belay decide CHECKPOINT" {
		t.Errorf("last line = %q", lines[3])
	}

	var list []belay.PendingHITL
	if err := json.Unmarshal([]byte(c.ok(t, nil, "pending", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Checkpoint.ID != timed.ID || list[0].TimeRemaining == nil ||
		*list[0].TimeRemaining < 3500 || *list[0].TimeRemaining > 3600 || list[1].TimeRemaining != nil ||
		list[0].Session.Title != "refactor billing" || list[0].Session.Status != belay.SessionAwaitingInput {
		t.Errorf("pending --json = %+v", list)
	}
	if out := c.ok(t, nil, "pending", "--session", plain.SessionID); strings.Contains(out, timed.ID) || !strings.Contains(out, plain.ID) {
		t.Errorf("pending --session:\n%s", out)
	}
}

// TestHITLCLIPendingShowsTheExpiry: a request whose checkpoint expires before
// its pause timeout shows the time to the expiry and the rejection it makes;
// one that only expires shows its expiry too.
func TestHITLCLIPendingShowsTheExpiry(t *testing.T) {
	c := newHITLCLI(t)
	ask := func(title string, timeout *belay.TimeoutInput) *belay.Checkpoint {
		t.Helper()
		sess, err := c.svc.CreateSession(hitlAgent, belay.CreateSessionInput{Title: title})
		if err != nil {
			t.Fatal(err)
		}
		exp := time.Now().Add(time.Hour)
		cp, err := c.svc.CreateCheckpoint(hitlAgent, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "plan ready", ExpiresAt: &exp,
			HITL: &belay.HITLInput{Required: true, Title: title, Options: hitlCLIOptions, Timeout: timeout}})
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}
	paused := ask("Pause later", &belay.TimeoutInput{Duration: 7200, DefaultAction: belay.ActionPause})
	expiring := ask("Expires only", nil)
	out := c.ok(t, nil, "pending")
	for _, cp := range []*belay.Checkpoint{paused, expiring} {
		row := regexp.MustCompile(regexp.QuoteMeta(cp.ID) + `.*\s(59m\d+s|1h0m0s) → reject \(expires\)\s+\ds ago\n`)
		if !row.MatchString(out) {
			t.Errorf("no row of %s counting down to the expiry's rejection:\n%s", cp.HITL.Title, out)
		}
	}

	var list []belay.PendingHITL
	if err := json.Unmarshal([]byte(c.ok(t, nil, "pending", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	for _, p := range list {
		if d := p.Deadline; d == nil || !d.At.Equal(*p.Checkpoint.ExpiresAt) || d.Reason != belay.DeadlineExpired ||
			d.Action != belay.ActionReject || d.Option != "no" || p.TimeRemaining == nil || *p.TimeRemaining > 3600 {
			t.Errorf("pending --json: deadline %+v, time remaining %v; want the expiry's rejection", p.Deadline, p.TimeRemaining)
		}
	}
}

func TestHITLCLIDecideWithFlags(t *testing.T) {
	c := newHITLCLI(t)

	t.Run("option and feedback", func(t *testing.T) {
		cp := c.request(t, "", belay.HITLInput{})
		out := c.ok(t, nil, "decide", cp.ID, "--option", "no", "--feedback", "too risky")
		if want := fmt.Sprintf("Decided no (reject). Session %s is failed.", cp.SessionID); strings.TrimSpace(out) != want {
			t.Errorf("output %q, want %q", out, want)
		}
		d := c.decision(t, cp.ID)
		if d == nil || d.Action != belay.ActionReject || d.SelectedOption != "no" || d.Feedback != "too risky" || d.UserID == "" || d.AutoTriggered {
			t.Errorf("decision = %+v", d)
		}
		r := c.run(t, nil, "decide", cp.ID, "--option", "ok")
		if r.code != cli.ExitError || !strings.Contains(r.stderr.String(), "(HITL_ALREADY_DECIDED)") {
			t.Errorf("deciding again: exit %d, stderr %q", r.code, r.stderr)
		}
	})
	t.Run("modify file", func(t *testing.T) {
		cp := c.request(t, "", belay.HITLInput{})
		file := filepath.Join(t.TempDir(), "changes.json")
		if err := os.WriteFile(file, []byte("{\n  \"steps\": 3,\n  \"db\": \"postgres\"\n}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		var res belay.DecideResult
		if err := json.Unmarshal([]byte(c.ok(t, nil, "decide", cp.ID, "--option", "change", "--modify-file", file, "--json")), &res); err != nil {
			t.Fatal(err)
		}
		var mods bytes.Buffer
		if err := json.Compact(&mods, res.Decision.Modifications); err != nil {
			t.Fatal(err)
		}
		if res.Decision.Action != belay.ActionModify || mods.String() != `{"steps":3,"db":"postgres"}` ||
			res.Session.Status != belay.SessionRunning || res.Checkpoint.ID != cp.ID {
			t.Errorf("decide --json = %+v", res)
		}
	})
	t.Run("modify file from stdin", func(t *testing.T) {
		cp := c.request(t, "", belay.HITLInput{})
		c.ok(t, strings.NewReader(`{"retry": true}`), "decide", cp.ID, "--option", "change", "--modify-file", "-")
		if d := c.decision(t, cp.ID); string(d.Modifications) != `{"retry":true}` {
			t.Errorf("modifications = %s", d.Modifications)
		}
	})
	t.Run("by number in a session", func(t *testing.T) {
		first := c.request(t, "", belay.HITLInput{})
		second := c.request(t, first.SessionID, belay.HITLInput{})
		c.ok(t, nil, "decide", "2", "--session", first.SessionID, "--option", "pass")
		if d := c.decision(t, second.ID); d == nil || d.Action != belay.ActionSkip {
			t.Errorf("checkpoint #2 decision = %+v", d)
		}
		if d := c.decision(t, first.ID); d != nil {
			t.Errorf("checkpoint #1 was decided too: %+v", d)
		}
	})
	t.Run("idempotency key", func(t *testing.T) {
		cp := c.request(t, "", belay.HITLInput{})
		for range 2 {
			c.ok(t, nil, "decide", cp.ID, "--option", "again", "--idempotency-key", "k1")
		}
		if d := c.decision(t, cp.ID); d.Action != belay.ActionRetry {
			t.Errorf("decision = %+v", d)
		}
	})
	t.Run("errors", func(t *testing.T) {
		cp := c.request(t, "", belay.HITLInput{})
		bad := filepath.Join(t.TempDir(), "bad.json")
		if err := os.WriteFile(bad, []byte("{steps: 3"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			args []string
			code belay.Code
		}{
			{[]string{"decide", cp.ID, "--option", "maybe"}, belay.CodeInvalidOption},
			{[]string{"decide", cp.ID, "--option", "ok", "--action", "reject"}, belay.CodeInvalidOption},
			{[]string{"decide", cp.ID, "--option", "ok", "--modify-file", bad}, belay.CodeValidation},
			{[]string{"decide", cp.ID, "--option", "ok", "--feedback", strings.Repeat("x", belay.MaxFeedback+1)}, belay.CodeValidation},
			{[]string{"decide", "01940000-0000-7000-8000-000000000000", "--option", "ok"}, belay.CodeCheckpointNotFound},
		} {
			r := c.run(t, nil, tc.args...)
			if r.code != cli.ExitError || !strings.Contains(r.stderr.String(), "("+string(tc.code)+")") {
				t.Errorf("belay %s: exit %d, stderr %q; want %s", strings.Join(tc.args, " "), r.code, r.stderr, tc.code)
			}
		}
		if d := c.decision(t, cp.ID); d != nil {
			t.Errorf("a failed decide was recorded: %+v", d)
		}
	})
}

// interactiveRequest makes the request the interactive tests decide.
func (c *hitlCLI) interactiveRequest(t *testing.T) *belay.Checkpoint {
	return c.request(t, "", belay.HITLInput{
		Title:   "Review Specification",
		Message: "Please review the generated specification before proceeding.",
		Context: json.RawMessage(`{"specPath":"docs/specs/SPEC-001.md","estimatedCost":5.5}`),
		Options: hitlCLIOptions[:3],
		Timeout: &belay.TimeoutInput{Duration: 3600, DefaultAction: belay.ActionApprove},
	})
}

// TestHITLCLIWaitHelpListsEveryExitCode: belay wait's help lists every code
// it ends with, wrong usage's 2 and an interruption's 130 among them, as the
// root's help promises ("'belay wait --help' lists its own").
func TestHITLCLIWaitHelpListsEveryExitCode(t *testing.T) {
	c := newHITLCLI(t)
	help := c.ok(t, nil, "wait", "--help")
	for _, want := range []string{"0 approve", "10 reject", "11 modify", "12 retry", "13 skip", "14 escalate",
		"3 no decision within --timeout", "1 error", "2 wrong usage", "130 interrupted"} {
		if !strings.Contains(help, want) {
			t.Errorf("wait --help lacks %q:\n%s", want, help)
		}
	}
}

func TestHITLCLIWaitExitCodes(t *testing.T) {
	cases := []struct {
		option string
		code   int
	}{
		{"ok", 0}, {"no", 10}, {"change", 11}, {"again", 12}, {"pass", 13}, {"up", 14},
	}
	admin := belay.WithActor(context.Background(), belay.Actor{UserID: "lead", Admin: true})
	for _, tc := range cases {
		t.Run(tc.option, func(t *testing.T) {
			t.Parallel()
			c := newHITLCLI(t)
			cp := c.request(t, "", belay.HITLInput{})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			r, done := c.start(ctx, nil, "wait", cp.ID, "--timeout", "15s")
			opt, _ := cp.HITL.Option(tc.option)
			if _, err := c.svc.Decide(admin, belay.DecideInput{CheckpointID: cp.ID, Action: opt.Action, SelectedOption: opt.ID, Feedback: "because"}); err != nil {
				t.Fatal(err)
			}
			res := <-done
			if res.code != tc.code {
				t.Fatalf("belay wait after %s: exit %d, want %d\n%s", opt.Action, res.code, tc.code, r.stderr)
			}
			if want := fmt.Sprintf("%s (option %s) by lead: because", opt.Action, opt.ID); strings.TrimSpace(r.stdout.String()) != want {
				t.Errorf("stdout %q, want %q", r.stdout, want)
			}
			if r.stderr.String() != "" {
				t.Errorf("stderr %q", r.stderr)
			}
		})
	}
	t.Run("no decision in time", func(t *testing.T) {
		t.Parallel()
		c := newHITLCLI(t)
		cp := c.request(t, "", belay.HITLInput{})
		r := c.run(t, nil, "wait", cp.ID, "--timeout", "300ms")
		if r.code != cli.ExitNoDecision || !strings.Contains(r.stderr.String(), "no decision yet") {
			t.Errorf("exit %d, stderr %q; want 3", r.code, r.stderr)
		}
		r = c.run(t, nil, "wait", cp.ID, "--timeout", "100ms", "--json")
		var res belay.WaitResult
		if r.code != cli.ExitNoDecision || json.Unmarshal([]byte(r.stdout.String()), &res) != nil || res.Decided {
			t.Errorf("--json: exit %d, stdout %q", r.code, r.stdout)
		}
	})
	// No sweeper runs beside the CLI: the wait itself settles the request
	// at its checkpoint's expiry, a rejection.
	t.Run("rejected at the expiry", func(t *testing.T) {
		t.Parallel()
		c := newHITLCLI(t)
		sess, err := c.svc.CreateSession(hitlAgent, belay.CreateSessionInput{Title: "refactor billing"})
		if err != nil {
			t.Fatal(err)
		}
		exp := time.Now().Add(time.Second)
		cp, err := c.svc.CreateCheckpoint(hitlAgent, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "plan ready", ExpiresAt: &exp,
			HITL: &belay.HITLInput{Required: true, Options: hitlCLIOptions}})
		if err != nil {
			t.Fatal(err)
		}
		r := c.run(t, nil, "wait", cp.ID, "--timeout", "15s")
		if want := "reject (option no) by system: expired at "; r.code != cli.ExitRejected || !strings.HasPrefix(r.stdout.String(), want) {
			t.Fatalf("exit %d, stdout %q; want %d and %q…", r.code, r.stdout, cli.ExitRejected, want)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w, done := c.start(ctx, nil, "watch", "--after", "0", "--type", belay.EventHITLTimedOut)
		w.stdout.waitFor(t, uniquePrefix(cp.ID)+": expired, reject")
		cancel()
		<-done
	})
	t.Run("decided before, json, over HTTP", func(t *testing.T) {
		t.Parallel()
		c := newHITLCLI(t)
		url, token := c.serve(t)
		c.env["BELAY_URL"], c.env["BELAY_TOKEN"] = url, token
		cp := c.request(t, "", belay.HITLInput{})
		if _, err := c.svc.Decide(admin, belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionReject, SelectedOption: "no"}); err != nil {
			t.Fatal(err)
		}
		r := c.run(t, nil, "wait", cp.ID, "--json")
		var res belay.WaitResult
		if r.code != cli.ExitRejected || json.Unmarshal([]byte(r.stdout.String()), &res) != nil || !res.Decided || res.Decision.Action != belay.ActionReject {
			t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
	})
}

// serve starts an HTTP server on the data directory's database and returns
// its URL and an admin token.
func (c *hitlCLI) serve(t *testing.T) (string, string) {
	t.Helper()
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Service: c.svc, Authenticate: c.svc.Authenticate,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler())
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	token, err := c.svc.Bootstrap(context.Background())
	if err != nil || token == "" {
		t.Fatalf("Bootstrap = %q, %v", token, err)
	}
	return srv.URL, token
}

func TestHITLCLIWatch(t *testing.T) {
	for _, remote := range []bool{false, true} {
		name := map[bool]string{false: "local database", true: "server"}[remote]
		t.Run(name, func(t *testing.T) {
			c := newHITLCLI(t)
			if remote {
				url, token := c.serve(t)
				c.env["BELAY_URL"], c.env["BELAY_TOKEN"] = url, token
			}
			// Some history before watch starts, more while it runs.
			cp := c.request(t, "", belay.HITLInput{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r, done := c.start(ctx, nil, "watch", "--after", "0", "--json")
			if _, err := c.svc.Decide(belay.WithActor(ctx, belay.Actor{UserID: "lead", Admin: true}),
				belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionApprove, SelectedOption: "ok"}); err != nil {
				t.Fatal(err)
			}
			final, err := c.db.LastEventSeq(ctx)
			if err != nil {
				t.Fatal(err)
			}
			r.stdout.waitFor(t, fmt.Sprintf(`{"seq":%d,`, final))
			cancel()
			res := <-done
			if res.code != cli.ExitInterrupted {
				t.Fatalf("watch after cancel: exit %d, stderr %q", res.code, res.stderr)
			}
			var types []string
			for i, line := range strings.Split(strings.TrimSpace(res.stdout.String()), "\n") {
				var e belay.Event
				if err := json.Unmarshal([]byte(line), &e); err != nil {
					t.Fatalf("line %d is not an event: %q", i, line)
				}
				if e.Seq != int64(i+1) {
					t.Fatalf("line %d has seq %d", i, e.Seq)
				}
				types = append(types, e.Type)
			}
			want := []string{belay.EventSessionCreated, belay.EventCheckpointCreated, belay.EventSessionStatusChanged,
				belay.EventHITLRequired, belay.EventHITLDecided, belay.EventSessionStatusChanged}
			if strings.Join(types, " ") != strings.Join(want, " ") {
				t.Errorf("watched %v, want %v", types, want)
			}
		})
	}

	t.Run("text, filtered", func(t *testing.T) {
		c := newHITLCLI(t)
		cp := c.request(t, "", belay.HITLInput{})
		if _, err := c.svc.Decide(belay.WithActor(context.Background(), belay.Actor{UserID: "lead", Admin: true}),
			belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionRetry, SelectedOption: "again"}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r, done := c.start(ctx, nil, "watch", "--after", "0", "--type", belay.EventHITLDecided)
		r.stdout.waitFor(t, "retry by lead")
		cancel()
		res := <-done
		out := strings.TrimSpace(res.stdout.String())
		if res.code != cli.ExitInterrupted || strings.Count(out, "\n") != 0 ||
			!regexp.MustCompile(`^5\s+\d\d:\d\d:\d\d\s+hitl\.decided\s+`+uniquePrefix(cp.SessionID)+` `+uniquePrefix(cp.ID)+`: retry by lead$`).MatchString(out) {
			t.Errorf("exit %d, output %q", res.code, out)
		}
	})
}

// TestStoredTextIsEscaped: what people and agents stored (summaries,
// descriptions, context, titles, messages, feedback) prints with its control
// characters as visible escapes, so it cannot drive the reader's terminal
// (colours, the window title, the clipboard by OSC 52); newlines of a
// multi-line field stay. --json prints it exactly.
func TestStoredTextIsEscaped(t *testing.T) {
	c := newHITLCLI(t)
	const esc = "esc \x1b[31mRED\x1b[0m \x1b]0;TITLE\a \x1b]52;c;ZXZpbA==\a \u009b2J"
	const shown = `esc \x1b[31mRED\x1b[0m \x1b]0;TITLE\x07 \x1b]52;c;ZXZpbA==\x07 \x9b2J`
	c.ok(t, nil, "save", "-m", esc, "--description", "line one\n"+esc, "--context", "k="+esc, "--no-snapshot")
	c.ok(t, nil, "session", "title", esc)
	c.ok(t, nil, "ask", esc, "--message", "first\n"+esc, "--option", "y:approve", "--no-snapshot")
	c.ok(t, nil, "ask", esc, "--no-snapshot")
	pending := c.ok(t, nil, "pending")
	c.ok(t, nil, "decide", "2", "--option", "y", "--feedback", esc)
	outputs := map[string]string{
		"show 1":       c.ok(t, nil, "show", "1"),
		"show 2":       c.ok(t, nil, "show", "2"),
		"wait 2":       c.ok(t, nil, "wait", "2"),
		"pending":      pending,
		"checkpoints":  c.ok(t, nil, "checkpoints"),
		"session-info": c.ok(t, nil, "session-info"),
	}
	for name, out := range outputs {
		if strings.ContainsFunc(out, func(r rune) bool { return r != '\n' && r != '\t' && unicode.IsControl(r) }) {
			t.Errorf("belay %s printed a control character:\n%q", name, out)
		}
		if !strings.Contains(out, `esc \x1b[31mRED`) {
			t.Errorf("belay %s does not show the escape:\n%s", name, out)
		}
	}
	for _, want := range []string{"line one\n" + shown + "\n", "Context k:    " + shown + "\n", "Summary:      " + shown + "\n"} {
		if !strings.Contains(outputs["show 1"], want) {
			t.Errorf("show 1 lacks %q:\n%s", want, outputs["show 1"])
		}
	}
	for _, want := range []string{"HITL:         approve: " + shown + "\n", "Message:      first\n" + shown + "\n", "Feedback:     " + shown + "\n"} {
		if !strings.Contains(outputs["show 2"], want) {
			t.Errorf("show 2 lacks %q:\n%s", want, outputs["show 2"])
		}
	}
	var cp belay.Checkpoint
	if err := json.Unmarshal([]byte(c.ok(t, nil, "show", "2", "--json")), &cp); err != nil {
		t.Fatal(err)
	}
	if cp.Summary != esc || cp.HITL.Message != "first\n"+esc || cp.Decision.Feedback != esc {
		t.Errorf("show --json changed the stored text: %+v, %+v", cp, cp.HITL)
	}
}
