package mcpserver

import (
	"context"
	"testing"
	"time"

	"github.com/belayhq/belay"
)

// waitRecorder is a service whose WaitDecision records how long it was asked
// to wait.
type waitRecorder struct {
	belay.Service
	waits []time.Duration
}

func (w *waitRecorder) WaitDecision(_ context.Context, _ string, wait time.Duration) (*belay.WaitResult, error) {
	w.waits = append(w.waits, wait)
	return &belay.WaitResult{}, nil
}

// TestWaitSeconds: wait_seconds absent waits the default, 0 not at all, and
// any wait is bounded by the server's.
func TestWaitSeconds(t *testing.T) {
	rec := &waitRecorder{}
	s := &server{svc: rec, askWait: 25 * time.Second}
	for _, n := range []int{0, 3, 60} {
		if _, err := s.wait(context.Background(), &WaitInput{ID: "01890000-0000-7000-8000-000000000001", WaitSec: &n}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.wait(context.Background(), &WaitInput{ID: "01890000-0000-7000-8000-000000000001"}); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{0, 3 * time.Second, 25 * time.Second, 20 * time.Second}
	if len(rec.waits) != len(want) {
		t.Fatalf("waits = %v, want %v", rec.waits, want)
	}
	for i := range want {
		if rec.waits[i] != want[i] {
			t.Errorf("waits = %v, want %v", rec.waits, want)
		}
	}
	negative := -1
	if _, err := s.wait(context.Background(), &WaitInput{ID: "01890000-0000-7000-8000-000000000001", WaitSec: &negative}); !belay.IsCode(err, belay.CodeValidation) {
		t.Errorf("a negative wait: %v", err)
	}
}
