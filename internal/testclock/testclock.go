// Package testclock is a belay.Clock for tests: time moves only when the test
// moves it, or by a fixed step on every reading.
package testclock

import (
	"sync"
	"time"
)

// Clock is safe for concurrent use.
type Clock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

// New returns a clock that reads start first and then moves on by step after
// every reading (0: it stands still).
func New(start time.Time, step time.Duration) *Clock {
	return &Clock{now: start, step: step}
}

// Now returns the clock's time, then moves it on by its step.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.now
	c.now = c.now.Add(c.step)
	return t
}

// Set puts the clock at t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
