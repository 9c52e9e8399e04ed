package graph_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/graph"
	"github.com/belayhq/belay/store/sqlite"
)

// crashGraph is a → b → c; every node logs its start and end to dir/log.
// In the child process, b announces itself (dir/b-started) and never ends.
func crashGraph(tb testing.TB, dir string, child bool) *graph.Compiled[doc] {
	logLine := func(line string) {
		f, err := os.OpenFile(filepath.Join(dir, "log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			panic(err)
		}
		defer f.Close()
		if _, err := f.WriteString(line + "\n"); err != nil {
			panic(err)
		}
	}
	node := func(name string) graph.Node[doc] {
		return func(ctx context.Context, s doc) (doc, error) {
			logLine("start " + name)
			if name == "b" && child {
				if err := os.WriteFile(filepath.Join(dir, "b-started"), nil, 0o644); err != nil {
					return s, err
				}
				<-ctx.Done() // the parent kills the process here
				return s, ctx.Err()
			}
			s.Steps = append(s.Steps, name)
			s.Count++
			logLine("end " + name)
			return s, nil
		}
	}
	return compile(tb, graph.New[doc]().AddNode("a", node("a")).AddNode("b", node("b")).AddNode("c", node("c")).
		AddEdge(graph.START, "a").AddEdge("a", "b").AddEdge("b", "c").AddEdge("c", graph.END), graph.WithLease(3*time.Second))
}

func openService(tb testing.TB, path string) *core.Service {
	tb.Helper()
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	svc := core.New(core.Options{Store: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	tb.Cleanup(func() {
		svc.Close()
		db.Close()
	})
	return svc
}

// TestGraphCrashChild is the process TestResumeAfterKill9 kills mid-node.
func TestGraphCrashChild(t *testing.T) {
	dir := os.Getenv("BELAY_GRAPH_CRASH_DIR")
	if dir == "" {
		t.Skip("run by TestResumeAfterKill9")
	}
	svc := openService(t, filepath.Join(dir, "belay.db"))
	c := crashGraph(t, dir, true)
	_, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: filepath.Join(dir, "project"), Title: "crash"})
	t.Fatalf("the run returned (%v): it was to be killed mid-node", err)
}

// TestResumeAfterKill9 kills a process with SIGKILL while its run is in node
// b, then resumes the run here: it continues from the checkpoint after a,
// runs b again from its start and c, and completes — no node completed twice.
func TestResumeAfterKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a lease to lapse")
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "project"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGraphCrashChild$", "-test.v")
	cmd.Env = append(os.Environ(), "BELAY_GRAPH_CRASH_DIR="+dir)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "b-started")); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the child ended (%v) before reaching b:\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the child never reached b:\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	<-done

	svc := openService(t, filepath.Join(dir, "belay.db"))
	list, err := svc.ListSessions(ctx, belay.ListSessionsInput{ProjectPath: filepath.Join(dir, "project")})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("sessions = %+v, %v; want the run's one session", list, err)
	}
	runID := list.Items[0].ID
	if h := list.Items[0].Holder; h == "" {
		t.Fatalf("the killed run's session has no holder: its lease was not taken")
	}
	c := crashGraph(t, dir, false)
	// The dead process's lease still runs: the run is held.
	if _, err := c.Resume(ctx, svc, runID, graph.Command{}); !belay.IsCode(err, belay.CodeLeaseLost) {
		t.Fatalf("Resume while the dead holder's lease lasts = %v, want LEASE_LOST", err)
	}
	if _, err := c.Resume(ctx, svc, runID, graph.Command{Resume: "x"}); !belay.IsCode(err, belay.CodeConflict) {
		t.Fatalf("Resume with a value of a run with no interrupt = %v, want CONFLICT", err)
	}
	var res *graph.Result[doc]
	for res == nil {
		res, err = c.Resume(ctx, svc, runID, graph.Command{})
		switch {
		case belay.IsCode(err, belay.CodeLeaseLost) && time.Now().Before(deadline):
			time.Sleep(100 * time.Millisecond)
		case err != nil:
			t.Fatalf("Resume after the lease lapsed: %v", err)
		}
	}
	if res.Status != graph.Completed || !slices.Equal(res.State.Steps, []string{"a", "b", "c"}) || res.State.Count != 3 || res.Steps != 3 {
		t.Fatalf("Resume = %+v, want completed after a, b, c once each", res)
	}
	if st := sessionStatus(t, svc, runID); st != belay.SessionCompleted {
		t.Fatalf("session status = %s, want completed", st)
	}
	logged, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "start a\nend a\nstart b\nstart b\nend b\nstart c\nend c\n"; string(logged) != want {
		t.Fatalf("node log =\n%s\nwant\n%s(b started twice, every node ended once)", logged, want)
	}
	var names []string
	for _, cp := range checkpoints(t, svc, runID) {
		names = append(names, cp.Name+"|"+string(cp.Type))
	}
	if want := []string{"__start__|auto", "a|auto", "b|auto", "c|auto"}; !slices.Equal(names, want) {
		t.Fatalf("checkpoints = %v, want %v", names, want)
	}
}

// A run holds its session's lease while a node runs and gives it up when it
// pauses (the session keeps awaiting input) and when it ends.
func TestRunHoldsTheLeaseWhileNodesRun(t *testing.T) {
	svc := newService(t)
	var during *belay.Session
	c := reviewGraph(t, func(ctx context.Context, s doc) (doc, error) {
		if during == nil && len(s.Answers) == 0 {
			list, err := svc.ListSessions(ctx, belay.ListSessionsInput{Limit: 1})
			if err != nil {
				return s, err
			}
			during = list.Items[0]
		}
		a, err := graph.Interrupt[string](ctx, graph.InterruptRequest{Title: "ok?"})
		s.Answers = append(s.Answers, a)
		return s, err
	})
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if during.Holder == "" || during.LeaseExpiresAt == nil || during.Status != belay.SessionRunning {
		t.Fatalf("session during a node = %+v, want running and held", during)
	}
	sess, _ := svc.GetSession(ctx, res.RunID)
	if sess.Status != belay.SessionAwaitingInput || sess.Holder != "" || sess.LeaseExpiresAt != nil {
		t.Fatalf("session at the interrupt = %+v, want awaiting_input, held by no one", sess)
	}
	if res, err = c.Resume(ctx, svc, res.RunID, graph.Command{Resume: "yes"}); err != nil || res.Status != graph.Completed {
		t.Fatalf("Resume = %+v, %v", res, err)
	}
	sess, _ = svc.GetSession(ctx, res.RunID)
	if sess.Status != belay.SessionCompleted || sess.Holder != "" {
		t.Fatalf("session at the end = %+v, want completed, held by no one", sess)
	}
}

// A run cancelled mid-node is left interrupted, not failed, and Resume goes
// on from its last checkpoint.
func TestCancelledRunIsResumable(t *testing.T) {
	svc := newService(t)
	started := make(chan struct{})
	block := true
	c := compile(t, graph.New[doc]().AddNode("a", visit("a")).
		AddNode("slow", func(ctx context.Context, s doc) (doc, error) {
			if block {
				close(started)
				<-ctx.Done()
				return s, ctx.Err()
			}
			s.Steps = append(s.Steps, "slow")
			return s, nil
		}).
		AddEdge(graph.START, "a").AddEdge("a", "slow").AddEdge("slow", graph.END))
	runCtx, cancel := context.WithCancel(ctx)
	go func() { <-started; cancel() }()
	res, err := c.Run(runCtx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if res != nil || err == nil {
		t.Fatalf("cancelled Run = %+v, %v; want the context's error", res, err)
	}
	list, _ := svc.ListSessions(ctx, belay.ListSessionsInput{Limit: 1})
	runID := list.Items[0].ID
	if st := sessionStatus(t, svc, runID); st != belay.SessionInterrupted {
		t.Fatalf("session after the cancel = %s, want interrupted", st)
	}
	block = false
	res, err = c.Resume(ctx, svc, runID, graph.Command{})
	if err != nil || res.Status != graph.Completed || !slices.Equal(res.State.Steps, []string{"a", "slow"}) {
		t.Fatalf("Resume = %+v, %v; want completed after a and slow", res, err)
	}
}

// A run whose lease another takes stops at once and writes nothing more.
func TestLostLeaseStopsTheRun(t *testing.T) {
	svc := newService(t)
	var runID string
	c := compile(t, graph.New[doc]().
		AddNode("slow", func(ctx context.Context, s doc) (doc, error) {
			list, err := svc.ListSessions(ctx, belay.ListSessionsInput{Limit: 1})
			if err != nil {
				return s, err
			}
			runID = list.Items[0].ID
			// Someone else ends the session meanwhile.
			if _, err := svc.EndSession(ctx, belay.EndSessionInput{SessionID: runID, Status: belay.SessionAbandoned}); err != nil {
				return s, err
			}
			<-ctx.Done()
			return s, ctx.Err()
		}).
		AddEdge(graph.START, "slow").AddEdge("slow", graph.END), graph.WithLease(time.Second))
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if !belay.IsCode(err, belay.CodeLeaseLost) || res != nil {
		t.Fatalf("Run = %+v, %v; want LEASE_LOST", res, err)
	}
	if cps := checkpoints(t, svc, runID); len(cps) != 1 {
		t.Fatalf("%d checkpoints, want only the input's", len(cps))
	}
}
