package core

import (
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/belayhq/belay"
)

// maxLimiters bounds the projects whose save rate is tracked at once; past
// it the least recently used are forgotten (they start with a full burst).
const maxLimiters = 10000

// saveLimiter limits checkpoint saves per project with a token bucket each.
type saveLimiter struct {
	perMinute int
	mu        sync.Mutex
	buckets   map[string]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

func newSaveLimiter(perMinute int) *saveLimiter {
	if perMinute <= 0 {
		return nil
	}
	return &saveLimiter{perMinute: perMinute, buckets: map[string]*bucket{}}
}

// allow takes one save of user's to project (or "session <id>") from its
// bucket, or says RATE_LIMITED with the seconds to wait in
// details.retryAfter.
func (l *saveLimiter) allow(user, project string, now time.Time) error {
	if l == nil {
		return nil
	}
	key := user + "\x00" + project
	l.mu.Lock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= maxLimiters {
			l.evict()
		}
		b = &bucket{lim: rate.NewLimiter(rate.Limit(float64(l.perMinute)/60), 2*l.perMinute)}
		l.buckets[key] = b
	}
	b.used = now
	r := b.lim.ReserveN(now, 1)
	l.mu.Unlock()
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		wait := int(math.Ceil(d.Seconds()))
		return belay.Errorf(belay.CodeRateLimited, "too many checkpoints saved for %s: %d a minute (bursts of %d) are allowed; retry in %ds",
			project, l.perMinute, 2*l.perMinute, wait).With("retryAfter", wait).With("projectPath", project)
	}
	return nil
}

// evict forgets the least recently used half of the buckets; l.mu is held.
func (l *saveLimiter) evict() {
	keys := slices.Collect(maps.Keys(l.buckets))
	slices.SortFunc(keys, func(a, b string) int { return l.buckets[a].used.Compare(l.buckets[b].used) })
	for _, k := range keys[:len(keys)/2] {
		delete(l.buckets, k)
	}
}
