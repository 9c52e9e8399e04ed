package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/sqlite"
)

// TestRunRestartsACrashedAgent is the crash test: the command kills
// itself with SIGKILL the first time; the session goes interrupted, the
// command starts again with the session's resume state, and completes.
func TestRunRestartsACrashedAgent(t *testing.T) {
	h := newHarness(t)
	script := `echo "run $BELAY_SESSION resumed=${BELAY_RESUMED:-0}"; if [ -z "$BELAY_RESUMED" ]; then kill -9 $$; fi; exit 0`
	r := h.run(t, "", "run", "--restart", "1", "--", "sh", "-c", script)
	if r.code != cli.ExitOK {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "resumed=0") || !strings.Contains(r.stdout, "resumed=1") || !strings.Contains(r.stderr, "restarting") {
		t.Fatalf("the command did not run twice:\n%s%s", r.stdout, r.stderr)
	}
	list := okJSON[belay.SessionList](t, h, "sessions")
	if len(list.Items) != 1 || list.Items[0].Status != belay.SessionCompleted {
		t.Fatalf("sessions = %+v", list.Items)
	}
	var statuses []string
	for _, e := range okEvents(t, h) {
		if e.Type == belay.EventSessionStatusChanged {
			var d struct{ To string }
			_ = json.Unmarshal(e.Data, &d)
			statuses = append(statuses, d.To)
		}
	}
	if got := strings.Join(statuses, ","); got != "interrupted,running,completed" {
		t.Errorf("status changes = %s, want interrupted,running,completed", got)
	}

	// Killed without restarts: interrupted, never running forever; then resumed and abandoned.
	r = h.run(t, "", "run", "--", "sh", "-c", "kill -9 $$")
	if r.code != 128+9 || !strings.Contains(r.stderr, "belay resume") {
		t.Fatalf("killed run: exit %d\n%s", r.code, r.stderr)
	}
	res := okJSON[belay.ResumeResult](t, h, "resume")
	if res.Session.Status != belay.SessionRunning {
		t.Fatalf("resume = %+v", res.Session)
	}
	h.ok(t, "", "session", "abandon", res.Session.ID, "--reason", "not worth it")
	r = h.run(t, "", "resume", res.Session.ID)
	if r.code != cli.ExitError || !strings.Contains(r.stderr, "abandoned") {
		t.Errorf("resume of an abandoned session: exit %d %s", r.code, r.stderr)
	}
	r = h.run(t, "", "run", "--", "sh", "-c", "exit 3")
	if r.code != 3 {
		t.Errorf("a failing command: exit %d, want 3", r.code)
	}
	if s := okJSON[belay.SessionList](t, h, "sessions").Items[0]; s.Status != belay.SessionFailed || s.EndReason == "" {
		t.Errorf("after exit 3: %s %q", s.Status, s.EndReason)
	}
}

// okEvents reads the event log of the harness's database.
func okEvents(t *testing.T, h *harness) []belay.Event {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(h.env["BELAY_DATA_DIR"], "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	evs, err := db.ListEvents(context.Background(), store.EventQuery{Scope: store.Everything, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestOrchestratorThroughTheCLI is the acceptance flow: plan → tasks
// with cost → budget warning checkpoint → adjust (drop + reorder) → continue
// → the hard limit pauses.
func TestOrchestratorThroughTheCLI(t *testing.T) {
	h := newHarness(t)
	h.ok(t, "", "save", "-m", "start", "--no-snapshot")
	h.ok(t, "t1: Design\nt2: Build\nt3: Test\nt4: Docs\nt5: Release\n", "plan", "set", "-", "--mode", "triggers", "--warn-at", "2", "--hard-limit", "4")
	h.ok(t, "", "task", "start", "t1")
	h.ok(t, "", "cost", "add", "1.5", "--tokens-in", "1000", "--model", "m")
	out := h.ok(t, "", "task", "done", "t1", "--file", "a.go", "--commit", "abc123")
	if !strings.Contains(out, "Checkpoint: 1/5 tasks done | $1.50 spent | ~$6.00 remaining") {
		t.Fatalf("progress = %q", out)
	}
	h.ok(t, "", "task", "start", "t2")
	warn := okJSON[belay.ProgressResult](t, h, "cost", "add", "0.5")
	if warn.Checkpoint == nil || len(warn.Triggers) != 1 || warn.Triggers[0] != belay.TriggerBudgetWarning {
		t.Fatalf("no budget warning: %+v", warn)
	}
	mods := `{"droppedTaskIds":["t3"],"reorderedTaskIds":["t5","t4"]}`
	h.ok(t, mods, "decide", warn.Checkpoint.ID, "--option", "adjust", "--modify-file", "-")
	plan := okJSON[belay.Plan](t, h, "plan", "show")
	var order []string
	for _, tk := range plan.Tasks {
		order = append(order, tk.ID)
	}
	if strings.Join(order, ",") != "t1,t2,t5,t4" {
		t.Fatalf("plan after adjusting = %v", order)
	}
	if out := h.ok(t, "", "status"); !strings.Contains(out, "$2.00 spent") {
		t.Errorf("status = %q", out)
	}
	// To the hard limit: paused, more cost refused until a person decides.
	stop := okJSON[belay.ProgressResult](t, h, "cost", "add", "2")
	if stop.Checkpoint == nil || stop.Session.Status != belay.SessionAwaitingInput {
		t.Fatalf("hard limit: %+v", stop)
	}
	// status says the session waits, and for what.
	out = h.ok(t, "", "status")
	for _, want := range []string{"is awaiting_input", "$4.00 spent", "1/4 tasks done", "1 decision waits", stop.Checkpoint.HITL.Title} {
		if !strings.Contains(out, want) {
			t.Errorf("status at the hard limit lacks %q:\n%s", want, out)
		}
	}
	r := h.run(t, "", "cost", "add", "0.01")
	if r.code != cli.ExitError || !strings.Contains(r.stderr, "BUDGET_EXCEEDED") {
		t.Fatalf("cost past the limit: exit %d %s", r.code, r.stderr)
	}
	h.ok(t, "", "decide", stop.Checkpoint.ID, "--option", "continue")
	h.ok(t, "", "cost", "add", "0.01")
	if out := h.ok(t, "", "context"); !strings.Contains(out, "Design (completed) commit abc123; changed: a.go") || !strings.Contains(out, "Next task: Build") {
		t.Errorf("context = %q", out)
	}
	// Bad input changes nothing.
	for _, args := range [][]string{{"cost", "add", "-1"}, {"cost", "add", "NaN"}, {"task", "done", "nope"}, {"task", "done", "t1"}} {
		if r := h.run(t, "", args...); r.code == cli.ExitOK {
			t.Errorf("belay %s succeeded", strings.Join(args, " "))
		}
	}
	var st struct{ Progress belay.ProgressSummary }
	if err := json.Unmarshal([]byte(h.ok(t, "", "--json", "status")), &st); err != nil || st.Progress.CumulativeCostMicros != 4_010_000 {
		t.Errorf("status after refused input = %+v, %v", st, err)
	}
}

// TestAddressingByNameStepAndPrefix: seed 004's `rollback architecture`,
// `--step N`, and unique id prefixes.
func TestAddressingByNameStepAndPrefix(t *testing.T) {
	h := newHarness(t)
	first := okJSON[belay.Checkpoint](t, h, "save", "-m", "arch v1", "--name", "architecture", "--step", "3", "--no-snapshot")
	second := okJSON[belay.Checkpoint](t, h, "save", "-m", "arch v2", "--name", "architecture", "--step", "4", "--no-snapshot")
	if got := okJSON[belay.Checkpoint](t, h, "show", "architecture"); got.ID != second.ID {
		t.Errorf("show architecture = #%d, want the newest (#%d)", got.Seq, second.Seq)
	}
	if got := okJSON[belay.Checkpoint](t, h, "show", "--step", "3"); got.ID != first.ID {
		t.Errorf("show --step 3 = #%d, want #%d", got.Seq, first.Seq)
	}
	// A suffix is no prefix: it must not resolve.
	if r := h.run(t, "", "show", first.ID[len(first.ID)-12:]); r.code != cli.ExitError {
		t.Errorf("a suffix resolved: %s", r.stdout)
	}
	short := first.ID[:9]
	for n := 9; n <= len(first.ID); n++ {
		if first.ID[:n] != second.ID[:n] {
			short = first.ID[:n]
			break
		}
	}
	if got := okJSON[belay.Checkpoint](t, h, "show", short); got.ID != first.ID {
		t.Errorf("show %s = %s, want %s", short, got.ID, first.ID)
	}
	r := h.run(t, "", "show", first.ID[:8])
	if first.ID[:8] == second.ID[:8] && (r.code != cli.ExitError || !strings.Contains(r.stderr, "ambiguous")) {
		t.Errorf("an ambiguous prefix: exit %d %s", r.code, r.stderr)
	}
	if r := h.run(t, "", "show", "1", "--step", "3"); r.code != cli.ExitUsage {
		t.Errorf("N and --step together: exit %d", r.code)
	}
	if r := h.run(t, "", "rollback", "nosuchname"); r.code != cli.ExitError || !strings.Contains(r.stderr, "CHECKPOINT_NOT_FOUND") {
		t.Errorf("rollback to an unknown name: exit %d %s", r.code, r.stderr)
	}
}

// TestRunOfACommandThatCannotStart: `belay run` of a command that does not
// exist says so and leaves no session behind, running or otherwise.
func TestRunOfACommandThatCannotStart(t *testing.T) {
	h := newHarness(t)
	r := h.run(t, "", "run", "--", filepath.Join(t.TempDir(), "no-such-agent"))
	if r.code != cli.ExitError || !strings.Contains(r.stderr, "cannot run") || !strings.Contains(r.stderr, "VALIDATION_ERROR") {
		t.Errorf("run of a missing command: exit %d, stderr %q", r.code, r.stderr)
	}
	if list := okJSON[belay.SessionList](t, h, "sessions", "--json"); len(list.Items) != 0 {
		t.Errorf("the failed run left %d sessions", len(list.Items))
	}
}

// TestRunTakesOverFromAHolderThatIsGone: `belay run --session` (by a unique
// prefix) waits out the lease of a process of this machine that is gone —
// a `belay resume` that printed and exited — and refuses one still running.
func TestRunTakesOverFromAHolderThatIsGone(t *testing.T) {
	h := newHarness(t)
	host, _ := os.Hostname()
	hold := func(id string, pid int) {
		t.Helper()
		db, err := sqlite.Open(t.Context(), filepath.Join(h.env["BELAY_DATA_DIR"], "belay.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		svc := core.New(core.Options{Store: db})
		if _, err := svc.Heartbeat(belay.WithActor(t.Context(), belay.Actor{UserID: "local", Admin: true}),
			belay.LeaseInput{SessionID: id, Holder: fmt.Sprintf("%s:%d", host, pid), Lease: 2 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	held := func(pid int) belay.Session {
		t.Helper()
		sess := okJSON[belay.Session](t, h, "session", "new")
		hold(sess.ID, pid)
		return sess
	}

	live := exec.Command("sleep", "60")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Process.Kill(); live.Wait() })
	sess := held(live.Process.Pid)
	if r := h.run(t, "", "run", "--session", sess.ID[:18], "--", "true"); r.code != cli.ExitError || !strings.Contains(r.stderr, "LEASE_LOST") {
		t.Fatalf("run under a session a live process holds: exit %d, %s", r.code, r.stderr)
	}

	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	sess = held(gone.Process.Pid)
	r := h.run(t, "", "run", "--session", sess.ID[:18], "--", "true")
	if r.code != cli.ExitOK || !strings.Contains(r.stderr, "which is no longer running; waiting for its lease to lapse") {
		t.Fatalf("run under a session a gone process held: exit %d, %s", r.code, r.stderr)
	}
	if s := okJSON[belay.Session](t, h, "session-info", sess.ID); s.Status != belay.SessionCompleted {
		t.Errorf("session after the run: %s", s.Status)
	}
	if r := h.run(t, "", "resume", sess.ID[:18]); r.code != cli.ExitError || !strings.Contains(r.stderr, "has ended (completed)") {
		t.Errorf("resume of an ended session by a prefix: exit %d, %s", r.code, r.stderr)
	}

	// A lease renewed meanwhile is a live holder after all (this machine's
	// name on another): the wait ends, LEASE_LOST.
	sess = held(gone.Process.Pid)
	done := make(chan result, 1)
	go func() { done <- h.run(t, "", "run", "--session", sess.ID, "--", "true") }()
	time.Sleep(500 * time.Millisecond)
	hold(sess.ID, gone.Process.Pid)
	select {
	case r := <-done:
		if r.code != cli.ExitError || !strings.Contains(r.stderr, "LEASE_LOST") {
			t.Errorf("run while the lease was renewed: exit %d, %s", r.code, r.stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run went on waiting for a lease that was renewed")
	}
}
