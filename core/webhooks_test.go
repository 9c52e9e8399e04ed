package core_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store/sqlite"
	"github.com/belayhq/belay/webhook"
)

var webhookAdmin = belay.WithActor(context.Background(), belay.Actor{UserID: "root", Admin: true})

// fastWebhooks retries at once, so tests wait only on bounded polling.
var fastWebhooks = webhook.Options{BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, PollInterval: 20 * time.Millisecond,
	Logger: slog.New(slog.DiscardHandler)}

// newWebhookService returns a service over a fresh SQLite file.
func newWebhookService(tb testing.TB) *core.Service {
	tb.Helper()
	db, err := sqlite.Open(localCtx, filepath.Join(tb.TempDir(), "belay.db"))
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	return core.New(core.Options{Store: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// runHookDispatcher runs the dispatcher until the test ends.
func runHookDispatcher(tb testing.TB, svc *core.Service, opts webhook.Options) {
	tb.Helper()
	ctx, cancel := context.WithCancel(localCtx)
	done := make(chan struct{})
	go func() {
		webhook.Run(ctx, svc.WebhookSource(), opts)
		close(done)
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
	})
}

// hookWait polls cond for up to 10 seconds.
func hookWait(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type hookRequest struct {
	header http.Header
	body   []byte
	event  belay.Event
}

// hookReceiver is a webhook endpoint on loopback that records what it gets and
// answers with respond (200 when nil). n counts requests from 1.
type hookReceiver struct {
	srv     *httptest.Server
	respond func(n int, w http.ResponseWriter, r *http.Request)

	mu   sync.Mutex
	reqs []hookRequest
}

func newHookReceiver(tb testing.TB, respond func(n int, w http.ResponseWriter, r *http.Request)) *hookReceiver {
	tb.Helper()
	rc := &hookReceiver{respond: respond}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := hookRequest{header: r.Header.Clone(), body: body}
		_ = json.Unmarshal(body, &req.event)
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, req)
		n := len(rc.reqs)
		rc.mu.Unlock()
		if rc.respond != nil {
			rc.respond(n, w, r)
		}
	}))
	tb.Cleanup(rc.srv.Close)
	return rc
}

func (rc *hookReceiver) requests() []hookRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.reqs)
}

func (rc *hookReceiver) seqs() []int64 {
	var out []int64
	for _, r := range rc.requests() {
		out = append(out, r.event.Seq)
	}
	return out
}

func addWebhook(tb testing.TB, svc *core.Service, url string, events ...string) *belay.Webhook {
	tb.Helper()
	w, err := svc.AddWebhook(webhookAdmin, url, events)
	if err != nil {
		tb.Fatalf("AddWebhook(%s, %v): %v", url, events, err)
	}
	return w
}

func hookDeliveries(tb testing.TB, svc *core.Service, webhookID string) []*belay.Delivery {
	tb.Helper()
	list, err := svc.ListDeliveries(webhookAdmin, webhookID, core.MaxDeliveryPage)
	if err != nil {
		tb.Fatalf("ListDeliveries: %v", err)
	}
	slices.Reverse(list) // oldest first
	return list
}

func hookLastSeq(tb testing.TB, svc *core.Service, id string) int64 {
	tb.Helper()
	hooks, err := core.StoreOf(svc).ListWebhooks(localCtx)
	if err != nil {
		tb.Fatalf("ListWebhooks: %v", err)
	}
	for _, w := range hooks {
		if w.ID == id {
			return w.LastSeq
		}
	}
	tb.Fatalf("webhook %s not found", id)
	return 0
}

func hookLogEnd(tb testing.TB, svc *core.Service) int64 {
	tb.Helper()
	seq, err := core.StoreOf(svc).LastEventSeq(localCtx)
	if err != nil {
		tb.Fatal(err)
	}
	return seq
}

func hookSave(tb testing.TB, svc *core.Service, project, summary string) *belay.Checkpoint {
	tb.Helper()
	cp, err := svc.CreateCheckpoint(localCtx, belay.CreateCheckpointInput{ProjectPath: project, Summary: summary})
	if err != nil {
		tb.Fatalf("CreateCheckpoint: %v", err)
	}
	return cp
}

func TestWebhookSignatureVerifies(t *testing.T) {
	svc := newWebhookService(t)
	rc := newHookReceiver(t, nil)
	hook := addWebhook(t, svc, rc.srv.URL+"/hook")
	if !strings.HasPrefix(hook.Secret, "whsec_") || len(hook.Secret) != len("whsec_")+43 {
		t.Fatalf("secret = %q, want whsec_ and 32 bytes base64url", hook.Secret)
	}
	runHookDispatcher(t, svc, fastWebhooks)
	cp := hookSave(t, svc, t.TempDir(), "signed")

	hookWait(t, "two events", func() bool { return len(rc.requests()) == 2 })
	for _, r := range rc.requests() {
		ts, sig := r.header.Get(webhook.HeaderTimestamp), r.header.Get(webhook.HeaderSignature)
		if !webhook.VerifySignature(hook.Secret, ts, r.body, sig) {
			t.Errorf("signature %q of %s does not verify", sig, r.body)
		}
		if webhook.VerifySignature("whsec_other", ts, r.body, sig) {
			t.Error("signature verifies with another secret")
		}
		if webhook.VerifySignature(hook.Secret, ts, append([]byte(" "), r.body...), sig) {
			t.Error("signature verifies for a changed body")
		}
		if next, _ := strconv.ParseInt(ts, 10, 64); webhook.VerifySignature(hook.Secret, strconv.FormatInt(next+1, 10), r.body, sig) {
			t.Error("signature verifies for another timestamp")
		}
		if got := r.header.Get("Content-Type"); got != "application/json" {
			t.Errorf("Content-Type = %q", got)
		}
		if got := r.header.Get(webhook.HeaderEvent); got != r.event.Type {
			t.Errorf("%s = %q, want the body's type %q", webhook.HeaderEvent, got, r.event.Type)
		}
	}
	last := rc.requests()[1]
	if last.event.Type != belay.EventCheckpointCreated || last.event.CheckpointID != cp.ID || last.event.SessionID != cp.SessionID {
		t.Errorf("event = %+v, want checkpoint.created of %s", last.event, cp.ID)
	}
	hookWait(t, "the delivery log", func() bool { return len(hookDeliveries(t, svc, hook.ID)) == 2 })
	log := hookDeliveries(t, svc, hook.ID)
	if id := last.header.Get(webhook.HeaderDelivery); log[1].ID != id {
		t.Errorf("%s = %q, want the logged delivery %q", webhook.HeaderDelivery, id, log[1].ID)
	}
	if d := log[1]; d.StatusCode != 200 || d.Error != "" || d.Attempt != 1 || d.EventSeq != last.event.Seq || d.EventType != last.event.Type {
		t.Errorf("delivery = %+v", d)
	}
}

func TestWebhookDeliversInOrderOnceFromItsCreation(t *testing.T) {
	svc := newWebhookService(t)
	project := t.TempDir()
	hookSave(t, svc, project, "before the webhook")
	rc := newHookReceiver(t, nil)
	hook := addWebhook(t, svc, rc.srv.URL)
	if want := hookLogEnd(t, svc); hook.LastSeq != want {
		t.Fatalf("new webhook LastSeq = %d, want the current %d", hook.LastSeq, want)
	}
	for i := range 5 {
		hookSave(t, svc, project, "before the dispatcher "+strconv.Itoa(i))
	}
	runHookDispatcher(t, svc, fastWebhooks)
	for i := range 5 {
		hookSave(t, svc, project, "while it runs "+strconv.Itoa(i))
	}
	want := []int64{}
	for seq := hook.LastSeq + 1; seq <= hookLogEnd(t, svc); seq++ {
		want = append(want, seq)
	}
	hookWait(t, "every event", func() bool { return hookLastSeq(t, svc, hook.ID) == want[len(want)-1] })
	// One more event: once it arrives, every earlier one has been handled,
	// so a redelivery would show.
	hookSave(t, svc, project, "last")
	want = append(want, want[len(want)-1]+1)
	hookWait(t, "the last event", func() bool { return len(rc.seqs()) >= len(want) })
	if got := rc.seqs(); !slices.Equal(got, want) {
		t.Errorf("delivered seqs = %v, want %v", got, want)
	}
}

func TestHangingWebhookBlocksNeitherDecidingNorOtherWebhooks(t *testing.T) {
	svc := newWebhookService(t)
	release := make(chan struct{})
	hanging := newHookReceiver(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) })
	healthy := newHookReceiver(t, nil)
	addWebhook(t, svc, hanging.srv.URL)
	addWebhook(t, svc, healthy.srv.URL)
	opts := fastWebhooks
	opts.Timeout = time.Hour
	runHookDispatcher(t, svc, opts)
	project := t.TempDir()
	hookSave(t, svc, project, "first")
	hookWait(t, "the hanging hookReceiver to hold a hookRequest", func() bool { return len(hanging.requests()) == 1 })

	// The hookReceiver never answers: any wait on it would outlast this deadline.
	ctx, cancel := context.WithTimeout(localCtx, 5*time.Second)
	defer cancel()
	cp, err := svc.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: project, Summary: "approve?",
		HITL: &belay.HITLInput{Required: true}})
	if err != nil {
		t.Fatalf("CreateCheckpoint while a webhook hangs: %v", err)
	}
	if _, err := svc.Decide(ctx, belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionApprove, SelectedOption: "approve"}); err != nil {
		t.Fatalf("Decide while a webhook hangs: %v", err)
	}

	last := hookLogEnd(t, svc)
	hookWait(t, "the healthy webhook to get every event", func() bool {
		seqs := healthy.seqs()
		return len(seqs) > 0 && seqs[len(seqs)-1] == last
	})
	if got := healthy.requests()[len(healthy.requests())-1].event.Type; got != belay.EventSessionStatusChanged && got != belay.EventHITLDecided {
		t.Errorf("last event = %s, want the decision's", got)
	}
	if got := len(hanging.requests()); got != 1 {
		t.Errorf("hanging hookReceiver got %d requests, want 1 (hookDeliveries to one webhook are sequential)", got)
	}
}

func TestWebhookEventFilter(t *testing.T) {
	svc := newWebhookService(t)
	rc := newHookReceiver(t, nil)
	hook := addWebhook(t, svc, rc.srv.URL, belay.EventHITLRequired, belay.EventHITLDecided, belay.EventHITLRequired)
	if !slices.Equal(hook.Events, []string{belay.EventHITLRequired, belay.EventHITLDecided}) {
		t.Errorf("events = %v, want the repeat dropped", hook.Events)
	}
	runHookDispatcher(t, svc, fastWebhooks)
	project := t.TempDir()
	hookSave(t, svc, project, "plain")
	cp, err := svc.CreateCheckpoint(localCtx, belay.CreateCheckpointInput{ProjectPath: project, Summary: "approve?",
		HITL: &belay.HITLInput{Required: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Decide(localCtx, belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionApprove, SelectedOption: "approve"}); err != nil {
		t.Fatal(err)
	}
	hookWait(t, "two events", func() bool { return len(rc.requests()) >= 2 })
	var got []string
	for _, r := range rc.requests() {
		got = append(got, r.event.Type)
		if r.event.CheckpointID != cp.ID {
			t.Errorf("event %+v is not about %s", r.event, cp.ID)
		}
	}
	if want := []string{belay.EventHITLRequired, belay.EventHITLDecided}; !slices.Equal(got, want) {
		t.Errorf("types = %v, want %v", got, want)
	}
}

func TestWebhookSourceReadsTheLogAndRecordsDeliveries(t *testing.T) {
	svc := newWebhookService(t)
	src := svc.WebhookSource()
	wake, stop := src.Wake()
	defer stop()
	hook := addWebhook(t, svc, "https://hooks.example.com/belay", belay.EventCheckpointCreated)
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("adding a webhook did not wake the source")
	}
	hooks, err := src.Webhooks(context.Background())
	if err != nil || len(hooks) != 1 || hooks[0].Secret != hook.Secret || hooks[0].LastSeq != hook.LastSeq {
		t.Fatalf("Webhooks = %+v, %v; want %s with its secret", hooks, err, hook.ID)
	}
	cp := hookSave(t, svc, t.TempDir(), "one")
	evs, err := src.Events(context.Background(), hook.LastSeq, hook.Events, 10)
	if err != nil || len(evs) != 1 || evs[0].Type != belay.EventCheckpointCreated || evs[0].CheckpointID != cp.ID {
		t.Fatalf("Events = %+v, %v; want the checkpoint.created of %s alone", evs, err, cp.ID)
	}
	attempt := &belay.Delivery{ID: "01890000-0000-7000-8000-000000000001", WebhookID: hook.ID, EventSeq: evs[0].Seq,
		EventType: evs[0].Type, Attempt: 1, StatusCode: 500, Error: "HTTP 500", CreatedAt: time.Now()}
	if err := src.RecordDelivery(context.Background(), attempt, false); err != nil {
		t.Fatal(err)
	}
	if got := hookLastSeq(t, svc, hook.ID); got != hook.LastSeq {
		t.Errorf("a failed attempt moved the webhook to %d", got)
	}
	retry := *attempt
	retry.ID, retry.Attempt, retry.StatusCode, retry.Error = "01890000-0000-7000-8000-000000000002", 2, 200, ""
	retry.CreatedAt = attempt.CreatedAt.Add(time.Second)
	if err := src.RecordDelivery(context.Background(), &retry, true); err != nil {
		t.Fatal(err)
	}
	if got := hookLastSeq(t, svc, hook.ID); got != evs[0].Seq {
		t.Errorf("webhook at %d after the last attempt, want %d", got, evs[0].Seq)
	}
	if log := hookDeliveries(t, svc, hook.ID); len(log) != 2 || log[0].ID != attempt.ID || log[1].ID != retry.ID {
		t.Errorf("delivery log = %+v, want both attempts", log)
	}
}

func TestWebhookManagementIsAdminOnly(t *testing.T) {
	svc := newWebhookService(t)
	hook := addWebhook(t, svc, "https://hooks.example.com/belay")
	for name, tc := range map[string]struct {
		ctx  context.Context
		want belay.Code
	}{
		"anonymous": {context.Background(), belay.CodeUnauthenticated},
		"user":      {belay.WithActor(context.Background(), belay.Actor{UserID: "ada"}), belay.CodeUnauthorized},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := tc.ctx
			_, err := svc.AddWebhook(ctx, "https://hooks.example.com/other", nil)
			testutil.WantCode(t, err, tc.want)
			_, err = svc.ListWebhooks(ctx)
			testutil.WantCode(t, err, tc.want)
			testutil.WantCode(t, svc.RemoveWebhook(ctx, hook.ID), tc.want, "")
			_, err = svc.ListDeliveries(ctx, "", 0)
			testutil.WantCode(t, err, tc.want)
		})
	}
	hooks, err := svc.ListWebhooks(webhookAdmin)
	if err != nil {
		t.Fatal(err)
	}
	if len(hooks) != 1 || hooks[0].ID != hook.ID {
		t.Fatalf("webhooks = %+v, want only %s", hooks, hook.ID)
	}
}

func TestWebhookListAndRemove(t *testing.T) {
	svc := newWebhookService(t)
	a := addWebhook(t, svc, "https://a.example.com/hook")
	b := addWebhook(t, svc, "http://b.example.com:8080/hook?x=1", belay.EventHITLRequired)
	hooks, err := svc.ListWebhooks(webhookAdmin)
	if err != nil {
		t.Fatal(err)
	}
	if len(hooks) != 2 || hooks[0].ID != a.ID || hooks[1].ID != b.ID || hooks[1].URL != b.URL ||
		!slices.Equal(hooks[1].Events, []string{belay.EventHITLRequired}) {
		t.Fatalf("webhooks = %+v", hooks)
	}
	for _, w := range hooks {
		if w.Secret != "" {
			t.Errorf("ListWebhooks shows the secret of %s", w.ID)
		}
	}
	if err := svc.RemoveWebhook(webhookAdmin, a.ID); err != nil {
		t.Fatal(err)
	}
	testutil.WantCode(t, svc.RemoveWebhook(webhookAdmin, a.ID), belay.CodeNotFound, "")
	_, err = svc.ListDeliveries(webhookAdmin, a.ID, 0)
	testutil.WantCode(t, err, belay.CodeNotFound)
	if list, err := svc.ListDeliveries(webhookAdmin, b.ID, 0); err != nil || len(list) != 0 {
		t.Errorf("deliveries of a new webhook = %v, %v", list, err)
	}
	if hooks, _ := svc.ListWebhooks(webhookAdmin); len(hooks) != 1 || hooks[0].ID != b.ID {
		t.Errorf("after remove: %+v", hooks)
	}
}

func TestWebhookValidation(t *testing.T) {
	svc := newWebhookService(t)
	for _, tc := range []struct {
		name, url string
		events    []string
		field     string
	}{
		{"empty url", "", nil, "url"},
		{"no scheme", "hooks.example.com/x", nil, "url"},
		{"ftp", "ftp://hooks.example.com/x", nil, "url"},
		{"no host", "https:///path", nil, "url"},
		{"only a port", "http://:8080/x", nil, "url"},
		{"port too large", "http://127.0.0.1:99999/x", nil, "url"},
		{"port 65536", "https://hooks.example.com:65536/x", nil, "url"},
		{"port zero", "http://127.0.0.1:0/x", nil, "url"},
		{"empty port", "http://127.0.0.1:/hook", nil, "url"},
		{"empty port, no path", "https://hooks.example.com:", nil, "url"},
		{"empty port of an IPv6 host", "http://[::1]:/hook", nil, "url"},
		{"not a url", "http://exa mple.com/%zz", nil, "url"},
		{"too long", "https://example.com/" + strings.Repeat("a", core.MaxWebhookURL), nil, "url"},
		{"unknown event", "https://example.com/x", []string{"checkpoint.created", "checkpoint.exploded"}, "events"},
		{"empty event", "https://example.com/x", []string{""}, "events"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.AddWebhook(webhookAdmin, tc.url, tc.events)
			testutil.WantCode(t, err, belay.CodeValidation, tc.field)
		})
	}
	testutil.WantCode(t, svc.RemoveWebhook(webhookAdmin, "nope"), belay.CodeValidation, "id")
	_, err := svc.ListDeliveries(webhookAdmin, "nope", 0)
	testutil.WantCode(t, err, belay.CodeValidation, "webhookId")
	_, err = svc.ListDeliveries(webhookAdmin, "", -1)
	testutil.WantCode(t, err, belay.CodeValidation, "limit")
	_, err = svc.ListDeliveries(webhookAdmin, "", core.MaxDeliveryPage+1)
	testutil.WantCode(t, err, belay.CodeValidation, "limit")
	if hooks, _ := svc.ListWebhooks(webhookAdmin); len(hooks) != 0 {
		t.Errorf("invalid input stored webhooks: %+v", hooks)
	}
}

// TestWebhookAttemptsCountAcrossRestarts: the attempts at an event are
// counted in the delivery log, so a dispatcher started again on the same
// database (belay serve restarted) goes on from the next attempt and gives up
// after MaxAttempts in all, not MaxAttempts more.
func TestWebhookAttemptsCountAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	open := func() (*core.Service, func()) {
		db, err := sqlite.Open(localCtx, path)
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		svc := core.New(core.Options{Store: db, Logger: slog.New(slog.DiscardHandler)})
		return svc, func() {
			svc.Close()
			db.Close()
		}
	}
	failing := newHookReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	})
	opts := fastWebhooks
	opts.MaxAttempts = 6
	// The same instance restarted: it takes its webhooks' leases back at once.
	opts.Holder = "instance-1"

	svc, closeFirst := open()
	hook := addWebhook(t, svc, failing.srv.URL, belay.EventCheckpointCreated)
	cp := hookSave(t, svc, t.TempDir(), "one")
	ctx, stop := context.WithCancel(localCtx)
	stopped := make(chan struct{})
	go func() {
		webhook.Run(ctx, svc.WebhookSource(), opts)
		close(stopped)
	}()
	hookWait(t, "three failed attempts", func() bool { return len(hookDeliveries(t, svc, hook.ID)) >= 3 })
	stop()
	<-stopped
	before := len(hookDeliveries(t, svc, hook.ID))
	closeFirst()
	if before >= opts.MaxAttempts {
		t.Fatalf("the first dispatcher made %d attempts before it stopped; the test needs fewer than %d", before, opts.MaxAttempts)
	}

	svc, closeSecond := open()
	defer closeSecond()
	runHookDispatcher(t, svc, opts)
	hookWait(t, "the webhook to give up on the event", func() bool { return hookLastSeq(t, svc, hook.ID) == hookLogEnd(t, svc) })
	log := hookDeliveries(t, svc, hook.ID)
	if len(log) != opts.MaxAttempts {
		t.Fatalf("%d attempts in all (%d before the restart), want %d", len(log), before, opts.MaxAttempts)
	}
	for i, d := range log {
		if d.Attempt != i+1 || d.Error == "" {
			t.Errorf("delivery %d = attempt %d error %q, want failed attempt %d", i, d.Attempt, d.Error, i+1)
		}
	}
	// An attempt in flight when the first dispatcher stopped reached the
	// receiver but was never recorded: it is made again after the restart.
	if got := len(failing.requests()); got != opts.MaxAttempts && got != opts.MaxAttempts+1 {
		t.Errorf("the receiver got %d requests, want %d (one more if an attempt was cut short by the stop)", got, opts.MaxAttempts)
	}
	if reqs := failing.requests(); reqs[len(reqs)-1].event.CheckpointID != cp.ID {
		t.Errorf("the last attempt carried %+v, want the checkpoint's event", reqs[len(reqs)-1].event)
	}
}

// TestAStoppedDispatcherReleasesItsWebhooks: a dispatcher that stops (a
// server shut down for a restart) gives its leases up, so another instance
// goes on delivering at once rather than after what was left of them.
func TestAStoppedDispatcherReleasesItsWebhooks(t *testing.T) {
	svc := newWebhookService(t)
	failing := newHookReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	})
	opts := fastWebhooks
	opts.MaxAttempts, opts.Lease = 100, time.Hour
	hook := addWebhook(t, svc, failing.srv.URL, belay.EventCheckpointCreated)
	hookSave(t, svc, t.TempDir(), "one")
	ctx, stop := context.WithCancel(localCtx)
	stopped := make(chan struct{})
	first := opts
	first.Holder = "instance-1"
	go func() {
		webhook.Run(ctx, svc.WebhookSource(), first)
		close(stopped)
	}()
	hookWait(t, "an attempt by the first instance", func() bool { return len(hookDeliveries(t, svc, hook.ID)) >= 1 })
	stop()
	<-stopped
	before := len(hookDeliveries(t, svc, hook.ID))
	second := opts
	second.Holder = "instance-2"
	runHookDispatcher(t, svc, second)
	hookWait(t, "the second instance to take the webhook over", func() bool { return len(hookDeliveries(t, svc, hook.ID)) > before })
}
