package research_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

	// Seed 001's events are in the session's log: a plan per round, the
	// trends of each, the ideas at the end.
	custom := map[string]int{}
	stop := errors.New("stop")
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = svc.Follow(fctx, belay.EventFilter{SessionID: res.RunID, Types: []string{belay.EventGraphCustom, belay.EventGraphResult}}, 0,
		func(_ int64, batch []belay.Event) error {
			for _, e := range batch {
				var d struct {
					Name   string `json:"name"`
					Status string `json:"status"`
				}
				if err := json.Unmarshal(e.Data, &d); err != nil {
					return err
				}
				custom[d.Name]++
				if d.Status == string(graph.Completed) {
					return stop
				}
			}
			return nil
		})
	if err != stop || custom["plan"] != 3 || custom["trend"] != 9 || custom["idea"] != 3 {
		t.Fatalf("the log's custom events: %v (%v); want 3 plans, 9 trends, 3 ideas", custom, err)
	}
}
