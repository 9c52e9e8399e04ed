package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/webhook"
)

// memSource is a webhook.Source in memory: a test's webhooks, event log and
// delivery log, kept the way a store keeps them.
type memSource struct {
	mu         sync.Mutex
	hooks      []*belay.Webhook
	events     []belay.Event
	deliveries []*belay.Delivery
	wakers     map[chan struct{}]struct{}
	claims     map[string]memClaim
	// rounds counts the dispatcher's rounds: its calls of Webhooks.
	rounds int
}

type memClaim struct {
	holder string
	until  time.Time
}

var _ webhook.Source = (*memSource)(nil)

func newMemSource() *memSource {
	return &memSource{wakers: map[chan struct{}]struct{}{}}
}

func (m *memSource) Webhooks(context.Context) ([]*belay.Webhook, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rounds++
	out := make([]*belay.Webhook, 0, len(m.hooks))
	for _, h := range m.hooks {
		c := *h
		c.Events = slices.Clone(h.Events)
		out = append(out, &c)
	}
	return out, nil
}

func (m *memSource) Events(_ context.Context, after int64, types []string, limit int) ([]belay.Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []belay.Event
	for _, e := range m.events {
		if e.Seq > after && (len(types) == 0 || slices.Contains(types, e.Type)) && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (m *memSource) Wake() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	m.wakers[ch] = struct{}{}
	m.mu.Unlock()
	return ch, func() {
		m.mu.Lock()
		delete(m.wakers, ch)
		m.mu.Unlock()
	}
}

func (m *memSource) RecordDelivery(_ context.Context, d *belay.Delivery, advance bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.IndexFunc(m.hooks, func(h *belay.Webhook) bool { return h.ID == d.WebhookID })
	if i < 0 {
		return fmt.Errorf("webhook %s not found", d.WebhookID)
	}
	c := *d
	m.deliveries = append(m.deliveries, &c)
	if advance {
		m.hooks[i].LastSeq = max(m.hooks[i].LastSeq, d.EventSeq)
	}
	return nil
}

func (m *memSource) LastAttempt(_ context.Context, webhookID string, seq int64) (*belay.Delivery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var last *belay.Delivery
	for _, d := range m.deliveries {
		if d.WebhookID == webhookID && d.EventSeq == seq && (last == nil || d.Attempt > last.Attempt) {
			c := *d
			last = &c
		}
	}
	return last, nil
}

func (m *memSource) ClaimWebhook(_ context.Context, id, holder string, now, until time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.ContainsFunc(m.hooks, func(h *belay.Webhook) bool { return h.ID == id }) {
		return false, nil
	}
	if m.claims == nil {
		m.claims = map[string]memClaim{}
	}
	c, ok := m.claims[id]
	if ok && c.holder != holder && c.until.After(now) {
		return false, nil
	}
	m.claims[id] = memClaim{holder, until}
	return true, nil
}

// notify wakes the dispatcher; the caller holds m.mu.
func (m *memSource) notify() {
	for ch := range m.wakers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// add registers a webhook for the events from now on.
func (m *memSource) add(url string, events ...string) *belay.Webhook {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.hooks) + 1
	h := &belay.Webhook{ID: fmt.Sprintf("hook-%d", n), URL: url, Secret: fmt.Sprintf("whsec_test%d", n),
		Events: events, LastSeq: int64(len(m.events))}
	m.hooks = append(m.hooks, h)
	m.notify()
	c := *h
	return &c
}

// emit appends an event of type typ and returns it.
func (m *memSource) emit(typ string) belay.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := belay.Event{Seq: int64(len(m.events)) + 1, Type: typ, SessionID: "session-1", CreatedAt: time.Now().UTC()}
	m.events = append(m.events, e)
	m.notify()
	return e
}

// deliveriesOf returns a webhook's delivery log, oldest first.
func (m *memSource) deliveriesOf(id string) []*belay.Delivery {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*belay.Delivery
	for _, d := range m.deliveries {
		if d.WebhookID == id {
			c := *d
			out = append(out, &c)
		}
	}
	return out
}

// position returns a webhook's LastSeq.
func (m *memSource) position(id string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, h := range m.hooks {
		if h.ID == id {
			return h.LastSeq
		}
	}
	return -1
}

// logEnd returns the newest event's seq.
func (m *memSource) logEnd() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return int64(len(m.events))
}

// fast retries at once, so tests wait only on bounded polling.
var fast = webhook.Options{BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, PollInterval: 20 * time.Millisecond,
	Logger: slog.New(slog.DiscardHandler)}

// runDispatcher runs webhook.Run until the test ends.
func runDispatcher(tb testing.TB, src webhook.Source, opts webhook.Options) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		webhook.Run(ctx, src, opts)
		close(done)
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
	})
}

// waitFor polls cond for up to 10 seconds.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type request struct {
	header http.Header
	body   []byte
	event  belay.Event
}

// receiver is a webhook endpoint that records what it gets and answers with
// respond (200 when nil). n counts requests from 1. Once it trusts a secret,
// it checks every request as a real receiver does and refuses, unrecorded,
// those not signed with it.
type receiver struct {
	srv     *httptest.Server
	respond func(n int, w http.ResponseWriter, r *http.Request)

	mu     sync.Mutex
	secret string
	reqs   []request
}

// trust makes rc refuse requests not signed with secret.
func (rc *receiver) trust(secret string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.secret = secret
}

func newReceiver(tb testing.TB, respond func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	tb.Helper()
	rc := &receiver{respond: respond}
	rc.srv = httptest.NewServer(rc)
	tb.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	secret := rc.secret
	rc.mu.Unlock()
	// What a receiver needs: the header names and VerifySignature.
	if secret != "" && !webhook.VerifySignature(secret, r.Header.Get(webhook.HeaderTimestamp), body, r.Header.Get(webhook.HeaderSignature)) {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	req := request{header: r.Header.Clone(), body: body}
	_ = json.Unmarshal(body, &req.event)
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, req)
	n := len(rc.reqs)
	rc.mu.Unlock()
	if rc.respond != nil {
		rc.respond(n, w, r)
	}
}

func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.reqs)
}

func (rc *receiver) seqs() []int64 {
	var out []int64
	for _, r := range rc.requests() {
		out = append(out, r.event.Seq)
	}
	return out
}
