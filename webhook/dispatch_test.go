package webhook_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testclock"
	"github.com/belayhq/belay/webhook"
)

func TestReceiverVerifiesWithVerifySignatureAlone(t *testing.T) {
	src := newMemSource()
	rc := newReceiver(t, nil)
	good := src.add(rc.srv.URL+"/good", belay.EventCheckpointCreated, belay.EventHITLRequired)
	rc.trust(good.Secret)
	stranger := src.add(rc.srv.URL+"/stranger", belay.EventCheckpointCreated)
	signedAt := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	opts := fast
	opts.MaxAttempts, opts.Clock = 1, testclock.New(signedAt, 0)
	runDispatcher(t, src, opts)
	created := src.emit(belay.EventCheckpointCreated)
	required := src.emit(belay.EventHITLRequired)

	waitFor(t, "both webhooks to be done", func() bool {
		return src.position(good.ID) == required.Seq && src.position(stranger.ID) == created.Seq
	})
	log := src.deliveriesOf(good.ID)
	reqs := rc.requests()
	if len(log) != 2 || len(reqs) != 2 {
		t.Fatalf("verified requests = %d, deliveries = %+v, want 2 of each", len(reqs), log)
	}
	for i, want := range []belay.Event{created, required} {
		r, d := reqs[i], log[i]
		if r.event.Seq != want.Seq || r.event.Type != want.Type {
			t.Errorf("request %d carries event %+v, want %+v", i, r.event, want)
		}
		if got := r.header.Get("Content-Type"); got != "application/json" {
			t.Errorf("Content-Type = %q", got)
		}
		if got := r.header.Get(webhook.HeaderEvent); got != want.Type {
			t.Errorf("%s = %q, want the body's type %q", webhook.HeaderEvent, got, want.Type)
		}
		if got := r.header.Get(webhook.HeaderDelivery); got != d.ID {
			t.Errorf("%s = %q, want the logged delivery %q", webhook.HeaderDelivery, got, d.ID)
		}
		if got, want := r.header.Get(webhook.HeaderTimestamp), strconv.FormatInt(signedAt.Unix(), 10); got != want {
			t.Errorf("%s = %q, want the clock's %q", webhook.HeaderTimestamp, got, want)
		}
		if d.StatusCode != http.StatusOK || d.Error != "" || d.Attempt != 1 || d.EventSeq != want.Seq || d.EventType != want.Type || !d.CreatedAt.Equal(signedAt) {
			t.Errorf("delivery %d = %+v", i, d)
		}
		sig, ts := r.header.Get(webhook.HeaderSignature), r.header.Get(webhook.HeaderTimestamp)
		if webhook.VerifySignature(good.Secret, ts, append([]byte(" "), r.body...), sig) {
			t.Error("signature verifies for a changed body")
		}
		if webhook.VerifySignature(good.Secret, strconv.FormatInt(signedAt.Unix()+1, 10), r.body, sig) {
			t.Error("signature verifies for another timestamp")
		}
	}
	if log := src.deliveriesOf(stranger.ID); len(log) != 1 || log[0].StatusCode != http.StatusUnauthorized ||
		log[0].Error != "HTTP 401 Unauthorized: bad signature" {
		t.Errorf("delivery signed with another secret = %+v, want refused", log)
	}
}

func TestRetriesUntilSuccess(t *testing.T) {
	src := newMemSource()
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n <= 2 {
			http.Error(w, "database\nis down", http.StatusInternalServerError)
		}
	})
	hook := src.add(rc.srv.URL, belay.EventCheckpointCreated)
	runDispatcher(t, src, fast)
	src.emit(belay.EventCheckpointCreated)

	waitFor(t, "three attempts logged", func() bool { return len(src.deliveriesOf(hook.ID)) == 3 })
	log := src.deliveriesOf(hook.ID)
	for i, d := range log {
		wantStatus, wantErr := 500, "HTTP 500 Internal Server Error: database is down"
		if i == 2 {
			wantStatus, wantErr = 200, ""
		}
		if d.Attempt != i+1 || d.StatusCode != wantStatus || d.Error != wantErr || d.EventType != belay.EventCheckpointCreated {
			t.Errorf("delivery %d = %+v, want attempt %d status %d error %q", i, d, i+1, wantStatus, wantErr)
		}
	}
	reqs := rc.requests()
	if len(reqs) != 3 || reqs[0].event.Seq != reqs[2].event.Seq {
		t.Fatalf("requests = %d, want the same event 3 times", len(reqs))
	}
	if reqs[0].header.Get(webhook.HeaderDelivery) == reqs[1].header.Get(webhook.HeaderDelivery) {
		t.Error("two attempts share a delivery id")
	}
	waitFor(t, "the webhook to move past the event", func() bool { return src.position(hook.ID) == reqs[0].event.Seq })
}

func TestGivesUpOnDeadReceiverAndMovesOn(t *testing.T) {
	src := newMemSource()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // nothing listens there any more: connections are refused
	redirect := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://example.com/elsewhere", http.StatusFound)
	})
	deadHook := src.add(dead.URL, belay.EventCheckpointCreated)
	redirectHook := src.add(redirect.srv.URL, belay.EventCheckpointCreated)
	opts := fast
	opts.MaxAttempts = 3
	runDispatcher(t, src, opts)
	src.emit(belay.EventCheckpointCreated)
	src.emit(belay.EventCheckpointCreated)

	for _, hook := range []*belay.Webhook{deadHook, redirectHook} {
		waitFor(t, "six attempts", func() bool { return len(src.deliveriesOf(hook.ID)) == 6 })
		log := src.deliveriesOf(hook.ID)
		for i, d := range log {
			if d.Attempt != i%3+1 || d.Error == "" || d.EventType != belay.EventCheckpointCreated || d.EventSeq != log[i/3*3].EventSeq {
				t.Errorf("%s delivery %d = %+v, want failed attempt %d of one event", hook.URL, i, d, i%3+1)
			}
		}
		if log[3].EventSeq <= log[0].EventSeq {
			t.Errorf("second event %d tried before first %d", log[3].EventSeq, log[0].EventSeq)
		}
		if hook == deadHook && log[0].StatusCode != 0 {
			t.Errorf("refused connection logged with status %d", log[0].StatusCode)
		}
		if hook == redirectHook && (log[0].StatusCode != http.StatusFound || !strings.Contains(log[0].Error, "not followed")) {
			t.Errorf("redirect logged as %+v", log[0])
		}
		waitFor(t, "the webhook to move on", func() bool { return src.position(hook.ID) == src.logEnd() })
	}
	if got := len(redirect.requests()); got != 6 {
		t.Errorf("redirecting receiver got %d requests, want 6 (the redirect is never followed)", got)
	}
}

func TestTimeoutIsAFailedAttempt(t *testing.T) {
	src := newMemSource()
	release := make(chan struct{})
	rc := newReceiver(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) })
	hook := src.add(rc.srv.URL, belay.EventCheckpointCreated)
	opts := fast
	opts.MaxAttempts, opts.Timeout = 1, 50*time.Millisecond
	runDispatcher(t, src, opts)
	src.emit(belay.EventCheckpointCreated)

	waitFor(t, "the attempt to be logged", func() bool { return len(src.deliveriesOf(hook.ID)) == 1 })
	d := src.deliveriesOf(hook.ID)[0]
	if d.StatusCode != 0 || !strings.Contains(d.Error, "Timeout") || d.DurationMs < 50 {
		t.Errorf("delivery = %+v, want a timeout after at least 50ms", d)
	}
	if strings.Contains(d.Error, rc.srv.URL) {
		t.Errorf("error %q repeats the URL", d.Error)
	}
}

func TestDeliversItsTypesInOrderOnce(t *testing.T) {
	src := newMemSource()
	src.emit(belay.EventSessionCreated) // before the webhooks: never delivered
	all := newReceiver(t, nil)
	hitl := newReceiver(t, nil)
	allHook := src.add(all.srv.URL)
	src.add(hitl.srv.URL, belay.EventHITLRequired, belay.EventHITLDecided)
	types := []string{belay.EventCheckpointCreated, belay.EventHITLRequired, belay.EventSessionStatusChanged, belay.EventHITLDecided}
	for _, typ := range types {
		src.emit(typ) // before the dispatcher starts
	}
	runDispatcher(t, src, fast)
	for _, typ := range types {
		src.emit(typ) // while it runs
	}
	waitFor(t, "every event", func() bool { return src.position(allHook.ID) == src.logEnd() })
	// One more event of every webhook's types: once it arrives, every
	// earlier one has been handled, so a redelivery would show.
	last := src.emit(belay.EventHITLDecided)
	waitFor(t, "the last event", func() bool {
		return slices.Contains(all.seqs(), last.Seq) && slices.Contains(hitl.seqs(), last.Seq)
	})

	var wantAll []int64
	for seq := int64(2); seq <= last.Seq; seq++ {
		wantAll = append(wantAll, seq)
	}
	if got := all.seqs(); !slices.Equal(got, wantAll) {
		t.Errorf("webhook of all types got seqs %v, want %v", got, wantAll)
	}
	var gotTypes []string
	for _, r := range hitl.requests() {
		gotTypes = append(gotTypes, r.event.Type)
	}
	want := []string{belay.EventHITLRequired, belay.EventHITLDecided, belay.EventHITLRequired, belay.EventHITLDecided, belay.EventHITLDecided}
	if !slices.Equal(gotTypes, want) {
		t.Errorf("webhook of hitl types got %v, want %v", gotTypes, want)
	}
}

func TestTransportOption(t *testing.T) {
	src := newMemSource()
	rc := &receiver{}
	rc.srv = httptest.NewTLSServer(rc) // a certificate only its own client trusts
	t.Cleanup(rc.srv.Close)
	hook := src.add(rc.srv.URL)
	opts := fast
	opts.Transport = rc.srv.Client().Transport
	runDispatcher(t, src, opts)
	src.emit(belay.EventCheckpointCreated)

	waitFor(t, "the delivery", func() bool { return src.position(hook.ID) == src.logEnd() })
	if log := src.deliveriesOf(hook.ID); len(log) != 1 || log[0].StatusCode != http.StatusOK || log[0].Error != "" {
		t.Errorf("deliveries over TLS = %+v, want one success", log)
	}
}

func TestDeliveryIDsAreTimeOrderedUUIDs(t *testing.T) {
	src := newMemSource()
	rc := newReceiver(t, nil)
	hook := src.add(rc.srv.URL)
	runDispatcher(t, src, fast)
	for range 3 {
		// In a row: the worker delivers them at once, in one millisecond,
		// whose ids must sort as they were made all the same.
		src.emit(belay.EventCheckpointCreated)
	}
	waitFor(t, "three deliveries", func() bool { return len(src.deliveriesOf(hook.ID)) == 3 })
	var ids []string
	for _, d := range src.deliveriesOf(hook.ID) {
		if !belay.IsUUID(d.ID) || d.ID[14] != '7' {
			t.Errorf("delivery id %q is not a version 7 UUID", d.ID)
		}
		ids = append(ids, d.ID)
	}
	if !slices.IsSorted(ids) {
		t.Errorf("delivery ids %v are not in time order", ids)
	}
}

// TestAStreamOfEventsWakesFewRounds: events written in quick succession,
// each waking the dispatcher, are handed over in a few rounds (each a list
// of the webhooks and a renewal of their leases), not a round each, and all
// of them are delivered.
func TestAStreamOfEventsWakesFewRounds(t *testing.T) {
	src := newMemSource()
	rcv := newReceiver(t, nil)
	hook := src.add(rcv.srv.URL)
	opts := fast
	opts.PollInterval = time.Minute
	runDispatcher(t, src, opts)
	waitFor(t, "the first round", func() bool {
		src.mu.Lock()
		defer src.mu.Unlock()
		return src.rounds > 0
	})
	src.mu.Lock()
	before := src.rounds
	src.mu.Unlock()
	const events = 100
	for range events {
		src.emit(belay.EventCheckpointCreated)
		time.Sleep(time.Millisecond) // as saves arrive, each after the last
	}
	waitFor(t, "every event", func() bool { return src.position(hook.ID) == src.logEnd() })
	src.mu.Lock()
	rounds := src.rounds - before
	src.mu.Unlock()
	if rounds > events/4 {
		t.Errorf("%d events in a row took %d rounds of the dispatcher, want a few", events, rounds)
	}
}
