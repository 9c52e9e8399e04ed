package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/belayhq/belay"
)

// TestCloseEndsStreamsAndWaits: Close stops the event tailer, so the store
// can close after it; streams and waits still running end with an error
// instead of reading a closed database, and new ones are refused.
func TestCloseEndsStreamsAndWaits(t *testing.T) {
	svc := newService(t, nil)
	cp := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: t.TempDir(), Summary: "ask",
		HITL: &belay.HITLInput{Required: true}})

	ctx, cancel := context.WithTimeout(localCtx, 10*time.Second)
	defer cancel()
	started := make(chan struct{})
	followed := make(chan error, 1)
	go func() {
		followed <- svc.Follow(ctx, belay.EventFilter{After: belay.FromNow}, 0, func(int64, []belay.Event) error {
			select {
			case <-started:
			default:
				close(started)
			}
			return nil
		})
	}()
	waited := make(chan error, 1)
	go func() {
		_, err := svc.WaitDecision(ctx, cp.ID, time.Minute)
		waited <- err
	}()
	<-started

	svc.Close()
	for name, ch := range map[string]chan error{"Follow": followed, "WaitDecision": waited} {
		select {
		case err := <-ch:
			if !belay.IsCode(err, belay.CodeInternal) {
				t.Errorf("%s after Close = %v, want INTERNAL_ERROR", name, err)
			}
		case <-ctx.Done():
			t.Fatalf("%s still runs after Close", name)
		}
	}
	if _, err := svc.WaitDecision(ctx, cp.ID, time.Minute); !belay.IsCode(err, belay.CodeInternal) {
		t.Errorf("WaitDecision after Close = %v, want INTERNAL_ERROR", err)
	}
	svc.Close() // a second Close is harmless
}
