package pace

import (
	"context"
	"testing"
	"time"
)

// TestPacerSpacesWokenRuns: a wake-up within the gap of the last run waits
// out the rest of it; one after a quiet spell, and the end of a sleep, start
// the run at once.
func TestPacerSpacesWokenRuns(t *testing.T) {
	ctx := t.Context()
	const gap = 300 * time.Millisecond
	p := Pacer{Gap: gap}
	wake := make(chan struct{}, 1)

	wake <- struct{}{}
	began := time.Now()
	if !p.Pause(ctx, wake, nil, time.Hour) || time.Since(began) >= gap {
		t.Fatalf("the first wake-up waited %v, want the run at once", time.Since(began))
	}
	wake <- struct{}{}
	if !p.Pause(ctx, nil, wake, time.Hour) || time.Since(began) < gap {
		t.Fatalf("a wake-up right after a run started the next after %v, want at least %v", time.Since(began), gap)
	}
	began = time.Now()
	if !p.Pause(ctx, wake, nil, time.Millisecond) || time.Since(began) >= gap {
		t.Fatalf("a sleep of 1ms right after a run lasted %v: only wake-ups wait out the gap", time.Since(began))
	}
	time.Sleep(gap)
	wake <- struct{}{}
	began = time.Now()
	if !p.Pause(ctx, wake, nil, time.Hour) || time.Since(began) >= gap {
		t.Fatalf("a wake-up after a quiet spell waited %v, want the run at once", time.Since(began))
	}

	stopped, cancel := context.WithCancel(ctx)
	wake <- struct{}{}
	go func() { time.Sleep(gap / 10); cancel() }()
	if p.Pause(stopped, wake, nil, time.Hour) {
		t.Fatal("pause reported a live context after it ended during the gap")
	}
}
