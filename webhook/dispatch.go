package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/pace"
	"github.com/google/uuid"
)

// Source is what the dispatcher needs from the service it runs beside: the
// webhooks, the event log they follow and the delivery log it writes. A
// Source checks no permission; it serves the process's own dispatcher.
type Source interface {
	// Webhooks returns every webhook with its secret and its position
	// (LastSeq: the last event it is done with).
	Webhooks(ctx context.Context) ([]*belay.Webhook, error)
	// Events returns at most limit events with Seq > after, in Seq order,
	// only of the given types unless types is empty.
	Events(ctx context.Context, after int64, types []string, limit int) ([]belay.Event, error)
	// Wake returns a channel that receives a value after events or webhooks
	// may have been added, and a function that stops it. It is a hint only:
	// the dispatcher also polls, for changes the Source cannot see.
	Wake() (wake <-chan struct{}, stop func())
	// RecordDelivery adds d to the delivery log. With advance it also moves
	// the webhook d.WebhookID on to d.EventSeq, in the same write, so the
	// event is never tried again; a position never moves back.
	RecordDelivery(ctx context.Context, d *belay.Delivery, advance bool) error
	// LastAttempt returns the recorded attempt with the highest number to
	// deliver event seq to webhook webhookID, or nil when there is none.
	LastAttempt(ctx context.Context, webhookID string, seq int64) (*belay.Delivery, error)
	// ClaimWebhook takes or renews holder's lease on delivering webhook
	// id's events until the given time, and reports whether holder holds it
	// now. Another holder takes the lease only once until has passed (its
	// until at or before now), so however many dispatchers share the
	// webhooks, one at a time delivers each webhook's events.
	ClaimWebhook(ctx context.Context, id, holder string, now, until time.Time) (bool, error)
}

// Options tune the dispatcher. Zero fields take the defaults.
type Options struct {
	// MaxAttempts is how many times one event is tried (default 6).
	MaxAttempts int
	// BaseDelay is the wait after the first failed attempt; it doubles after
	// each further one (default 1s).
	BaseDelay time.Duration
	// MaxDelay caps the wait between attempts (default 1 min).
	MaxDelay time.Duration
	// Timeout bounds one attempt, connection to last byte (default 10s).
	Timeout time.Duration
	// PollInterval is the longest the dispatcher sleeps: it also notices
	// events and webhooks written by other processes (default 1s).
	PollInterval time.Duration
	// Transport makes the requests (default http.DefaultTransport), e.g. to
	// trust a private CA. Whatever it is, redirects are never followed and
	// Timeout applies.
	Transport http.RoundTripper
	// Clock dates and signs the attempts (default the system clock).
	Clock belay.Clock
	// Logger receives what goes wrong (default slog.Default()).
	Logger *slog.Logger
	// Holder names this dispatcher in the webhooks' leases (default a
	// random id). Dispatchers sharing a database must have different ones.
	Holder string
	// Lease is how long a claim on a webhook lasts unless renewed (default
	// 30s): a dispatcher that dies hands its webhooks on after at most that.
	// It renews every PollInterval, and it is at least
	// Timeout + 3×PollInterval, so an attempt never outlives the lease.
	Lease time.Duration
}

// Default dispatcher settings.
const (
	DefaultAttempts     = 6
	DefaultBaseDelay    = time.Second
	DefaultMaxDelay     = time.Minute
	DefaultTimeout      = 10 * time.Second
	DefaultPollInterval = time.Second
	DefaultLease        = 30 * time.Second
)

func (o Options) withDefaults() Options {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultAttempts
	}
	if o.BaseDelay <= 0 {
		o.BaseDelay = DefaultBaseDelay
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = DefaultMaxDelay
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.Transport == nil {
		o.Transport = http.DefaultTransport
	}
	if o.Clock == nil {
		o.Clock = belay.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Holder == "" {
		o.Holder = newDeliveryID()
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	o.Lease = max(o.Lease, o.Timeout+3*o.PollInterval)
	return o
}

// backoff is the wait after failed attempt number attempt (1-based).
func (o Options) backoff(attempt int) time.Duration {
	d := o.BaseDelay
	for i := 1; i < attempt && d < o.MaxDelay; i++ {
		d *= 2
	}
	return min(d, o.MaxDelay)
}

// pageSize bounds one read of the event log by a worker.
const pageSize = 100

// Run delivers src's events to src's webhooks until ctx ends, and returns
// once every delivery in flight has stopped. It notices webhooks added and
// removed while it runs.
//
// A 2xx answer is success. Anything else (a redirect, which is never
// followed, an error status, a timeout, a refused connection) is retried
// with exponential backoff (1s, 2s, 4s… by default), up to
// Options.MaxAttempts attempts in all (6 by default). Every attempt is
// recorded in the delivery log, and the attempts are counted there: a
// dispatcher that starts on an event tried before (by an earlier run, or
// another instance) goes on from the next attempt once the backoff since the
// last one has passed. After the last attempt the webhook moves on
// to the next event, so a dead endpoint never stalls the log; the given-up
// delivery stays visible in the log.
//
// Each webhook has its own worker, so a slow or dead endpoint delays only
// its own deliveries. Several dispatchers may share one database (several
// `belay serve` instances on PostgreSQL): each delivers only the webhooks it
// holds a lease on (Source.ClaimWebhook), renews its leases while it runs,
// and starts an attempt only while enough of its lease is left for the
// attempt to end within it, so each event is delivered by one of them. Run never asks src to write during HTTP: recording an
// attempt is a short write after the request.
func Run(ctx context.Context, src Source, opts Options) {
	opts = opts.withDefaults()
	d := &dispatcher{src: src, opts: opts, log: opts.Logger}
	d.client = &http.Client{
		Transport: opts.Transport,
		Timeout:   opts.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	wake, stopWake := src.Wake()
	defer stopWake()
	workers := map[string]*worker{}
	var wg sync.WaitGroup
	defer func() {
		for _, w := range workers {
			w.stop()
		}
		wg.Wait()
		d.release(ctx, workers)
	}()
	pacer := pace.Pacer{Gap: wakeGap}
	for {
		hooks, err := d.claim(ctx, workers)
		if err != nil && ctx.Err() == nil {
			d.log.Error("webhooks: list", "error", err)
		}
		if err == nil {
			live := map[string]bool{}
			for _, h := range hooks {
				w := workers[h.ID]
				if w == nil {
					continue // held by another dispatcher
				}
				live[h.ID] = true
				if !w.started {
					w.started = true
					wctx := w.ctx
					wg.Go(func() { d.work(wctx, w) })
				}
				// Replace any snapshot the worker has not taken yet; only
				// this loop sends, so the send never blocks.
				select {
				case <-w.kick:
				default:
				}
				w.kick <- h
			}
			for id, w := range workers {
				if !live[id] {
					w.stop()
					delete(workers, id)
				}
			}
		}
		if !pacer.Pause(ctx, wake, nil, opts.PollInterval) {
			return
		}
	}
}

// wakeGap is the least time between two rounds of the dispatcher that saves
// woke (see pace.Pacer): a round lists the webhooks and renews their leases,
// a read and a write, which a stream of saves would otherwise pay each (one
// sequential HTTP client saving: 11 % of the server's CPU). An event is
// handed to its webhook's worker up to this much later than at once.
const wakeGap = 20 * time.Millisecond

type worker struct {
	// kick carries the newest snapshot of the webhook: a cue to deliver.
	kick    chan *belay.Webhook
	ctx     context.Context
	stop    context.CancelFunc
	started bool
	// until is when this dispatcher's lease on the webhook ends (Unix
	// nanoseconds by Options.Clock).
	until atomic.Int64
}

// claim takes or renews the lease on every webhook, creating a worker for
// each one newly held and stopping the worker of each one lost, and
// returns the webhooks as read after the claims: a webhook just taken over
// starts from the position its previous holder left.
func (d *dispatcher) claim(ctx context.Context, workers map[string]*worker) ([]*belay.Webhook, error) {
	hooks, err := d.src.Webhooks(ctx)
	if err != nil {
		return nil, err
	}
	taken := false
	for _, h := range hooks {
		now := d.opts.Clock.Now()
		until := now.Add(d.opts.Lease)
		ok, err := d.src.ClaimWebhook(ctx, h.ID, d.opts.Holder, now, until)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Error("webhooks: claim", "webhook", h.ID, "error", err)
			}
			continue // a worker keeps what is left of its lease
		}
		w := workers[h.ID]
		switch {
		case ok && w == nil:
			w = &worker{kick: make(chan *belay.Webhook, 1)}
			w.ctx, w.stop = context.WithCancel(ctx)
			workers[h.ID] = w
			taken = true
		case !ok && w != nil:
			w.stop()
			delete(workers, h.ID)
		}
		if ok {
			w.until.Store(until.UnixNano())
		}
	}
	if !taken {
		return hooks, nil
	}
	return d.src.Webhooks(ctx)
}

// release ends this dispatcher's leases on the webhooks of workers, which
// no longer deliver, so another dispatcher (or this one restarted) takes
// them at once instead of after what is left of them.
func (d *dispatcher) release(ctx context.Context, workers map[string]*worker) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	for id := range workers {
		now := d.opts.Clock.Now()
		if _, err := d.src.ClaimWebhook(ctx, id, d.opts.Holder, now, now); err != nil {
			d.log.Warn("webhooks: release lease", "webhook", id, "error", err)
			if ctx.Err() != nil {
				return // out of time: the rest lapse on their own
			}
		}
	}
}

// releaseTimeout bounds how long a stopping dispatcher spends releasing its
// leases; what it could not release lapses on its own.
const releaseTimeout = 5 * time.Second

// held reports whether enough of w's lease is left for one more attempt
// (at most Timeout) and its record to end within it.
func (d *dispatcher) held(w *worker) bool {
	return d.opts.Clock.Now().Add(d.opts.Timeout+d.opts.PollInterval).UnixNano() < w.until.Load()
}

type dispatcher struct {
	src    Source
	opts   Options
	log    *slog.Logger
	client *http.Client
}

// work delivers one webhook's events in order until ctx ends.
func (d *dispatcher) work(ctx context.Context, w *worker) {
	var pos int64 // the last event handled by this worker
	for {
		select {
		case <-ctx.Done():
			return
		case h := <-w.kick:
			// Another process may have moved the webhook further on.
			pos = d.drain(ctx, w, h, max(pos, h.LastSeq))
		}
	}
}

// drain delivers h's events after pos and returns the new position. It stops
// early when ctx ends or the log cannot be written; the next kick resumes.
func (d *dispatcher) drain(ctx context.Context, w *worker, h *belay.Webhook, pos int64) int64 {
	for {
		evs, err := d.src.Events(ctx, pos, h.Events, pageSize)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Error("webhooks: read events", "webhook", h.ID, "error", err)
			}
			return pos
		}
		for _, e := range evs {
			if !d.deliver(ctx, w, h, e) {
				return pos
			}
			pos = e.Seq
		}
		if len(evs) < pageSize {
			return pos
		}
	}
}

// deliver tries e until it succeeds or MaxAttempts are spent, records every
// attempt, and advances the webhook past e with the last one. It reports
// false when it stopped before that (ctx ended, or the log write failed).
func (d *dispatcher) deliver(ctx context.Context, w *worker, h *belay.Webhook, e belay.Event) bool {
	body, err := json.Marshal(e)
	if err != nil {
		d.log.Error("webhooks: encode event", "seq", e.Seq, "error", err)
		return false
	}
	last, err := d.src.LastAttempt(ctx, h.ID, e.Seq)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Error("webhooks: read delivery log", "webhook", h.ID, "seq", e.Seq, "error", err)
		}
		return false
	}
	attempt := 1
	if last != nil {
		attempt = last.Attempt + 1
		if !sleep(ctx, last.CreatedAt.Add(d.opts.backoff(last.Attempt)).Sub(d.opts.Clock.Now())) {
			return false
		}
	}
	for ; ; attempt++ {
		if !d.held(w) {
			return false // the lease is lost or lapsing: tried again once renewed
		}
		del := &belay.Delivery{ID: newDeliveryID(), WebhookID: h.ID, EventSeq: e.Seq, EventType: e.Type, Attempt: attempt}
		d.post(ctx, h, body, del)
		if ctx.Err() != nil {
			return false // shutting down: the event is tried again on the next start
		}
		done := del.Error == "" || attempt >= d.opts.MaxAttempts
		if err := d.src.RecordDelivery(ctx, del, done); err != nil {
			if ctx.Err() == nil {
				d.log.Error("webhooks: record delivery", "webhook", h.ID, "seq", e.Seq, "error", err)
			}
			return false
		}
		if done {
			if del.Error != "" {
				d.log.Warn("webhooks: gave up", "webhook", h.ID, "seq", e.Seq, "attempts", attempt, "error", del.Error)
			}
			return true
		}
		if !sleep(ctx, d.opts.backoff(attempt)) {
			return false
		}
	}
}

// sleep waits for d (no time when d is not positive) and reports whether
// ctx was still going when the wait ended.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// maxErrorBody bounds how much of a failed response's body goes to the log.
const maxErrorBody = 200

// post makes one attempt and fills del's outcome.
func (d *dispatcher) post(ctx context.Context, h *belay.Webhook, body []byte, del *belay.Delivery) {
	now := d.opts.Clock.Now()
	del.CreatedAt = now
	timestamp := strconv.FormatInt(now.Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		del.Error = err.Error()
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "belay-webhooks")
	req.Header.Set(HeaderEvent, del.EventType)
	req.Header.Set(HeaderDelivery, del.ID)
	req.Header.Set(HeaderTimestamp, timestamp)
	req.Header.Set(HeaderSignature, Sign(h.Secret, timestamp, body))
	start := time.Now()
	resp, err := d.client.Do(req)
	if err != nil {
		del.DurationMs = time.Since(start).Milliseconds()
		del.Error = deliveryError(err)
		return
	}
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	resp.Body.Close()
	del.DurationMs = time.Since(start).Milliseconds()
	del.StatusCode = resp.StatusCode
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		// %.200q quotes at most 200 characters of the location.
		del.Error = fmt.Sprintf("redirect to %.200q not followed", resp.Header.Get("Location"))
	default:
		del.Error = "HTTP " + resp.Status
		if s := strings.Join(strings.Fields(strings.ToValidUTF8(string(snippet), "")), " "); s != "" {
			del.Error += ": " + s
		}
	}
}

// deliveryError describes a failed request without repeating the URL, which
// the webhook already shows.
func deliveryError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// newDeliveryID returns a time-ordered UUID (version 7, RFC 9562), the form
// of every id belay makes: ordered within a millisecond too, so a worker's
// deliveries in a row sort as they were made.
func newDeliveryID() string {
	return uuid.Must(uuid.NewV7()).String()
}
