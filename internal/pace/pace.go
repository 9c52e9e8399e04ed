// Package pace spaces the runs of the background loops that saves wake.
package pace

import (
	"context"
	"time"
)

// A Pacer spaces the runs of a background loop that saves wake. Every save
// wakes the loops that act on new rows (the sweeper, the search indexer, the
// webhook dispatcher), and a run after each of hundreds of saves a second
// cost each save as much again: the indexer's claim and its embeddings are
// two more write transactions, each synced, the sweeper reads three times,
// the dispatcher lists the webhooks and renews their leases. A wake-up
// within Gap of the last run's start waits out the rest of Gap, so that a
// stream of saves starts a run every Gap, each taking all the saves since
// the last; one after a quiet spell runs at once.
type Pacer struct {
	Gap  time.Duration
	last time.Time
}

// Pause waits for d, a wake-up (from wake or remote, either may be nil) or
// the end of ctx, and reports whether ctx is still live: the idle step of a
// background loop, after which its next run starts. A sleep that ends on
// its own is never lengthened.
func (p *Pacer) Pause(ctx context.Context, wake, remote <-chan struct{}, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	woken := false
	select {
	case <-ctx.Done():
		return false
	case <-wake:
		woken = true
	case <-remote:
		woken = true
	case <-timer.C:
	}
	if rest := p.Gap - time.Since(p.last); woken && rest > 0 {
		timer.Reset(rest)
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
		}
	}
	p.last = time.Now()
	return true
}
