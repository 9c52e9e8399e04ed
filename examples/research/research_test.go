package research_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/examples/research"
	"github.com/belayhq/belay/graph"
	"github.com/belayhq/belay/store/sqlite"
)

var ctx = belay.WithActor(context.Background(), belay.Actor{UserID: "local", Admin: true})

func TestResearchFlow(t *testing.T) {
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	svc := core.New(core.Options{Store: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() { svc.Close(); db.Close() })
	flow, err := research.New(research.Offline{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	res, err := flow.Run(ctx, svc, graph.RunInput[research.State]{ProjectPath: t.TempDir(), State: research.State{Topic: "AI agents"}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Status != graph.Interrupted || res.Interrupt.Node != "await_approval" || len(res.State.Trends) != 3 {
		t.Fatalf("Run = %+v, want a pause at await_approval with 3 trends", res)
	}
	decide := func(option, feedback string) {
		t.Helper()
		if _, err := svc.Decide(ctx, belay.DecideInput{CheckpointID: res.Interrupt.ID, SelectedOption: option, Feedback: feedback}); err != nil {
			t.Fatalf("Decide %s: %v", option, err)
		}
		if res, err = flow.Wait(ctx, svc, res.RunID); err != nil {
			t.Fatalf("Wait after %s: %v", option, err)
		}
	}

	decide(research.Refine, "open source only")
	if res.Status != graph.Interrupted || res.State.Rounds != 2 || res.State.Feedback != "open source only" ||
		!strings.Contains(res.State.Queries[0], "(open source only)") || len(res.State.Trends) != 3 {
		t.Fatalf("after refine = %+v, want a second round planned with the feedback", res.State)
	}
	decide(research.Restart, "")
	if res.Status != graph.Interrupted || res.State.Rounds != 3 || res.State.Feedback != "" || strings.Contains(res.State.Queries[0], "(") {
		t.Fatalf("after restart = %+v, want a fresh round without feedback", res.State)
	}
	decide(research.Approved, "")
	if res.Status != graph.Completed || len(res.State.Ideas) != 3 || res.State.HITLStatus != research.Approved {
		t.Fatalf("after approve = %+v, want completed with ideas", res)
	}
	sess, err := svc.GetSession(ctx, res.RunID)
	if err != nil || sess.Status != belay.SessionCompleted {
		t.Fatalf("session = %+v, %v; want completed", sess, err)
	}
}
