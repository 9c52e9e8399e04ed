package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/belayhq/belay"
)

// progressDelay is how long an operation runs before its progress shows, so
// quick ones print nothing extra.
var progressDelay = time.Second

// progressInterval is the least time between two redraws.
const progressInterval = 100 * time.Millisecond

// withProgress returns ctx set up to show on standard error how the
// operation it is used for is getting on (files hashed, bytes written, or an
// elapsed-time spinner for a server's work), once it has taken progressDelay,
// and a function that ends the display. It shows nothing when standard
// error is not a terminal or the output is JSON.
func (a *app) withProgress(ctx context.Context, label string) (context.Context, func()) {
	f, ok := a.env.Stderr.(*os.File)
	if a.json || !ok || !isTerminal(f) {
		return ctx, func() {}
	}
	pl := &progressLine{w: a.env.Stderr, label: label, start: time.Now()}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(progressInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				pl.draw(false)
			}
		}
	})
	return belay.WithProgress(ctx, pl.update), func() {
		close(done)
		wg.Wait()
		pl.clear()
	}
}

// progressLine is the one line of progress, redrawn in place.
type progressLine struct {
	w     io.Writer
	label string
	start time.Time

	mu     sync.Mutex
	last   belay.Progress
	drawn  time.Time
	frames int
}

func (pl *progressLine) update(p belay.Progress) {
	pl.mu.Lock()
	pl.last = p
	pl.mu.Unlock()
	pl.draw(true)
}

// draw redraws the line once progressDelay has passed; an update redraws at
// most every progressInterval.
func (pl *progressLine) draw(update bool) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	elapsed := time.Since(pl.start)
	if elapsed < progressDelay || update && time.Since(pl.drawn) < progressInterval {
		return
	}
	pl.drawn = time.Now()
	pl.frames++
	fmt.Fprintf(pl.w, "\r\x1b[K%s", progressText(pl.label, pl.last, elapsed, pl.frames))
}

func (pl *progressLine) clear() {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if !pl.drawn.IsZero() {
		fmt.Fprint(pl.w, "\r\x1b[K")
	}
}

var spinner = []rune("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")

// progressText is the line shown: what is done, how far, how long.
func progressText(label string, p belay.Progress, elapsed time.Duration, frame int) string {
	var b strings.Builder
	b.WriteString("belay: ")
	if p.Phase != "" {
		b.WriteString(p.Phase)
	} else {
		b.WriteString(label)
	}
	var parts []string
	switch {
	case p.Total > 0:
		parts = append(parts, fmt.Sprintf("%d/%d", p.Done, p.Total))
	case p.Done > 0:
		parts = append(parts, fmt.Sprint(p.Done))
	}
	switch {
	case p.TotalBytes > 0:
		parts = append(parts, humanBytes(p.Bytes)+" of "+humanBytes(p.TotalBytes))
	case p.Bytes > 0:
		parts = append(parts, humanBytes(p.Bytes))
	}
	if len(parts) > 0 {
		b.WriteString(" " + strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, " %c %s", spinner[frame%len(spinner)], elapsed.Truncate(100*time.Millisecond))
	return b.String()
}
