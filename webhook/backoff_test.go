package webhook

import (
	"slices"
	"testing"
	"time"
)

func TestBackoffDoublesUpToMaxDelay(t *testing.T) {
	opts := Options{}.withDefaults()
	var got []time.Duration
	for attempt := 1; attempt <= 8; attempt++ {
		got = append(got, opts.backoff(attempt))
	}
	s := time.Second
	if want := []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s, time.Minute, time.Minute}; !slices.Equal(got, want) {
		t.Errorf("default backoff = %v, want %v", got, want)
	}
}
