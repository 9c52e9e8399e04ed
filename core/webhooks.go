package core

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// Webhook signature headers.
const (
	HeaderEvent     = "X-Belay-Event"
	HeaderDelivery  = "X-Belay-Delivery"
	HeaderTimestamp = "X-Belay-Timestamp"
	HeaderSignature = "X-Belay-Signature"
)

// Webhook limits.
const (
	MaxWebhookURL = 2048
	// MaxDeliveryPage bounds one read of the delivery log.
	MaxDeliveryPage = belay.MaxDeliveryPage
)

// webhookSecretPrefix marks webhook signing secrets.
const webhookSecretPrefix = "whsec_"

// EventTypes lists every event type a webhook can subscribe to.
var EventTypes = belay.EventTypes

// SignWebhook returns the X-Belay-Signature value of body sent at timestamp
// (unix seconds, as sent in X-Belay-Timestamp). The HMAC key is the whole
// secret, "whsec_" prefix included.
func SignWebhook(secret, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// VerifySignature reports whether signature (the X-Belay-Signature header)
// is the signature of body and timestamp (the X-Belay-Timestamp header)
// with secret (the whole "whsec_…" string). It compares in constant time. It does not judge the
// timestamp's age: reject old ones yourself to stop replays. In a handler:
//
//	body, err := io.ReadAll(r.Body)
//	ts := r.Header.Get(core.HeaderTimestamp)
//	if err != nil || !core.VerifySignature(secret, ts, body, r.Header.Get(core.HeaderSignature)) {
//		http.Error(w, "bad signature", http.StatusUnauthorized)
//		return
//	}
func VerifySignature(secret string, timestamp string, body []byte, signature string) bool {
	return hmac.Equal([]byte(SignWebhook(secret, timestamp, body)), []byte(signature))
}

func newWebhookSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return webhookSecretPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// webhookAdmin lets only an admin manage webhooks: they see every event.
func webhookAdmin(ctx context.Context, what string) error {
	_, err := authorizeAdmin(ctx, what)
	return err
}

func validWebhookURL(raw string) error {
	if raw == "" || len(raw) > MaxWebhookURL {
		return belay.Invalid("url", "url must be 1-%d characters", MaxWebhookURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return belay.Invalid("url", "url is not valid: %q", belay.Clip(raw, 200))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return belay.Invalid("url", "url must start with http:// or https://, got %q", belay.Clip(raw, 200))
	}
	if u.Hostname() == "" {
		return belay.Invalid("url", "url must name a host, got %q", belay.Clip(raw, 200))
	}
	return nil
}

// webhookEvents validates event types and drops repeats; empty means all.
func webhookEvents(types []string) ([]string, error) {
	var out []string
	for _, t := range types {
		if !slices.Contains(EventTypes, t) {
			return nil, belay.Invalid("events", "unknown event type %q; known: %s", belay.Clip(t, 100), strings.Join(EventTypes, ", ")).
				With("allowed", EventTypes)
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// AddWebhook registers url to receive every future event of the given types
// (all types when none are given). Only an admin may. The returned webhook
// carries its signing secret; later reads do not.
func (s *Service) AddWebhook(ctx context.Context, url string, events []string) (*belay.Webhook, error) {
	if err := webhookAdmin(ctx, "add webhooks"); err != nil {
		return nil, err
	}
	if err := validWebhookURL(url); err != nil {
		return nil, err
	}
	events, err := webhookEvents(events)
	if err != nil {
		return nil, err
	}
	w := &belay.Webhook{ID: newID(), URL: url, Secret: newWebhookSecret(), Events: events, CreatedAt: s.clock.Now()}
	err = s.update(ctx, func(tx store.Tx) error {
		// Only events from now on: reading the position in the same
		// transaction leaves no gap and no overlap.
		if w.LastSeq, err = tx.LastEventSeq(ctx); err != nil {
			return err
		}
		return tx.InsertWebhook(ctx, w)
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// ListWebhooks returns the webhooks, oldest first, without their secrets.
// Only an admin may.
func (s *Service) ListWebhooks(ctx context.Context) ([]*belay.Webhook, error) {
	if err := webhookAdmin(ctx, "list webhooks"); err != nil {
		return nil, err
	}
	hooks, err := s.store.ListWebhooks(ctx)
	if err != nil {
		return nil, err
	}
	for _, w := range hooks {
		w.Secret = ""
	}
	if hooks == nil {
		hooks = []*belay.Webhook{}
	}
	return hooks, nil
}

// RemoveWebhook deletes a webhook and its delivery log. Only an admin may.
// Deliveries already in flight may still arrive.
func (s *Service) RemoveWebhook(ctx context.Context, id string) error {
	if err := webhookAdmin(ctx, "remove webhooks"); err != nil {
		return err
	}
	if err := belay.ValidateID("id", id); err != nil {
		return err
	}
	return s.update(ctx, func(tx store.Tx) error {
		return tx.DeleteWebhook(ctx, id)
	})
}

// ListDeliveries returns the newest delivery attempts, of one webhook when
// webhookID is set. limit 0 means belay.DefaultListLimit. Only an admin may.
func (s *Service) ListDeliveries(ctx context.Context, webhookID string, limit int) ([]*belay.Delivery, error) {
	if err := webhookAdmin(ctx, "read the webhook delivery log"); err != nil {
		return nil, err
	}
	if limit < 0 || limit > MaxDeliveryPage {
		return nil, belay.Invalid("limit", "limit must be 1-%d, got %d", MaxDeliveryPage, limit)
	}
	if limit == 0 {
		limit = belay.DefaultListLimit
	}
	if webhookID != "" {
		if err := belay.ValidateID("webhookId", webhookID); err != nil {
			return nil, err
		}
		hooks, err := s.store.ListWebhooks(ctx)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(hooks, func(w *belay.Webhook) bool { return w.ID == webhookID }) {
			return nil, belay.Errorf(belay.CodeNotFound, "webhook %s not found", webhookID).With("id", webhookID)
		}
	}
	list, err := s.store.ListDeliveries(ctx, store.DeliveryQuery{WebhookID: webhookID, Limit: limit})
	if err != nil {
		return nil, err
	}
	if list == nil {
		list = []*belay.Delivery{}
	}
	return list, nil
}

// WebhookOptions tune the webhook dispatcher. Zero fields take the defaults.
type WebhookOptions struct {
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
}

// Default webhook dispatcher settings.
const (
	DefaultWebhookAttempts  = 6
	DefaultWebhookBaseDelay = time.Second
	DefaultWebhookMaxDelay  = time.Minute
	DefaultWebhookTimeout   = 10 * time.Second
)

func (o WebhookOptions) withDefaults() WebhookOptions {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultWebhookAttempts
	}
	if o.BaseDelay <= 0 {
		o.BaseDelay = DefaultWebhookBaseDelay
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = DefaultWebhookMaxDelay
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultWebhookTimeout
	}
	if o.PollInterval <= 0 {
		o.PollInterval = SweepInterval
	}
	return o
}

// backoff is the wait after failed attempt number attempt (1-based).
func (o WebhookOptions) backoff(attempt int) time.Duration {
	d := o.BaseDelay
	for i := 1; i < attempt && d < o.MaxDelay; i++ {
		d *= 2
	}
	return min(d, o.MaxDelay)
}

// RunWebhooks delivers events to webhooks with the default options until
// ctx ends, and returns once every delivery in flight has stopped.
//
// Every event of a webhook's types is POSTed to its URL, one at a time in
// event order, with these headers:
//
//	Content-Type:      application/json (the body is the belay.Event)
//	X-Belay-Event:     the event type, e.g. checkpoint.created
//	X-Belay-Delivery:  the id of this attempt in the delivery log
//	X-Belay-Timestamp: unix seconds when the attempt was signed
//	X-Belay-Signature: sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>
//
// A receiver verifies a request by computing the HMAC over the timestamp
// header, a dot and the raw body with the webhook's secret, comparing it to
// the signature in constant time (VerifySignature does both), and rejecting
// timestamps more than a few minutes old to stop replays.
//
// A 2xx answer is success. Anything else (a redirect, which is never
// followed, an error status, a timeout, a refused connection) is retried
// with exponential backoff (1s, 2s, 4s… by default), up to
// WebhookOptions.MaxAttempts attempts in all (6 by default). Every attempt
// is recorded in the delivery log. After the last attempt the webhook moves
// on to the next event, so a dead endpoint never stalls the log; the
// given-up delivery stays visible in the log.
//
// Delivery is at least once: a process that stops between a delivery and
// recording it, or several `belay serve` processes on one database each
// running a dispatcher, can deliver an event twice. The event's seq (in the
// body) is global and stable: receivers drop duplicates by it.
//
// Each webhook has its own worker, so a slow or dead endpoint delays only its
// own deliveries. The dispatcher never holds a write transaction during
// HTTP: deciding and saving never wait for a webhook.
func (s *Service) RunWebhooks(ctx context.Context) {
	s.RunWebhooksWith(ctx, WebhookOptions{})
}

// webhookPage bounds one read of the event log by a webhook worker.
const webhookPage = 100

// RunWebhooksWith is RunWebhooks with tuned retries and timeouts.
func (s *Service) RunWebhooksWith(ctx context.Context, opts WebhookOptions) {
	d := &dispatcher{s: s, opts: opts.withDefaults()}
	d.client = &http.Client{
		Timeout: d.opts.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	wake, cancelWake := s.Wake()
	defer cancelWake()
	workers := map[string]*webhookWorker{}
	var wg sync.WaitGroup
	defer func() {
		for _, w := range workers {
			w.stop()
		}
		wg.Wait()
	}()
	for {
		hooks, err := s.store.ListWebhooks(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Error("webhooks: list", "error", err)
		}
		if err == nil {
			live := map[string]bool{}
			for _, h := range hooks {
				live[h.ID] = true
				w := workers[h.ID]
				if w == nil {
					w = &webhookWorker{kick: make(chan *belay.Webhook, 1)}
					var wctx context.Context
					wctx, w.stop = context.WithCancel(ctx)
					workers[h.ID] = w
					wg.Go(func() { d.work(wctx, w.kick) })
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
		if !pause(ctx, wake, d.opts.PollInterval) {
			return
		}
	}
}

type webhookWorker struct {
	// kick carries the newest snapshot of the webhook: a cue to deliver.
	kick chan *belay.Webhook
	stop context.CancelFunc
}

type dispatcher struct {
	s      *Service
	opts   WebhookOptions
	client *http.Client
}

// work delivers one webhook's events in order until ctx ends.
func (d *dispatcher) work(ctx context.Context, kick <-chan *belay.Webhook) {
	var pos int64 // the last event handled by this worker
	for {
		select {
		case <-ctx.Done():
			return
		case h := <-kick:
			// Another process may have moved the webhook further on.
			pos = d.drain(ctx, h, max(pos, h.LastSeq))
		}
	}
}

// drain delivers h's events after pos and returns the new position. It stops
// early when ctx ends or the log cannot be written; the next kick resumes.
func (d *dispatcher) drain(ctx context.Context, h *belay.Webhook, pos int64) int64 {
	for {
		evs, err := d.s.store.ListEvents(ctx, store.EventQuery{Scope: store.Everything, After: pos, Types: h.Events, Limit: webhookPage})
		if err != nil {
			if ctx.Err() == nil {
				d.s.log.Error("webhooks: read events", "webhook", h.ID, "error", err)
			}
			return pos
		}
		for _, e := range evs {
			if !d.deliver(ctx, h, e) {
				return pos
			}
			pos = e.Seq
		}
		if len(evs) < webhookPage {
			return pos
		}
	}
}

// deliver tries e until it succeeds or MaxAttempts are spent, records every
// attempt, and advances the webhook past e with the last one. It reports
// false when it stopped before that (ctx ended, or the log write failed).
func (d *dispatcher) deliver(ctx context.Context, h *belay.Webhook, e belay.Event) bool {
	body, err := json.Marshal(e)
	if err != nil {
		d.s.log.Error("webhooks: encode event", "seq", e.Seq, "error", err)
		return false
	}
	for attempt := 1; ; attempt++ {
		del := &belay.Delivery{ID: newID(), WebhookID: h.ID, EventSeq: e.Seq, EventType: e.Type, Attempt: attempt}
		d.post(ctx, h, body, del)
		if ctx.Err() != nil {
			return false // shutting down: the event is tried again on the next start
		}
		last := del.Error == "" || attempt >= d.opts.MaxAttempts
		// Short write transactions after the request, never around it.
		err := d.s.store.Update(ctx, func(tx store.Tx) error {
			if err := tx.InsertDelivery(ctx, del); err != nil {
				return err
			}
			if last {
				return tx.AdvanceWebhook(ctx, h.ID, e.Seq)
			}
			return nil
		})
		if err != nil {
			if ctx.Err() == nil {
				d.s.log.Error("webhooks: record delivery", "webhook", h.ID, "seq", e.Seq, "error", err)
			}
			return false
		}
		if last {
			if del.Error != "" {
				d.s.log.Warn("webhooks: gave up", "webhook", h.ID, "seq", e.Seq, "attempts", attempt, "error", del.Error)
			}
			return true
		}
		timer := time.NewTimer(d.opts.backoff(attempt))
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-timer.C:
		}
	}
}

// maxErrorBody bounds how much of a failed response's body goes to the log.
const maxErrorBody = 200

// post makes one attempt and fills del's outcome.
func (d *dispatcher) post(ctx context.Context, h *belay.Webhook, body []byte, del *belay.Delivery) {
	now := d.s.clock.Now()
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
	req.Header.Set(HeaderSignature, SignWebhook(h.Secret, timestamp, body))
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
		del.Error = fmt.Sprintf("redirect to %q not followed", belay.Clip(resp.Header.Get("Location"), 200))
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
