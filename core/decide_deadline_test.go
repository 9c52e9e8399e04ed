package core_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/store/sqlite"
)

// armedClock reads `before` once after being armed, then `after` for good:
// the deadline passes between Decide's first look and its transaction.
type armedClock struct {
	mu            sync.Mutex
	now           time.Time
	armed         bool
	before, after time.Time
}

func (c *armedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.armed {
		c.armed, c.now = false, c.after
		return c.before
	}
	return c.now
}

// TestDecideWhenDeadlinePassesMidway: a decision whose transaction starts
// after the timeout expired loses to the timeout, which is kept.
func TestDecideWhenDeadlinePassesMidway(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, def := range []belay.Action{belay.ActionApprove, belay.ActionPause} {
		t.Run(string(def), func(t *testing.T) {
			db, err := sqlite.Open(localCtx, filepath.Join(t.TempDir(), "belay.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			clk := &armedClock{now: start}
			svc := core.New(core.Options{Store: db, Clock: clk})
			ctx := belay.WithActor(context.Background(), belay.Actor{UserID: "alice"})
			cp, err := svc.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: t.TempDir(), Summary: "ask",
				HITL: &belay.HITLInput{Required: true, Timeout: &belay.TimeoutInput{Duration: 60, DefaultAction: def}}})
			if err != nil {
				t.Fatal(err)
			}
			deadline := cp.HITL.Timeout.ExpiresAt
			clk.mu.Lock()
			clk.armed, clk.before, clk.after = true, deadline.Add(-time.Millisecond), deadline.Add(time.Second)
			clk.mu.Unlock()
			res, err := svc.Decide(ctx, belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionReject, SelectedOption: "reject"})
			got, gerr := svc.GetCheckpoint(ctx, cp.ID)
			if gerr != nil {
				t.Fatal(gerr)
			}
			switch def {
			case belay.ActionApprove:
				if !belay.IsCode(err, belay.CodeHITLAlreadyDecided) {
					t.Fatalf("Decide = %+v, %v; want HITL_ALREADY_DECIDED", res, err)
				}
				if got.Decision == nil || !got.Decision.AutoTriggered || got.Decision.Action != belay.ActionApprove {
					t.Errorf("decision = %+v; want the timeout's automatic approve", got.Decision)
				}
			case belay.ActionPause:
				if err != nil || res.Decision.Action != belay.ActionReject || !got.TimeoutFired {
					t.Errorf("Decide = %+v, %v, timeout fired %v; want the human's reject after the pause", res, err, got.TimeoutFired)
				}
			}
		})
	}
}
