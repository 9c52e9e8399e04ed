package webhook_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/belayhq/belay/webhook"
)

// A receiver checks every delivery before trusting it: the signature over
// the timestamp and the raw body, then the timestamp's age against replays.
func ExampleVerifySignature() {
	const secret = "whsec_…" // shown once by `belay webhook add`
	receive := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		ts := r.Header.Get(webhook.HeaderTimestamp)
		if err != nil || !webhook.VerifySignature(secret, ts, body, r.Header.Get(webhook.HeaderSignature)) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if sent, err := strconv.ParseInt(ts, 10, 64); err != nil || time.Since(time.Unix(sent, 0)).Abs() > 5*time.Minute {
			http.Error(w, "stale delivery", http.StatusUnauthorized)
			return
		}
		// Trusted: decode body as a belay.Event and drop repeats by its seq.
		w.WriteHeader(http.StatusNoContent)
	}

	// Three deliveries as belay would send them: signed now, tampered with,
	// and replayed an hour later.
	body := `{"seq":42,"type":"hitl.required"}`
	for _, d := range []struct {
		name, body string
		sentAt     time.Time
	}{
		{"signed now", body, time.Now()},
		{"body changed", `{"seq":42,"type":"hitl.decided"}`, time.Now()},
		{"an hour old", body, time.Now().Add(-time.Hour)},
	} {
		ts := strconv.FormatInt(d.sentAt.Unix(), 10)
		req := httptest.NewRequest(http.MethodPost, "/belay", strings.NewReader(d.body))
		req.Header.Set(webhook.HeaderTimestamp, ts)
		req.Header.Set(webhook.HeaderSignature, webhook.Sign(secret, ts, []byte(body)))
		rec := httptest.NewRecorder()
		receive(rec, req)
		fmt.Println(d.name, rec.Code)
	}
	// Output:
	// signed now 204
	// body changed 401
	// an hour old 401
}
